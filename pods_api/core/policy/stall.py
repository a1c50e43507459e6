"""The stall guard of every watch stream (gRPC, SSE, the Kubernetes view): a client that has
taken nothing for the send timeout (`--send-timeout`) is cut off, since a stream whose client
reads nothing would hold its buffers for as long as it stays connected.

One timer per stream, not one per send: the surface marks each send's `begin` and `end`, and
the timer fires at most once every send timeout, either on time or re-armed for when the send
under way would reach the limit. A per-send deadline cost ~7 µs a frame, 14% of an SSE frame's
CPU (`python -m bench sse`). What a stream does once its client stalled (cancel its task, say
why) is the surface's `on_stall`.

Each pending send is timed on its own: an SSE heartbeat's send can overlap a data send, and
timing "some send pending" from the first of a run of overlapping ones cut off SSE watchers that
kept reading, once a starved server's sends overlapped without a gap for the send timeout (W7,
BENCHMARKS.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class StallTimer:
    """Calls `on_stall` once, when one send (from `begin` to `end`) has waited `seconds`; `fired`
    says it did. Made inside the stream's loop; `close` when the stream ends."""

    def __init__(self, seconds: float, on_stall: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        self.seconds = seconds
        self.fired = False
        self._loop = loop
        self._on_stall = on_stall
        self._sends: dict[int, float] = {}  # a pending send's token -> when it began
        self._next = 0
        self._timer = loop.call_later(seconds, self._check)

    def begin(self) -> int:
        """A send begins: the token its `end` takes."""
        token = self._next
        self._next = token + 1
        self._sends[token] = self._loop.time()
        return token

    def end(self, token: int) -> None:
        del self._sends[token]

    def close(self) -> None:
        self._timer.cancel()

    def _check(self) -> None:
        since, now = min(self._sends.values(), default=None), self._loop.time()
        if since is not None and now - since >= self.seconds:
            self.fired = True
            self._on_stall()
            return
        self._timer = self._loop.call_at((now if since is None else since) + self.seconds, self._check)
