"""`pods-api serve --apiserver` against a real kube-apiserver v1.37.2 and etcd (started by the
suite: tests/support/realapiserver.py), authenticated as the DaemonSet is: the ServiceAccount and
ClusterRole of deploy/overlays/apiserver/rbac.yaml, applied as they are, and a token from the
TokenRequest API.

What a node agent on pods-api depends on, each shown on a real control plane: every pod bound
to the node is served, and a watcher holding pods-api's watch holds exactly what the API server
has, after thousands of pods, a 410 after an etcd compaction, the API server and etcd restarting
and an outage of minutes; meanwhile the last good pods stay served (never "no pods"), marked
stale once they may be old; and a missing RBAC verb is one clear error, never "no pods".

Pods are bound by `spec.nodeName` (no scheduler, no kubelet here), each test on a node of its own
so the others' pods are other nodes' pods; they are deleted with grace period 0 (no kubelet
confirms a deletion here).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from podwatch import DELETED, SYNCED, Watch
from realapiserver import ControlPlane, real_apiserver  # noqa: F401  (the fixture)
from repo import ROOT
from serve import TIMEOUT, Served, serving
from tcpcut import Link

from pods_api.core.api.codec import pod_from_bytes
from pods_api.core.api.pb import pods_v1alpha1_pb2 as api
from pods_api.core.api.pb import pods_v1alpha1_pb2_grpc as api_grpc

RBAC = ROOT / "deploy" / "overlays" / "apiserver" / "rbac.yaml"
NAMESPACE = "lab"
ACCOUNT = ("kube-system", "pods-api")  # the DaemonSet's ServiceAccount (rbac.yaml)
USER = f"system:serviceaccount:{ACCOUNT[0]}:{ACCOUNT[1]}"
# Pods on the big node: the scale, with thousands of pods of a List in pages of 500.
MANY = 5000
# --apiserver-watch-timeout for the tests that wait on watches ending: watches of 5 to 10 s (each
# ended by the server, with a bookmark before its end), so a test sees several in seconds;
# stale after 40 s failing.
SHORT_WATCH = 10
STALE_AFTER = SHORT_WATCH + 30.0
# The outage: minutes, several times the stale period, so that "stale, and still served"
# is shown long after the staleness began.
OUTAGE = 120.0
# How often the outage's clients ask (a user's agent polling; each sample is checked).
SAMPLE_EVERY = 10.0
# The longest a change takes to reach a watcher of pods-api once the API server is reachable:
# a reconnect's backoff (up to 30 s after repeated failures) plus a relist of thousands of pods
# on a loaded machine.
CONVERGE = 90.0
# A List of thousands of pods is over gRPC's default 4 MiB a message.
UNBOUNDED = (("grpc.max_receive_message_length", -1),)
# A watcher reading the initial 5,000 pods plus a List's decoding on 2 shared cores.
BIG = 180.0


def bound(name: str, node: str, **labels: str) -> dict[str, Any]:
    """A pod bound to node: nothing runs it here, so no token is mounted and no image pulled."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": name}},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
        },
    }


def rbac() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc]


def role() -> dict[str, Any]:
    (found,) = (doc for doc in rbac() if doc["kind"] == "ClusterRole")
    return found


@pytest.fixture(scope="module")
def plane(real_apiserver: ControlPlane) -> ControlPlane:  # noqa: F811
    real_apiserver.namespace(NAMESPACE)
    real_apiserver.apply(rbac())
    return real_apiserver


@pytest.fixture
def kubeconfig(plane: ControlPlane, tmp_path: Path) -> Path:
    return plane.kubeconfig(tmp_path / "kubeconfig", plane.token(*ACCOUNT))


# -- the API server's side ----------------------------------------------------------------------


def create(plane: ControlPlane, *pods: dict[str, Any]) -> None:
    plane.create_pods(NAMESPACE, pods)


def relabel(plane: ControlPlane, name: str, **labels: str) -> None:
    path = f"/api/v1/namespaces/{NAMESPACE}/pods/{name}"
    plane.request("PATCH", path, {"metadata": {"labels": labels}}, patch=True)


def delete(plane: ControlPlane, name: str) -> None:
    """A forced delete: gone at once (no kubelet here to confirm a graceful one)."""
    path = f"/api/v1/namespaces/{NAMESPACE}/pods/{name}"
    plane.request("DELETE", path, {"gracePeriodSeconds": 0})


def truth(plane: ControlPlane, node: str) -> dict[str, str]:
    """The node's pods as the API server has them now (a consistent read): uid -> resourceVersion."""
    listed = plane.request("GET", f"/api/v1/pods?fieldSelector=spec.nodeName%3D{node}")
    return {p["metadata"]["uid"]: p["metadata"]["resourceVersion"] for p in listed["items"]}


# -- pods-api's side ----------------------------------------------------------------------------


@contextlib.contextmanager
def pods_api(tmp_path: Path, kubeconfig: Path, node: str, *more: str, ready: bool = True) -> Iterator[Served]:
    args = ("--apiserver", "--kubeconfig", str(kubeconfig), *more)
    # A short run dir: a UNIX socket's path has at most 107 bytes, and pytest's are long.
    run_dir = Path(tempfile.mkdtemp(prefix="pa-", dir="/tmp"))
    try:
        with serving(run_dir, *args, node_name=node, ready=ready) as served:
            yield served
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


async def served(target: Served) -> tuple[dict[str, str], list[str]]:
    """ListPods: uid -> resourceVersion, and the warnings it carried (trailing metadata)."""
    async with grpc.aio.insecure_channel(target.target, options=UNBOUNDED) as channel:
        call = api_grpc.PodsStub(channel).ListPods(api.ListPodsRequest())
        response = await call
        trailing = await call.trailing_metadata() or ()
    pods = map(pod_from_bytes, response.pods)
    warnings = [str(value) for key, value in trailing if key == "pods-api-warning"]
    return {p["metadata"]["uid"]: p["metadata"]["resourceVersion"] for p in pods}, warnings


class Holder:
    """What a client holds from pods-api's watch (uid -> resourceVersion), as an informer does."""

    def __init__(self, target: Served) -> None:
        self.watch = Watch(target)
        self.held: dict[str, str] = {}
        self.synced = False

    async def until(self, want: dict[str, str], within: float = CONVERGE) -> None:
        """Read events until what is held is exactly `want` (after the first SYNCED)."""
        try:
            async with asyncio.timeout(within):
                while not (self.synced and self.held == want):
                    ((kind, pod),) = await self.watch.next(1, within)
                    if kind == SYNCED:
                        self.synced = True
                    elif kind == DELETED:
                        self.held.pop(pod["metadata"]["uid"], None)
                    else:
                        self.held[pod["metadata"]["uid"]] = pod["metadata"]["resourceVersion"]
        except TimeoutError:
            lost = {uid: rv for uid, rv in want.items() if self.held.get(uid) != rv}
            extra = sorted(set(self.held) - set(want))
            raise AssertionError(
                f"after {within} s: {len(lost)} pods not as the API server has them, {len(extra)} extra"
            ) from None

    async def close(self) -> None:
        await self.watch.close()


@contextlib.asynccontextmanager
async def holding(target: Served) -> AsyncIterator[Holder]:
    holder = Holder(target)
    try:
        yield holder
    finally:
        await holder.close()


def health(target: Served) -> int:
    with grpc.insecure_channel(target.target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return int(stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT).status)


def http_get(target: Served, path: str) -> httpx.Response:
    transport = httpx.HTTPTransport(uds=str(target.http_socket))
    with httpx.Client(transport=transport, timeout=TIMEOUT) as client:
        return client.get(f"http://localhost{path}")


def connected(target: Served) -> float:
    body = http_get(target, "/metrics").text
    line = 'pods_api_source_connected{source="apiserver"}'
    return sum(float(row.split()[-1]) for row in body.splitlines() if row.startswith(line))


def changes(plane: ControlPlane, node: str, tag: str) -> None:
    """One of each change a node's pods see: a label edited, a pod deleted, a pod added."""
    names = sorted(p for p in _names(plane, node))
    relabel(plane, names[0], app=names[0], changed=tag)
    delete(plane, names[1])
    create(plane, bound(f"{node}-{tag}", node))


def _names(plane: ControlPlane, node: str) -> list[str]:
    listed = plane.request("GET", f"/api/v1/pods?fieldSelector=spec.nodeName%3D{node}")
    return [p["metadata"]["name"] for p in listed["items"]]


def small_node(plane: ControlPlane, node: str, count: int = 4) -> dict[str, str]:
    create(plane, *(bound(f"{node}-{i}", node) for i in range(count)))
    return truth(plane, node)


# -- the tests ----------------------------------------------------------------------------------


async def test_the_deploy_role_suffices_and_a_missing_watch_verb_is_a_clear_error(
    plane: ControlPlane, tmp_path: Path, kubeconfig: Path
) -> None:
    assert role()["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    node = "node-rbac"
    want = small_node(plane, node, 2)
    since = plane.audit_size()
    with pods_api(tmp_path, kubeconfig, node) as target:
        assert (await served(target))[0] == want
    # A v1.37 server offers watch-list: one watch is the list too, as for the kubelet.
    (first, *_) = asked = plane.requests(USER, since)
    assert {r.verb for r in asked} == {"watch"} and first.query.get("sendInitialEvents") == "True"

    # `list` is needed only where the server offers no watch-list (the last test).
    with without(plane, "list"), pods_api(tmp_path, kubeconfig, node) as target:
        assert (await served(target))[0] == want
        assert connected(target) == 1
    with without(plane, "watch"), pods_api(tmp_path, kubeconfig, node) as target:
        line = target.wait_for_line("cannot watch resource")
        assert "HTTP 403" in line and "needs get, list and watch on pods" in line and "rbac.yaml" in line
        assert (await served(target))[0] == want  # listed instead, so served; and said
        assert connected(target) == 0


@contextlib.contextmanager
def without(plane: ControlPlane, verb: str) -> Iterator[None]:
    """The deploy role with one verb fewer, effective; the role as deploy/ has it afterwards."""
    granted = role()
    fewer = [v for v in granted["rules"][0]["verbs"] if v != verb]
    plane.apply([{**granted, "rules": [{**granted["rules"][0], "verbs": fewer}]}])
    try:
        _wait_denied(plane, verb)
        yield
    finally:
        plane.apply([granted])


def _wait_denied(plane: ControlPlane, verb: str) -> None:
    """Until the API server's authorizer has the changed role (its informer lags a write)."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": USER, "resourceAttributes": {"verb": verb, "resource": "pods"}},
    }
    deadline = time.monotonic() + TIMEOUT
    while plane.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)["status"].get(
        "allowed"
    ):
        assert time.monotonic() < deadline, f"{verb} on pods still allowed for {USER}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def big_node(plane: ControlPlane) -> str:
    """MANY pods bound to one node, and a few on another."""
    node = "node-big"
    create(plane, *(bound(f"big-{i:05}", node, app="big", shard=str(i % 7)) for i in range(MANY)))
    create(plane, *(bound(f"elsewhere-{i}", "node-elsewhere") for i in range(20)))
    return node


async def test_thousands_of_pods_listed_and_watched_exactly(
    plane: ControlPlane, big_node: str, tmp_path: Path, kubeconfig: Path
) -> None:
    want = truth(plane, big_node)
    assert len(want) == MANY
    since = plane.audit_size()
    with pods_api(tmp_path, kubeconfig, big_node) as target:
        assert (await served(target))[0] == want
        (first,) = plane.requests(USER, since)  # the whole state on one watch-list stream
        assert first.verb == "watch" and first.query.get("sendInitialEvents") == "True"
        async with holding(target) as holder:
            await holder.until(want, BIG)
            for tag in ("a", "b"):
                changes(plane, big_node, tag)
            want = truth(plane, big_node)
            await holder.until(want)
        assert (await served(target))[0] == want


async def test_bookmarks_move_the_resume_point_past_other_nodes_changes(
    plane: ControlPlane, tmp_path: Path, kubeconfig: Path
) -> None:
    node = "node-quiet"
    want = small_node(plane, node, 1)
    since = plane.audit_size()
    with pods_api(tmp_path, kubeconfig, node, "--apiserver-watch-timeout", str(SHORT_WATCH)) as target:
        first = _watches(plane, since)[0]
        # Other nodes' pods change; this node's do not: only a bookmark tells pods-api how far
        # the server's history has gone, so a resume (and a 410's relist) starts from there.
        other = small_node(plane, "node-busy", 3)
        moved = max(map(int, other.values()))
        deadline = time.monotonic() + CONVERGE
        while not any(int(w.query.get("resourceVersion") or 0) >= moved for w in _watches(plane, since)):
            assert time.monotonic() < deadline, (
                f"no watch resumed from {moved} or later: {_watches(plane, since)}"
            )
            await asyncio.sleep(0.5)
        assert first.query.get("sendInitialEvents") == "True"  # its end bookmark was before
        assert (await served(target))[0] == want


def _watches(plane: ControlPlane, since: int) -> list[Any]:
    return [r for r in plane.requests(USER, since) if r.verb == "watch" and r.code in (0, 200)]


async def test_the_api_server_restarted(plane: ControlPlane, tmp_path: Path, kubeconfig: Path) -> None:
    node = "node-restart"
    want = small_node(plane, node)
    with pods_api(tmp_path, kubeconfig, node) as target:
        async with holding(target) as holder:
            await holder.until(want)
            plane.stop_apiserver()
            assert (await served(target))[0] == want  # the last good pods, while it is down
            assert health(target) == health_pb2.HealthCheckResponse.SERVING
            plane.start_apiserver(*plane.apiserver_flags)
            changes(plane, node, "after")
            want = truth(plane, node)
            await holder.until(want)
        assert (await served(target))[0] == want


async def test_etcd_restarted(plane: ControlPlane, tmp_path: Path, kubeconfig: Path) -> None:
    node = "node-etcd"
    want = small_node(plane, node)
    with pods_api(tmp_path, kubeconfig, node) as target:
        async with holding(target) as holder:
            await holder.until(want)
            plane.stop_etcd()
            assert (await served(target))[0] == want
            plane.start_etcd()
            _wait_writable(plane)
            changes(plane, node, "after")
            want = truth(plane, node)
            await holder.until(want)
        assert (await served(target))[0] == want


def _wait_writable(plane: ControlPlane) -> None:
    """Until the API server reaches etcd again (its /readyz checks etcd)."""
    deadline = time.monotonic() + TIMEOUT * 3
    while True:
        with plane.admin() as admin, contextlib.suppress(httpx.HTTPError):
            if admin.get("/readyz", timeout=5).status_code == 200:
                return
        assert time.monotonic() < deadline, f"the API server did not reach etcd again: {plane.log_tail()}"
        time.sleep(0.2)


async def test_an_outage_of_minutes_serves_the_last_good_pods_marked_stale_throughout(
    plane: ControlPlane, tmp_path: Path
) -> None:
    node = "node-outage"
    want = small_node(plane, node)
    link = Link(plane.port)
    try:
        kubeconfig = plane.kubeconfig(
            tmp_path / "kubeconfig", plane.token(*ACCOUNT), f"https://127.0.0.1:{link.port}"
        )
        with pods_api(tmp_path, kubeconfig, node, "--apiserver-watch-timeout", str(SHORT_WATCH)) as target:
            async with holding(target) as holder:
                await holder.until(want)
                assert connected(target) == 1
                link.cut()
                cut = time.monotonic()
                changes(plane, node, "meanwhile")  # the API server moves on; pods-api cannot see it
                target.wait_for_line("stale: nothing applied from", STALE_AFTER + TIMEOUT)
                became_stale = time.monotonic() - cut
                samples = 0
                while time.monotonic() - cut < OUTAGE:
                    pods, warnings = await served(target)
                    assert pods == want  # the last good state, never "no pods"
                    assert any(w.startswith("apiserver: stale: nothing applied from") for w in warnings), (
                        warnings
                    )
                    assert health(target) == health_pb2.HealthCheckResponse.SERVING
                    readyz = http_get(target, "/readyz")
                    assert readyz.status_code == 200 and "stale" in readyz.text
                    assert connected(target) == 0
                    samples += 1
                    await asyncio.sleep(SAMPLE_EVERY)
                assert samples >= (OUTAGE - became_stale) // SAMPLE_EVERY
                link.mend()
                want = truth(plane, node)
                await holder.until(want)
                target.wait_for_line("current again")
            pods, warnings = await served(target)
            assert pods == want and not warnings
            assert connected(target) == 1
    finally:
        link.close()


@pytest.fixture(scope="module")
def uncached(plane: ControlPlane) -> Iterator[ControlPlane]:
    """The API server without its watch cache and without watch-list (as before v1.34, or with
    the gate off): lists and watches go to etcd, so a List is served in pages and a watch from a
    compacted resourceVersion is 410 Gone. Restored afterwards."""
    flags = plane.apiserver_flags
    plane.restart_apiserver("--watch-cache=false", "--feature-gates=WatchList=false")
    yield plane
    plane.restart_apiserver(*flags)


async def test_a_list_is_paged_where_the_server_pages(
    uncached: ControlPlane, big_node: str, tmp_path: Path, kubeconfig: Path
) -> None:
    want = truth(uncached, big_node)
    since = uncached.audit_size()
    with pods_api(tmp_path, kubeconfig, big_node) as target:
        assert (await served(target))[0] == want
        asked = uncached.requests(USER, since)
        assert (asked[0].verb, asked[0].code) == ("watch", 422)  # no watch-list here: listed
        lists = [r for r in asked if r.verb == "list"]
        assert len(lists) >= MANY // 500, lists[:2]
        assert all(r.query.get("limit") == "500" for r in lists)
        assert all(r.query.get("continue") for r in lists[1:])
        async with holding(target) as holder:
            await holder.until(want, BIG)
            changes(uncached, big_node, "paged")
            want = truth(uncached, big_node)
            await holder.until(want)


async def test_a_410_after_an_etcd_compaction_relists_with_nothing_lost(
    uncached: ControlPlane, tmp_path: Path
) -> None:
    plane = uncached
    node = "node-compacted"
    want = small_node(plane, node, 6)
    link = Link(plane.port)
    try:
        kubeconfig = plane.kubeconfig(
            tmp_path / "kubeconfig", plane.token(*ACCOUNT), f"https://127.0.0.1:{link.port}"
        )
        with pods_api(tmp_path, kubeconfig, node) as target:
            async with holding(target) as holder:
                await holder.until(want)
                link.cut()
                for tag in ("x", "y"):
                    changes(plane, node, tag)
                plane.compact()  # the history pods-api would resume from is gone
                link.mend()
                target.wait_for_line("listing again", CONVERGE)
                want = truth(plane, node)
                await holder.until(want)
                changes(plane, node, "z")  # and it watches on from the relist
                want = truth(plane, node)
                await holder.until(want)
            assert (await served(target))[0] == want
    finally:
        link.close()


async def test_without_watch_list_a_missing_list_verb_is_a_clear_error_not_no_pods(
    uncached: ControlPlane, tmp_path: Path, kubeconfig: Path
) -> None:
    node = "node-rbac"
    with without(uncached, "list"), pods_api(tmp_path, kubeconfig, node, ready=False) as target:
        line = target.wait_for_line("cannot list resource")
        assert "HTTP 403" in line and "needs get, list and watch on pods" in line and "rbac.yaml" in line
        with pytest.raises(grpc.RpcError) as refused, grpc.insecure_channel(target.target) as channel:
            api_grpc.PodsStub(channel).ListPods(api.ListPodsRequest(), timeout=TIMEOUT)
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        readyz = http_get(target, "/readyz")
        assert readyz.status_code == 503 and "apiserver" in readyz.text
