"""`pods-api serve --watch-overflow drop`: a watcher whose queue is full is dropped as the kubelet
drops it (pkg/kubelet/apis/pods/server.go, v1.37.2), on every surface, end to end over the real
sockets. Agent developers use it to see their reconnect path run on a laptop."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import yaml
from builders import make_pod
from kubeletpodsserver import kubelet_pods_server
from serve import TIMEOUT, Served, serving

from pods_api.core.api.codec import pod_from_bytes
from pods_api.core.api.pb import pods_v1alpha1_pb2, pods_v1alpha1_pb2_grpc

PODS = 40  # per change, each ~20 KB: 800 KB a change, far more than a client's buffers after a few
# Enough changes to overflow any stalled client's buffers many times over; a test ends its
# flood as soon as every stalled watcher is dropped.
MAX_ROUNDS = 60
# The queue: small, so the drop comes after a few changes, not after a hundred.
BUFFER = "2"
# One change of every pod: its round number.
Change = Callable[[int], object]


def bulk(round_: int) -> dict[str, Any]:
    items = []
    for i in range(PODS):
        pod = make_pod(f"bulk-{i}", f"bulk-{i:03d}", typed=True)
        pod["metadata"]["annotations"] = {"round": str(round_), "blob": "x" * 20_000}
        items.append(pod)
    return {"apiVersion": "v1", "kind": "PodList", "items": items}


def write_bulk(directory: Path, round_: int) -> None:
    """Atomically, so the source sees one change of every pod."""
    tmp = directory / ".bulk.tmp"
    tmp.write_text(yaml.safe_dump(bulk(round_)))
    os.replace(tmp, directory / "bulk.yaml")


@pytest.fixture
def fixtures(tmp_path: Path) -> Path:
    directory = tmp_path / "fixtures"
    directory.mkdir()
    write_bulk(directory, 0)
    return directory


def dropping(tmp_path: Path, fixtures: Path, buffer: str = BUFFER) -> Any:
    return serving(
        tmp_path / "run", "--fixtures", str(fixtures), "--watch-overflow", "drop", "--watch-buffer", buffer
    )


def metrics(served: Served) -> str:
    transport = httpx.HTTPTransport(uds=str(served.http_socket))
    with httpx.Client(transport=transport, timeout=TIMEOUT) as client:
        return client.get("http://localhost/metrics").text


def dropped_total(served: Served) -> float:
    for line in metrics(served).splitlines():
        if line.startswith("kubelet_pod_watch_events_dropped_total "):
            return float(line.split()[1])
    raise AssertionError("kubelet_pod_watch_events_dropped_total not in /metrics")


async def read(call: Any, count: int) -> list[Any]:
    async with asyncio.timeout(TIMEOUT):
        return [await call.read() for _ in range(count)]


async def flood_until_dropped(change: Change, dropped: Callable[[], float], fast: Any, stalled: int) -> int:
    """Change every pod (`change(round)`), round after round, each round taken whole by the `fast`
    watch before the next, until `dropped()` counts `stalled` watchers; the last round."""
    for round_ in range(1, MAX_ROUNDS):
        await asyncio.to_thread(change, round_)
        events = await read(fast, PODS)
        assert {pod_from_bytes(e.pod)["metadata"]["annotations"]["round"] for e in events} == {str(round_)}
        if await asyncio.to_thread(dropped) >= stalled:
            return round_
    raise AssertionError(f"{stalled} stalled watchers not dropped after {MAX_ROUNDS} changes")


def changes(served: Served, fixtures: Path) -> tuple[Change, Callable[[], float]]:
    """How a test changes every pod of a pods-api serving `fixtures`, and reads its drop count."""
    return (lambda round_: write_bulk(fixtures, round_)), (lambda: dropped_total(served))


async def slow_watch_end(target: str, change: Change, dropped: Callable[[], float]) -> tuple[Any, ...]:
    """A watcher that reads nothing beside one that keeps up, changes until it is dropped and one
    more: how its stream ends, the drop count, and whether the one that kept up was kept."""
    async with (
        grpc.aio.insecure_channel(target) as fast_ch,
        grpc.aio.insecure_channel(target) as slow_ch,
    ):
        fast = pods_v1alpha1_pb2_grpc.PodsStub(fast_ch).WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
        slow = pods_v1alpha1_pb2_grpc.PodsStub(slow_ch).WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
        await read(fast, PODS + 1)  # the start: every pod, then the marker
        await slow.initial_metadata()
        last = await flood_until_dropped(change, dropped, fast, stalled=1)
        await asyncio.to_thread(change, last + 1)
        kept = len(await read(fast, PODS)) == PODS
        async with asyncio.timeout(TIMEOUT):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                while (await slow.read()) is not grpc.aio.EOF:
                    pass
        fast.cancel()
        return err.value.code(), err.value.details(), await asyncio.to_thread(dropped), kept


async def test_a_grpc_watcher_whose_queue_is_full_is_dropped_with_the_kubelets_status(
    tmp_path: Path, fixtures: Path
) -> None:
    with dropping(tmp_path, fixtures) as served:
        async with (
            grpc.aio.insecure_channel(served.target) as fast_ch,
            grpc.aio.insecure_channel(served.target) as slow_ch,
        ):
            fast = pods_v1alpha1_pb2_grpc.PodsStub(fast_ch).WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
            slow = pods_v1alpha1_pb2_grpc.PodsStub(slow_ch).WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
            await read(fast, PODS + 1)  # the start: every pod, then the marker
            await slow.initial_metadata()  # open; it reads nothing until it is dropped
            last = await flood_until_dropped(*changes(served, fixtures), fast, stalled=1)
            # The watcher that keeps up is not dropped, and the count is per watcher, not per
            # event lost: another change is one more event lost to the dropped one, not a count.
            write_bulk(fixtures, last + 1)
            await read(fast, PODS)
            assert await asyncio.to_thread(dropped_total, served) == 1
            assert (
                "# HELP kubelet_pod_watch_events_dropped_total Watchers dropped because their queue was "
                "full (--watch-overflow drop), one each, as the kubelet counts them."
            ) in await asyncio.to_thread(metrics, served)
            # The dropped one reads now: what was on its way and queued, then the kubelet's status.
            rounds = []
            async with asyncio.timeout(TIMEOUT):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    while True:
                        event = await slow.read()
                        assert event is not grpc.aio.EOF
                        if event.type == pods_v1alpha1_pb2.MODIFIED:
                            rounds.append(int(pod_from_bytes(event.pod)["metadata"]["annotations"]["round"]))
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert err.value.details() == "watch client channel closed"
            assert rounds == sorted(rounds) and rounds[-1] < last  # it missed the rest: relist
            assert served.wait_for_line("dropped a watcher whose queue of 2 events was full")
            fast.cancel()


def _stalled_http_watch(served: Served, path: str) -> socket.socket:
    """An HTTP watch whose client reads nothing (a small receive buffer: it stalls soon)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(TIMEOUT)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(str(served.http_socket))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    return sock


def _read_response(sock: socket.socket) -> bytes:
    """The response, up to the end of its chunked body (the connection is kept alive after it)."""
    data = b""
    while not data.endswith(b"\r\n0\r\n\r\n"):
        chunk = sock.recv(65536)
        assert chunk, f"closed before the body ended: {data[-200:]!r}"
        data += chunk
    return data


async def test_sse_and_the_kubernetes_view_end_a_dropped_watch_as_each_surface_ends_one(
    tmp_path: Path, fixtures: Path
) -> None:
    """SSE: a final ERROR event with the kubelet's status. The Kubernetes view: the watch ends
    cleanly, as the API server ends a watcher it dropped for being slow (its cacher closes the
    result channel); client-go then watches again from its last resourceVersion."""
    with dropping(tmp_path, fixtures) as served:
        sse = _stalled_http_watch(served, "/v1/pods?watch=true")
        kube = _stalled_http_watch(served, "/api/v1/pods?watch=1")
        async with grpc.aio.insecure_channel(served.target) as ch:
            fast = pods_v1alpha1_pb2_grpc.PodsStub(ch).WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
            await read(fast, PODS + 1)
            await flood_until_dropped(*changes(served, fixtures), fast, stalled=2)
            fast.cancel()
        sse_stream = await asyncio.to_thread(_read_response, sse)
        kube_stream = await asyncio.to_thread(_read_response, kube)
        sse.close()
        kube.close()
    last_event = sse_stream.rsplit(b"event: ", 1)[1]
    assert last_event.startswith(b"ERROR\ndata: ")
    error = json.loads(last_event.split(b"data: ", 1)[1].split(b"\n", 1)[0])["error"]
    assert (error["status"], error["message"]) == ("RESOURCE_EXHAUSTED", "watch client channel closed")
    assert kube_stream.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b'"type":"ERROR"' not in kube_stream


async def test_a_slow_watcher_ends_as_the_kubelets_own_server_ends_it(
    go_build: Callable[[str, str], Path], tmp_path: Path, fixtures: Path
) -> None:
    """The same flood against v1.37.2's own server code (tests/go/node/cmd/podsserver, with the
    kubelet's 100-event channel) and against pods-api in drop mode: the same end, the same count."""
    binary = go_build("node", "./cmd/podsserver")
    with kubelet_pods_server(binary, tmp_path / "kubelet.sock") as kubelet:
        kubelet.command("ready")
        kubelet.command(f"pods {PODS} 20000")
        theirs = await slow_watch_end(
            kubelet.target, lambda r: kubelet.command(f"round {r}"), kubelet.dropped
        )
    with dropping(tmp_path, fixtures, buffer="100") as served:  # the kubelet's channel size
        ours = await slow_watch_end(served.target, *changes(served, fixtures))
    assert ours == theirs == (grpc.StatusCode.RESOURCE_EXHAUSTED, "watch client channel closed", 1.0, True)
