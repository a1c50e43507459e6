"""The authoritative gRPC Pods API, end to end: a real `pods-api serve` process, real grpc.aio
clients generated from our proto/ for both contracts, over the real UNIX socket."""

from __future__ import annotations

import asyncio
import grp
import json
import logging
import os
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import yaml
from builders import make_pod
from google.protobuf.descriptor_pb2 import FileDescriptorProto
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from released import ADDED, DELETED, MODIFIED, SYNCED
from repo import ROOT
from serve import PODS_API, TIMEOUT, Served, serving

from pods_api.core.api.codec import pod_from_bytes, pod_from_message, pod_to_bytes
from pods_api.core.api.pb import (
    pods_doc_pb2,
    pods_doc_pb2_grpc,
    pods_v1alpha1_pb2,
    pods_v1alpha1_pb2_grpc,
    podsapi_v1_pb2,
    podsapi_v1_pb2_grpc,
)
from pods_api.core.config import DEFAULT_SOCKET
from pods_api.core.policy.throttled_log import ThrottledLog

MASK = "x-kubernetes-fieldmask"


def write(directory: Path, name: str, pod: dict[str, Any]) -> None:
    """Write atomically, as editors and config management do, so the watcher sees one change."""
    tmp = directory / f".{name}.tmp"
    tmp.write_text(yaml.safe_dump(pod) if pod.get("kind") == "Pod" else json.dumps(pod))
    os.replace(tmp, directory / f"{name}.yaml")


def canonical(pod: dict[str, Any]) -> dict[str, Any]:
    return pod_from_bytes(pod_to_bytes(pod))


PODS = {
    "web": make_pod("web", "uid-b", typed=True),
    "db": make_pod("db", "uid-a", typed=True),
    "cache": make_pod("cache", "uid-c", "Pending", typed=True),
}


@pytest.fixture
def fixtures(tmp_path: Path) -> Path:
    directory = tmp_path / "fixtures"
    directory.mkdir()
    for name, pod in PODS.items():
        write(directory, name, pod)
    return directory


@pytest.fixture
def server(tmp_path: Path, fixtures: Path) -> Iterator[Served]:
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        yield served


@pytest.fixture
async def channel(server: Served) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(server.target) as ch:
        yield ch


async def watch_until(call: Any, count: int) -> list[Any]:
    events = []
    async with asyncio.timeout(TIMEOUT):
        while len(events) < count:
            events.append(await call.read())
    return events


# -- List, Get ---------------------------------------------------------------------------------


async def test_list_returns_every_fixture_pod_in_uid_order_on_both_contracts(
    channel: grpc.aio.Channel,
) -> None:
    listed = await pods_v1alpha1_pb2_grpc.PodsStub(channel).ListPods(pods_v1alpha1_pb2.ListPodsRequest())
    assert [pod_from_bytes(p) for p in listed.pods] == [canonical(PODS[n]) for n in ("db", "web", "cache")]
    documented = await pods_doc_pb2_grpc.PodsStub(channel).ListPods(pods_doc_pb2.PodListRequest())
    assert [p.SerializeToString(deterministic=True) for p in documented.pods] == list(listed.pods)


async def test_get_by_uid_and_not_found(channel: grpc.aio.Channel) -> None:
    stub = pods_v1alpha1_pb2_grpc.PodsStub(channel)
    got = await stub.GetPod(pods_v1alpha1_pb2.GetPodRequest(podUID="uid-b"))
    assert pod_from_bytes(got.pod) == canonical(PODS["web"])
    doc = await pods_doc_pb2_grpc.PodsStub(channel).GetPod(pods_doc_pb2.PodGetRequest(podUID="uid-b"))
    assert doc.pod.metadata.name == "web"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.GetPod(pods_v1alpha1_pb2.GetPodRequest(podUID="nope"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert "nope" in (err.value.details() or "")


async def test_field_mask_selects_paths_and_keeps_identity(channel: grpc.aio.Channel) -> None:
    stub = pods_v1alpha1_pb2_grpc.PodsStub(channel)
    listed = await stub.ListPods(
        pods_v1alpha1_pb2.ListPodsRequest(), metadata=[(MASK, "status.phase, spec.containers.image")]
    )
    assert pod_from_bytes(listed.pods[0]) == {
        "metadata": {"name": "db", "namespace": "shop", "uid": "uid-a"},
        "spec": {"containers": [{"name": "", "image": "shop/db:1"}]},  # name: Go prints it at zero
        "status": {"phase": "Running"},
    }
    got = await stub.GetPod(
        pods_v1alpha1_pb2.GetPodRequest(podUID="uid-c"), metadata=[(MASK, "status.phase")]
    )
    assert pod_from_bytes(got.pod)["status"] == {"phase": "Pending"}


@pytest.mark.parametrize(
    ("metadata", "detail"),
    [
        ([(MASK, "status.phse")], "did you mean 'phase'"),
        ([(MASK, "status.phase"), (MASK, "spec")], "must have one value, got 2"),
        # An empty path is a mistake, never "no mask".
        ([(MASK, ",,,")], "path 1 of 4 is empty"),
        ([(MASK, "status.phase,")], "path 2 of 2 is empty"),
    ],
)
async def test_invalid_masks_are_invalid_argument_on_every_method(
    channel: grpc.aio.Channel, metadata: list[tuple[str, str]], detail: str
) -> None:
    stub = pods_v1alpha1_pb2_grpc.PodsStub(channel)
    calls = [
        stub.ListPods(pods_v1alpha1_pb2.ListPodsRequest(), metadata=metadata),
        stub.GetPod(pods_v1alpha1_pb2.GetPodRequest(podUID="uid-a"), metadata=metadata),
    ]
    for call in calls:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert detail in (err.value.details() or "")
    watch = stub.WatchPods(pods_v1alpha1_pb2.WatchPodsRequest(), metadata=metadata)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await watch.read()
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("method", ["/v1alpha1.Pods/GetPod", "/Pods/GetPod", "/v1alpha1.Pods/ListPods"])
async def test_an_unparsable_request_is_internal_as_grpc_go_answers(server: Served, method: str) -> None:
    """What the kubelet (grpc-go) answers for request bytes that are not the message; and one
    short log line for a burst of them, not a traceback each (anyone on the socket can send them)."""
    async with grpc.aio.insecure_channel(server.target) as ch:
        call = ch.unary_unary(method)  # no serializer: the bytes go as they are
        # A truncated tag, a truncated field; for GetPod also a podUID that is not UTF-8.
        garbage = [b"\xff" * 3, b"\x0a\x05ab", *([b"\x0a\x02\xff\xfe"] if "GetPod" in method else [])]
        for data in garbage * 10:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call(data)
            assert err.value.code() == grpc.StatusCode.INTERNAL
            assert (err.value.details() or "").startswith("grpc: error unmarshalling request: ")
        watch = ch.unary_stream(method.rsplit("/", 1)[0] + "/WatchPods")(b"\xff")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await watch.read()
        assert err.value.code() == grpc.StatusCode.INTERNAL
        assert (err.value.details() or "").startswith("grpc: error unmarshalling request: ")
        # The server still answers well-formed calls.
        await pods_v1alpha1_pb2_grpc.PodsStub(ch).GetPod(pods_v1alpha1_pb2.GetPodRequest(podUID="uid-a"))
    assert await asyncio.to_thread(server.stop) == 0
    server.close()  # the whole of stderr is in server.lines now
    log = "".join(server.lines)
    assert "Traceback" not in log
    assert len([line for line in server.lines if "unparsable request" in line]) == 1


def test_the_unparsable_request_log_is_one_line_per_period_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    throttled = ThrottledLog(
        logging.getLogger("pods_api.core.grpc.requests"), every=10.0, clock=lambda: now[0]
    )
    with caplog.at_level("WARNING", logger="pods_api.core.grpc.requests"):
        for _ in range(5):
            throttled.warning("unparsable request")
        now[0] += 10.0
        throttled.warning("unparsable request")
    assert caplog.messages == ["unparsable request", "unparsable request (4 more since the last such line)"]


# -- Watch -------------------------------------------------------------------------------------


async def test_watch_snapshot_then_live_events(channel: grpc.aio.Channel, fixtures: Path) -> None:
    call = pods_v1alpha1_pb2_grpc.PodsStub(channel).WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
    initial = await watch_until(call, 4)
    assert [(e.type, pod_from_bytes(e.pod)["metadata"]["name"] if e.pod else None) for e in initial] == [
        (ADDED, "db"),
        (ADDED, "web"),
        (ADDED, "cache"),
        (SYNCED, None),
    ]
    assert initial[3].pod == b""

    write(fixtures, "cache", make_pod("cache", "uid-c", "Running", typed=True))
    (modified,) = await watch_until(call, 1)
    assert modified.type == MODIFIED
    assert pod_from_bytes(modified.pod) == canonical(make_pod("cache", "uid-c", "Running", typed=True))

    (fixtures / "web.yaml").unlink()
    (deleted,) = await watch_until(call, 1)
    assert deleted.type == DELETED
    # Only the identity, as the kubelet sends it: no stale end state for a client to act on.
    assert pod_from_bytes(deleted.pod) == {"metadata": {"name": "web", "namespace": "shop", "uid": "uid-b"}}

    write(fixtures, "api", make_pod("api", "uid-d", typed=True))
    (added,) = await watch_until(call, 1)
    assert (added.type, pod_from_bytes(added.pod)["metadata"]["uid"]) == (ADDED, "uid-d")
    call.cancel()


async def test_documented_contract_watch_carries_event_types(
    channel: grpc.aio.Channel, fixtures: Path
) -> None:
    call = pods_doc_pb2_grpc.PodsStub(channel).WatchPods(pods_doc_pb2.PodWatchRequest())
    initial = await watch_until(call, 4)
    assert [(e.type, e.pod.metadata.name) for e in initial] == [
        (ADDED, "db"),
        (ADDED, "web"),
        (ADDED, "cache"),
        (SYNCED, ""),
    ]
    (fixtures / "db.yaml").unlink()
    (deleted,) = await watch_until(call, 1)
    assert (deleted.type, deleted.pod.metadata.uid) == (DELETED, "uid-a")
    assert deleted.pod.metadata.name == "db" and deleted.pod.metadata.namespace == "shop"
    # Nothing else: Go's bytes of a new pod with these three set, its spec and status at zero.
    assert pod_from_message(deleted.pod) == {"metadata": {"name": "db", "namespace": "shop", "uid": "uid-a"}}
    call.cancel()


async def test_deleted_carries_only_identity_whatever_the_mask(
    channel: grpc.aio.Channel, fixtures: Path
) -> None:
    call = pods_v1alpha1_pb2_grpc.PodsStub(channel).WatchPods(
        pods_v1alpha1_pb2.WatchPodsRequest(), metadata=[(MASK, "status.phase,metadata.labels")]
    )
    await watch_until(call, 4)
    (fixtures / "cache.yaml").unlink()
    (deleted,) = await watch_until(call, 1)
    assert deleted.type == DELETED
    assert pod_from_bytes(deleted.pod) == {"metadata": {"name": "cache", "namespace": "shop", "uid": "uid-c"}}
    call.cancel()


async def test_lookup_watch_deleted_keeps_the_last_state(channel: grpc.aio.Channel, fixtures: Path) -> None:
    """Our own extension's watch keeps the API server's meaning of DELETED (its DELETED is also
    "stopped matching the selectors"): the last state."""
    call = podsapi_v1_pb2_grpc.PodLookupStub(channel).WatchPods(podsapi_v1_pb2.WatchPodsRequest())
    await watch_until(call, 4)
    (fixtures / "web.yaml").unlink()
    (deleted,) = await watch_until(call, 1)
    assert deleted.type == DELETED
    assert pod_from_bytes(deleted.pod) == canonical(PODS["web"])
    call.cancel()


async def test_masked_watch_skips_changes_outside_the_mask(channel: grpc.aio.Channel, fixtures: Path) -> None:
    call = pods_v1alpha1_pb2_grpc.PodsStub(channel).WatchPods(
        pods_v1alpha1_pb2.WatchPodsRequest(), metadata=[(MASK, "status.phase")]
    )
    initial = await watch_until(call, 4)
    assert pod_from_bytes(initial[0].pod) == {
        "metadata": {"name": "db", "namespace": "shop", "uid": "uid-a"},
        "status": {"phase": "Running"},
    }
    write(fixtures, "cache", make_pod("cache", "uid-c", "Pending", tier="backend", typed=True))  # labels only
    write(fixtures, "cache", make_pod("cache", "uid-c", "Failed", tier="backend", typed=True))
    (event,) = await watch_until(call, 1)
    assert event.type == MODIFIED
    assert pod_from_bytes(event.pod)["status"] == {"phase": "Failed"}
    call.cancel()


async def test_watch_limit(tmp_path: Path, fixtures: Path) -> None:
    with serving(tmp_path / "run", "--fixtures", str(fixtures), "--max-watchers", "1") as served:
        async with grpc.aio.insecure_channel(served.target) as ch:
            stub = pods_v1alpha1_pb2_grpc.PodsStub(ch)
            first = stub.WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
            await watch_until(first, 4)
            second = stub.WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await second.read()
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            first.cancel()


# Enough rounds of 800 KB to overflow any client's buffers many times over.
MAX_ROUNDS = 60


def big_pods(round_: int, count: int = 40) -> dict[str, Any]:
    """A PodList whose every pod changes each round: one file write, `count` MODIFIED events of
    ~20 KB each, far more than a client that does not read can buffer."""
    items = []
    for i in range(count):
        pod = make_pod(f"bulk-{i}", f"bulk-{i:03d}", typed=True)
        pod["metadata"]["annotations"] = {"round": str(round_), "blob": "x" * 20_000}
        items.append(pod)
    return {"apiVersion": "v1", "kind": "PodList", "items": items}


async def test_a_watcher_that_stops_reading_is_not_cut_off_and_then_reaches_the_current_state(
    tmp_path: Path, fixtures: Path
) -> None:
    port = _free_port()
    write(fixtures, "bulk", big_pods(0))
    args = ("--fixtures", str(fixtures), "--watch-buffer", "2", "--metrics-listen", f"127.0.0.1:{port}")
    with serving(tmp_path / "run", *args) as served:
        async with (
            grpc.aio.insecure_channel(served.target) as fast_ch,
            grpc.aio.insecure_channel(served.target) as slow_ch,
        ):
            fast = pods_v1alpha1_pb2_grpc.PodsStub(fast_ch).WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
            slow = pods_v1alpha1_pb2_grpc.PodsStub(slow_ch).WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
            pods = len(await watch_until(fast, 44)) - 1  # the start: every pod, then the marker
            await slow.initial_metadata()  # the slow watch is open; it reads nothing for a while
            # How much a stalled client's transport swallows is grpc's business (megabytes):
            # change every pod until the server has coalesced the slow watcher's events, the
            # fast watcher getting each whole change meanwhile.
            coalesced, last = 0.0, 0
            for last in range(1, MAX_ROUNDS):
                write(fixtures, "bulk", big_pods(last))
                events = await watch_until(fast, 40)
                rounds = {pod_from_bytes(e.pod)["metadata"]["annotations"]["round"] for e in events}
                assert rounds == {str(last)}
                coalesced = _metric(port, "pods_api_watch_events_coalesced_total")
                if coalesced >= 40:
                    break
            assert coalesced >= 40
            assert _metric(port, "kubelet_pod_watch_events_dropped_total") >= coalesced
            # Now it reads: what was in flight, then one event per pod, the newest. It was not cut
            # off, and applying what it got gives the current state.
            state: dict[str, str] = {}
            async with asyncio.timeout(TIMEOUT):
                while len(state) < pods or set(state.values()) != {"", str(last)}:
                    event = await slow.read()
                    assert event is not grpc.aio.EOF
                    if event.type == pods_v1alpha1_pb2.INITIAL_SYNC_COMPLETE:
                        continue
                    pod = pod_from_bytes(event.pod)
                    assert event.type != pods_v1alpha1_pb2.DELETED
                    state[pod["metadata"]["uid"]] = pod["metadata"].get("annotations", {}).get("round", "")
            assert served.proc.poll() is None
            fast.cancel()
            slow.cancel()


# -- readiness, rate limit, health ---------------------------------------------------------------


async def test_not_ready_is_failed_precondition_on_every_method(tmp_path: Path, fixtures: Path) -> None:
    with serving(
        tmp_path / "run", "--fixtures", str(fixtures), "--ready-delay", "3600", ready=False
    ) as served:
        async with grpc.aio.insecure_channel(served.target) as ch:
            for stub in (pods_v1alpha1_pb2_grpc.PodsStub(ch), pods_doc_pb2_grpc.PodsStub(ch)):
                for call in (
                    stub.ListPods(pods_v1alpha1_pb2.ListPodsRequest()),
                    stub.GetPod(pods_v1alpha1_pb2.GetPodRequest(podUID="uid-a")),
                ):
                    with pytest.raises(grpc.aio.AioRpcError) as err:
                        await call
                    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
                    assert err.value.details() == "Kubelet is initializing"  # the kubelet's words
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub.WatchPods(pods_v1alpha1_pb2.WatchPodsRequest()).read()
                assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            health = await health_pb2_grpc.HealthStub(ch).Check(
                health_pb2.HealthCheckRequest(service="v1alpha1.Pods")
            )
            assert health.status == health_pb2.HealthCheckResponse.NOT_SERVING


async def test_health_turns_serving_when_sources_sync(tmp_path: Path, fixtures: Path) -> None:
    # A hold long enough that a loaded machine still connects before it ends (a 1 s hold was
    # sometimes over before the first read, and NOT_SERVING was never seen); the test does not
    # wait for it: it ends the moment SERVING arrives.
    with serving(tmp_path / "run", "--fixtures", str(fixtures), "--ready-delay", "5", ready=False) as served:
        async with grpc.aio.insecure_channel(served.target) as ch:
            updates = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service="Pods"))
            seen = [(await updates.read()).status]
            while seen[-1] != health_pb2.HealthCheckResponse.SERVING:
                seen.append((await asyncio.wait_for(updates.read(), TIMEOUT)).status)
            assert seen[0] == health_pb2.HealthCheckResponse.NOT_SERVING
            listed = await pods_v1alpha1_pb2_grpc.PodsStub(ch).ListPods(pods_v1alpha1_pb2.ListPodsRequest())
            assert len(listed.pods) == 3
            updates.cancel()


async def test_list_and_get_share_the_rate_limit_and_watch_is_exempt(tmp_path: Path, fixtures: Path) -> None:
    with serving(tmp_path / "run", "--fixtures", str(fixtures), "--qps", "0.001", "--burst", "3") as served:
        async with grpc.aio.insecure_channel(served.target) as ch:
            stub = pods_v1alpha1_pb2_grpc.PodsStub(ch)
            await stub.ListPods(pods_v1alpha1_pb2.ListPodsRequest())
            await stub.GetPod(pods_v1alpha1_pb2.GetPodRequest(podUID="uid-a"))
            await pods_doc_pb2_grpc.PodsStub(ch).ListPods(pods_doc_pb2.PodListRequest())
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.GetPod(pods_v1alpha1_pb2.GetPodRequest(podUID="uid-a"))
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            watch = stub.WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
            assert len(await watch_until(watch, 4)) == 4
            watch.cancel()


def test_reflection_lists_and_describes_both_contracts(server: Served) -> None:
    with grpc.insecure_channel(server.target) as ch:
        db = ProtoReflectionDescriptorDatabase(ch)
        services = sorted(db.get_services())
        pool = DescriptorPool(db)
        fields = [f.name for f in pool.FindMessageTypeByName("v1alpha1.ListPodsResponse").fields]
        pod = pool.FindMessageTypeByName("k8s.io.api.core.v1.Pod")  # and the Pod schema itself
        assert [f.number for f in pod.fields] == [1, 2, 3]
    assert {"v1alpha1.Pods", "Pods", "grpc.health.v1.Health"} <= set(services)
    assert fields == ["pods"]


def test_reflection_answers_under_v1_too(server: Served) -> None:
    """grpcurl from 1.8.7 and current grpc-go/java clients ask grpc.reflection.v1 first; the
    messages are v1alpha's under another package, so v1alpha's classes speak it byte for byte."""
    with grpc.insecure_channel(server.target) as ch:
        info = ch.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        requests = [
            reflection_pb2.ServerReflectionRequest(list_services=""),
            reflection_pb2.ServerReflectionRequest(
                file_containing_symbol="grpc.reflection.v1.ServerReflection"
            ),
        ]
        listed, described = list(info(iter(requests), timeout=TIMEOUT))
    names = {s.name for s in listed.list_services_response.service}
    expected = {"grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection", "Pods"}
    assert expected <= names
    file = FileDescriptorProto.FromString(described.file_descriptor_response.file_descriptor_proto[0])
    assert (file.package, file.service[0].name) == ("grpc.reflection.v1", "ServerReflection")


def test_metrics_use_the_kubelet_names(server: Served, tmp_path: Path) -> None:
    with grpc.insecure_channel(server.target) as ch:
        stub = pods_v1alpha1_pb2_grpc.PodsStub(ch)
        stub.ListPods(pods_v1alpha1_pb2.ListPodsRequest())
        with pytest.raises(grpc.RpcError):
            stub.GetPod(pods_v1alpha1_pb2.GetPodRequest(podUID="nope"))
    body = _metrics_over_http_socket(server)
    assert 'kubelet_pod_requests_total{server_api_version="v1alpha1",status_code="OK"}' in body
    assert 'kubelet_pod_requests_list_total{server_api_version="v1alpha1",status_code="OK"} 1.0' in body
    assert 'kubelet_pod_requests_get_total{server_api_version="v1alpha1",status_code="NotFound"} 1.0' in body
    assert "kubelet_pod_watch_events_dropped_total 0.0" in body
    assert "pods_api_pods 3.0" in body


# -- the socket, signals, the command line ------------------------------------------------------


def test_sockets_are_private(server: Served) -> None:
    for path in (server.socket, server.http_socket):
        assert stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_socket_mode_flag(tmp_path: Path, fixtures: Path) -> None:
    run_dir = tmp_path / "fresh" / "run"
    with serving(run_dir, "--fixtures", str(fixtures), "--socket-mode", "0660") as served:
        assert stat.S_IMODE(served.socket.stat().st_mode) == 0o660
        assert stat.S_IMODE(run_dir.stat().st_mode) == 0o750


def test_a_second_server_on_a_live_socket_is_refused(server: Served, fixtures: Path) -> None:
    second = subprocess.run(
        [PODS_API, "serve", "--run-dir", str(server.run_dir), "--fixtures", str(fixtures)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert second.returncode == 1
    assert f"a server is already serving {server.socket} (it holds {server.socket}.lock)" in second.stderr
    assert "Traceback" not in second.stderr
    with grpc.insecure_channel(server.target) as ch:  # the first one is untouched
        assert (
            len(pods_v1alpha1_pb2_grpc.PodsStub(ch).ListPods(pods_v1alpha1_pb2.ListPodsRequest()).pods) == 3
        )


def test_a_stale_socket_file_is_replaced(tmp_path: Path, fixtures: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(run_dir / "pods-api.sock"))
    stale.close()  # the file stays, nobody answers: what a crash leaves
    with serving(run_dir, "--fixtures", str(fixtures)) as served, grpc.insecure_channel(served.target) as ch:
        assert (
            len(pods_v1alpha1_pb2_grpc.PodsStub(ch).ListPods(pods_v1alpha1_pb2.ListPodsRequest()).pods) == 3
        )


async def test_sigterm_ends_watches_with_unavailable_and_removes_the_sockets(server: Served) -> None:
    async with grpc.aio.insecure_channel(server.target) as ch:
        watch = pods_v1alpha1_pb2_grpc.PodsStub(ch).WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
        await watch_until(watch, 4)
        rc = await asyncio.to_thread(server.stop)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await asyncio.wait_for(watch.read(), TIMEOUT)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert rc == 0
    assert not server.socket.exists()
    assert not server.http_socket.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "no pod source: give at least one of --fixtures DIR, --manifests DIR, --manifest-url URL"),
        (["--fixtures", "/nonexistent"], "--fixtures /nonexistent: not a directory"),
        (["--fixtures", ".", "--socket-mode", "rw"], "'rw' is not an octal mode"),
        (["--fixtures", ".", "--http-listen", "0.0.0.0:8080"], "only loopback addresses"),
        (["--fixtures", ".", "--qps", "-1"], "'-1' is negative"),
        (
            ["--fixtures", ".", "--watch-overflow", "nope"],
            "argument --watch-overflow: invalid choice: 'nope' (choose from 'coalesce', 'drop')",
        ),
    ],
)
def test_command_line_errors_are_one_clear_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = subprocess.run(
        [PODS_API, "serve", "--run-dir", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


# nobody, given CAP_DAC_READ_SEARCH: a user who is not root and may write nowhere of root's, but
# may read this machine's Python where it lives under root's home (mode 0700 in this image).
_NOBODY = ["--reuid=65534", "--regid=65534", "--clear-groups"]
_READ_ANYWHERE = ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]


def _as_a_user(command: list[str]) -> list[str]:
    """command as a user who may not create the default socket's directory; skips where no
    such user can be had."""
    if os.geteuid() != 0:
        if os.access(DEFAULT_SOCKET.parent.parent, os.W_OK) or os.access(DEFAULT_SOCKET.parent, os.W_OK):
            pytest.skip(f"this user may write {DEFAULT_SOCKET.parent}: nothing to refuse")
        return command
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root, and no setpriv (util-linux) to run pods-api as another user")
    return [setpriv, *_NOBODY, *_READ_ANYWHERE, *command]


def test_a_non_root_serve_without_run_dir_says_what_to_do() -> None:
    """The newcomer's first command without --run-dir, as a user who is not root: which path it
    wanted, why, and what to do instead, in one line (not a bare `[Errno 13]`)."""
    result = subprocess.run(
        _as_a_user([PODS_API, "serve", "--fixtures", "examples/fixtures"]),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("pods-api: cannot create /var/lib/kubelet"), line
    assert f"(for the socket {DEFAULT_SOCKET})" in line
    assert "where node agents look for the Pods API" in line
    assert "give --run-dir DIR (e.g. --run-dir ./run)" in line and "or run as root" in line


# -- helpers -------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _metric(port: int, name: str) -> float:
    body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=TIMEOUT).text
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in metrics")


def _metrics_over_http_socket(server: Served) -> str:
    transport = httpx.HTTPTransport(uds=str(server.http_socket))
    with httpx.Client(transport=transport, timeout=TIMEOUT) as client:
        return client.get("http://localhost/metrics").text


def test_the_readme_python_client_lists_and_watches(server: Served) -> None:
    example = ROOT / "examples" / "list_pods.py"
    result = subprocess.run(
        [sys.executable, str(example), str(server.socket), "status.phase"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    )
    assert result.stdout.splitlines() == [
        "shop db Running",
        "shop web Running",
        "shop cache Pending",
        "ADDED db",
        "ADDED web",
        "ADDED cache",
        "INITIAL_SYNC_COMPLETE",
    ]


def test_socket_group_flag(tmp_path: Path, fixtures: Path) -> None:
    group = next((g for g in ("daemon", "nogroup", "users") if _has_group(g)), None)
    if group is None:
        pytest.skip("no spare group on this machine")
    with serving(
        tmp_path / "run", "--fixtures", str(fixtures), "--socket-group", group, "--socket-mode", "0660"
    ) as served:
        for path in (served.socket, served.http_socket):
            assert path.stat().st_gid == grp.getgrnam(group).gr_gid
            assert stat.S_IMODE(path.stat().st_mode) == 0o660


def test_an_unknown_socket_group_is_a_usage_error(tmp_path: Path, fixtures: Path) -> None:
    result = subprocess.run(
        [
            PODS_API,
            "serve",
            "--run-dir",
            str(tmp_path),
            "--fixtures",
            str(fixtures),
            "--socket-group",
            "no-such-group",
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 2 and "no such group: no-such-group" in result.stderr


def _has_group(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def test_json_logs_are_one_object_per_line(tmp_path: Path, fixtures: Path) -> None:
    with serving(tmp_path / "run", "--fixtures", str(fixtures), "--log-format", "json") as served:
        line = served.wait_for_line("serving the Pods API")
        served.stop()
    entry = json.loads(line)
    assert entry["level"] == "info" and entry["logger"] == "pods_api.serve.process"
    assert entry["msg"] == f"serving the Pods API on {served.socket} (gRPC) and {served.http_socket} (HTTP)"
    assert all(json.loads(text)["msg"] for text in served.lines)
