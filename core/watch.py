"""Watch fan-out: every watcher has a bounded queue; publishing never waits for a client.

A watcher that falls behind is cut off (its queue would otherwise grow without bound, or make
every other watcher wait): the client lists and watches again, as with the kubelet.

"Behind" is judged when a change arrives: a watcher that holds `capacity` undelivered events is
over. One change that touches many pods at once (a relist, a PodList file rewritten) is always
taken whole by a watcher that is not over, so it never cuts off a watcher that was keeping up.
A watcher that is over is given `grace` seconds to get back under `capacity`, as the API
server's watch cache gives a full watcher a time budget: a burst faster than the client reads
(a rollout, a relist of a big node) passes, a client that keeps up on average is never cut
off. It is cut off when it is still over once the grace ends (a timer, so a stalled client is
cut off even when nothing more is published), or at once when its queue reaches
`BURST_FACTOR * capacity` events, which bounds memory. Queued events share the cache's pod
versions, so a queue costs a pointer per event, not the pods' bytes. With `grace` 0 the rule is
the kubelet's: over at a change is cut off.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from pods_api.core.pod import PodVersion
from pods_api.core.status import Code, ResourceExhausted, StatusError

# A watcher over capacity may queue up to this many times its capacity while in its grace: the
# bound on memory a burst can take (with the default capacity of 100, 400 pointers).
BURST_FACTOR = 4
# Seconds a watcher over capacity has to get back under it: a burst of a few thousand events
# drains in well under a second into a reading client, and a stalled one is cut off soon after.
DEFAULT_GRACE = 2.0


class EventType(IntEnum):
    """Values are the kubelet's v1alpha1.EventType numbers."""

    ADDED = 0
    MODIFIED = 1
    DELETED = 2
    INITIAL_SYNC_COMPLETE = 3


@dataclass(frozen=True, slots=True)
class PodEvent:
    type: EventType
    pod: PodVersion
    revision: int
    previous: PodVersion | None  # for MODIFIED: the version this one replaces
    published: float  # time.monotonic() when the cache published it


class WatchEnded(StatusError):
    """The watch is over for a reason the client must hear (fell behind, server stopping)."""


class FellBehind(WatchEnded):
    code = Code.RESOURCE_EXHAUSTED

    def __init__(self, dropped: int) -> None:
        super().__init__("fell behind; list and watch again")
        self.dropped = dropped


class ServerStopping(WatchEnded):
    code = Code.UNAVAILABLE

    def __init__(self) -> None:
        super().__init__("server is shutting down")


class TooManyWatchers(ResourceExhausted):
    pass


class Watcher:
    def __init__(self, hub: WatchHub, capacity: int, grace: float) -> None:
        self._hub = hub
        self._capacity = capacity
        self._grace = grace
        self._limit = capacity * BURST_FACTOR if grace > 0 else capacity
        self._queue: deque[PodEvent] = deque()
        self._wakeup = asyncio.Event()
        self._ended: WatchEnded | None = None
        self._over_since: float | None = None  # when it went over capacity, while it is

    async def get(self) -> PodEvent:
        """The next event; raises WatchEnded when the watch is over."""
        while not self._queue:
            if self._ended is not None:
                raise self._ended
            self._wakeup.clear()
            await self._wakeup.wait()
        event = self._queue.popleft()
        if self._over_since is not None and len(self._queue) < self._capacity:
            self._over_since = None  # back under: the burst passed
        return event

    def close(self) -> None:
        """The stream that read this watcher has ended: its place among the open watches frees."""
        self._hub._watchers.discard(self)
        self._hub._open.discard(self)

    def _offer(self, events: list[PodEvent]) -> None:
        if self._ended is not None:
            return
        if len(self._queue) >= self._capacity:
            now = time.monotonic()
            if self._over_since is None and self._grace > 0:
                self._over_since = now
                self._check_later()
            elif self._over_since is None or now - self._over_since >= self._grace:
                self._fell_behind(len(events))
                return
            if len(self._queue) + len(events) > self._limit:
                self._fell_behind(len(events))
                return
        self._queue.extend(events)
        self._wakeup.set()

    def _check_later(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a synchronous caller): judged at the next change instead
        loop.call_later(self._grace, self._check)

    def _check(self) -> None:
        """The grace is over: still over capacity is cut off."""
        over = self._over_since
        if self._ended is None and over is not None and time.monotonic() - over >= self._grace:
            self._fell_behind(0)

    def _fell_behind(self, arriving: int) -> None:
        self._end(FellBehind(dropped=len(self._queue) + arriving))

    def _end(self, reason: WatchEnded) -> None:
        self._queue.clear()
        self._ended = reason
        self._wakeup.set()
        # No more events; but its stream still holds a place until it ends (close): a client that
        # reads nothing must not hold a stream past the limit after being cut off.
        self._hub._watchers.discard(self)
        if isinstance(reason, FellBehind):
            self._hub.on_drop(reason.dropped)

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def caught_up(self) -> bool:
        """No event waits for this watcher: it has taken every one published so far (a
        Kubernetes BOOKMARK may then carry the cache's current revision)."""
        return not self._queue


class WatchHub:
    def __init__(self, *, capacity: int, max_watchers: int, grace: float = 0.0) -> None:
        self.capacity = capacity
        self.grace = grace
        self.max_watchers = max_watchers
        # Told how many events a cut-off watcher lost; the server points it at a metric.
        self.on_drop: Callable[[int], None] = lambda dropped: None
        self._watchers: set[Watcher] = set()  # getting events
        self._open: set[Watcher] = set()  # whose streams have not ended: what max_watchers caps
        self._stopped = False
        # Set by stop(): for streams that wait before they watch (an SSE client accepted before
        # the sources synced), so they too end with UNAVAILABLE.
        self.stopping = asyncio.Event()

    def __len__(self) -> int:
        """Open watches: those getting events, and those cut off whose streams have not ended."""
        return len(self._open)

    def subscribe(self) -> Watcher:
        """A new watcher; raises TooManyWatchers, or ServerStopping once stop() was called."""
        if self._stopped:
            raise ServerStopping()
        if len(self._open) >= self.max_watchers:
            raise TooManyWatchers(f"{self.max_watchers} watches are open; the limit is reached")
        watcher = Watcher(self, self.capacity, self.grace)
        self._watchers.add(watcher)
        self._open.add(watcher)
        return watcher

    def publish(self, events: list[PodEvent]) -> None:
        """Hand one change (all the events of one source update) to every watcher."""
        for watcher in list(self._watchers):
            watcher._offer(events)

    def stop(self) -> None:
        """End every watch, and refuse new ones: the server is going away."""
        self._stopped = True
        self.stopping.set()
        for watcher in list(self._watchers):
            watcher._end(ServerStopping())
