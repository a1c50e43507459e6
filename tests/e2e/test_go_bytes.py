"""The bytes a real `pods-api serve` sends for the project's example fixtures and manifests, held
against Go's own: every pod of ListPods, masked and not, every ADDED of a watch and the DELETED of
a removed manifest is what `v1.Pod.Marshal()` writes after `v1.Pod.Unmarshal()` read it
(tests/go/kubelet/cmd/remarshal, built from k8s.io/api)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc
from podwatch import ADDED, DELETED, SYNCED
from repo import ROOT
from serve import TIMEOUT, serving

from pods_api.core.api.codec import pod_from_bytes
from pods_api.core.api.pb import pods_v1alpha1_pb2 as api
from pods_api.core.api.pb import pods_v1alpha1_pb2_grpc as api_grpc

FIXTURES = ROOT / "examples" / "fixtures"
MANIFESTS = ROOT / "examples" / "manifests"
MASK = "status.phase,status.podIPs"


async def test_served_pods_and_a_deleted_are_gos_bytes(
    tmp_path: Path, go_remarshal: Callable[[Sequence[bytes]], list[bytes]]
) -> None:
    manifests = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, manifests)
    expected = len(list(FIXTURES.glob("*.yaml"))) + len(list(manifests.glob("*.yaml")))
    with serving(tmp_path / "run", "--fixtures", str(FIXTURES), "--manifests", str(manifests)) as served:
        async with grpc.aio.insecure_channel(served.target) as channel:
            stub = api_grpc.PodsStub(channel)
            listed = list((await stub.ListPods(api.ListPodsRequest(), timeout=TIMEOUT)).pods)
            masked = await stub.ListPods(
                api.ListPodsRequest(), metadata=[("x-kubernetes-fieldmask", MASK)], timeout=TIMEOUT
            )
            watch = stub.WatchPods(api.WatchPodsRequest(), timeout=TIMEOUT)
            added = [(await watch.read()) for _ in range(expected + 1)]
            assert [e.type for e in added] == [ADDED] * expected + [SYNCED]
            (manifests / "nginx.yaml").unlink()
            deleted = await watch.read()
            watch.cancel()
    assert len(listed) == expected
    assert deleted.type == DELETED
    gone = pod_from_bytes(deleted.pod)["metadata"]
    assert set(gone) == {"name", "namespace", "uid"} and gone["name"].startswith("nginx")
    ours = [*listed, *masked.pods, *(e.pod for e in added[:-1]), deleted.pod]
    assert [len(p) for p in go_remarshal(ours)] == [len(p) for p in ours]
    assert go_remarshal(ours) == ours
