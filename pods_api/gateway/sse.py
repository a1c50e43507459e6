"""WatchPods as Server-Sent Events.

    id: <revision>
    event: ADDED | MODIFIED | DELETED | INITIAL_SYNC_COMPLETE | ERROR
    data: <one line of JSON>

A new watch gets the current pods as ADDED events (without `id`: a snapshot cannot be resumed
half-way), then INITIAL_SYNC_COMPLETE (data `{}`, `id` = the snapshot's revision), then live
events, each with its revision as `id`. A watch that resumes (`Last-Event-ID`, or
`?resourceVersion=`) from a revision the cache still holds events after gets those events
instead of a snapshot, then INITIAL_SYNC_COMPLETE with data `{"resumed":true}`; from an older
revision it gets a full snapshot again. So clients prune local state only at
INITIAL_SYNC_COMPLETE, and only when it does not say "resumed": then the pods received on this
connection are all the pods.

A watch that falls behind, or is open when the server stops, ends with an ERROR event whose data
is the error body (RESOURCE_EXHAUSTED, UNAVAILABLE). A comment line is sent every heartbeat.

The watch itself (start, what a view shows, the frame cache) is core/store/stream.py, and its
response (the stall guard, heartbeats, the end) is gateway/http/watchbody.py's, shared with the
Kubernetes view; this module is the SSE encoding and its words for a watch's end.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from sse_starlette import ServerSentEvent

from pods_api.core.api.statuserrors import StatusError
from pods_api.core.config import Config
from pods_api.core.query.view import View
from pods_api.core.store.stream import Encoding, Watch, WatchStreams
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import EventType
from pods_api.gateway.assemble import pod_bytes
from pods_api.gateway.http.admission import Call
from pods_api.gateway.http.errors import Code, error_body
from pods_api.gateway.http.watchbody import WatchBody, Wording

_SYNCED = b"{}"
_RESUMED = b'{"resumed":true}'


def frame(event: str, data: bytes, revision: int | None = None) -> bytes:
    head = b"id: %d\n" % revision if revision is not None else b""
    return b"%sevent: %s\ndata: %s\n\n" % (head, event.encode(), data)


def error_frame(code: Code, message: str) -> bytes:
    return frame("ERROR", error_body(code, message))


def _event(kind: EventType, pod: PodVersion, view: View, revision: int | None) -> bytes:
    return frame(kind.name, pod_bytes(pod, view), revision)


def _synced(revision: int, resumed: bool) -> bytes:
    return frame("INITIAL_SYNC_COMPLETE", _RESUMED if resumed else _SYNCED, revision)


# The snapshot (or replay) goes out as one chunk: one write, shared by every watch that starts
# from the same snapshot and view.
ENCODING = Encoding("sse", _event, _synced, join_start=True)


# How long an EventSource waits before it reconnects (WHATWG's `retry:` field, in
# milliseconds): a second, as the Retry-After of a 503 says. A field of the stream's first event,
# not a block of its own: WHATWG clients take it either way, but a block with no data is an empty
# message to clients that yield every block (httpx-sse), which a naive json.loads then fails on.
RETRY = b"retry: 1000\n"


def _ended(exc: StatusError) -> bytes:
    return error_frame(exc.code, exc.message)


# What the one watch body (gateway/http/watchbody.py) says of an SSE watch besides its events.
WORDING = Wording(
    media_type="text/event-stream",
    ended=_ended,
    # Caches and proxies must pass each event on at once, and keep none of them.
    headers={"Cache-Control": "no-store", "Connection": "keep-alive", "X-Accel-Buffering": "no"},
    preamble=RETRY,
    heartbeat=ServerSentEvent(comment="heartbeat", sep="\n").encode(),
)


def watch_body(frames: AsyncIterator[bytes], watch: Watch | None, call: Call, config: Config) -> WatchBody:
    """The response of an SSE watch: `frames` (the watch's, or `when_synced`'s)."""
    return WatchBody(
        frames, WORDING, call, send_timeout=config.send_timeout, heartbeat=config.heartbeat, watch=watch
    )


async def when_synced(
    streams: WatchStreams, synced: asyncio.Event, stopping: asyncio.Event, view: View, since: int | None
) -> AsyncIterator[bytes]:
    """A watch accepted before the pod sources synced: heartbeats (the body's) until they have
    (`synced`), then the watch; raises (the body says it) if the server stops first or the watch
    is refused."""
    waits = [asyncio.ensure_future(synced.wait()), asyncio.ensure_future(stopping.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
    with streams.open(view, since) as watch:
        async for data in watch.frames(ENCODING):
            yield data
