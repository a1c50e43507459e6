"""`pods-api serve --apiserver` end to end: a real process, a kubeconfig with the test API
server's CA and token, and the events a client sees on a real gRPC watch of pods-api."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import yaml
from apipods import pod
from apiserver import KubeAPIServer
from grpc_health.v1 import health_pb2, health_pb2_grpc
from released import ADDED, DELETED, MODIFIED, SYNCED
from serve import TIMEOUT, Served, serving

from pods_api.core.api.codec import pod_from_bytes
from pods_api.core.api.pb import pods_v1alpha1_pb2 as api
from pods_api.core.api.pb import pods_v1alpha1_pb2_grpc as api_grpc
from pods_api.core.store.identity import MIRROR_ANNOTATION


@pytest.fixture
def server(tmp_path: Path) -> Iterator[KubeAPIServer]:
    s = KubeAPIServer(tmp_path)
    s.start()
    yield s
    s.stop()


def flags(server: KubeAPIServer, tmp_path: Path, **kw: Any) -> tuple[str, ...]:
    return ("--apiserver", "--kubeconfig", str(server.kubeconfig(tmp_path / "kubeconfig", **kw)))


class Watch:
    """A real WatchPods stream of pods-api; `next(n)` is the next n events as (type, name)."""

    def __init__(self, served: Served) -> None:
        self._channel = grpc.aio.insecure_channel(served.target)
        self._call = api_grpc.PodsStub(self._channel).WatchPods(api.WatchPodsRequest())

    async def next(self, count: int = 1) -> list[tuple[int, str]]:
        out = []
        async with asyncio.timeout(TIMEOUT):
            while len(out) < count:
                event = await self._call.read()
                name = pod_from_bytes(event.pod)["metadata"]["name"] if event.pod else ""
                out.append((event.type, name))
        return out

    async def close(self) -> None:
        self._call.cancel()
        await self._channel.close()


async def listed(served: Served) -> list[dict[str, Any]]:
    async with grpc.aio.insecure_channel(served.target) as channel:
        response = await api_grpc.PodsStub(channel).ListPods(api.ListPodsRequest())
    return [pod_from_bytes(p) for p in response.pods]


async def names(served: Served) -> list[str]:
    return sorted(p["metadata"]["name"] for p in await listed(served))


def health(served: Served) -> int:
    with grpc.insecure_channel(served.target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return int(stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT).status)


def http_get(served: Served, path: str) -> httpx.Response:
    transport = httpx.HTTPTransport(uds=str(served.http_socket))
    with httpx.Client(transport=transport, timeout=TIMEOUT) as client:
        return client.get(f"http://localhost{path}")


def metric(served: Served, line_start: str) -> float:
    body = http_get(served, "/metrics").text
    return sum(float(line.split()[-1]) for line in body.splitlines() if line.startswith(line_start))


async def test_syncs_this_nodes_pods_and_follows_changes(server: KubeAPIServer, tmp_path: Path) -> None:
    server.put(pod("web"))
    server.put(pod("db"))
    server.put(pod("other-nodes-pod", node="node-2"))

    with serving(tmp_path / "run", *flags(server, tmp_path)) as served:
        assert await names(served) == ["db", "web"]
        watch = Watch(served)
        assert sorted(await watch.next(3)) == [(ADDED, "db"), (ADDED, "web"), (SYNCED, "")]

        server.put(pod("web", image="nginx:2"))
        server.put(pod("moved-here", node="node-2"))
        server.put(pod("moved-here", node="node-1"))  # now bound to this node: ADDED
        server.delete("uid-db")
        assert await watch.next(3) == [(MODIFIED, "web"), (ADDED, "moved-here"), (DELETED, "db")]
        assert await names(served) == ["moved-here", "web"]
        await watch.close()
        assert served.stop() == 0  # SIGTERM ends the open watch on the API server too


async def test_a_410_with_changes_in_between_gives_exactly_those_events(
    server: KubeAPIServer, tmp_path: Path
) -> None:
    for name in ("same-1", "same-2", "changed", "removed"):
        server.put(pod(name))
    with serving(tmp_path / "run", *flags(server, tmp_path)) as served:
        watch = Watch(served)
        await watch.next(5)
        server.stop()
        server.put(pod("changed", image="nginx:2"))
        server.delete("uid-removed")
        server.put(pod("new"))
        server.put(pod("same-2", node="node-2"))  # moved away: gone from this node
        server.restart(keep_history=False)  # our resourceVersion is too old now: 410, relist

        events = sorted(await watch.next(4))
        assert events == [(ADDED, "new"), (MODIFIED, "changed"), (DELETED, "removed"), (DELETED, "same-2")]
        served.wait_for_line("listing again")
        server.put(pod("marker"))
        assert await watch.next(1) == [(ADDED, "marker")]  # and nothing for unchanged pods before it
        await watch.close()


async def test_an_outage_changes_nothing_clients_see_and_it_converges_after(
    server: KubeAPIServer, tmp_path: Path
) -> None:
    server.put(pod("web"))
    server.put(pod("db"))
    with serving(tmp_path / "run", *flags(server, tmp_path)) as served:
        watch = Watch(served)
        await watch.next(3)
        assert metric(served, 'pods_api_source_connected{source="apiserver"}') == 1

        server.stop()
        served.wait_for_line("cannot connect")
        assert await names(served) == ["db", "web"]
        assert health(served) == health_pb2.HealthCheckResponse.SERVING
        assert http_get(served, "/readyz").status_code == 200
        assert metric(served, 'pods_api_source_connected{source="apiserver"}') == 0
        assert metric(served, 'pods_api_source_errors_total{source="apiserver"}') >= 1

        server.put(pod("web", image="nginx:2"))
        server.delete("uid-db")
        server.restart(keep_history=False)
        assert sorted(await watch.next(2)) == [(MODIFIED, "web"), (DELETED, "db")]
        served.wait_for_line("resolved")
        assert metric(served, 'pods_api_source_connected{source="apiserver"}') == 1
        await watch.close()


async def test_a_refused_token_is_a_clear_error_not_no_pods(server: KubeAPIServer, tmp_path: Path) -> None:
    server.put(pod("web"))
    with serving(tmp_path / "run", *flags(server, tmp_path, token="wr0ng"), ready=False) as served:
        line = served.wait_for_line("401")
        assert "Unauthorized" in line and "check the credentials of kubeconfig" in line
        async with grpc.aio.insecure_channel(served.target) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await api_grpc.PodsStub(channel).ListPods(api.ListPodsRequest())
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        readyz = http_get(served, "/readyz")
        assert readyz.status_code == 503 and "apiserver" in readyz.text
    assert "wr0ng" not in "".join(served.lines) and server.token not in "".join(served.lines)


def test_kubeconfig_flags_without_apiserver_are_a_usage_error(tmp_path: Path) -> None:
    from serve import start

    served = start(tmp_path / "run", "--fixtures", str(tmp_path), "--kube-context", "x", wait=None)
    try:
        assert served.proc.wait(TIMEOUT) == 2
        said = "--kubeconfig, --kube-context and --apiserver-watch-timeout are for --apiserver"
        assert said in "".join(served.lines)
    finally:
        served.close()


async def test_a_static_pod_and_its_mirror_are_one_pod(server: KubeAPIServer, tmp_path: Path) -> None:
    static_uid = "5f0c6a2e9b7d4e1f8a3c2b1d0e9f8a7b"  # the kubelet's config hash: the static pod's uid
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "etcd", "namespace": "kube-system", "uid": static_uid},
        "spec": {"containers": [{"name": "etcd", "image": "registry.k8s.io/etcd:3.5"}]},
    }
    (manifests / "etcd.yaml").write_text(yaml.safe_dump(manifest))
    mirror = pod("etcd-node-1", uid="mirror-uid", annotations={MIRROR_ANNOTATION: static_uid})
    mirror["metadata"]["namespace"] = "kube-system"
    server.put(mirror)

    args = (*flags(server, tmp_path), "--manifests", str(manifests))
    with serving(tmp_path / "run", *args) as served:
        (only,) = await listed(served)
        assert (only["metadata"]["name"], only["metadata"]["uid"]) == ("etcd-node-1", static_uid)
        # As the kubelet's Pods API: the spec from the local manifest, the status the mirror reports.
        assert only["spec"]["containers"][0]["image"] == "registry.k8s.io/etcd:3.5"
        assert only["metadata"]["annotations"]["kubernetes.io/config.source"] == "file"
        assert only["status"]["phase"] == "Running"

        watch = Watch(served)
        await watch.next(2)
        mirror["status"]["phase"] = "Failed"
        server.put(mirror)
        assert await watch.next(1) == [(MODIFIED, "etcd-node-1")]
        (only,) = await listed(served)
        assert (only["metadata"]["uid"], only["status"]["phase"]) == (static_uid, "Failed")
        await watch.close()


async def test_a_manifest_without_a_uid_and_its_mirror_are_one_pod_under_the_kubelets_uid(
    server: KubeAPIServer, tmp_path: Path
) -> None:
    # On a kubeadm node the manifest has no uid: the kubelet hashes Go's in-memory pod into one
    # (which no other program can reproduce), and the mirror's annotation names that uid.
    kubelet_uid = "0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a"
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
        "spec": {
            "containers": [{"name": "kube-scheduler", "image": "registry.k8s.io/kube-scheduler:v1.33.0"}]
        },
    }
    (manifests / "kube-scheduler.yaml").write_text(yaml.safe_dump(manifest))
    # As the kubelet creates it: the static pod's annotations and the mirror one; the API server
    # gives it a uid of its own and may default its spec differently.
    annotations = {
        MIRROR_ANNOTATION: kubelet_uid,
        "kubernetes.io/config.hash": kubelet_uid,
        "kubernetes.io/config.source": "file",
    }
    mirror = pod("kube-scheduler-node-1", uid="mirror-uid", annotations=annotations, image="mirror-image")
    mirror["metadata"]["namespace"] = "kube-system"
    mirror["status"] = {"phase": "Running", "podIP": "192.168.56.10", "podIPs": [{"ip": "192.168.56.10"}]}
    server.put(mirror)

    args = (*flags(server, tmp_path), "--manifests", str(manifests))
    with serving(tmp_path / "run", *args) as served:
        (only,) = await listed(served)
        assert (only["metadata"]["name"], only["metadata"]["uid"]) == ("kube-scheduler-node-1", kubelet_uid)
        assert only["metadata"]["annotations"]["kubernetes.io/config.hash"] == kubelet_uid
        assert MIRROR_ANNOTATION not in only["metadata"]["annotations"]
        assert only["spec"]["containers"][0]["image"] == "registry.k8s.io/kube-scheduler:v1.33.0"
        assert only["status"]["phase"] == "Running" and only["status"]["podIP"] == "192.168.56.10"
        async with grpc.aio.insecure_channel(served.target) as channel:
            got = await api_grpc.PodsStub(channel).GetPod(api.GetPodRequest(podUID=kubelet_uid))
        assert pod_from_bytes(got.pod)["metadata"]["name"] == "kube-scheduler-node-1"

        watch = Watch(served)
        assert await watch.next(2) == [(ADDED, "kube-scheduler-node-1"), (SYNCED, "")]
        mirror["status"]["phase"] = "Failed"
        server.put(mirror)
        assert await watch.next(1) == [(MODIFIED, "kube-scheduler-node-1")]
        # The mirror deleted (the manifest stays): our own uid until the kubelet makes a new one;
        # a different uid is a different pod to clients, the old one goes first.
        server.delete("mirror-uid")
        assert await watch.next(2) == [(DELETED, "kube-scheduler-node-1"), (ADDED, "kube-scheduler-node-1")]
        (only,) = await listed(served)
        assert only["metadata"]["uid"] not in (kubelet_uid, "mirror-uid")
        assert only["status"] == {"phase": "Pending"}
        await watch.close()
