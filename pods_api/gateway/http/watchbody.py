"""The one ASGI response of every HTTP watch: SSE (`/v1/pods?watch=true`, gateway/sse.py) and
the Kubernetes view (`?watch=1`, gateway/kube/watching.py). A surface hands it its frames and
its `Wording`; the body owns what both need alike:

- the stall guard: one timer per stream (core/policy/stall.py, `--send-timeout`, the same
  policy as every gRPC watch). A client that has taken nothing of one send for the send timeout
  is cut off: its watcher is closed, and it is told why (the surface's words for `TookNothing`)
  as the connection's last words (gateway/server/hooks.py), queued past flow control behind what
  it has not read, so that a client that reads again gets all that was on its way, then the
  reason, then the end of the chunked body (never a truncated one);
- the end of a watch: one that ends for a reason the client must hear (`WatchEnded`: the server
  stopping, a watcher dropped; or a refusal of a watch that opens late) ends with the surface's
  words for it, then the end of the body; a client that leaves (`http.disconnect`) ends the
  stream at once. The call's outcome (metrics) is each of these reasons;
- heartbeats, for a surface that has them (SSE's comment lines), every `heartbeat` seconds;
- the watcher is let go of however the response ends, even when the client left before the
  first byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field

import anyio
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from pods_api.core.api.statuserrors import Code, StatusError
from pods_api.core.policy.stall import StallTimer
from pods_api.core.policy.throttled_log import ThrottledLog
from pods_api.core.store.stream import Watch
from pods_api.core.store.watch import TookNothing
from pods_api.gateway.http.admission import Call
from pods_api.gateway.server.hooks import connection_hooks

log = logging.getLogger(__name__)

_STALLED_LOG = ThrottledLog(log)
# How long the end of a stream waits for its frames' generator to clean up (cancel its pending
# read of the watcher): that takes one loop turn; a generator that takes longer is left.
_CLOSE_TIMEOUT = 1.0


@dataclass(frozen=True, slots=True)
class Wording:
    """What one surface's watch says besides its frames."""

    media_type: str
    # The last frame of a watch that ended for `StatusError` (b"": none, the body just ends).
    ended: Callable[[StatusError], bytes]
    headers: Mapping[str, str] = field(default_factory=dict)
    preamble: bytes = b""  # put before the stream's first frame (not a heartbeat)
    heartbeat: bytes = b""  # sent every `heartbeat` seconds when the body is given one


class WatchBody(Response):
    """A watch's chunked response (module docstring). `watch`: the watcher to let go of at the
    end (None: the frames open and close their own, as a watch that waits for the sources)."""

    def __init__(
        self,
        frames: AsyncIterator[bytes],
        wording: Wording,
        call: Call,
        *,
        send_timeout: float,
        heartbeat: float | None = None,
        watch: Watch | None = None,
    ) -> None:
        self.status_code = 200
        self.media_type = wording.media_type
        self.background = None
        self.init_headers(wording.headers)
        self._frames = frames
        self._wording = wording
        self._call = call
        self._send_timeout = send_timeout
        self._heartbeat = heartbeat if wording.heartbeat else None
        self._watch = watch
        self._open = True  # the body has not ended: a heartbeat may still go

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stalled = anyio.CancelScope()  # around the stream, cancelled by the stall timer
        timer = StallTimer(self._send_timeout, stalled.cancel)
        try:
            with stalled:
                await _timed(send, timer, self._start())
                async with anyio.create_task_group() as group:
                    if self._heartbeat is not None:
                        group.start_soon(self._beat, send, timer, self._heartbeat)
                    group.start_soon(_until_disconnect, receive, group.cancel_scope)
                    await self._stream(send, timer)
                    group.cancel_scope.cancel()
            if timer.fired:
                self._cut_off(scope)
        finally:
            timer.close()
            if self._watch is not None:
                self._watch.close()

    def _start(self) -> Message:
        return {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}

    async def _stream(self, send: Send, timer: StallTimer) -> None:
        frames, preamble = self._frames, self._wording.preamble
        begin, end = timer.begin, timer.end
        first = True
        try:
            async for frame in frames:
                if first:
                    frame, first = preamble + frame, False
                sending = begin()
                await send({"type": "http.response.body", "body": frame, "more_body": True})
                end(sending)
        except StatusError as exc:
            self._call.end(exc.code)
            last = self._wording.ended(exc)
            if last:
                self._open = False  # no heartbeat after the last frame
                await _timed(send, timer, _chunk(preamble + last if first else last))
        except asyncio.CancelledError:
            self._call.end(Code.CANCELLED)  # the client left (or stalled: then _cut_off says so)
            raise
        finally:
            self._open = False  # no heartbeat after the last frame
            await _close(frames)
        self._call.end(Code.OK)  # (unless it ended otherwise first: the first reason wins)
        await _timed(send, timer, {"type": "http.response.body", "body": b"", "more_body": False})

    async def _beat(self, send: Send, timer: StallTimer, seconds: float) -> None:
        beat = _chunk(self._wording.heartbeat)
        while True:
            await anyio.sleep(seconds)
            if not self._open:
                return
            await _timed(send, timer, beat)

    def _cut_off(self, scope: Scope) -> None:
        """The client took nothing of a send for the send timeout: its watcher goes, and it
        hears why, after what it has not read yet, if its connection can still take that."""
        if self._watch is not None:
            self._watch.close()
        self._call.outcome = Code.RESOURCE_EXHAUSTED
        hooks = connection_hooks(scope)
        told = hooks is not None and hooks.last_words(self._wording.ended(TookNothing(self._send_timeout)))
        if hooks is not None and not told:
            hooks.drop()
        _STALLED_LOG.warning(
            f"ending a watch whose client took nothing for {self._send_timeout:g} s"
            + ("" if told else "; it could not be told")
        )


def _chunk(data: bytes) -> Message:
    return {"type": "http.response.body", "body": data, "more_body": True}


async def _timed(send: Send, timer: StallTimer, message: Message) -> None:
    sending = timer.begin()
    await send(message)
    timer.end(sending)


async def _until_disconnect(receive: Receive, stream: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    stream.cancel()


async def _close(frames: AsyncIterator[bytes]) -> None:
    """Lets the frames' generator clean up now (it may be suspended at a frame whose send was
    cancelled), shielded from the cancellation that ends the stream."""
    aclose = getattr(frames, "aclose", None)
    if aclose is None:
        return
    with anyio.move_on_after(_CLOSE_TIMEOUT, shield=True):
        with contextlib.suppress(RuntimeError):  # already being closed by the task reading it
            await aclose()
