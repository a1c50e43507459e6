"""`--watch-overflow drop`: the kubelet's slow-watcher rule in the hub (its server.go, v1.37.2:
a watcher whose channel is full is dropped, counted once, and its stream still yields what the
channel held before it ends with RESOURCE_EXHAUSTED "watch client channel closed")."""

from __future__ import annotations

import asyncio

import pytest
from builders import stored

from pods_api.core.api.statuserrors import Code
from pods_api.core.store.cache import PodCache
from pods_api.core.store.watch import (
    Dropped,
    EventType,
    Overflow,
    PodEvent,
    ServerStopping,
    Watcher,
    WatchHub,
)

# A safety net: every get below has an event waiting.
GET_TIMEOUT = 5.0


def dropping_cache(capacity: int) -> tuple[PodCache, WatchHub]:
    hub = WatchHub(capacity=capacity, max_watchers=10, overflow=Overflow.DROP)
    return PodCache(hub), hub


async def until_ended(watcher: Watcher) -> tuple[list[PodEvent], BaseException]:
    """Everything the watcher still yields, and the exception that ends it."""
    got = []
    while True:
        try:
            got.append(await asyncio.wait_for(watcher.get(), GET_TIMEOUT))
        except (Dropped, ServerStopping) as exc:
            return got, exc


async def test_a_change_that_finds_the_queue_full_drops_the_watcher_after_what_it_holds() -> None:
    cache, hub = dropping_cache(capacity=2)
    sink = cache.source("a")
    _, slow = cache.watch()
    sink.upsert(stored("1"))
    sink.upsert(stored("2"))  # the queue is full now
    sink.upsert(stored("3"))  # finds it full: dropped, and not queued
    sink.upsert(stored("4"))
    got, ended = await until_ended(slow)
    assert [(e.type, e.pod.uid, e.coalesced) for e in got] == [
        (EventType.ADDED, "1", False),
        (EventType.ADDED, "2", False),
    ]
    assert isinstance(ended, Dropped)
    assert (ended.code, ended.message) == (Code.RESOURCE_EXHAUSTED, "watch client channel closed")
    assert hub.dropped == 1 and hub.coalesced == 0  # one dropped watcher, not two events
    assert len(hub) == 1  # its stream holds its place until it ends
    slow.close()
    assert len(hub) == 0 and hub.dropped == 1


async def test_the_count_is_per_dropped_watcher_and_a_watcher_that_keeps_up_stays() -> None:
    cache, hub = dropping_cache(capacity=2)
    sink = cache.source("a")
    _, fast = cache.watch()
    slow = [cache.watch()[1] for _ in range(3)]
    for round_ in range(5):
        # One change of more pods than the queue holds: a watcher under capacity takes it whole.
        sink.replace([stored(str(i), "Running" if round_ % 2 else "Pending") for i in range(4)])
        while not fast.caught_up:
            await asyncio.wait_for(fast.get(), GET_TIMEOUT)
    assert hub.dropped == 3
    for watcher in slow:
        got, ended = await until_ended(watcher)
        assert isinstance(ended, Dropped) and len(got) == 4  # the first change, whole
    sink.upsert(stored("9"))
    assert (await asyncio.wait_for(fast.get(), GET_TIMEOUT)).pod.uid == "9"


async def test_what_a_closed_or_stopped_watch_had_not_taken_is_not_counted() -> None:
    """The kubelet counts dropped watchers, not the events in a channel its client left."""
    cache, hub = dropping_cache(capacity=100)
    sink = cache.source("a")
    _, left = cache.watch()
    _, stopped = cache.watch()
    sink.replace([stored(str(i)) for i in range(4)])
    left.close()
    hub.stop()
    with pytest.raises(ServerStopping):
        await stopped.get()
    assert hub.dropped == 0


async def test_coalescing_stays_the_default() -> None:
    hub = WatchHub(capacity=1, max_watchers=10)
    cache = PodCache(hub)
    sink = cache.source("a")
    _, watcher = cache.watch()
    for phase in ("Pending", "Running", "Succeeded"):
        sink.upsert(stored("1", phase))
    first = await asyncio.wait_for(watcher.get(), GET_TIMEOUT)
    newest = await asyncio.wait_for(watcher.get(), GET_TIMEOUT)
    assert hub.overflow is Overflow.COALESCE
    assert (first.type, newest.type, newest.coalesced) == (EventType.ADDED, EventType.MODIFIED, True)
    assert watcher.caught_up
