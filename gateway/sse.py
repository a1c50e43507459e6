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
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import SendTimeoutError
from starlette.types import Receive, Scope, Send

from pods_api.core.cache import PodCache, Snapshot
from pods_api.core.fieldmask import FieldMask
from pods_api.core.lru import LRU
from pods_api.core.metrics import Metrics
from pods_api.core.watch import EventType, FellBehind, PodEvent, ServerStopping, TooManyWatchers, Watcher
from pods_api.gateway.assemble import pod_bytes
from pods_api.gateway.errors import ApiError, Code, error_body
from pods_api.gateway.rpcs import end_stream

log = logging.getLogger(__name__)

# Frames kept for reuse across watchers, per (event, mask): enough for a burst of events to every
# watcher of a busy node; bounded so a quiet server holds little.
FRAMES_KEPT = 1024
# A client whose socket has not taken a byte for this long is gone or stuck; its watcher is
# already cut off by then (it fell behind), this frees the connection too.
SEND_TIMEOUT = 30.0
# A watch slot frees only when another watch ends: retrying every second is pointless.
WATCH_LIMIT_RETRY_AFTER = 5.0
_SYNCED = b"{}"
_RESUMED = b'{"resumed":true}'


def frame(event: str, data: bytes, revision: int | None = None) -> bytes:
    head = b"id: %d\n" % revision if revision is not None else b""
    return b"%sevent: %s\ndata: %s\n\n" % (head, event.encode(), data)


def error_frame(code: Code, message: str) -> bytes:
    return frame("ERROR", error_body(code, message))


class FrameCache:
    """Each event is encoded once per distinct mask, however many clients watch with it."""

    def __init__(self, size: int = FRAMES_KEPT) -> None:
        self._frames: LRU[tuple[int, str], bytes | None] = LRU(size)

    def event(self, event: PodEvent, mask: FieldMask | None) -> bytes | None:
        """The frame for a published event; None for a MODIFIED the mask hides entirely."""

        def make() -> bytes | None:
            return None if _masked_unchanged(event, mask) else _event_frame(event, mask)

        return self._frames.get((event.revision, mask.key if mask else ""), make)


def _event_frame(event: PodEvent, mask: FieldMask | None) -> bytes:
    return frame(event.type.name, pod_bytes(event.pod, mask), event.revision)


def _masked_unchanged(event: PodEvent, mask: FieldMask | None) -> bool:
    if mask is None or event.type is not EventType.MODIFIED or event.previous is None:
        return False
    return event.previous.masked(mask).json_bytes == event.pod.masked(mask).json_bytes


def initial_frames(snapshot: Snapshot, mask: FieldMask | None) -> bytes:
    """The snapshot as one chunk, shared by every watch that starts from this snapshot."""

    def make() -> bytes:
        added = [frame("ADDED", pod_bytes(pod, mask)) for pod in snapshot.pods]
        return b"".join([*added, frame("INITIAL_SYNC_COMPLETE", _SYNCED, snapshot.revision)])

    return snapshot.memo(("sse-initial", mask.key if mask else ""), make)


@dataclass(frozen=True, slots=True)
class Start:
    """Where a watch begins: a snapshot, or the events after the client's revision."""

    watcher: Watcher
    snapshot: Snapshot | None
    replay: list[PodEvent]
    revision: int  # what the client has seen once the snapshot or replay is through


def subscribe(cache: PodCache, since: int | None) -> Start:
    """Raises ApiError: RESOURCE_EXHAUSTED at the watcher limit, UNAVAILABLE when stopping."""
    try:
        if since is None:
            snapshot, watcher = cache.watch()
            return Start(watcher, snapshot, [], snapshot.revision)
        resumed, replay, watcher = cache.watch_from(since)
    except TooManyWatchers as exc:
        raise ApiError(Code.RESOURCE_EXHAUSTED, str(exc), retry_after=WATCH_LIMIT_RETRY_AFTER) from None
    except ServerStopping as exc:
        raise ApiError(Code.UNAVAILABLE, str(exc)) from None
    if resumed is not None:
        return Start(watcher, resumed, [], resumed.revision)
    return Start(watcher, None, replay, cache.revision)


async def stream(
    start: Start, mask: FieldMask | None, frames: FrameCache, metrics: Metrics, scope: Scope
) -> AsyncIterator[bytes]:
    watcher = start.watcher
    try:
        if start.snapshot is not None:
            yield initial_frames(start.snapshot, mask)
        else:
            replayed = (frames.event(e, mask) for e in start.replay)
            yield b"".join(
                [*(f for f in replayed if f), frame("INITIAL_SYNC_COMPLETE", _RESUMED, start.revision)]
            )
        while True:
            try:
                event = await watcher.get()
            except FellBehind as exc:
                yield _end(scope, Code.RESOURCE_EXHAUSTED, str(exc))
                return
            except ServerStopping as exc:
                yield _end(scope, Code.UNAVAILABLE, str(exc))
                return
            data = frames.event(event, mask)
            if data is not None:
                metrics.fanout_delay.observe(time.monotonic() - event.published)
                yield data
    except (GeneratorExit, asyncio.CancelledError):
        # Closed or cancelled under us: the client went away (unless the end was already known).
        end_stream(scope, Code.CANCELLED)
        raise
    finally:
        watcher.close()


def _end(scope: Scope, code: Code, message: str) -> bytes:
    end_stream(scope, code)
    return error_frame(code, message)


class WatchResponse(EventSourceResponse):
    """An event stream that always lets go of its watcher, however the response ends (even if
    the stream never starts, e.g. the client left before the first byte)."""

    def __init__(self, content: AsyncIterator[bytes], watcher: Watcher, heartbeat: float) -> None:
        super().__init__(
            content,
            ping=heartbeat,
            sep="\n",
            ping_message_factory=lambda: ServerSentEvent(comment="heartbeat", sep="\n"),
            send_timeout=SEND_TIMEOUT,
        )
        self._watcher = watcher

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except SendTimeoutError:
            log.warning("closing a watch whose client took nothing for %.0f s", SEND_TIMEOUT)
        finally:
            self._watcher.close()
