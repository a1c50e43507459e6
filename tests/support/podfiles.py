"""A fixtures directory a test can change the way a person would: edit, remove and add pod
files, each written atomically (a rename), as the fixtures source expects."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from repo import ROOT

EXAMPLES = ROOT / "examples" / "fixtures"
WEB = "web-7c9d8f6b5d-x2x9k.yaml"
REPORT = "report-28755360-kx4jd.yaml"
WORKER = "orders-worker-6d5f7c9b8-q7zrt.yaml"


def copy_examples(dst: Path) -> Path:
    shutil.copytree(EXAMPLES, dst)
    return dst


def uid_of(path: Path) -> str:
    uid: str = yaml.safe_load(path.read_text())["metadata"]["uid"]
    return uid


def write(path: Path, pod: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(yaml.safe_dump(pod))
    os.replace(tmp, path)


def edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    pod = yaml.safe_load(path.read_text())
    change(pod)
    write(path, pod)


def add_copy(directory: Path, of: str, name: str, uid: str) -> None:
    """A new pod file: a copy of `of` under another name and UID."""
    pod = yaml.safe_load((directory / of).read_text())
    pod["metadata"].update(name=name, uid=uid)
    write(directory / f"{name}.yaml", pod)


def set_phase(phase: str) -> Callable[[dict[str, Any]], None]:
    def change(pod: dict[str, Any]) -> None:
        pod["status"]["phase"] = phase

    return change


def finish(phase: str = "Failed") -> Callable[[dict[str, Any]], None]:
    """The pod as the kubelet leaves it once it is done with it: a terminal phase, its sandbox
    down (the kubelet's watch then says DELETED: core/store/version.py `finished`)."""

    def change(pod: dict[str, Any]) -> None:
        pod["status"]["phase"] = phase
        for condition in pod["status"].get("conditions", []):
            if condition["type"] == "PodReadyToStartContainers":
                condition["status"] = "False"

    return change
