"""pods-api as a node agent built against the kubelet's own Go module sees it: the conformance
client (tests/go/kubelet/cmd/conformance, k8s.io/kubelet's v1alpha1 stubs and k8s.io/api's
v1.Pod) against a real `pods-api serve`. The event numbers, the DELETED without a stale end
state, the statuses and the mask are as upstream's code reads them, not as our generated
modules do. The test writes the fixture files; the Go program prints what it received."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import make_pod
from docblocks import run_by
from gobuild import BUILD_TIMEOUT, go
from golines import Lines, run
from repo import DOCS, ROOT
from serve import TIMEOUT, Served, serving

pytestmark = pytest.mark.needs_go

PODS = {"db": "uid-a", "web": "uid-b", "cache": "uid-c"}


def write(directory: Path, name: str, pod: dict[str, Any]) -> None:
    """Atomically, as editors do, so that the server sees one change."""
    tmp = directory / f".{name}.tmp"
    tmp.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", **pod}))
    tmp.replace(directory / f"{name}.yaml")


@pytest.fixture
def conformance(go_build: Callable[[str, str], Path]) -> Path:
    return go_build("kubelet", "./cmd/conformance")


@pytest.fixture
def fixtures(tmp_path: Path) -> Path:
    directory = tmp_path / "fixtures"
    directory.mkdir()
    for name, uid in PODS.items():
        write(directory, name, make_pod(name, uid))
    return directory


@pytest.fixture
def served(tmp_path: Path, fixtures: Path) -> Iterator[Served]:
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as server:
        yield server


def ask(conformance: Path, served: Served, *args: str) -> dict[str, Any]:
    """The one line a List, Get or burst prints."""
    code, lines, err = run(conformance, "-socket", str(served.socket), *args)
    assert len(lines) == 1, err
    assert code == (1 if lines[0]["kind"] == "error" else 0), err
    return lines[0]


def test_list_and_get_decode_with_v1_pod_unmarshal(conformance: Path, served: Served) -> None:
    listed = ask(conformance, served, "list")
    assert listed["kind"] == "list"
    assert sorted((p["name"], p["uid"]) for p in listed["pods"]) == sorted(PODS.items())
    for pod in listed["pods"]:  # Go's own JSON of the v1.Pod it decoded
        assert pod["pod"]["status"]["phase"] == "Running"
        assert pod["pod"]["spec"]["containers"][0]["image"] == f"shop/{pod['name']}:1"
        assert pod["pod"]["metadata"]["labels"] == {"app": pod["name"]}
    got = ask(conformance, served, "get", "uid-b")
    assert (got["kind"], got["pod"]["name"], got["pod"]["raw"]) == (
        "get",
        "web",
        next(p["raw"] for p in listed["pods"] if p["uid"] == "uid-b"),
    )
    assert ask(conformance, served, "get", "no-such-uid")["code"] == "NotFound"


@pytest.mark.parametrize("api", ["kubelet", "doc", "lookup"])
def test_watch_through_an_add_a_modify_and_a_delete(
    conformance: Path, served: Served, fixtures: Path, api: str
) -> None:
    """The released numbers on both contracts and on PodLookup's watch; a DELETED with only the
    pod's identity on the kubelet's contracts, its last state on our lookup watch."""
    with Lines(conformance, "-socket", str(served.socket), "-api", api, "watch") as watch:
        start = watch.take(len(PODS) + 1)
        assert [(e["type"], e["number"]) for e in start] == [("ADDED", 1)] * len(PODS) + [
            ("INITIAL_SYNC_COMPLETE", 4)
        ]
        assert sorted(e["pod"]["uid"] for e in start[:-1]) == sorted(PODS.values())
        assert start[-1]["pod"] is None  # INITIAL_SYNC_COMPLETE carries no pod

        write(fixtures, "api", make_pod("api", "uid-d"))
        added = watch.next()
        assert (added["type"], added["number"], added["pod"]["uid"]) == ("ADDED", 1, "uid-d")

        write(fixtures, "web", make_pod("web", "uid-b", "Failed"))
        modified = watch.next()
        assert (modified["type"], modified["number"], modified["pod"]["uid"]) == ("MODIFIED", 2, "uid-b")
        assert modified["pod"]["pod"]["status"]["phase"] == "Failed"
        if api != "lookup":
            # Finished: the kubelet's DELETED, identity only, while ListPods still lists it.
            finished = watch.next()
            assert (finished["type"], finished["pod"]["uid"]) == ("DELETED", "uid-b")
            assert finished["pod"]["identityOnly"], finished["pod"]
            listed = ask(conformance, served, "list")
            assert "uid-b" in {p["uid"] for p in listed["pods"]}

        (fixtures / "db.yaml").unlink()
        deleted = watch.next()
        assert (deleted["type"], deleted["number"]) == ("DELETED", 3)
        pod = deleted["pod"]
        assert (pod["namespace"], pod["name"], pod["uid"]) == ("shop", "db", "uid-a")
        if api == "lookup":
            assert not pod["identityOnly"] and pod["pod"]["status"]["phase"] == "Running"
        else:
            assert pod["identityOnly"], pod["pod"]


def test_a_masked_list_and_watch_carry_only_the_mask_and_the_identity(
    conformance: Path, served: Served
) -> None:
    listed = ask(conformance, served, "-mask", "status.phase", "list")
    for pod in listed["pods"]:
        assert pod["pod"]["status"] == {"phase": "Running"}
        assert pod["pod"]["spec"] == {"containers": None}  # Go's JSON of an empty PodSpec
        meta = pod["pod"]["metadata"]
        assert {k: v for k, v in meta.items() if v is not None} == {
            "name": pod["name"],
            "namespace": "shop",
            "uid": pod["uid"],
        }
    with Lines(conformance, "-socket", str(served.socket), "-mask", "status.podIPs", "watch") as watch:
        first = watch.next()
        assert first["pod"]["pod"]["status"] == {"podIPs": [{"ip": "10.1.0.7"}]}


def test_failed_precondition_until_the_sources_have_synced(
    conformance: Path, tmp_path: Path, fixtures: Path
) -> None:
    with serving(
        tmp_path / "run", "--fixtures", str(fixtures), "--ready-delay", "600", ready=False
    ) as served:
        for args in (["list"], ["get", "uid-a"], ["watch"]):
            failed = ask(conformance, served, *args)
            assert (failed["kind"], failed["code"]) == ("error", "FailedPrecondition"), args


def test_resource_exhausted_past_the_burst(conformance: Path, tmp_path: Path, fixtures: Path) -> None:
    # 0.01 per second: no token comes back while the ten calls run.
    with serving(tmp_path / "run", "--fixtures", str(fixtures), "--qps", "0.01", "--burst", "3") as served:
        burst = ask(conformance, served, "burst", "10")
        assert burst["codes"] == {"OK": 3, "ResourceExhausted": 7}


# -- docs/clients.md's Go example ----------------------------------------------------------------

EXAMPLE = ROOT / "tests" / "go" / "kubelet" / "cmd" / "example" / "main.go"


def test_the_go_example_is_shown_verbatim() -> None:
    text = (DOCS / "clients.md").read_text()
    block = re.search(r"## From Go \(the kubelet's client\)\n.*?```go\n(.*?)```", text, re.S)
    assert block is not None, "docs/clients.md has no Go example"
    assert block.group(1) == EXAMPLE.read_text()


def documented_run() -> str:
    """The shell block of docs/clients.md that runs the example, as written."""
    block = run_by("clients.md", "test_the_go_example_lists_and_watches")
    assert "go run ./cmd/example" in block, block
    return block


def test_the_go_example_lists_and_watches(served: Served, fixtures: Path) -> None:
    """docs/clients.md's command as written (`cd tests/go/kubelet && go run ./cmd/example
    ../../../run/pods-api.sock`), from a checkout's top, where `run/` is the served directory:
    the module is copied there, since the relative path is resolved from its real directory."""
    top = served.run_dir.parent
    shutil.copytree(EXAMPLE.parents[2], top / "tests" / "go" / "kubelet")
    env = {**os.environ, "PATH": f"{Path(go()).parent}:{os.environ['PATH']}", "GOFLAGS": "-mod=readonly"}
    errors = top / "go-run.stderr"
    err_file = errors.open("w")
    proc = subprocess.Popen(
        ["bash", "-c", "set -euo pipefail\n" + documented_run()],
        cwd=top,
        env=env,
        stdout=subprocess.PIPE,
        stderr=err_file,
        text=True,
        start_new_session=True,  # go run's child too is stopped with its group
    )
    # A safety net: `go run` compiles (from the build cache the other tests filled), then every
    # line below comes at once.
    guard = threading.Timer(BUILD_TIMEOUT, os.killpg, (proc.pid, signal.SIGKILL))
    guard.start()
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip() for _ in range(2 * len(PODS) + 1)]
        listed = sorted(f"shop {name} Running" for name in PODS)
        assert sorted(lines[: len(PODS)]) == listed, errors.read_text()
        assert sorted(lines[len(PODS) : -1]) == [f"ADDED {line}" for line in listed]
        assert lines[-1] == "INITIAL_SYNC_COMPLETE"
        (fixtures / "web.yaml").unlink()
        assert proc.stdout.readline().strip() == "DELETED shop web"  # no phase: only the identity
    finally:
        guard.cancel()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=TIMEOUT)
        err_file.close()


def versions_block() -> str:
    return run_by("clients.md", "test_the_documented_module_versions_are_the_ones_built")


def test_the_documented_module_versions_are_the_ones_built() -> None:
    """README.md and docs/clients.md name the k8s.io/kubelet and k8s.io/api versions go.mod
    pins, and docs/clients.md shows how to check them: its block, run as written from the
    checkout's top (the second command asks the Go module proxy; offline, that part skips)."""
    env = {**os.environ, "PATH": f"{Path(go()).parent}:{os.environ['PATH']}", "GOFLAGS": "-mod=readonly"}
    lines = versions_block().splitlines()
    assert lines[0] == "cd tests/go/kubelet" and len(lines) == 3, lines

    def run(script: str) -> subprocess.CompletedProcess[str]:
        command = ["bash", "-c", "set -euo pipefail\n" + script]
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT, env=env)

    local = run("\n".join(lines[:2]))  # the versions built against: go.mod's, no network
    assert local.returncode == 0, local.stderr
    versions = dict(line.split() for line in local.stdout.splitlines())
    for text in ((DOCS / "clients.md").read_text(), (ROOT / "README.md").read_text()):
        assert f"**`k8s.io/kubelet` {versions['k8s.io/kubelet']}**" in text
        assert f"`k8s.io/api` {versions['k8s.io/api']}" in text
    whole = run(versions_block())
    if whole.returncode != 0 and ("dial tcp" in whole.stderr or "proxy" in whole.stderr):
        pytest.skip(f"the Go module proxy is unreachable: {whole.stderr.strip()[-300:]}")
    assert whole.returncode == 0, whole.stderr
    releases = whole.stdout.splitlines()[-1].split()
    assert releases[0] == "k8s.io/kubelet" and versions["k8s.io/kubelet"] in releases[1:]
