"""The cache: reconciliation, ownership, revisions, readiness, and watch fan-out."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from builders import stored

from pods_api.core.query.fieldmask import parse_mask
from pods_api.core.query.view import View
from pods_api.core.store.cache import RING_SIZE, PodCache
from pods_api.core.store.lru import LRU
from pods_api.core.store.snapshot import MEMO_BYTES, MEMO_PER_SNAPSHOT
from pods_api.core.store.version import MASKED_PER_POD, PodVersion
from pods_api.core.store.watch import EventType, PodEvent, ServerStopping, TooManyWatchers, Watcher, WatchHub


def new_cache(capacity: int = 100, max_watchers: int = 10) -> tuple[PodCache, WatchHub]:
    hub = WatchHub(capacity=capacity, max_watchers=max_watchers)
    return PodCache(hub), hub


def drain(watcher: Any) -> list[tuple[EventType, str]]:
    out = []
    while watcher._queue:
        event = watcher._queue.popleft()
        if not event.notice:  # the kubelet's contracts' alone (test_kubelet_events.py)
            out.append((event.type, event.pod.uid))
    return out


async def taken(watcher: Watcher) -> list[PodEvent]:
    """Every event waiting for the watcher, as its client would take them."""
    out = []
    while not watcher.caught_up:
        event = await asyncio.wait_for(watcher.get(), 5)
        if not event.notice:
            out.append(event)
    return out


def apply(state: dict[str, PodVersion], events: list[PodEvent]) -> dict[str, PodVersion]:
    """What a client holds after applying the events (ADDED/MODIFIED set, DELETED removes)."""
    for event in events:
        if event.type is EventType.DELETED:
            assert event.pod.uid in state, f"DELETED of {event.pod.uid}, which the client never had"
            del state[event.pod.uid]
        else:
            state[event.pod.uid] = event.pod
    return state


def test_replace_reconciles_a_snapshot_into_events() -> None:
    cache, _ = new_cache()
    sink = cache.source("a")
    _, watcher = cache.watch()
    sink.replace([stored("1"), stored("2")])
    sink.replace([stored("1"), stored("2", "Unknown"), stored("3")])  # 1 unchanged: no event
    sink.replace([stored("3")])
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
    sink.replace([stored("1")])
    _, watcher = cache.watch()
    sink.upsert(stored("1", "Pending"))
    sink.delete("1")
    modified, deleted = list(watcher._queue)
    assert modified.previous is not None and modified.previous.json["status"]["phase"] == "Running"
    assert deleted.pod.json["status"]["phase"] == "Pending"


def test_each_served_version_carries_the_revision_it_began_at() -> None:
    """What the Kubernetes view gives as a pod's resourceVersion: the revision of the event that
    served this version; a deleted version keeps its own, the DELETED event has the next."""
    cache, _ = new_cache()
    sink = cache.source("a")
    _, watcher = cache.watch()
    sink.replace([stored("1"), stored("2")])
    sink.upsert(stored("1", "Pending"))
    sink.upsert(stored("2"))  # the same bytes: no event, the served version keeps its revision
    sink.delete("2")
    added_1, added_2, modified, deleted = list(watcher._queue)
    assert [e.pod.revision for e in (added_1, added_2, modified)] == [
        e.revision for e in (added_1, added_2, modified)
    ]
    assert cache.get("1") is modified.pod and modified.pod.revision == cache.revision - 1
    assert deleted.pod is added_2.pod and deleted.pod.revision == added_2.revision < deleted.revision


def test_a_uid_held_by_one_source_is_refused_to_another(caplog: pytest.LogCaptureFixture) -> None:
    cache, _ = new_cache()
    first, second = cache.source("fixtures:a"), cache.source("manifests:b")
    first.replace([stored("1", name="mine")])
    second.replace([stored("1", name="theirs"), stored("2")])
    assert [(p.uid, p.name) for p in cache.snapshot().pods] == [("1", "mine"), ("2", "2")]
    assert "source manifests:b refused: source fixtures:a already serves that uid" in caplog.text
    caplog.clear()
    second.replace([stored("1", name="theirs"), stored("2")])  # a lasting conflict is said once
    assert "refused" not in caplog.text
    _, watcher = cache.watch()
    first.replace([])  # the holder lets go: the refused pod is served at once
    assert [(p.uid, p.name) for p in cache.snapshot().pods] == [("1", "theirs"), ("2", "2")]
    assert drain(watcher) == [(EventType.DELETED, "1"), (EventType.ADDED, "1")]
    second.replace([stored("2")])
    assert [p.uid for p in cache.snapshot().pods] == ["2"]


def test_a_replace_deletes_before_it_adds() -> None:
    cache, _ = new_cache()
    sink = cache.source("manifests")
    sink.replace([stored("old", name="etcd")])
    _, watcher = cache.watch()
    sink.replace([stored("new", name="etcd")])  # an edited static pod changes UID
    assert drain(watcher) == [(EventType.DELETED, "old"), (EventType.ADDED, "new")]


def test_revisions_grow_and_the_ring_resumes_or_says_it_cannot() -> None:
    cache, _ = new_cache()
    sink = cache.source("a")
    start = cache.revision
    sink.replace([stored("1")])
    sink.replace([stored("1", "Unknown")])
    assert cache.revision == start + 2
    assert [(e.type, e.revision) for e in cache.events_since(start) or []] == [
        (EventType.ADDED, start + 1),
        (EventType.MODIFIED, start + 2),
    ]
    assert cache.events_since(cache.revision) == []
    assert cache.events_since(start - 1) is None  # from before this process
    assert cache.events_since(cache.revision + 1) is None  # from the future
    for i in range(RING_SIZE):
        sink.upsert(stored("1", str(i)))
    assert cache.events_since(start) is None  # overwritten
    assert cache.events_since(cache.revision - 10) is not None


def test_the_ring_is_bounded_by_the_bytes_its_events_keep_alive() -> None:
    first, second = stored("1"), stored("1", "Unknown")
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


def test_a_recent_revision_is_rebuilt_from_the_ring_as_it_was() -> None:
    cache = PodCache(WatchHub(capacity=100, max_watchers=1), ring_size=4)
    sink = cache.source("a")
    sink.replace([stored("1"), stored("2")])
    then = cache.snapshot()
    sink.upsert(stored("1", "Unknown"))  # MODIFIED
    sink.delete("2")  # DELETED
    sink.upsert(stored("3"))  # ADDED
    rebuilt = cache.snapshot_at(then.revision)
    assert rebuilt is not None and rebuilt.revision == then.revision
    assert rebuilt.pods == then.pods  # the very versions, with the revisions they were served at
    assert [p.revision for p in rebuilt.pods] == [p.revision for p in then.pods]
    assert cache.snapshot_at(cache.revision) is cache.snapshot()
    middle = cache.snapshot_at(then.revision + 1)
    assert middle is not None and [(p.uid, p.json["status"]["phase"]) for p in middle.pods] == [
        ("1", "Unknown"),
        ("2", "Running"),
    ]
    sink.upsert(stored("3", "Unknown"))
    sink.upsert(stored("3", "Pending"))  # the ring (4 events) no longer reaches back to `then`
    assert cache.snapshot_at(then.revision) is None
    assert cache.snapshot_at(cache.revision - 4) is not None
    assert cache.snapshot_at(cache.revision + 1) is None  # from the future


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
    sink.replace([stored("1")])
    snap = cache.snapshot()
    built = snap.memo("list", lambda: b"assembled")
    assert cache.snapshot() is snap
    assert snap.memo("list", lambda: b"other") is built
    sink.replace([stored("1"), stored("2")])
    assert cache.snapshot() is not snap


def test_masked_encodings_are_made_once_per_mask_and_bounded() -> None:
    version = stored("1")
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
    sink.replace([stored("1")])
    snap, watcher = cache.watch()
    sink.replace([stored("1"), stored("2")])
    assert [p.uid for p in snap.pods] == ["1"]
    event = await asyncio.wait_for(watcher.get(), 5)
    assert (event.type, event.pod.uid) == (EventType.ADDED, "2")


async def test_a_watcher_past_capacity_gets_one_event_per_pod_the_newest() -> None:
    cache, hub = new_cache(capacity=2)
    sink = cache.source("a")
    _, slow = cache.watch()
    _, fast = cache.watch()
    # One change of many pods is taken whole, even beyond capacity.
    sink.replace([stored(str(i)) for i in range(5)])
    assert len(drain(fast)) == 5
    fast_got = []
    sink.upsert(stored("0", "Unknown"))  # slow holds 5 >= 2: coalesced from here on
    fast_got += drain(fast)
    sink.upsert(stored("1", "Unknown"))
    fast_got += drain(fast)
    sink.upsert(stored("0", "Pending"))  # replaces the pending MODIFIED of 0
    fast_got += drain(fast)
    got = await taken(slow)
    assert [(e.type, e.pod.uid) for e in got[:5]] == [(EventType.ADDED, str(i)) for i in range(5)]
    # In the order of their newest version: 1's, then 0's newest.
    assert [(e.type, e.pod.uid, e.pod.json["status"]["phase"]) for e in got[5:]] == [
        (EventType.MODIFIED, "1", "Unknown"),
        (EventType.MODIFIED, "0", "Pending"),
    ]
    # 1 changed once while behind: its published event; 0's two changes: one coalesced event,
    # at the revision of its newest (where a client resumes from).
    assert [e.coalesced for e in got[5:]] == [False, True]
    assert [e.revision for e in got[5:]] == [got[5].pod.revision, cache.revision]
    # The MODIFIED replaces what the client holds, so a selector can judge the transition.
    assert got[6].previous is got[0].pod
    assert hub.coalesced == 1 and hub.dropped == 1
    assert len(fast_got) == 3  # a watcher that keeps up gets every version
    assert len(cache.hub) == 2  # nobody was cut off


async def test_a_deleted_wins_and_a_pod_that_came_and_went_unseen_is_not_sent() -> None:
    cache, hub = new_cache(capacity=1)
    sink = cache.source("a")
    sink.replace([stored("old")])
    _, watcher = cache.watch()
    sink.upsert(stored("x"))  # queued exactly: the watcher is now at capacity
    sink.upsert(stored("old", "Unknown"))
    sink.delete("old")  # the DELETED replaces the pending MODIFIED
    sink.upsert(stored("brief"))
    sink.upsert(stored("brief", "Unknown"))
    sink.delete("brief")  # added and deleted while pending: the client never hears of it
    sink.upsert(stored("new"))
    got = await taken(watcher)
    assert [(e.type, e.pod.uid) for e in got] == [
        (EventType.ADDED, "x"),
        (EventType.DELETED, "old"),
        (EventType.ADDED, "new"),
    ]
    assert hub.coalesced == 4  # old's MODIFIED, and brief's three events
    assert apply({"old": stored("old")}, got).keys() == {p.uid for p in cache.snapshot().pods}


async def test_a_pod_deleted_and_added_again_while_pending_is_modified() -> None:
    cache, _ = new_cache(capacity=1)
    sink = cache.source("a")
    sink.replace([stored("p")])
    _, watcher = cache.watch()
    sink.upsert(stored("x"))
    sink.delete("p")
    sink.upsert(stored("p", "Pending"))  # the same UID again: the client holds the old version
    got = await taken(watcher)
    assert [(e.type, e.pod.uid) for e in got] == [(EventType.ADDED, "x"), (EventType.MODIFIED, "p")]
    assert got[1].pod.json["status"]["phase"] == "Pending"


async def test_a_lagging_watcher_reaches_exactly_the_current_state_under_any_churn() -> None:
    # A watcher far behind a long random churn: applying what it takes, from its snapshot, gives
    # exactly the cache's current pods, and its pending events never exceed the pods' count.
    rng = random.Random(7)
    cache, hub = new_cache(capacity=3)
    sink = cache.source("a")
    sink.replace([stored(str(i)) for i in range(20)])
    start, watcher = cache.watch()
    live = {p.uid for p in start.pods}
    for step in range(2000):
        uid = str(rng.randrange(30))
        if uid in live and rng.random() < 0.3:
            sink.delete(uid)
            live.discard(uid)
        else:
            sink.upsert(stored(uid, f"Phase{step}"))
            live.add(uid)
        assert len(watcher._pending) <= 30
    state = apply({p.uid: p for p in start.pods}, await taken(watcher))
    current = {p.uid: p.json_bytes for p in cache.snapshot().pods}
    assert {uid: p.json_bytes for uid, p in state.items()} == current
    assert hub.coalesced > 1000 and len(cache.hub) == 1


class Resumer:
    """A client that follows a watcher, and checks a resume from the revision of every event it
    was given: the replay never sends a version older than one it was given, nor a pod after
    its DELETED unless the pod was added again; and applying it gives exactly the cache's
    current pods. Added again: an ADDED, or (its ADDED coalesced before the resume point) a
    version the cache served after the DELETED one."""

    def __init__(self, cache: PodCache, start: list[PodVersion]) -> None:
        self.cache = cache
        self.state = {p.uid: p for p in start}
        self.newest = {p.uid: p.revision for p in start}  # the newest version given, per pod
        self.deleted: set[str] = set()
        self.resumes = 0

    def given(
        self, state: dict[str, PodVersion], newest: dict[str, int], deleted: set[str], e: PodEvent
    ) -> None:
        uid = e.pod.uid
        if uid in deleted and e.type is not EventType.ADDED:
            assert e.pod.revision > newest[uid], f"{e.type.name} of {uid} after its DELETED"
        assert e.pod.revision >= newest.get(uid, 0), (
            f"{e.type.name} of {uid} at revision {e.pod.revision}, older than {newest[uid]} given"
        )
        newest[uid] = e.pod.revision
        if e.type is EventType.DELETED:
            state.pop(uid, None)
            deleted.add(uid)
        else:
            state[uid] = e.pod
            deleted.discard(uid)

    def take(self, event: PodEvent) -> None:
        self.given(self.state, self.newest, self.deleted, event)
        self.resume_from(event.revision)

    def resume_from(self, revision: int) -> None:
        replay = self.cache.events_since(revision)
        assert replay is not None, "the ring holds every event of these tests"
        state, newest, deleted = dict(self.state), dict(self.newest), set(self.deleted)
        for event in replay:
            self.given(state, newest, deleted, event)
        current = {p.uid: p.json_bytes for p in self.cache.snapshot().pods}
        assert {uid: p.json_bytes for uid, p in state.items()} == current
        self.resumes += 1


async def test_a_resume_from_a_coalesced_event_never_goes_back_nor_brings_a_deleted_pod_back() -> None:
    # The reported case: a watcher with a buffer of 4 falls behind while pods are rewritten and one
    # is deleted, then resumes from the id of each event it got. Before the fix, every coalesced
    # event carried the revision of the last exact one: the replay sent pod 0's generation 2
    # after its 5, and a MODIFIED of pod 1 after its DELETED.
    cache, _ = new_cache(capacity=4)
    sink = cache.source("a")
    sink.replace([stored(str(i)) for i in range(3)])
    start, watcher = cache.watch()
    client = Resumer(cache, list(start.pods))
    for gen in range(1, 6):
        for uid in ("0", "1", "2"):
            if uid == "1" and gen == 3:
                sink.delete(uid)
            elif uid != "1" or gen < 3:
                sink.upsert(stored(uid, f"Gen{gen}"))
    got = await taken(watcher)
    assert any(e.coalesced for e in got)
    assert [e.revision for e in got] == sorted({e.revision for e in got})  # ids only go forward
    for event in got:
        client.take(event)
    assert client.resumes == len(got)


async def test_a_resume_at_every_point_of_a_lagging_watcher_under_any_churn() -> None:
    # Coalescing, then a resume after any event taken, while the churn goes on between takes.
    for seed in range(20):
        rng = random.Random(seed)
        cache, hub = new_cache(capacity=rng.choice([1, 3, 8]))
        sink = cache.source("a")
        sink.replace([stored(str(i)) for i in range(6)])
        start, watcher = cache.watch()
        client = Resumer(cache, list(start.pods))
        live = {p.uid for p in start.pods}
        for step in range(300):
            uid = str(rng.randrange(10))
            if uid in live and rng.random() < 0.3:
                sink.delete(uid)
                live.discard(uid)
            else:
                sink.upsert(stored(uid, f"Phase{step}"))
                live.add(uid)
            if rng.random() < 0.3 and not watcher.caught_up:
                client.take(await asyncio.wait_for(watcher.get(), 5))
        for event in await taken(watcher):
            client.take(event)
        assert hub.coalesced > 0, seed


async def test_a_watcher_that_caught_up_gets_every_event_again() -> None:
    cache, _ = new_cache(capacity=2)
    sink = cache.source("a")
    _, watcher = cache.watch()
    sink.replace([stored(str(i)) for i in range(3)])
    sink.upsert(stored("0", "Unknown"))
    sink.upsert(stored("0", "Pending"))
    assert len(await taken(watcher)) == 4  # 3 ADDED, one coalesced MODIFIED
    sink.upsert(stored("1", "Unknown"))
    sink.upsert(stored("1", "Pending"))
    got = await taken(watcher)
    assert [(e.type, e.coalesced) for e in got] == [(EventType.MODIFIED, False)] * 2


async def test_what_a_closed_watch_had_not_taken_counts_as_dropped() -> None:
    cache, hub = new_cache(capacity=100)
    sink = cache.source("a")
    _, watcher = cache.watch()
    sink.replace([stored(str(i)) for i in range(4)])
    await watcher.get()
    watcher.close()
    assert hub.dropped == 3 and hub.coalesced == 0 and len(cache.hub) == 0


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
    sink.replace([stored("1")])
    seen = cache.revision
    sink.replace([stored("1"), stored("2")])
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
    cache.source("a").replace([stored("1")])
    snap = cache.snapshot()
    for i in range(MEMO_PER_SNAPSHOT + 5):
        snap.memo(("list", i), lambda: b"x")
    assert len(snap._memo) == MEMO_PER_SNAPSHOT


def test_a_snapshot_keeps_at_most_memo_bytes_of_assembled_responses() -> None:
    cache, _ = new_cache()
    cache.source("a").replace([stored("1")])
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
