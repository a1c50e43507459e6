"""Lookups follow a pod through its life, and selectors filter watches, observed through the
surfaces of a real `pods-api serve --fixtures` while its fixture files change: a container
restart changes the container ID (the old one finds nothing, the new one the pod), a debug
container joins, deletion removes every entry; a pod that stops matching a watch's selector is
DELETED for that watch, one that starts matching is ADDED. Every wait is for an event."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from nodepods import CART, CHECKOUT, NODE_EXPORTER, REPORT, cid, container_status, pod, uid, write
from released import NAMES
from serve import TIMEOUT, Served, serving

from pods_api import pod_from_bytes
from pods_api.core.api.pb import pods_v1alpha1_pb2
from pods_api.core.api.pb import podsapi_v1_pb2 as lookup_pb
from pods_api.core.api.pb import podsapi_v1_pb2_grpc as lookup_grpc

FIRST, RESTARTED = cid("worker/app#0"), cid("worker/app#1")
SIDECAR, MIGRATE, DEBUG = cid("worker/log-shipper"), cid("worker/migrate"), cid("worker/debugger")
WORKER = pod(
    "orders-worker-6d5f7c9b8-q7zrt",
    "shop",
    "b16d8fa7-5c9e-4e3d-8f4b-7a0c3d6e8f06",
    labels={"app": "orders-worker", "tier": "backend"},
    containers={
        "containerStatuses": {"app": FIRST, "log-shipper": SIDECAR},
        "initContainerStatuses": {"migrate": MIGRATE},
    },
    ips=("10.244.1.40", "fd00:10:244:1::28"),
)


@dataclass
class Surfaces:
    server: Served
    fixtures: Path
    http: httpx.Client
    stub: lookup_grpc.PodLookupStub

    def by_container(self, container_id: str) -> list[tuple[str, str, str]]:
        """(uid, container name, kind) per match, the same over HTTP and gRPC (checked here)."""
        r = self.http.get("/v1/pods", params={"containerID": container_id})
        assert r.status_code == 200, r.text
        over_http = [(m["uid"], m["container"]["name"], m["container"]["kind"]) for m in r.json()["matches"]]
        kinds = {v: k for k, v in {"container": 1, "initContainer": 2, "ephemeralContainer": 3}.items()}
        matches = self.stub.Lookup(
            lookup_pb.LookupRequest(container_id=container_id), timeout=TIMEOUT
        ).matches
        over_grpc = [
            (pod_from_bytes(m.pod)["metadata"]["uid"], m.container.name, kinds[m.container.kind])
            for m in matches
        ]
        assert over_http == over_grpc
        return over_http

    def by_ip(self, ip: str) -> list[str]:
        r = self.http.get("/v1/pods", params={"podIP": ip})
        assert r.status_code == 200, r.text
        over_http = [item["metadata"]["uid"] for item in r.json()["items"]]
        matches = self.stub.Lookup(lookup_pb.LookupRequest(pod_ip=ip), timeout=TIMEOUT).matches
        assert [pod_from_bytes(m.pod)["metadata"]["uid"] for m in matches] == over_http
        return over_http

    def by_name(self, namespace: str, name: str) -> list[str]:
        r = self.http.get(f"/v1/namespaces/{namespace}/pods/{name}")
        over_http = [r.json()["metadata"]["uid"]] if r.status_code == 200 else []
        assert r.status_code in (200, 404)
        request = lookup_pb.LookupRequest(name=lookup_pb.PodName(namespace=namespace, name=name))
        matches = self.stub.Lookup(request, timeout=TIMEOUT).matches
        assert [pod_from_bytes(m.pod)["metadata"]["uid"] for m in matches] == over_http
        return over_http


@pytest.fixture
def surfaces(tmp_path: Path) -> Iterator[Surfaces]:
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    for p in (WORKER, CHECKOUT, CART, NODE_EXPORTER, REPORT):
        write(fixtures, p)
    # No heartbeat within the test: a missing event then fails on the read timeout, not never.
    with serving(
        tmp_path / "run", "--fixtures", str(fixtures), "--qps", "0", "--heartbeat", "3600"
    ) as served:
        transport = httpx.HTTPTransport(uds=str(served.http_socket))
        with (
            httpx.Client(transport=transport, base_url="http://localhost", timeout=TIMEOUT) as http,
            grpc.insecure_channel(served.target) as channel,
        ):
            yield Surfaces(served, fixtures, http, lookup_grpc.PodLookupStub(channel))


class SSE:
    """Events of one SSE watch, read as they come (comment lines skipped)."""

    def __init__(self, lines: Iterator[str]) -> None:
        self._lines = lines

    def next(self) -> tuple[str, dict[str, Any]]:
        kind, data = "", ""
        for line in self._lines:
            if line.startswith(":"):
                continue
            if not line:
                if kind:
                    return kind, json.loads(data)
                continue
            key, _, value = line.partition(": ")
            if key == "event":
                kind = value
            elif key == "data":
                data = value
        raise AssertionError("the event stream ended")

    def start(self) -> list[str]:
        """The snapshot's names, through INITIAL_SYNC_COMPLETE."""
        names = []
        while True:
            kind, data = self.next()
            if kind == "INITIAL_SYNC_COMPLETE":
                return sorted(names)
            assert kind == "ADDED"
            names.append(data["metadata"]["name"])


class GrpcWatch:
    def __init__(self, stream: Iterator[pods_v1alpha1_pb2.WatchPodsEvent]) -> None:
        self._stream = stream

    def next(self) -> tuple[str, str]:
        event = next(self._stream)
        name = pod_from_bytes(event.pod)["metadata"]["name"] if event.pod else ""
        return NAMES[event.type], name

    def start(self) -> list[str]:
        names = []
        while True:
            kind, name = self.next()
            if kind == "INITIAL_SYNC_COMPLETE":
                return sorted(names)
            assert kind == "ADDED"
            names.append(name)


def changed(p: dict[str, Any], edit: Any) -> dict[str, Any]:
    new = copy.deepcopy(p)
    edit(new)
    return new


def restart_app(p: dict[str, Any]) -> None:
    """The kubelet restarted the app container: a new ID; the old one only in lastState."""
    (app,) = [c for c in p["status"]["containerStatuses"] if c["name"] == "app"]
    app.update(container_status("app", RESTARTED, restarts=1))
    app["lastState"] = {
        "terminated": {"exitCode": 137, "reason": "OOMKilled", "containerID": f"containerd://{FIRST}"}
    }


def debug(p: dict[str, Any]) -> None:
    """`kubectl debug`: an ephemeral container joins."""
    p["spec"]["ephemeralContainers"] = [
        {"name": "debugger", "image": "busybox", "targetContainerName": "app"}
    ]
    p["status"]["ephemeralContainerStatuses"] = [container_status("debugger", DEBUG)]


def test_lookups_follow_a_pod_through_its_life(surfaces: Surfaces) -> None:
    name = WORKER["metadata"]["name"]
    with surfaces.http.stream("GET", "/v1/pods", params={"watch": "true"}) as r:
        events = SSE(r.iter_lines())
        assert name in events.start()
        worker = (uid(WORKER), "app", "container")
        assert surfaces.by_container(FIRST) == [worker]
        assert surfaces.by_container(FIRST[:12]) == [worker]
        assert surfaces.by_container(MIGRATE) == [(uid(WORKER), "migrate", "initContainer")]
        assert surfaces.by_ip("10.244.1.40") == surfaces.by_ip("fd00:10:244:1::28") == [uid(WORKER)]

        # The app container restarts: a new ID finds the pod, the old one (kept only in
        # lastState) finds nothing, in every form; the other containers are unchanged.
        restarted = changed(WORKER, restart_app)
        write(surfaces.fixtures, restarted)
        assert events.next()[0] == "MODIFIED"
        for old in (FIRST, f"containerd://{FIRST}", FIRST[:12]):
            assert surfaces.by_container(old) == []
        assert surfaces.by_container(f"containerd://{RESTARTED}") == [worker]
        assert surfaces.by_container(RESTARTED[:12]) == [worker]
        assert surfaces.by_container(SIDECAR) == [(uid(WORKER), "log-shipper", "container")]

        # A debug container joins.
        debugged = changed(restarted, debug)
        write(surfaces.fixtures, debugged)
        assert events.next()[0] == "MODIFIED"
        assert surfaces.by_container(DEBUG) == [(uid(WORKER), "debugger", "ephemeralContainer")]

        # Deleted: every entry goes; the neighbours stay.
        (surfaces.fixtures / f"{name}.json").unlink()
        kind, data = events.next()
        assert (kind, data["metadata"]["name"]) == ("DELETED", name)
        for container_id in (RESTARTED, SIDECAR, MIGRATE, DEBUG, RESTARTED[:12]):
            assert surfaces.by_container(container_id) == []
        assert surfaces.by_ip("10.244.1.40") == surfaces.by_ip("fd00:10:244:1::28") == []
        assert surfaces.by_name("shop", name) == []
        assert surfaces.by_name("shop", CART["metadata"]["name"]) == [uid(CART)]
        assert surfaces.by_ip("10.244.1.31") == [uid(CART)]


def test_selectors_filter_watches_on_both_surfaces(surfaces: Surfaces) -> None:
    cart, checkout = CART["metadata"]["name"], CHECKOUT["metadata"]["name"]
    selected = {"labelSelector": "tier=web", "fieldSelector": "status.phase=Running"}
    request = lookup_pb.WatchPodsRequest(label_selector="tier=web", field_selector="status.phase=Running")
    with surfaces.http.stream("GET", "/v1/pods", params={"watch": "true", **selected}) as r:
        sse, stream = SSE(r.iter_lines()), GrpcWatch(surfaces.stub.WatchPods(request, timeout=TIMEOUT * 3))
        assert sse.start() == stream.start() == sorted([cart, checkout])

        def next_on_both() -> tuple[str, str]:
            kind, data = sse.next()
            assert stream.next() == (kind, data["metadata"]["name"])
            return kind, data["metadata"]["name"]

        # The cart stops matching (its label goes): DELETED, with its last matching state.
        unlabelled = changed(CART, lambda p: p["metadata"]["labels"].pop("tier"))
        write(surfaces.fixtures, unlabelled)
        assert next_on_both() == ("DELETED", cart)
        # A change to a pod outside the view is not sent: the next event is the checkout's.
        write(surfaces.fixtures, changed(unlabelled, lambda p: p["metadata"]["labels"].update(v="2")))
        write(surfaces.fixtures, changed(NODE_EXPORTER, lambda p: p["metadata"]["labels"].update(v="2")))
        write(surfaces.fixtures, changed(CHECKOUT, lambda p: p["metadata"]["labels"].update(v="2")))
        assert next_on_both() == ("MODIFIED", checkout)
        # The cart matches again: ADDED.
        write(surfaces.fixtures, CART)
        assert next_on_both() == ("ADDED", cart)
        # The pending report starts running with tier=web: it enters by a field and a label.
        running = changed(REPORT, lambda p: p["status"].update(phase="Running"))
        running["metadata"]["labels"]["tier"] = "web"
        write(surfaces.fixtures, running)
        assert next_on_both() == ("ADDED", REPORT["metadata"]["name"])
        # Deleted while in the view: DELETED.
        (surfaces.fixtures / f"{checkout}.json").unlink()
        assert next_on_both() == ("DELETED", checkout)
