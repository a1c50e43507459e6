"""WatchPods over Server-Sent Events: order, ids, masks, resume, heartbeats, limits, and a slow
client cut off with a final ERROR event."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from typing import Any

import orjson
import pytest
from gatewayharness import (
    PODS,
    TIMEOUT,
    Gateway,
    GatewayFactory,
    make_pod,
    until,
    version,
    watching,
)
from gatewayjson import TYPE_META, canonical, deserialize

from pods_api.core.query.fieldmask import parse_mask
from pods_api.core.query.view import View
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import EventType
from pods_api.gateway import sse
from pods_api.gateway.http.errors import Code

# The `gateway` and `make_gateway` fixtures.

WATCH_OK = {"server_api_version": "http"}


async def test_snapshot_then_initial_sync_complete_then_live_events(gateway: Gateway) -> None:
    listed = (await gateway.client.get("/v1/pods")).json()
    async with watching(gateway.client) as (r, events):
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert r.headers["cache-control"] == "no-store"
        snapshot = await events.take(4)
        assert [e.event for e in snapshot] == ["ADDED"] * 3 + ["INITIAL_SYNC_COMPLETE"]
        assert [e.data for e in snapshot[:3]] == listed["items"]
        assert all(e.id is None for e in snapshot[:3])  # a snapshot cannot be resumed half-way
        assert snapshot[3].id == listed["metadata"]["resourceVersion"]
        assert snapshot[3].data == {}

        gateway.publish(make_pod("api", "uid-d"))
        gateway.publish(make_pod("web", "uid-b", "Succeeded"))
        gateway.sink.delete("uid-c")
        live = await events.take(3)
        assert [(e.event, e.uid) for e in live] == [
            ("ADDED", "uid-d"),
            ("MODIFIED", "uid-b"),
            ("DELETED", "uid-c"),
        ]
        assert [int(e.id or 0) for e in live] == [
            int(listed["metadata"]["resourceVersion"]) + n for n in (1, 2, 3)
        ]
        assert live[0].data == canonical(make_pod("api", "uid-d"))
        assert live[1].data["status"]["phase"] == "Succeeded"
        assert live[2].data == canonical(PODS[2])  # the pod as it was when deleted
        for event in (*snapshot[:3], *live):
            pod = deserialize(orjson.dumps(event.data).decode(), "V1Pod")
            assert (pod.kind, pod.api_version) == ("Pod", "v1")


async def test_accept_event_stream_is_a_watch(gateway: Gateway) -> None:
    async with gateway.client.stream("GET", "/v1/pods", headers={"Accept": "text/event-stream"}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = r.aiter_lines()
        # When to reconnect, as a field of the first event: no empty block before it.
        assert await anext(lines) == "retry: 1000"
        assert await anext(lines) == "event: ADDED"


async def test_httpx_sse_yields_only_real_events(gateway: Gateway) -> None:
    """httpx-sse yields every block, data or not: each it yields is an event whose data is JSON
    (no empty message for the reconnection time, which comes as a field of the first event)."""
    httpx_sse = pytest.importorskip("httpx_sse", reason="httpx-sse is not installed")
    async with httpx_sse.aconnect_sse(gateway.client, "GET", "/v1/pods?watch=1") as source:
        events = source.aiter_sse()
        first = await asyncio.wait_for(anext(events), TIMEOUT)
        assert (first.event, first.retry) == ("ADDED", 1000)
        assert orjson.loads(first.data)["kind"] == "Pod"
        rest = [await asyncio.wait_for(anext(events), TIMEOUT) for _ in range(len(PODS))]
        assert [e.event for e in rest] == ["ADDED"] * (len(PODS) - 1) + ["INITIAL_SYNC_COMPLETE"]
        assert all(isinstance(orjson.loads(e.data), dict) and e.retry is None for e in rest)


async def test_each_event_is_one_line_of_json(gateway: Gateway) -> None:
    gateway.publish(
        {
            **make_pod("api", "uid-d"),
            "metadata": {
                "name": "api",
                "namespace": "shop",
                "uid": "uid-d",
                "annotations": {"note": "two\nlines\r\nhere"},
            },
        }
    )
    async with watching(gateway.client) as (r, _events):
        lines = []
        async for line in r.aiter_lines():
            lines.append(line)
            if line.startswith("event: INITIAL_SYNC_COMPLETE"):
                break
    data = [line for line in lines if line.startswith("data: ")]
    assert len(data) == 4
    assert orjson.loads(data[3][6:])["metadata"]["annotations"]["note"] == "two\nlines\r\nhere"


async def test_masked_watch_sends_masked_pods_and_skips_hidden_changes(gateway: Gateway) -> None:
    mask = parse_mask("status.phase")
    assert mask is not None
    async with watching(gateway.client, {"fields": "status.phase"}) as (_, events):
        snapshot = await events.until("INITIAL_SYNC_COMPLETE")
        assert snapshot[0].data == {
            **TYPE_META,
            "metadata": {"name": "db", "namespace": "shop", "uid": "uid-a"},
            "status": {"phase": "Running"},
        }
        gateway.publish(make_pod("db", "uid-a", "Running", tier="backend"))  # labels only: hidden
        gateway.publish(make_pod("db", "uid-a", "Failed", tier="backend"))
        revision = gateway.core.cache.revision
        gateway.sink.delete("uid-a")
        modified, deleted = await events.take(2)
        assert (modified.event, modified.id) == ("MODIFIED", str(revision))
        assert modified.data["status"] == {"phase": "Failed"}
        without_type_meta = canonical(make_pod("db", "uid-a", "Failed", tier="backend"))
        assert modified.data == {
            **TYPE_META,
            **mask.apply_json({k: v for k, v in without_type_meta.items() if k not in TYPE_META}),
        }
        assert (deleted.event, deleted.uid, set(deleted.data)) == (
            "DELETED",
            "uid-a",
            {"kind", "apiVersion", "metadata", "status"},
        )


async def test_unmasked_watch_sends_every_change(gateway: Gateway) -> None:
    async with watching(gateway.client) as (_, events):
        await events.until("INITIAL_SYNC_COMPLETE")
        gateway.publish(make_pod("db", "uid-a", "Running", tier="backend"))
        (event,) = await events.take(1)
        assert event.event == "MODIFIED" and event.data["metadata"]["labels"]["tier"] == "backend"


async def test_invalid_mask_is_refused_before_the_stream(gateway: Gateway) -> None:
    r = await gateway.client.get("/v1/pods", params={"watch": "true", "fields": "spec.nope"})
    assert r.status_code == 400 and r.json()["error"]["status"] == "INVALID_ARGUMENT"


# -- resume ----------------------------------------------------------------------------------


async def test_resume_within_the_event_history_replays_only_what_was_missed(gateway: Gateway) -> None:
    seen = gateway.core.cache.revision
    gateway.publish(make_pod("api", "uid-d"))
    gateway.publish(make_pod("web", "uid-b", "Failed"))
    for headers, params in (({"Last-Event-ID": str(seen)}, {}), ({}, {"resourceVersion": str(seen)})):
        async with watching(gateway.client, params, headers) as (_, events):
            replay = await events.until("INITIAL_SYNC_COMPLETE")
            assert [(e.event, e.id) for e in replay] == [
                ("ADDED", str(seen + 1)),
                ("MODIFIED", str(seen + 2)),
                ("INITIAL_SYNC_COMPLETE", str(seen + 2)),
            ]
            assert replay[-1].data == {"resumed": True}
    gateway.publish(make_pod("api", "uid-d", "Failed"))
    async with watching(gateway.client, {}, {"Last-Event-ID": str(seen + 2)}) as (_, events):
        replay = await events.until("INITIAL_SYNC_COMPLETE")
        assert [(e.event, e.id) for e in replay] == [
            ("MODIFIED", str(seen + 3)),
            ("INITIAL_SYNC_COMPLETE", str(seen + 3)),
        ]
        gateway.publish(make_pod("api", "uid-d", "Succeeded"))
        (live,) = await events.take(1)
        assert (live.event, live.id) == ("MODIFIED", str(seen + 4))


async def test_resume_from_now_sends_only_initial_sync_complete(gateway: Gateway) -> None:
    now = str(gateway.core.cache.revision)
    async with watching(gateway.client, {}, {"Last-Event-ID": now}) as (_, events):
        (synced,) = await events.take(1)
        assert (synced.event, synced.id, synced.data) == ("INITIAL_SYNC_COMPLETE", now, {"resumed": True})


async def test_resume_with_a_mask_skips_hidden_changes_in_the_replay(gateway: Gateway) -> None:
    seen = gateway.core.cache.revision
    gateway.publish(make_pod("db", "uid-a", "Running", tier="backend"))
    gateway.publish(make_pod("db", "uid-a", "Failed", tier="backend"))
    async with watching(gateway.client, {"fields": "status.phase"}, {"Last-Event-ID": str(seen)}) as (
        _,
        events,
    ):
        replay = await events.until("INITIAL_SYNC_COMPLETE")
        assert [(e.event, e.id) for e in replay] == [
            ("MODIFIED", str(seen + 2)),
            ("INITIAL_SYNC_COMPLETE", str(seen + 2)),
        ]


async def test_resume_from_too_old_or_unknown_revisions_sends_a_full_snapshot(gateway: Gateway) -> None:
    seen = gateway.core.cache.revision
    # Enough changes to push `seen` out of the event history.
    a, b = version(make_pod("db", "uid-a", "Running")), version(make_pod("db", "uid-a", "Failed"))
    ring = gateway.core.cache.ring_size
    for n in range(ring + 2):
        gateway.sink.upsert(a if n % 2 else b)
    for stale in (str(seen), "1", str(gateway.core.cache.revision + 100)):
        async with watching(gateway.client, {}, {"Last-Event-ID": stale}) as (_, events):
            snapshot = await events.until("INITIAL_SYNC_COMPLETE")
            assert [e.event for e in snapshot] == ["ADDED"] * 3 + ["INITIAL_SYNC_COMPLETE"]
            assert (snapshot[-1].id, snapshot[-1].data) == (str(gateway.core.cache.revision), {})


async def test_last_event_id_wins_over_resource_version(gateway: Gateway) -> None:
    now = str(gateway.core.cache.revision)
    async with watching(gateway.client, {"resourceVersion": "1"}, {"Last-Event-ID": now}) as (_, events):
        (synced,) = await events.take(1)
        assert synced.data == {"resumed": True}


@pytest.mark.parametrize(
    ("params", "headers"), [({"resourceVersion": "abc"}, {}), ({}, {"Last-Event-ID": "x1"})]
)
async def test_non_numeric_revision_is_invalid_argument(
    gateway: Gateway, params: dict[str, str], headers: dict[str, str]
) -> None:
    r = await gateway.client.get("/v1/pods", params={"watch": "true", **params}, headers=headers)
    assert r.status_code == 400
    assert r.json()["error"]["status"] == "INVALID_ARGUMENT"


# -- no gap, no duplicate --------------------------------------------------------------------


async def test_a_watch_opened_during_churn_ends_up_with_exactly_the_cache(
    make_gateway: GatewayFactory,
) -> None:
    async def churn(gw: Gateway) -> None:
        n, after = 0, 0
        while after < 300:  # until 300 events after the watch subscribed
            n += 1
            after += len(gw.core.cache.hub)
            gw.publish(make_pod(f"p{n % 7}", f"uid-p{n % 7}", ["Pending", "Running"][n % 2]))
            if n % 5 == 0:
                gw.sink.delete(f"uid-p{(n * 3) % 7}")
            await asyncio.sleep(0)

    # A buffer deep enough for the whole churn: this test is about the start, not about slow clients.
    async with make_gateway(watch_buffer=10_000) as gw:
        publisher = asyncio.create_task(churn(gw))
        await until(
            lambda: gw.core.cache.revision > 100 + int(gw.core.cache._first_revision),
            lambda: asyncio.sleep(0),
        )
        held: dict[str, Any] = {}
        last_id = 0
        async with watching(gw.client) as (_, events):
            for event in await events.until("INITIAL_SYNC_COMPLETE"):
                if event.event == "ADDED":
                    held[event.uid] = event.data
                else:
                    last_id = int(event.id or 0)
            await publisher
            assert last_id < gw.core.cache.revision  # the watch started in the middle of the churn
            while last_id < gw.core.cache.revision:
                event = await events.next()
                assert int(event.id or 0) > last_id
                last_id = int(event.id or 0)
                if event.event == "DELETED":
                    del held[event.uid]
                else:
                    assert (event.event == "ADDED") == (event.uid not in held)
                    held[event.uid] = event.data
        listed = (await gw.client.get("/v1/pods")).json()["items"]
        assert held == {p["metadata"]["uid"]: p for p in listed}


# -- heartbeats, limits, ends ----------------------------------------------------------------


async def test_heartbeat_comments_keep_the_stream_alive(make_gateway: GatewayFactory) -> None:
    async with make_gateway(heartbeat=0.05) as gw, watching(gw.client) as (r, _):

        async def first_comment() -> str:
            async for line in r.aiter_lines():
                if line.startswith(":"):
                    return line
            raise EOFError

        assert await asyncio.wait_for(first_comment(), TIMEOUT) == ": heartbeat"


async def test_too_many_watchers_is_resource_exhausted(make_gateway: GatewayFactory) -> None:
    async with make_gateway(max_watchers=1) as gw, watching(gw.client) as (first, _):
        assert first.status_code == 200
        r = await gw.client.get("/v1/pods", params={"watch": "true"})
        assert r.status_code == 429
        assert r.headers["grpc-status"] == str(Code.RESOURCE_EXHAUSTED.number)
        assert "limit" in r.json()["error"]["message"]
        assert r.headers["retry-after"] == "5"
        assert (
            gw.counter("kubelet_pod_requests_watch_total", **WATCH_OK, status_code="ResourceExhausted") == 1
        )


async def test_server_stopping_ends_watches_with_unavailable(gateway: Gateway) -> None:
    async with watching(gateway.client) as (_, events):
        await events.until("INITIAL_SYNC_COMPLETE")
        gateway.core.cache.hub.stop()
        (error,) = await events.take(1)
        assert (error.event, error.id) == ("ERROR", None)
        assert error.data["error"]["status"] == "UNAVAILABLE" and error.data["error"]["code"] == 503
        with pytest.raises(EOFError):
            await events.next()
    assert gateway.counter("kubelet_pod_requests_watch_total", **WATCH_OK, status_code="Unavailable") == 1


async def test_a_client_leaving_frees_its_watcher_and_counts_as_canceled(gateway: Gateway) -> None:
    async with watching(gateway.client) as (_, events):
        await events.until("INITIAL_SYNC_COMPLETE")
        assert len(gateway.core.cache.hub) == 1
    await until(lambda: len(gateway.core.cache.hub) == 0, lambda: asyncio.sleep(0))
    labels = {**WATCH_OK, "status_code": "Canceled"}
    await until(
        lambda: gateway.counter("kubelet_pod_requests_watch_total", **labels) == 1, lambda: asyncio.sleep(0)
    )


async def test_fanout_delay_is_observed_per_delivered_event(gateway: Gateway) -> None:
    async with watching(gateway.client) as (_, events):
        await events.until("INITIAL_SYNC_COMPLETE")
        before = gateway.counter("pods_api_watch_event_delay_seconds_count")
        gateway.publish(make_pod("api", "uid-d"))
        gateway.publish(make_pod("api", "uid-d", "Failed"))
        await events.take(2)
        assert gateway.counter("pods_api_watch_event_delay_seconds_count") == before + 2


async def test_each_event_is_encoded_once_per_mask_for_all_watchers(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded: list[tuple[int, str]] = []
    real = sse.ENCODING

    def counting(kind: EventType, pod: PodVersion, view: View, revision: int | None) -> bytes:
        if revision is not None:  # a live event, not the snapshot
            encoded.append((revision, view.key))
        return real.event(kind, pod, view, revision)

    monkeypatch.setattr(sse, "ENCODING", dataclasses.replace(real, event=counting))
    async with (
        watching(gateway.client) as (_, plain1),
        watching(gateway.client) as (_, plain2),
        watching(gateway.client, {"fields": "status.phase"}) as (_, masked1),
        watching(gateway.client, {"fields": "status.phase"}) as (_, masked2),
    ):
        for reader in (plain1, plain2, masked1, masked2):
            await reader.until("INITIAL_SYNC_COMPLETE")
        gateway.publish(make_pod("api", "uid-d"))
        received = [(await reader.next()).data for reader in (plain1, plain2, masked1, masked2)]
    assert received[0] == received[1] and received[2] == received[3] != received[0]
    revision = gateway.core.cache.revision
    assert sorted(encoded) == [(revision, ""), (revision, "status.phase")]


# -- a slow client ---------------------------------------------------------------------------


def big_pod(round_: int) -> dict[str, Any]:
    pod = make_pod("big", "uid-big")
    pod["metadata"]["annotations"] = {"blob": f"{round_:08d}" + "x" * 65536}
    return pod


async def test_a_client_that_stops_reading_is_not_cut_off_and_then_gets_the_newest_version(
    make_gateway: GatewayFactory,
) -> None:
    async with make_gateway(watch_buffer=3) as gw:
        loop = asyncio.get_running_loop()
        raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        raw.setblocking(False)
        await loop.sock_connect(raw, str(gw.path))
        await loop.sock_sendall(raw, b"GET /v1/pods?watch=true HTTP/1.1\r\nHost: localhost\r\n\r\n")
        await until(lambda: len(gw.core.cache.hub) == 1, lambda: asyncio.sleep(0))
        # The client reads nothing: the socket buffers fill, the stream blocks, its watcher's queue
        # fills and what comes next is coalesced. Events keep coming, a turn of the loop after each.
        published = 0

        async def publish() -> None:
            nonlocal published
            published += 1
            gw.publish(big_pod(published))
            await asyncio.sleep(0)

        await until(lambda: gw.counter("pods_api_watch_events_coalesced_total") > 3, publish)
        assert gw.counter("kubelet_pod_watch_events_dropped_total") >= 4
        assert len(gw.core.cache.hub) == 1  # still watching
        # Now it reads: what it was sent, then the newest version of the pod; no ERROR.
        reader = _SocketReader(loop, raw)
        newest = b'"blob":"%08d' % published
        async with asyncio.timeout(TIMEOUT):
            while newest not in reader.buffer:
                await reader._more()
        raw.close()
        assert b"event: ERROR" not in reader.buffer
        await until(lambda: len(gw.core.cache.hub) == 0, lambda: asyncio.sleep(0))


async def read_chunked_response(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> bytes:
    """The body of one HTTP/1.1 chunked response, read to its last chunk."""
    reader = _SocketReader(loop, sock)
    head = await reader.through(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"transfer-encoding: chunked" in head.lower()
    body = b""
    while True:
        size = int(await reader.through(b"\r\n"), 16)
        body += await reader.exactly(size)
        assert await reader.exactly(2) == b"\r\n"
        if size == 0:
            return body


class _SocketReader:
    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        self.loop, self.sock, self.buffer = loop, sock, b""

    async def _more(self) -> None:
        data = await self.loop.sock_recv(self.sock, 1 << 20)
        if not data:
            raise EOFError("connection closed before the response ended")
        self.buffer += data

    async def through(self, separator: bytes) -> bytes:
        while separator not in self.buffer:
            await self._more()
        line, self.buffer = self.buffer.split(separator, 1)
        return line

    async def exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            await self._more()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data


async def test_a_watch_before_the_sources_sync_waits_with_heartbeats_then_gets_its_snapshot(
    make_gateway: GatewayFactory,
) -> None:
    """An EventSource takes a 503 on reconnect as final (WHATWG) and never retries: so a watch
    is accepted while the server syncs (after a restart), kept alive with heartbeats, and sent
    its snapshot once the sources have synced, the first event telling when to reconnect."""
    async with make_gateway(synced=False, heartbeat=0.05) as gw, watching(gw.client) as (r, events):
        assert r.status_code == 200
        seen: list[str] = []
        while sum(line.startswith(":") for line in seen) < 2:  # heartbeats while it waits
            seen.append(await asyncio.wait_for(anext(events.lines), TIMEOUT))
        assert not any(line.startswith(("event:", "data:", "retry:")) for line in seen)
        gw.sink.mark_synced()
        names = [(await events.next()).event for _ in range(4)]
        assert names == ["ADDED", "ADDED", "ADDED", "INITIAL_SYNC_COMPLETE"]


async def test_a_watch_waiting_for_the_sync_hears_unavailable_when_the_server_stops(
    make_gateway: GatewayFactory,
) -> None:
    async with make_gateway(synced=False) as gw, watching(gw.client) as (r, events):
        assert r.status_code == 200
        gw.core.cache.hub.stop()
        error = await events.next()
        assert error.event == "ERROR" and error.data["error"]["status"] == "UNAVAILABLE"
