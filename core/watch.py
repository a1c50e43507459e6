"""Watch fan-out: every watcher has a bounded queue; publishing never waits for a client.

A watcher that falls behind is cut off (its queue would otherwise grow without bound, or make
every other watcher wait): the client lists and watches again, as with the kubelet.

"Behind" is judged when a change arrives: a watcher that still holds `capacity` undelivered
events is cut off; otherwise it takes the whole change. So one change that touches many pods at
once (a relist, a PodList file rewritten) never cuts off a watcher that was keeping up, and a
queue holds at most capacity - 1 events plus one change.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from pods_api.core.pod import PodVersion
from pods_api.core.status import Code, ResourceExhausted, StatusError


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
    def __init__(self, hub: WatchHub, capacity: int) -> None:
        self._hub = hub
        self._capacity = capacity
        self._queue: deque[PodEvent] = deque()
        self._wakeup = asyncio.Event()
        self._ended: WatchEnded | None = None

    async def get(self) -> PodEvent:
        """The next event; raises WatchEnded when the watch is over."""
        while not self._queue:
            if self._ended is not None:
                raise self._ended
            self._wakeup.clear()
            await self._wakeup.wait()
        return self._queue.popleft()

    def close(self) -> None:
        self._hub._watchers.discard(self)

    def _offer(self, events: list[PodEvent]) -> None:
        if self._ended is not None:
            return
        if len(self._queue) >= self._capacity:
            self._end(FellBehind(dropped=len(self._queue) + len(events)))
            return
        self._queue.extend(events)
        self._wakeup.set()

    def _end(self, reason: WatchEnded) -> None:
        self._queue.clear()
        self._ended = reason
        self._wakeup.set()
        self.close()
        if isinstance(reason, FellBehind):
            self._hub.on_drop(reason.dropped)

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WatchHub:
    def __init__(self, *, capacity: int, max_watchers: int) -> None:
        self.capacity = capacity
        self.max_watchers = max_watchers
        # Told how many events a cut-off watcher lost; the server points it at a metric.
        self.on_drop: Callable[[int], None] = lambda dropped: None
        self._watchers: set[Watcher] = set()
        self._stopped = False

    def __len__(self) -> int:
        return len(self._watchers)

    def subscribe(self) -> Watcher:
        """A new watcher; raises TooManyWatchers, or ServerStopping once stop() was called."""
        if self._stopped:
            raise ServerStopping()
        if len(self._watchers) >= self.max_watchers:
            raise TooManyWatchers(f"{self.max_watchers} watches are open; the limit is reached")
        watcher = Watcher(self, self.capacity)
        self._watchers.add(watcher)
        return watcher

    def publish(self, events: list[PodEvent]) -> None:
        """Hand one change (all the events of one source update) to every watcher."""
        for watcher in list(self._watchers):
            watcher._offer(events)

    def stop(self) -> None:
        """End every watch, and refuse new ones: the server is going away."""
        self._stopped = True
        for watcher in list(self._watchers):
            watcher._end(ServerStopping())
