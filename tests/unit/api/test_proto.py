"""The committed generated modules are what proto/generate.py makes from proto/*.proto."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from repo import ROOT

# Where proto/generate.py puts each file's modules: the CRI's beside its only user.
PB = ("pods_api/core/api/pb", "pods_api/sources/cri/pb")


def _generated(root: Path) -> dict[str, str]:
    return {
        f"{folder}/{p.name}": p.read_text()
        for folder in PB
        for p in (root / folder).iterdir()
        if p.suffix in (".py", ".pyi") and p.name != "__init__.py"
    }


def test_generated_modules_are_fresh(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "proto" / "generate.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    fresh, committed = _generated(tmp_path), _generated(ROOT)
    assert sorted(fresh) == sorted(committed), "run: python proto/generate.py"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"stale generated modules {stale}: run python proto/generate.py"


def test_message_names_and_numbers_are_kubernetes() -> None:
    from pods_api.core.api.pb import k8s_core_v1_pb2, pods_doc_pb2, pods_v1alpha1_pb2

    pod = k8s_core_v1_pb2.Pod.DESCRIPTOR
    assert pod.full_name == "k8s.io.api.core.v1.Pod"
    assert [(f.name, f.number) for f in pod.fields] == [("metadata", 1), ("spec", 2), ("status", 3)]
    assert pods_v1alpha1_pb2.DESCRIPTOR.services_by_name["Pods"].full_name == "v1alpha1.Pods"
    assert pods_doc_pb2.DESCRIPTOR.services_by_name["Pods"].full_name == "Pods"
    # k8s.io/kubelet's released numbers, written out (the point is to catch our .proto drifting).
    released = {"UNSPECIFIED": 0, "ADDED": 1, "MODIFIED": 2, "DELETED": 3, "INITIAL_SYNC_COMPLETE": 4}
    assert {v.name: v.number for v in pods_v1alpha1_pb2.EventType.DESCRIPTOR.values} == released


def test_every_proto_with_a_service_has_grpc_stubs() -> None:
    """Stubs follow what a file declares, not its name: a new service file gets them too."""
    import importlib

    with_services, stubs = set(), set()
    for folder in PB:
        for path in (ROOT / folder).glob("*_pb2.py"):
            module = importlib.import_module(f"{folder.replace('/', '.')}.{path.stem}")
            if module.DESCRIPTOR.services_by_name:
                with_services.add(path.stem)
        stubs |= {p.stem.removesuffix("_grpc") for p in (ROOT / folder).glob("*_pb2_grpc.py")}
    assert with_services >= {"pods_v1alpha1_pb2", "pods_doc_pb2", "cri_runtime_v1_pb2"}
    assert stubs == with_services


def test_cri_names_and_numbers_are_the_cri_api() -> None:
    # Taken from k8s.io/cri-api pkg/apis/runtime/v1/api.proto: the same bytes on the wire.
    from pods_api.sources.cri.pb import cri_runtime_v1_pb2 as cri

    assert cri.DESCRIPTOR.package == "runtime.v1"
    assert cri.DESCRIPTOR.services_by_name["RuntimeService"].full_name == "runtime.v1.RuntimeService"
    numbers = {f.name: f.number for f in cri.ContainerStatus.DESCRIPTOR.fields}
    assert {k: numbers[k] for k in ("state", "exit_code", "image_ref", "reason", "annotations")} == {
        "state": 3,
        "exit_code": 7,
        "image_ref": 9,
        "reason": 10,
        "annotations": 13,
    }
    sandbox = {f.name: f.number for f in cri.PodSandboxStatus.DESCRIPTOR.fields}
    assert (sandbox["network"], sandbox["labels"], sandbox["annotations"]) == (5, 7, 8)
    assert cri.NODE == 2 and cri.CONTAINER_EXITED == 2 and cri.SANDBOX_NOTREADY == 1
