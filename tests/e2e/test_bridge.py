"""`--kubelet-socket`: two real `pods-api serve` processes chained, A serving fixtures and B
bridging A's socket as it would the kubelet's. B must list, get and watch exactly what A does,
byte for byte, through A's death, restart with changes, and late start."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from kubelet_server import KubeletServer
from podfiles import REPORT, WEB, WORKER, add_copy, copy_examples, edit, finish, set_phase, uid_of
from released import MODIFIED, SYNCED
from serve import PODS_API, TIMEOUT, Served, serving, start
from vectors import SHARED_K8S, shared_vectors, vector_pb

from pods_api import pod_from_bytes, pod_to_bytes
from pods_api.client import Client, Contract, EventType, NotReady, Pod, WatchEvent
from pods_api.core.api.marshal import go_marshal
from pods_api.core.api.pb import k8s_core_v1_pb2, k8s_meta_v1_pb2
from pods_api.core.api.pb.pods_v1alpha1_pb2 import GetPodRequest, WatchPodsEvent
from pods_api.core.config import BRIDGE_SOCKET, DEFAULT_SOCKET
from pods_api.serve.cli import _parser, config_from_args

NEW_UID = "9f3e1c55-0000-4a5b-8c7d-112233445566"
MASK = "status.phase,status.podIPs,spec.containers.image"


def raw_call(served: Served, method: str, request: bytes = b"", fields: str | None = None) -> bytes:
    """A response's exact bytes, read with plain grpcio."""
    metadata = [("x-kubernetes-fieldmask", fields)] if fields else None
    with grpc.insecure_channel(served.target) as channel:
        response: bytes = channel.unary_unary(method)(request, metadata=metadata, timeout=TIMEOUT)
    return response


def frames(events: list[WatchEvent]) -> list[tuple[EventType, bytes | None]]:
    return [(e.type, e.pod and e.pod.raw) for e in events]


def http_get(served: Served, path: str) -> Any:
    transport = httpx.HTTPTransport(uds=str(served.http_socket))
    with httpx.Client(transport=transport, base_url="http://localhost", timeout=TIMEOUT) as http:
        response = http.get(path)
    response.raise_for_status()
    return response.json()


def pods_json(served: Served, path: str) -> list[Any]:
    items = http_get(served, path)["items"]
    for item in items:
        item["metadata"].pop("resourceVersion", None)
    return list(items)


async def next_events(stream: AsyncIterator[WatchEvent], n: int) -> list[WatchEvent]:
    async with asyncio.timeout(TIMEOUT):
        return [await anext(stream) for _ in range(n)]


async def snapshot(stream: AsyncIterator[WatchEvent]) -> list[WatchEvent]:
    events = []
    async with asyncio.timeout(TIMEOUT):
        async for event in stream:
            events.append(event)
            if event.type is EventType.INITIAL_SYNC_COMPLETE:
                return events
    raise AssertionError("the watch ended before INITIAL_SYNC_COMPLETE")


async def test_bridge_serves_upstreams_bytes(tmp_path: Path) -> None:
    fixtures = copy_examples(tmp_path / "fixtures")
    with (
        serving(tmp_path / "a", "--fixtures", str(fixtures)) as a,
        serving(tmp_path / "b", "--kubelet-socket", str(a.socket)) as b,
    ):
        for contract in Contract:
            method = f"/{contract.value}/ListPods"
            assert raw_call(b, method) == raw_call(a, method)  # the whole response, unmasked
            assert raw_call(b, method, fields=MASK) == raw_call(a, method, fields=MASK)
        get = f"/{Contract.KUBELET.value}/GetPod"
        request = GetPodRequest(podUID=uid_of(fixtures / WEB)).SerializeToString()
        assert raw_call(b, get, request) == raw_call(a, get, request)
        # B renders a pod's JSON only when a reader asks: then it is A's, on every JSON surface
        # (each server's own revision is the Kubernetes view's resourceVersion).
        assert http_get(b, f"/v1/pods/{uid_of(fixtures / WEB)}") == http_get(
            a, f"/v1/pods/{uid_of(fixtures / WEB)}"
        )
        for path in ("/v1/pods", "/api/v1/pods"):
            assert pods_json(b, path) == pods_json(a, path)

        async with Client(a.socket) as ca, Client(b.socket) as cb:
            wa, wb = ca.watch(), cb.watch()
            assert frames(await snapshot(wb)) == frames(await snapshot(wa))
            edit(fixtures / WEB, finish())
            (fixtures / REPORT).unlink()
            add_copy(fixtures, WORKER, "orders-worker-6d5f7c9b8-new11", NEW_UID)
            # The finished pod: MODIFIED, then the kubelet's DELETED, and it stays listed.
            from_a, from_b = await next_events(wa, 4), await next_events(wb, 4)
            assert sorted(frames(from_b), key=repr) == sorted(frames(from_a), key=repr)
            web = uid_of(fixtures / WEB)
            assert [e.type for e in from_b if e.pod is not None and e.pod.uid == web] == [
                EventType.MODIFIED,
                EventType.DELETED,
            ]
            assert [p.raw for p in await cb.list()] == [p.raw for p in await ca.list()]
            assert web in {p.uid for p in await cb.list()}
            await wa.aclose()
            await wb.aclose()


async def test_a_finished_pod_the_kubelet_lets_go_without_an_event_leaves_the_bridge(tmp_path: Path) -> None:
    """The kubelet's watch says nothing when a finished pod leaves its List (its manifest removed
    after the DELETED): the bridge lists again while it holds finished pods and withdraws the
    pod, which its state surfaces (here PodLookup's watch) are told as a DELETED."""
    fixtures = copy_examples(tmp_path / "fixtures")
    web = uid_of(fixtures / WEB)
    with (
        serving(tmp_path / "a", "--fixtures", str(fixtures)) as a,
        serving(tmp_path / "b", "--kubelet-socket", str(a.socket)) as b,
    ):
        async with Client(b.socket) as cb:
            watch = cb.watch(label_selector="app.kubernetes.io/name=web")
            await snapshot(watch)
            edit(fixtures / WEB, finish())
            (modified,) = await next_events(watch, 1)
            assert modified.type is EventType.MODIFIED
            assert web in {p.uid for p in await cb.list()}  # finished, still listed
            (fixtures / WEB).unlink()  # A's kubelet contract sends nothing for it now
            (gone,) = await next_events(watch, 1)
            assert (gone.type, gone.pod is not None and gone.pod.uid) == (EventType.DELETED, web)
            assert web not in {p.uid for p in await cb.list()}
            await watch.aclose()


async def test_bridge_keeps_serving_through_upstream_restart(tmp_path: Path) -> None:
    """A dies: B keeps serving its last state. A comes back with one pod changed, one gone and
    one new: B's watchers see exactly those three events, nothing for the unchanged pods."""
    fixtures = copy_examples(tmp_path / "fixtures")
    a = start(tmp_path / "a", "--fixtures", str(fixtures))
    try:
        a.wait_ready()
        with serving(tmp_path / "b", "--kubelet-socket", str(a.socket)) as b:
            async with Client(b.socket) as cb:
                before = [p.raw for p in await cb.list()]
                wb = cb.watch()
                await snapshot(wb)
                a.proc.kill()
                a.close()
                assert [p.raw for p in await cb.list()] == before  # outage: nothing changes
                edit(fixtures / WEB, finish())
                report = uid_of(fixtures / REPORT)
                (fixtures / REPORT).unlink()
                add_copy(fixtures, WORKER, "orders-worker-6d5f7c9b8-new11", NEW_UID)
                a = start(tmp_path / "a", "--fixtures", str(fixtures))
                # The pod that finished meanwhile: MODIFIED, then the DELETED the kubelet's
                # contract sends for a finished pod (it stays listed).
                changes = await next_events(wb, 4)
                assert sorted((e.type, e.pod.uid) for e in changes if e.pod) == sorted(
                    [
                        (EventType.MODIFIED, uid_of(fixtures / WEB)),
                        (EventType.DELETED, uid_of(fixtures / WEB)),
                        (EventType.DELETED, report),
                        (EventType.ADDED, NEW_UID),
                    ]
                )
                assert uid_of(fixtures / WEB) in {p.uid for p in await cb.list()}
                # One more change after the reconnect: the next event is it, so nothing (no
                # replay of unchanged pods) came between.
                edit(fixtures / WORKER, set_phase("Succeeded"))
                (sentinel,) = await next_events(wb, 1)
                assert sentinel.type is EventType.MODIFIED and sentinel.pod is not None
                assert sentinel.pod.uid == uid_of(fixtures / WORKER)
                method = "/v1alpha1.Pods/ListPods"
                assert raw_call(b, method) == raw_call(a, method)
                await wb.aclose()
    finally:
        a.close()


async def upstream_errors(b: Served, upstream: Path) -> float:
    """B's error count for its kubelet source, once it is above zero (a scrape has no event to
    await: poll, with TIMEOUT as the safety net)."""
    series = f'pods_api_source_errors_total{{source="kubelet:{upstream}"}} '
    transport = httpx.AsyncHTTPTransport(uds=str(b.http_socket))
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://localhost") as http,
        asyncio.timeout(TIMEOUT),
    ):
        while True:
            text = (await http.get("/metrics")).text
            if series in text and float(text.split(series, 1)[1].split()[0]) > 0:
                return float(text.split(series, 1)[1].split()[0])
            await asyncio.sleep(0.05)


async def test_bridge_not_ready_until_upstream_is_up_and_synced(tmp_path: Path) -> None:
    a_run = tmp_path / "a"
    with serving(tmp_path / "b", "--kubelet-socket", str(a_run / "pods-api.sock"), ready=False) as b:
        async with Client(b.socket) as cb, Client(a_run / "pods-api.sock") as ca:
            with pytest.raises(NotReady):
                await cb.list()  # upstream absent
            assert await upstream_errors(b, a_run / "pods-api.sock") >= 1  # operators see it
            with serving(
                a_run, "--fixtures", str(copy_examples(tmp_path / "f")), "--ready-delay", "3", ready=False
            ):
                with pytest.raises(NotReady):
                    await ca.list()  # upstream up, not synced ...
                with pytest.raises(NotReady):
                    await cb.list()  # ... and so neither are we
                await asyncio.to_thread(b.wait_ready)
                assert [p.raw for p in await cb.list()] == [p.raw for p in await ca.list()]


async def test_bridge_passes_the_kubelets_bytes_through(tmp_path: Path) -> None:
    """Go's bytes (the shared vectors), which our own encoder would write differently, reach
    B's clients unchanged: decoded only to index, never re-encoded."""
    pods = {}
    for v in shared_vectors():
        pod = Pod(vector_pb(v))
        if pod.uid:
            pods[pod.uid] = pod.raw
    if not pods:
        pytest.skip(f"{SHARED_K8S} is absent")
    assert any(pod_to_bytes(pod_from_bytes(raw)) != raw for raw in pods.values())  # the test can fail
    kubelet = KubeletServer(tmp_path / "kubelet.sock", pods)
    await kubelet.start()
    b = await asyncio.to_thread(start, tmp_path / "b", "--kubelet-socket", str(kubelet.path))
    try:
        await asyncio.to_thread(b.wait_ready)
        async with Client(b.socket) as client:
            assert [p.raw for p in await client.list()] == [pods[uid] for uid in sorted(pods)]
            first = min(pods)
            assert (await client.get(first)).raw == pods[first]
            stream = client.watch()
            assert frames(await snapshot(stream))[:-1] == [
                (EventType.ADDED, pods[uid]) for uid in sorted(pods)
            ]
            # Appended fields merge into the message: a change whose bytes only we could keep.
            label = k8s_core_v1_pb2.Pod(metadata=k8s_meta_v1_pb2.ObjectMeta(labels={"changed": "yes"}))
            kubelet.put(first, pods[first] + label.SerializeToString())
            (event,) = await next_events(stream, 1)
            assert (event.type, event.pod and event.pod.raw) == (EventType.MODIFIED, kubelet.pods[first])
            await stream.aclose()
    finally:
        b.close()
        await kubelet.stop()


async def test_a_relayed_event_reaches_watchers_in_the_kubelets_own_frame(tmp_path: Path) -> None:
    """The bridge fans out the kubelet's WatchPodsEvent bytes as they came, not a frame of its
    own around the pod: a frame whose fields come in another order than any encoder of ours
    writes them (valid protobuf: the pod, then the type) reaches B's v1alpha1 watchers as sent.
    A masked watch, and the documented contract, still get frames of their own."""
    meta = k8s_meta_v1_pb2.ObjectMeta(name="web", namespace="default", uid=NEW_UID)
    pod = go_marshal(k8s_core_v1_pb2.Pod(metadata=meta))
    kubelet = KubeletServer(tmp_path / "kubelet.sock", {NEW_UID: pod})
    await kubelet.start()
    b = await asyncio.to_thread(start, tmp_path / "b", "--kubelet-socket", str(kubelet.path))
    try:
        await asyncio.to_thread(b.wait_ready)
        changed = go_marshal(k8s_core_v1_pb2.Pod(metadata=meta, spec=k8s_core_v1_pb2.PodSpec(nodeName="n")))
        # Field 2 (pod), then field 1 (type MODIFIED): ours would write the type first.
        pod_first = b"\x12" + _varint(len(changed)) + changed + b"\x08" + bytes([MODIFIED])
        assert pod_first != WatchPodsEvent(type=MODIFIED, pod=changed).SerializeToString()  # type: ignore[arg-type]
        async with grpc.aio.insecure_channel(f"unix:{b.socket}") as channel:
            whole = channel.unary_stream("/v1alpha1.Pods/WatchPods")(b"")
            masked = channel.unary_stream("/v1alpha1.Pods/WatchPods")(
                b"", metadata=(("x-kubernetes-fieldmask", "spec.nodeName"),)
            )
            for call in (whole, masked):
                async with asyncio.timeout(TIMEOUT):
                    while WatchPodsEvent.FromString(await call.read()).type != SYNCED:
                        pass
            kubelet.put_framed(NEW_UID, changed, pod_first)
            async with asyncio.timeout(TIMEOUT):
                assert await whole.read() == pod_first
                event = WatchPodsEvent.FromString(await masked.read())
            assert (event.type, event.pod) == (MODIFIED, changed)  # its own frame, the same pod
            whole.cancel()
            masked.cancel()
    finally:
        b.close()
        await kubelet.stop()


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes([*out, n])


def test_our_socket_is_never_the_kubelets(tmp_path: Path) -> None:
    kubelet = tmp_path / "kubelet" / "pods-api.sock"
    for args in (
        ["--socket", str(kubelet)],
        ["--run-dir", str(kubelet.parent)],
        ["--socket", str(tmp_path / "x.sock"), "--http-socket", str(kubelet)],
    ):
        result = subprocess.run(
            [PODS_API, "serve", "--kubelet-socket", str(kubelet), *args],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert result.returncode == 2, result.stderr
        assert f"--kubelet-socket {kubelet} is also where pods-api would serve" in result.stderr
        assert "Traceback" not in result.stderr


def test_default_socket_moves_when_bridging() -> None:
    def socket_for(*args: str) -> Path:
        return config_from_args(_parser().parse_args(["serve", *args])).socket

    assert socket_for("--fixtures", ".") == DEFAULT_SOCKET
    assert socket_for("--kubelet-socket", str(DEFAULT_SOCKET)) == BRIDGE_SOCKET
    assert socket_for("--kubelet-socket", str(DEFAULT_SOCKET), "--socket", "/tmp/s.sock") == Path(
        "/tmp/s.sock"
    )
