"""Watch fan-out: every watcher has a queue; publishing never waits for a client.

A watcher that falls behind is cut off (its queue would otherwise grow without bound, or make
every other watcher wait): the client lists and watches again, as with the kubelet.

"Behind" is judged when a change arrives: a watcher that holds `capacity` undelivered events is
over. One change that touches many pods at once (a relist, a PodList file rewritten) is always
taken whole by a watcher that is not over, so it never cuts off a watcher that was keeping up.

A watcher is cut off for what its client does, not for what the server does. While it is over,
it is cut off when it has taken nothing for `grace` seconds: its client stopped reading (a timer,
so a stalled client is cut off even when nothing more is published). As the API server's watch
cache gives a full watcher a time budget, a burst faster than the client reads passes; and when
the server itself is short of CPU, so that every watcher's queue grows because the loop comes
round to each less often than changes arrive, nobody is cut off for it: cutting them off would
only add a relist each to the load. Memory stays bounded by the backlog: a watcher whose queue
passes `backlog_events` events or `backlog_bytes` bytes of pod encodings is cut off at once. Every
queue is a suffix of one published stream and shares the cache's pod versions, so all queues
together keep alive at most one backlog's bytes, however many watchers there are (the same bound
as the cache's ring, which is the same kind of suffix). With `grace` 0 the rule is the
kubelet's: over at a change is cut off.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from pods_api.core.store.pod import PodVersion
from pods_api.core.api.status import Code, ResourceExhausted, StatusError
# Seconds a watcher over capacity may take nothing before it is cut off: a reading client takes
# an event every loop round trip (milliseconds, well under a second on a loaded node), so only a
# client that stopped reading gets near it, and is cut off soon after.
DEFAULT_GRACE = 2.0
# What a watcher may have queued: the cache's ring bounds (core/store/cache.py uses these), a few
# minutes of churn on a busy node. Queues pin old pod versions only within this suffix of the
# published stream, so the bound holds for all watchers together.
BACKLOG_EVENTS = 4096
# 4,096 events of ~10 KiB pods would pin ~80 MiB; this keeps about 1,600 of them.
BACKLOG_BYTES = 32 * 1024 * 1024


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

    def held(self) -> int:
        """The bytes of pod encodings this event keeps alive (its pod and the one it replaces)."""
        size = len(self.pod.framed) + len(self.pod.json_bytes)
        if self.previous is not None:
            size += len(self.previous.framed) + len(self.previous.json_bytes)
        return size


class WatchEnded(StatusError):
    """The watch is over for a reason the client must hear (fell behind, server stopping)."""


class FellBehind(WatchEnded):
    code = Code.RESOURCE_EXHAUSTED

    def __init__(self, dropped: int) -> None:
        super().__init__("fell behind; list and watch again")
        self.dropped = dropped


class TookNothing(WatchEnded):
    """A surface's send to the client has waited `seconds`: the client stopped reading, and is
    cut off as one that fell behind (its events from here on are lost to it)."""

    code = Code.RESOURCE_EXHAUSTED

    def __init__(self, seconds: float) -> None:
        super().__init__(f"took nothing for {seconds:g} s; fell behind: list and watch again")


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
        # Each event with the bytes it keeps alive (shared by every watcher's queue).
        self._queue: deque[tuple[PodEvent, int]] = deque()
        self._queued_bytes = 0
        self._wakeup = asyncio.Event()
        self._ended: WatchEnded | None = None
        self._over = False
        # When its client last took an event, or when it went over if later: its grace counts
        # from there, so a client idle only because nothing was published gets a whole grace.
        self._progress_at = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None  # the pending grace check, one at most

    async def get(self) -> PodEvent:
        """The next event; raises WatchEnded when the watch is over."""
        while not self._queue:
            if self._ended is not None:
                raise self._ended
            self._wakeup.clear()
            await self._wakeup.wait()
        event, size = self._queue.popleft()
        self._queued_bytes -= size
        self._progress_at = time.monotonic()
        if self._over and len(self._queue) < self._capacity:
            self._over = False  # back under: the burst passed
        return event

    def close(self) -> None:
        """The stream that read this watcher has ended: its place among the open watches frees."""
        self._hub._watchers.discard(self)
        self._hub._open.discard(self)

    def _offer(self, events: list[tuple[PodEvent, int]], size: int) -> None:
        if self._ended is not None:
            return
        if len(self._queue) >= self._capacity:
            if self._grace <= 0 or (self._over and time.monotonic() - self._progress_at >= self._grace):
                self._fell_behind(len(events))
                return
            if not self._over:
                self._over = True
                self._progress_at = time.monotonic()
                self._check_later()
            if self._past_backlog(len(events), size):
                self._fell_behind(len(events))
                return
        self._queue.extend(events)
        self._queued_bytes += size
        self._wakeup.set()

    def _past_backlog(self, events: int, size: int) -> bool:
        hub = self._hub
        return len(self._queue) + events > hub.backlog_events or self._queued_bytes + size > hub.backlog_bytes

    def _check_later(self) -> None:
        if self._timer is not None:
            return  # a check is pending already; it re-arms itself while the watcher is over
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a synchronous caller): judged at the next change instead
        due = self._progress_at + self._grace - time.monotonic()
        self._timer = loop.call_later(max(0.0, due), self._check)

    def _check(self) -> None:
        """A grace may be over: over capacity with nothing taken for `grace` is cut off; one that
        took something meanwhile is looked at again a grace after what it last took."""
        self._timer = None
        if self._ended is not None or not self._over:
            return
        if time.monotonic() - self._progress_at >= self._grace:
            self._fell_behind(0)
        else:
            self._check_later()

    def _fell_behind(self, arriving: int) -> None:
        self._end(FellBehind(dropped=len(self._queue) + arriving))

    def _end(self, reason: WatchEnded) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._queue.clear()
        self._queued_bytes = 0
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
    def __init__(
        self,
        *,
        capacity: int,
        max_watchers: int,
        grace: float = 0.0,
        backlog_events: int = BACKLOG_EVENTS,
        backlog_bytes: int = BACKLOG_BYTES,
    ) -> None:
        self.capacity = capacity
        self.grace = grace
        self.backlog_events, self.backlog_bytes = backlog_events, backlog_bytes
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

    def publish(self, held: list[tuple[PodEvent, int]]) -> None:
        """Hand one change (all the events of one source update, each with its `held()` bytes)
        to every watcher."""
        size = sum(h for _, h in held)
        for watcher in list(self._watchers):
            watcher._offer(held, size)

    def stop(self) -> None:
        """End every watch, and refuse new ones: the server is going away."""
        self._stopped = True
        self.stopping.set()
        for watcher in list(self._watchers):
            watcher._end(ServerStopping())
