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

The watch itself (start, what a view shows, the frame cache) is core/store/stream.py; this module is
the SSE encoding and the mapping of a watch's end to an ERROR event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import SendTimeoutError
from starlette.types import Message, Receive, Scope, Send

from pods_api.core.policy.throttled_log import ThrottledLog
from pods_api.core.query.view import View
from pods_api.core.store.pod import PodVersion
from pods_api.core.store.stream import Encoding, Watch, WatchStreams
from pods_api.core.store.watch import EventType, ServerStopping, TooManyWatchers, WatchEnded
from pods_api.gateway.admission import Call
from pods_api.gateway.assemble import pod_bytes
from pods_api.gateway.connection import LAST_WORDS
from pods_api.gateway.errors import ApiError, Code, error_body

log = logging.getLogger(__name__)

# A watch slot frees only when another watch ends: retrying every second is pointless.
WATCH_LIMIT_RETRY_AFTER = 5.0
_STALLED_LOG = ThrottledLog(log)
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


def open_watch(streams: WatchStreams, view: View, since: int | None) -> Watch:
    """Raises ApiError: RESOURCE_EXHAUSTED at the watcher limit, UNAVAILABLE when stopping."""
    try:
        return streams.open(view, since)
    except TooManyWatchers as exc:
        raise ApiError(Code.RESOURCE_EXHAUSTED, str(exc), retry_after=WATCH_LIMIT_RETRY_AFTER) from None
    except ServerStopping as exc:
        raise ApiError(Code.UNAVAILABLE, str(exc)) from None


async def stream(watch: Watch, call: Call) -> AsyncIterator[bytes]:
    first = True
    try:
        async for data in watch.frames(ENCODING):
            yield RETRY + data if first else data
            first = False
    except WatchEnded as exc:
        call.end(exc.code)
        yield (RETRY if first else b"") + error_frame(exc.code, str(exc))
    except (GeneratorExit, asyncio.CancelledError):
        # Closed or cancelled under us: the client went away (unless the end was already known).
        call.end(Code.CANCELLED)
        raise
    finally:
        watch.close()


async def stream_when_synced(
    streams: WatchStreams,
    synced: asyncio.Event,
    stopping: asyncio.Event,
    view: View,
    since: int | None,
    call: Call,
) -> AsyncIterator[bytes]:
    """A watch accepted before the pod sources synced: heartbeats (the response's) until they
    have (`synced`), then the watch as `stream`; ERROR UNAVAILABLE if the server stops first."""
    waits = [asyncio.ensure_future(synced.wait()), asyncio.ensure_future(stopping.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
    try:
        watch = open_watch(streams, view, since)
    except ApiError as exc:
        call.end(exc.code)
        yield RETRY + error_frame(exc.code, exc.message)
        return
    async for data in stream(watch, call):
        yield data


class WatchResponse(EventSourceResponse):
    """An event stream that always lets go of its watcher, however the response ends (even if
    the stream never starts, e.g. the client left before the first byte).

    The send timeout (a client that has taken nothing for `send_timeout` is cut off) is one
    timer per stream rather than sse-starlette's cancel scope with a deadline around every
    send: that scope cost ~7 µs a frame, 14% of a frame's CPU (`python -m bench sse`). The timer is
    re-armed only when it fires, to the deadline of the send then pending, so a stalled send
    is still cut off `send_timeout` after it began, with the same SendTimeoutError."""

    def __init__(
        self,
        content: AsyncIterator[bytes],
        watch: Watch | None,
        call: Call,
        heartbeat: float,
        send_timeout: float,
    ) -> None:
        super().__init__(
            content,
            ping=heartbeat,
            sep="\n",
            ping_message_factory=lambda: ServerSentEvent(comment="heartbeat", sep="\n"),
            send_timeout=send_timeout,
        )
        self._watch = watch
        self._call = call
        self._timeout = send_timeout
        # When each pending send began: a heartbeat's can overlap a data send. Each send is
        # timed on its own: timing "some send pending" from the first of a run of overlapping
        # ones cut off SSE watchers that kept reading, once a starved server's sends took long
        # enough to overlap without a gap for the send timeout (W7, BENCHMARKS.md).
        self._sends: dict[object, float] = {}
        self._stalled = anyio.CancelScope()  # around the stream, cancelled by a stalled send
        self._timer: asyncio.TimerHandle | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._timeout, self._check_send, loop)
        try:
            await super().__call__(scope, receive, send)
        except SendTimeoutError:
            if self._watch is not None:
                self._watch.close()
            # The client has read nothing for the send timeout: its watcher is cut off. It still
            # hears why, after what it has not read yet (the server's connection class queues
            # the ERROR past flow control); an ASGI server without that just drops it.
            self._call.outcome = Code.RESOURCE_EXHAUSTED
            message = f"took nothing for {self._timeout:g} s; fell behind: list and watch again"
            last_words = scope.get("extensions", {}).get(LAST_WORDS)
            told = last_words is not None and last_words(error_frame(Code.RESOURCE_EXHAUSTED, message))
            _STALLED_LOG.warning(
                f"ending a watch whose client took nothing for {self._timeout:g} s"
                + ("" if told else "; it could not be told")
            )
        finally:
            self._timer.cancel()
            if self._watch is not None:
                self._watch.close()  # (a watch opened later, by the stream, closes itself)

    def _check_send(self, loop: asyncio.AbstractEventLoop) -> None:
        since, now = min(self._sends.values(), default=None), loop.time()
        if since is not None and now - since >= self._timeout:
            self._stalled.cancel()
            return
        due = (since if since is not None else now) + self._timeout
        self._timer = loop.call_at(due, self._check_send, loop)

    async def _send_with_timeout(self, send: Send, message: Message) -> None:
        # Data and heartbeats both come here, the one in a send the other may be waiting on.
        token = object()
        self._sends[token] = asyncio.get_running_loop().time()
        try:
            await send(message)
        finally:
            del self._sends[token]

    async def _stream_response(self, send: Send) -> None:
        with self._stalled:
            await super()._stream_response(send)
        if self._stalled.cancel_called:
            raise SendTimeoutError()
