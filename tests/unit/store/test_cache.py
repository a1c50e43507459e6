"""The cache: reconciliation, ownership, revisions, readiness, and watch fan-out."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pods_api.core.query.fieldmask import parse_mask
from pods_api.core.query.view import View
from pods_api.core.store.cache import MEMO_BYTES, MEMO_PER_SNAPSHOT, RING_SIZE, PodCache
from pods_api.core.store.lru import LRU
from pods_api.core.store.pod import MASKED_PER_POD, PodVersion
from pods_api.core.store.watch import EventType, FellBehind, ServerStopping, TooManyWatchers, WatchHub


def pod(uid: str, phase: str = "Running", name: str | None = None) -> PodVersion:
    return PodVersion.from_json(
        {"metadata": {"name": name or uid, "namespace": "ns", "uid": uid}, "status": {"phase": phase}}
    )


def new_cache(capacity: int = 100, max_watchers: int = 10) -> tuple[PodCache, list[int]]:
    dropped: list[int] = []
    hub = WatchHub(capacity=capacity, max_watchers=max_watchers)
    hub.on_drop = dropped.append
    return PodCache(hub), dropped


def drain(watcher: Any) -> list[tuple[EventType, str]]:
    out = []
    while watcher._queue:
        event, _ = watcher._queue.popleft()
        out.append((event.type, event.pod.uid))
    return out


def test_replace_reconciles_a_snapshot_into_events() -> None:
    cache, _ = new_cache()
    sink = cache.source("a")
    _, watcher = cache.watch()
    sink.replace([pod("1"), pod("2")])
    sink.replace([pod("1"), pod("2", "Failed"), pod("3")])  # 1 unchanged: no event
    sink.replace([pod("3")])
    assert drain(watcher) == [
        (EventType.ADDED, "1"),
        (EventType.ADDED, "2"),
        (EventType.MODIFIED, "2"),
        (EventType.ADDED, "3"),
        (EventType.DELETED, "1"),
        (EventType.DELETED, "2"),
    ]
    assert [p.uid for p in cache.snapshot().pods] == ["3"]


def test_deleted_events_carry_the_last_state_and_modified_the_previous() -> None:
    cache, _ = new_cache()
    sink = cache.source("a")
    sink.replace([pod("1")])
    _, watcher = cache.watch()
    sink.upsert(pod("1", "Succeeded"))
    sink.delete("1")
    modified, deleted = [e for e, _ in watcher._queue]
    assert modified.previous is not None and modified.previous.json["status"]["phase"] == "Running"
    assert deleted.pod.json["status"]["phase"] == "Succeeded"


def test_each_served_version_carries_the_revision_it_began_at() -> None:
    """What the Kubernetes view gives as a pod's resourceVersion: the revision of the event that
    served this version; a deleted version keeps its own, the DELETED event has the next."""
    cache, _ = new_cache()
    sink = cache.source("a")
    _, watcher = cache.watch()
    sink.replace([pod("1"), pod("2")])
    sink.upsert(pod("1", "Succeeded"))
    sink.upsert(pod("2"))  # the same bytes: no event, the served version keeps its revision
    sink.delete("2")
    added_1, added_2, modified, deleted = [e for e, _ in watcher._queue]
    assert [e.pod.revision for e in (added_1, added_2, modified)] == [
        e.revision for e in (added_1, added_2, modified)
    ]
    assert cache.get("1") is modified.pod and modified.pod.revision == cache.revision - 1
    assert deleted.pod is added_2.pod and deleted.pod.revision == added_2.revision < deleted.revision


def test_a_uid_held_by_one_source_is_refused_to_another(caplog: pytest.LogCaptureFixture) -> None:
    cache, _ = new_cache()
    first, second = cache.source("fixtures:a"), cache.source("manifests:b")
    first.replace([pod("1", name="mine")])
    second.replace([pod("1", name="theirs"), pod("2")])
    assert [(p.uid, p.name) for p in cache.snapshot().pods] == [("1", "mine"), ("2", "2")]
    assert "source manifests:b refused: source fixtures:a already serves that uid" in caplog.text
    caplog.clear()
    second.replace([pod("1", name="theirs"), pod("2")])  # a lasting conflict is said once
    assert "refused" not in caplog.text
    _, watcher = cache.watch()
    first.replace([])  # the holder lets go: the refused pod is served at once
    assert [(p.uid, p.name) for p in cache.snapshot().pods] == [("1", "theirs"), ("2", "2")]
    assert drain(watcher) == [(EventType.DELETED, "1"), (EventType.ADDED, "1")]
    second.replace([pod("2")])
    assert [p.uid for p in cache.snapshot().pods] == ["2"]


def test_a_replace_deletes_before_it_adds() -> None:
    cache, _ = new_cache()
    sink = cache.source("manifests")
    sink.replace([pod("old", name="etcd")])
    _, watcher = cache.watch()
    sink.replace([pod("new", name="etcd")])  # an edited static pod changes UID
    assert drain(watcher) == [(EventType.DELETED, "old"), (EventType.ADDED, "new")]


def test_revisions_grow_and_the_ring_resumes_or_says_it_cannot() -> None:
    cache, _ = new_cache()
    sink = cache.source("a")
    start = cache.revision
    sink.replace([pod("1")])
    sink.replace([pod("1", "Failed")])
    assert cache.revision == start + 2
    assert [(e.type, e.revision) for e in cache.events_since(start) or []] == [
        (EventType.ADDED, start + 1),
        (EventType.MODIFIED, start + 2),
    ]
    assert cache.events_since(cache.revision) == []
    assert cache.events_since(start - 1) is None  # from before this process
    assert cache.events_since(cache.revision + 1) is None  # from the future
    for i in range(RING_SIZE):
        sink.upsert(pod("1", str(i)))
    assert cache.events_since(start) is None  # overwritten
    assert cache.events_since(cache.revision - 10) is not None


def test_the_ring_is_bounded_by_the_bytes_its_events_keep_alive() -> None:
    first, second = pod("1"), pod("1", "Failed")
    per_event = 2 * (len(first.framed) + len(first.json_bytes)) + 64  # a MODIFIED counts both versions
    cache = PodCache(WatchHub(capacity=100, max_watchers=1), ring_bytes=3 * per_event)
    sink = cache.source("a")
    start = cache.revision
    for i in range(10):
        sink.upsert(first if i % 2 else second)
    assert cache.events_since(start) is None  # far fewer than RING_SIZE events, but over the bytes
    kept = cache.events_since(cache.revision - 3)
    assert kept is not None and len(kept) == 3
    assert cache.events_since(cache.revision - 4) is None


def test_ready_only_when_every_gate_is_open() -> None:
    cache, _ = new_cache()
    seen: list[bool] = []
    cache.on_readiness(seen.append)
    assert not cache.ready  # no source at all is not ready
    a, b = cache.source("a"), cache.source("b")
    hold = cache.hold("ready-delay")
    a.mark_synced()
    b.mark_synced()
    assert not cache.ready
    hold.set_open()
    assert cache.ready
    assert seen == [False, False, True]
    with pytest.raises(ValueError, match="already registered"):
        cache.source("a")


def test_snapshot_and_its_assembled_bytes_are_reused_until_a_change() -> None:
    cache, _ = new_cache()
    sink = cache.source("a")
    sink.replace([pod("1")])
    snap = cache.snapshot()
    built = snap.memo("list", lambda: b"assembled")
    assert cache.snapshot() is snap
    assert snap.memo("list", lambda: b"other") is built
    sink.replace([pod("1"), pod("2")])
    assert cache.snapshot() is not snap


def test_masked_encodings_are_made_once_per_mask_and_bounded() -> None:
    version = pod("1")
    view = View(parse_mask("status.phase"))
    assert version.masked(view) is version.masked(View(parse_mask("status.phase , status.phase")))
    assert version.masked(View.EVERYTHING).framed is version.framed  # the bytes kept, not a copy
    for text in (
        "spec",
        "status",
        "metadata",
        "spec.nodeName",
        "status.podIP",
        "status.hostIP",
        "metadata.labels",
        "metadata.annotations",
        "status.reason",
    ):
        version.masked(View(parse_mask(text)))
    assert len(version._masked) == MASKED_PER_POD


async def test_watch_snapshot_and_subscription_have_no_gap() -> None:
    cache, _ = new_cache()
    sink = cache.source("a")
    sink.replace([pod("1")])
    snap, watcher = cache.watch()
    sink.replace([pod("1"), pod("2")])
    assert [p.uid for p in snap.pods] == ["1"]
    event = await asyncio.wait_for(watcher.get(), 5)
    assert (event.type, event.pod.uid) == (EventType.ADDED, "2")


async def test_a_watcher_behind_by_capacity_is_cut_off_and_the_loss_counted() -> None:
    cache, dropped = new_cache(capacity=2)
    sink = cache.source("a")
    _, slow = cache.watch()
    _, fast = cache.watch()
    # One change of many pods is taken whole, even beyond capacity: a relist never cuts off.
    sink.replace([pod(str(i)) for i in range(5)])
    assert len(drain(fast)) == 5
    sink.upsert(pod("0", "Failed"))  # slow still holds 5 >= 2 undelivered events: cut off
    with pytest.raises(FellBehind):
        await slow.get()
    assert dropped == [6]
    assert len(cache.hub) == 2  # cut off, but open until its stream ends: it still counts
    assert drain(fast) == [(EventType.MODIFIED, "0")]
    slow.close()
    assert len(cache.hub) == 1


def grace_cache(
    capacity: int, grace: float, backlog_events: int = 4096, backlog_bytes: int = 1 << 30
) -> tuple[PodCache, asyncio.Future[int]]:
    cut_off: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    hub = WatchHub(
        capacity=capacity,
        max_watchers=10,
        grace=grace,
        backlog_events=backlog_events,
        backlog_bytes=backlog_bytes,
    )
    hub.on_drop = lambda dropped: cut_off.done() or cut_off.set_result(dropped)
    return PodCache(hub), cut_off


async def test_a_watcher_over_capacity_that_catches_up_within_its_grace_loses_nothing() -> None:
    cache, cut_off = grace_cache(capacity=2, grace=60)
    sink = cache.source("a")
    _, watcher = cache.watch()
    sink.replace([pod(str(i)) for i in range(5)])  # 5 >= 2: over from the next change on
    sink.upsert(pod("0", "Failed"))  # over, but in its grace: queued, not cut off
    sink.upsert(pod("1", "Failed"))
    got = [(e.type, e.pod.uid) for e in [await watcher.get() for _ in range(7)]]
    assert got == [(EventType.ADDED, str(i)) for i in range(5)] + [
        (EventType.MODIFIED, "0"),
        (EventType.MODIFIED, "1"),
    ]
    # Caught up: the next burst gets a grace of its own.
    sink.replace([pod(str(i), "Pending") for i in range(5)])
    sink.upsert(pod("0", "Succeeded"))
    assert len([await watcher.get() for _ in range(6)]) == 6
    assert not cut_off.done() and len(cache.hub) == 1


async def test_a_watcher_that_keeps_taking_is_not_cut_off_however_long_it_stays_over() -> None:
    # The server is the slow one (say its CPU is short): the watcher takes an event whenever it
    # is offered one, but changes come faster. Its queue grows past capacity and stays there for
    # many graces; it is never cut off for it, and gets every event in order.
    cache, cut_off = grace_cache(capacity=2, grace=0.3)
    sink = cache.source("a")
    _, watcher = cache.watch()
    sink.replace([pod(str(i)) for i in range(3)])
    published, taken = 3, []
    deadline = asyncio.get_running_loop().time() + 1.5  # five graces
    while asyncio.get_running_loop().time() < deadline:
        sink.upsert(pod(str(published % 3), f"Phase{published}"))
        sink.upsert(pod(str((published + 1) % 3), f"Phase{published + 1}"))
        published += 2
        taken.append(await watcher.get())
        await asyncio.sleep(0.01)  # time passing is what this test is about
    assert not cut_off.done()
    while len(taken) < published:
        taken.append(await watcher.get())
    first = taken[0].revision
    assert [e.revision for e in taken] == list(range(first, first + published))


async def test_a_watcher_idle_because_nothing_changed_gets_a_whole_grace_when_it_goes_over() -> None:
    # Its client last took an event long ago only because nothing was published since: going
    # over starts its grace afresh, so it is not cut off before it had time to take anything.
    cache, cut_off = grace_cache(capacity=2, grace=0.5)
    sink = cache.source("a")
    _, watcher = cache.watch()
    await asyncio.sleep(0.6)  # more than a grace of quiet: time passing is the subject
    sink.replace([pod(str(i)) for i in range(3)])
    sink.upsert(pod("0", "Failed"))  # over, with nothing taken yet
    await asyncio.sleep(0.1)  # well within the grace from going over
    assert not cut_off.done()
    assert len([await watcher.get() for _ in range(4)]) == 4
    assert not cut_off.done()


async def test_a_backlog_past_its_events_bound_is_cut_off_at_once() -> None:
    cache, cut_off = grace_cache(capacity=2, grace=60, backlog_events=8)
    sink = cache.source("a")
    _, watcher = cache.watch()
    sink.replace([pod(str(i)) for i in range(5)])
    sink.upsert(pod("0", "Failed"))  # 6 queued: over, in its grace
    sink.upsert(pod("1", "Failed"))  # 7
    sink.upsert(pod("2", "Failed"))  # 8: the bound
    assert not cut_off.done()
    sink.upsert(pod("3", "Failed"))  # 9 > 8: memory is bounded, grace or not
    assert cut_off.result() == 9
    with pytest.raises(FellBehind):
        await watcher.get()


async def test_a_backlog_past_its_bytes_bound_is_cut_off_at_once() -> None:
    one = pod("0")
    size = len(one.framed) + len(one.json_bytes)
    # Room for the first change's 3 pods and a MODIFIED (which counts the version it replaces).
    cache, cut_off = grace_cache(capacity=2, grace=60, backlog_bytes=6 * size)
    sink = cache.source("a")
    _, watcher = cache.watch()
    sink.replace([pod(str(i)) for i in range(3)])
    sink.upsert(pod("0", "Pending"))  # ~5 pods' bytes queued
    assert not cut_off.done()
    sink.upsert(pod("1", "Pending"))  # ~7 > 6
    assert cut_off.result() == 5
    with pytest.raises(FellBehind):
        await watcher.get()


async def test_a_stalled_watcher_is_cut_off_when_its_grace_ends_with_nothing_more_published() -> None:
    cache, cut_off = grace_cache(capacity=2, grace=0.05)
    sink = cache.source("a")
    _, watcher = cache.watch()
    sink.replace([pod(str(i)) for i in range(3)])
    sink.upsert(pod("0", "Failed"))  # over: the grace starts, and nothing comes after
    assert await asyncio.wait_for(cut_off, 10) == 4
    assert len(cache.hub) == 1  # cut off; open (it counts against the limit) until its stream ends
    with pytest.raises(FellBehind):
        await watcher.get()
    watcher.close()
    assert len(cache.hub) == 0


async def test_watcher_limit_and_stop() -> None:
    cache, _ = new_cache(max_watchers=1)
    _, watcher = cache.watch()
    with pytest.raises(TooManyWatchers):
        cache.watch()
    watcher.close()
    _, watcher = cache.watch()  # a closed watcher frees its place
    cache.hub.stop()
    with pytest.raises(ServerStopping):
        await watcher.get()
    with pytest.raises(ServerStopping):  # and no new watch starts while the server stops
        cache.watch()


def test_resume_from_a_revision_replays_or_gives_a_snapshot() -> None:
    cache, _ = new_cache()
    sink = cache.source("a")
    sink.replace([pod("1")])
    seen = cache.revision
    sink.replace([pod("1"), pod("2")])
    snapshot, replay, _ = cache.watch_from(seen)
    assert snapshot is None and [(e.type, e.pod.uid) for e in replay] == [(EventType.ADDED, "2")]
    snapshot, replay, _ = cache.watch_from(seen - 100)  # before this process began
    assert snapshot is not None and [p.uid for p in snapshot.pods] == ["1", "2"] and replay == []


def test_the_shared_lru_is_bounded_keeps_what_is_used_and_caches_none() -> None:
    made: list[str] = []

    def make(key: str) -> str | None:
        made.append(key)
        return None if key == "hidden" else key.upper()

    lru: LRU[str, str | None] = LRU(2)
    assert lru.get("a", lambda: make("a")) == "A"
    assert lru.get("hidden", lambda: make("hidden")) is None
    assert lru.get("hidden", lambda: make("hidden")) is None  # a None answer is kept too
    assert lru.get("a", lambda: make("a")) == "A"  # used: now the most recent
    lru.get("b", lambda: make("b"))  # evicts "hidden", the least recently used
    lru.get("a", lambda: make("a"))
    lru.get("hidden", lambda: make("hidden"))
    assert made == ["a", "hidden", "b", "hidden"]
    assert len(lru) == 2


def test_a_snapshot_keeps_a_bounded_number_of_assembled_responses() -> None:
    cache, _ = new_cache()
    cache.source("a").replace([pod("1")])
    snap = cache.snapshot()
    for i in range(MEMO_PER_SNAPSHOT + 5):
        snap.memo(("list", i), lambda: b"x")
    assert len(snap._memo) == MEMO_PER_SNAPSHOT


def test_a_snapshot_keeps_at_most_memo_bytes_of_assembled_responses() -> None:
    cache, _ = new_cache()
    cache.source("a").replace([pod("1")])
    snap = cache.snapshot()
    made: list[str] = []

    def body(name: str, size: int) -> bytes:
        made.append(name)
        return b"x" * size

    third = MEMO_BYTES // 3 + 1
    for name in ("grpc", "http", "grpc", "start"):  # "start" pushes out "http", the least used
        snap.memo(name, lambda name=name: body(name, third))  # type: ignore[misc]
    assert made == ["grpc", "http", "start"]
    snap.memo("http", lambda: body("http", third))
    assert made[-1] == "http"
    # A response larger than the whole bound is assembled for each call, never kept.
    huge = [snap.memo("huge", lambda: body("huge", MEMO_BYTES + 1)) for _ in range(2)]
    assert made.count("huge") == 2 and huge[0] == huge[1]
    frames: tuple[bytes, ...] = (b"f" * third, b"g" * third)
    assert snap.memo("frames", lambda: frames) is frames
    assert snap.memo("frames", lambda: (b"",)) is frames  # a watch start's frames weigh their bytes
