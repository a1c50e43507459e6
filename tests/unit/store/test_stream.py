"""The one watch stream: its start, what a view shows of each event (masks and selectors), the
frame cache every surface shares, and how it ends. The surfaces' own tests (test_grpc.py,
test_gateway_watch.py) check the same stream through real sockets."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from builders import stored
from hypothesis import given, settings
from hypothesis import strategies as st

from pods_api.core.api.codec import pod_from_bytes
from pods_api.core.api.pb import k8s_core_v1_pb2, k8s_meta_v1_pb2, pods_v1alpha1_pb2
from pods_api.core.grpc.service import ServiceName, watch_encoding
from pods_api.core.query.fieldmask import parse_mask
from pods_api.core.query.selector import parse_selector
from pods_api.core.query.view import View
from pods_api.core.store import snapshot as snapshot_module
from pods_api.core.store.cache import PodCache
from pods_api.core.store.stream import Encoding, WatchStreams, change
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import EventType, PodEvent, ServerStopping, WatchHub
from pods_api.gateway import sse

TIMEOUT = 5.0


@dataclass(frozen=True)
class PhaseIs:
    """A stand-in for a parsed field selector (`status.phase=<phase>`): the stream needs only
    a key and a predicate on the pod's JSON."""

    phase: str  # "": every pod

    @property
    def key(self) -> str:
        return f"status.phase={self.phase}" if self.phase else ""

    def matches(self, pod: Mapping[str, Any]) -> bool:
        return not self.phase or pod.get("status", {}).get("phase") == self.phase


def pod(uid: str, phase: str = "Running", label: str = "a") -> PodVersion:
    """Every pod here carries label `l`, which the views select on."""
    return stored(uid, phase, name=f"pod-{uid}", labels={"l": label})


def _event(kind: EventType, version: PodVersion, view: View, revision: int | None) -> bytes:
    return orjson.dumps([kind.name, revision, version.uid, version.masked(view).json])


def _synced(revision: int, resumed: bool) -> bytes:
    return orjson.dumps(["SYNCED", revision, resumed])


# Frames a test can read: [type, revision, uid, the pod as the view shows it].
PLAIN = Encoding("test", _event, _synced)


def setup(capacity: int = 100) -> tuple[PodCache, WatchStreams, list[float]]:
    cache = PodCache(WatchHub(capacity=capacity, max_watchers=10))
    delays: list[float] = []
    return cache, WatchStreams(cache, delays.append), delays


async def take(frames: AsyncIterator[bytes], count: int) -> list[Any]:
    return [orjson.loads(await asyncio.wait_for(anext(frames), TIMEOUT)) for _ in range(count)]


RUNNING = View(selector=PhaseIs("Running"))


def test_a_view_has_a_stable_key_and_compares_by_it() -> None:
    mask = parse_mask("status.phase, spec.nodeName")
    assert View.EVERYTHING.key == "" and View() == View.EVERYTHING
    assert View(mask) == View(parse_mask("spec.nodeName,status.phase")) and View(mask).key == mask.key  # type: ignore[union-attr]
    keys = {View(mask).key, View(mask, PhaseIs("Running")).key, View(None, PhaseIs("Running")).key, ""}
    assert len(keys) == 4  # mask, selector, both, neither: four different caches
    assert hash(View(mask, PhaseIs("Running"))) == hash(
        View(parse_mask("spec.nodeName,status.phase"), PhaseIs("Running"))
    )
    assert View(mask, PhaseIs("")).key == View(mask).key  # a selector of everything: no selector
    with pytest.raises(dataclasses.FrozenInstanceError):
        View.EVERYTHING.mask = mask  # type: ignore[misc]


def test_views_that_differ_only_in_selector_share_a_pods_encodings() -> None:
    version = pod("1")
    mask = parse_mask("status.phase")
    assert version.masked(View(mask)) is version.masked(View(mask, PhaseIs("Running")))
    assert version.masked(View(selector=PhaseIs("Running"))).framed is version.framed


async def test_snapshot_start_then_live_events_then_the_end() -> None:
    cache, streams, delays = setup()
    sink = cache.source("a")
    sink.replace([pod("2"), pod("1")])
    with streams.open(View.EVERYTHING) as watch:
        frames = watch.frames(PLAIN)
        start = await take(frames, 3)
        assert [(f[0], f[1], f[2]) for f in start[:2]] == [("ADDED", None, "1"), ("ADDED", None, "2")]
        assert start[2] == ["SYNCED", cache.revision, False]
        sink.upsert(pod("1", "Unknown"))
        (live,) = await take(frames, 1)
        assert live[:3] == ["MODIFIED", cache.revision, "1"]
        assert len(delays) == 1 and delays[0] >= 0  # only live events count, once each
        cache.hub.stop()
        with pytest.raises(ServerStopping):
            await anext(frames)


async def test_a_joined_start_ends_with_its_marker_as_a_chunk_of_its_own() -> None:
    """A surface that writes the start as one chunk gets the pods joined, then the marker: what
    holds the last chunk sent until the next event (sse-starlette's loop does) holds only the
    marker, not a copy of every pod of the start."""
    cache, streams, _ = setup()
    sink = cache.source("a")
    sink.replace([pod("2"), pod("1")])
    joined = dataclasses.replace(PLAIN, name="joined", join_start=True)
    with streams.open(View.EVERYTHING) as watch:
        frames = watch.frames(joined)
        pods_chunk = await asyncio.wait_for(anext(frames), TIMEOUT)
        marker = await asyncio.wait_for(anext(frames), TIMEOUT)
    added = [_event(EventType.ADDED, p, View.EVERYTHING, None) for p in cache.snapshot().pods]
    assert pods_chunk == b"".join(added)
    assert orjson.loads(marker) == ["SYNCED", cache.revision, False]


async def test_a_start_too_large_to_keep_is_shared_while_sent_then_let_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Watches starting together from one snapshot send one start object, even when it is too
    large for the snapshot to keep; once they have sent it, nothing holds it."""
    monkeypatch.setattr(snapshot_module, "MEMO_BYTES", 16)
    monkeypatch.setattr(snapshot_module, "POD_BYTES_FACTOR", 0)
    cache, streams, _ = setup()
    cache.source("a").replace([pod("2"), pod("1")])
    snapshot = cache.snapshot()
    with streams.open(View.EVERYTHING) as a, streams.open(View.EVERYTHING) as b:
        frames_a, frames_b = a.frames(PLAIN), b.frames(PLAIN)
        first_a = await asyncio.wait_for(anext(frames_a), TIMEOUT)
        first_b = await asyncio.wait_for(anext(frames_b), TIMEOUT)
        assert first_a is first_b
        assert len(snapshot._in_use) == 1 and len(snapshot._memo) == 0
        await frames_a.aclose()
        await frames_b.aclose()
    assert len(snapshot._in_use) == 0


async def test_a_watcher_that_falls_behind_gets_the_newest_version_and_is_not_cut_off() -> None:
    cache, streams, _ = setup(capacity=1)
    sink = cache.source("a")
    watch = streams.open(View.EVERYTHING)
    sink.upsert(pod("1"))
    sink.upsert(pod("1", "Unknown"))  # one undelivered event already: coalesced
    sink.upsert(pod("1", "Pending"))
    frames = watch.frames(PLAIN)
    await take(frames, 1)  # the start: nothing but the marker
    added, modified = await take(frames, 2)
    assert (added[0], added[3]["status"]["phase"]) == ("ADDED", "Running")
    # Coalesced: carries its newest version's revision (where to resume: nothing older follows).
    assert (modified[0], modified[1], modified[3]["status"]["phase"]) == (
        "MODIFIED",
        cache.revision,
        "Pending",
    )
    assert modified[1] > added[1]
    watch.close()


async def test_a_watcher_behind_gets_the_frame_every_watcher_got_of_a_pod_that_changed_once() -> None:
    """Past its buffer, a watcher's event of a pod that changed once while it was behind is the
    published event itself: the same bytes as a watcher that kept up got, made once for both."""
    cache, streams, _ = setup(capacity=1)
    sink = cache.source("a")
    grpc = watch_encoding(ServiceName.V1ALPHA1)
    with streams.open(View.EVERYTHING) as behind, streams.open(View.EVERYTHING) as current:
        behind_frames, current_frames = behind.frames(grpc), current.frames(grpc)
        for frames in (behind_frames, current_frames):
            await asyncio.wait_for(anext(frames), TIMEOUT)  # the start: the marker alone
        kept_up = []
        for uid, phase in (("1", "Running"), ("2", "Pending"), ("1", "Unknown"), ("3", "Running")):
            sink.upsert(pod(uid, phase))  # `behind` queues the first; the rest are coalesced
            kept_up.append(await asyncio.wait_for(anext(current_frames), TIMEOUT))
        got = [await asyncio.wait_for(anext(behind_frames), TIMEOUT) for _ in range(4)]
    shown = [pods_v1alpha1_pb2.WatchPodsEvent.FromString(f) for f in got]
    assert [(e.type, pod_from_bytes(e.pod)["metadata"]["uid"]) for e in shown] == [
        (EventType.ADDED, "1"),
        (EventType.ADDED, "2"),
        (EventType.MODIFIED, "1"),  # pod 1's ADDED was queued; its MODIFIED alone is coalesced
        (EventType.ADDED, "3"),
    ]
    assert all(mine is theirs for mine, theirs in zip(got, kept_up, strict=True))  # made once
    assert cache.hub.coalesced == 0  # nothing was merged


async def test_a_selector_turns_leaving_into_deleted_and_entering_into_added() -> None:
    cache, streams, _ = setup()
    sink = cache.source("a")
    sink.replace([pod("1"), pod("2", "Pending")])
    with streams.open(RUNNING) as watch:
        frames = watch.frames(PLAIN)
        assert [(f[0], f[2]) for f in await take(frames, 2)] == [("ADDED", "1"), ("SYNCED", False)]
        sink.upsert(pod("2", "Running"))  # starts matching
        sink.upsert(pod("1", "Unknown"))  # stops matching
        sink.upsert(pod("1", "Pending"))  # outside, stays outside: nothing
        sink.upsert(pod("3", "Pending"))  # added outside: nothing
        sink.delete("1")  # deleted outside: nothing
        sink.upsert(pod("2", "Running", label="b"))  # inside, stays inside
        sink.delete("2")
        got = await take(frames, 4)
    assert [(f[0], f[2]) for f in got] == [
        ("ADDED", "2"),
        ("DELETED", "1"),
        ("MODIFIED", "2"),
        ("DELETED", "2"),
    ]
    # The DELETED of a pod that left carries the last version that matched, as the API server
    # sends it, with the revision of the change that made it leave.
    assert got[1][3]["status"] == {"phase": "Running"}


async def test_the_selector_parser_plugs_into_a_view() -> None:
    """core/query/selector.py's selectors are what a View carries; the stand-in above only shortens
    the other tests."""
    cache, streams, _ = setup()
    sink = cache.source("a")
    sink.replace([pod("1", label="a"), pod("2", label="b")])
    view = View(parse_mask("status.phase"), parse_selector("l=a", "status.phase=Running"))
    assert View(None, parse_selector()) == View.EVERYTHING
    with streams.open(view) as watch:
        frames = watch.frames(PLAIN)
        assert [(f[0], f[2]) for f in await take(frames, 2)] == [("ADDED", "1"), ("SYNCED", False)]
        sink.upsert(pod("2", label="a"))  # label now matches
        sink.upsert(pod("1", "Unknown", label="a"))  # phase no longer matches
        got = await take(frames, 2)
    assert [(f[0], f[2], f[3]["status"]) for f in got] == [
        ("ADDED", "2", {"phase": "Running"}),
        ("DELETED", "1", {"phase": "Running"}),
    ]


async def test_a_resumed_watch_replays_through_the_view() -> None:
    cache, streams, _ = setup()
    sink = cache.source("a")
    sink.replace([pod("1"), pod("2", "Pending")])
    seen = cache.revision
    sink.upsert(pod("2", "Running"))
    sink.upsert(pod("1", "Pending"))
    sink.upsert(pod("1", "Unknown"))
    with streams.open(RUNNING, since=seen) as watch:
        assert watch.snapshot is None
        replay = await take(watch.frames(PLAIN), 3)
    assert [(f[0], f[1], f[2]) for f in replay] == [
        ("ADDED", seen + 1, "2"),
        ("DELETED", seen + 2, "1"),
        ("SYNCED", seen + 3, True),
    ]


async def test_a_resume_too_old_starts_from_a_snapshot_of_the_view() -> None:
    cache, streams, _ = setup()
    cache.source("a").replace([pod("1"), pod("2", "Pending")])
    with streams.open(RUNNING, since=1) as watch:
        start = await take(watch.frames(PLAIN), 2)
    assert [(f[0], f[2]) for f in start] == [("ADDED", "1"), ("SYNCED", False)]


def test_a_masked_modified_that_changes_nothing_is_not_sent() -> None:
    view = View(parse_mask("status.phase"))
    before, after = pod("1", label="a"), pod("1", label="b")
    hidden = PodEvent(EventType.MODIFIED, after, 7, before, 0.0)
    assert change(hidden, view) is None
    assert change(hidden, View.EVERYTHING) == (EventType.MODIFIED, after)


def test_suppression_is_decided_on_the_masked_protobuf_for_every_surface() -> None:
    """Two versions whose JSON is the same but whose protobuf differs (an upstream's fieldsV1
    spelled with other spaces: the JSON is the object it holds, the bytes are the bytes): the
    change is sent on every surface, SSE included, because a gRPC client's bytes change."""

    def upstream(raw: bytes) -> PodVersion:
        entry = k8s_meta_v1_pb2.ManagedFieldsEntry(manager="m", fieldsV1=k8s_meta_v1_pb2.FieldsV1(Raw=raw))
        meta = k8s_meta_v1_pb2.ObjectMeta(name="a", namespace="ns", uid="1", managedFields=[entry])
        return PodVersion.from_bytes(k8s_core_v1_pb2.Pod(metadata=meta).SerializeToString())

    explicit, implicit = upstream(b'{"f:spec": {}}'), upstream(b'{"f:spec":{}}')
    view = View(parse_mask("metadata.managedFields"))
    assert implicit.masked(view).json_bytes == explicit.masked(view).json_bytes
    assert implicit.masked(view).pb != explicit.masked(view).pb
    _, streams, _ = setup()
    event = PodEvent(EventType.MODIFIED, explicit, 7, implicit, 0.0)
    assert change(event, view) == (EventType.MODIFIED, explicit)
    assert streams.frame(event, sse.ENCODING, view) is not None


async def test_each_frame_is_made_once_per_revision_encoding_and_view() -> None:
    made: list[tuple[str, int | None, str]] = []

    def counting(name: str) -> Encoding:
        def event(kind: EventType, version: PodVersion, view: View, revision: int | None) -> bytes:
            made.append((name, revision, view.key))
            return _event(kind, version, view, revision)

        return Encoding(name, event, _synced)

    one, two = counting("one"), counting("two")
    cache, streams, _ = setup()
    sink = cache.source("a")
    sink.replace([pod("1")])
    masked = View(parse_mask("status.phase"))
    opened = [
        (streams.open(view), enc)
        for view in (View.EVERYTHING, View.EVERYTHING, masked, masked)
        for enc in (one, two)
    ]
    watches = [watch for watch, _ in opened]
    streams_of = [watch.frames(enc) for watch, enc in opened]
    for frames in streams_of:
        await take(frames, 2)
    assert len(made) == 4  # the snapshot: once per (snapshot, encoding, view), not per watcher
    made.clear()
    sink.upsert(pod("1", "Unknown"))
    for frames in streams_of:
        await take(frames, 1)
    revision = cache.revision
    assert sorted(made) == sorted((n, revision, k) for n in ("one", "two") for k in ("", "status.phase"))
    for watch in watches:
        watch.close()


# -- the property: a client applying the stream holds exactly the view -----------------------

_UIDS = ("1", "2", "3")
_PHASES = ("Pending", "Running", "Unknown")
_OPS = st.one_of(
    st.tuples(st.just("upsert"), st.sampled_from(_UIDS), st.sampled_from(_PHASES), st.sampled_from("ab")),
    st.tuples(st.just("delete"), st.sampled_from(_UIDS), st.just(""), st.just("")),
)
_VIEWS = st.sampled_from(
    [
        View.EVERYTHING,
        View(parse_mask("status.phase")),
        View(parse_mask("metadata.labels")),
        RUNNING,
        View(parse_mask("metadata.labels"), PhaseIs("Running")),
    ]
)


def _apply(sink: Any, op: tuple[str, str, str, str]) -> None:
    kind, uid, phase, label = op
    if kind == "upsert":
        sink.upsert(pod(uid, phase, label))
    else:
        sink.delete(uid)


def _pb_frames(kind: EventType, version: PodVersion, view: View, revision: int | None) -> bytes:
    return orjson.dumps([kind.name, version.uid, version.masked(view).pb.hex()])


@settings(max_examples=200, deadline=None)
@given(
    view=_VIEWS,
    before=st.lists(_OPS, max_size=8),
    after=st.lists(_OPS, max_size=25),
    resume=st.booleans(),
    capacity=st.sampled_from([1, 3, 1000]),  # 1 and 3: a watcher behind gets events coalesced
)
def test_a_client_applying_the_stream_holds_exactly_the_view(
    view: View, before: list[Any], after: list[Any], resume: bool, capacity: int
) -> None:
    synced = lambda revision, resumed: orjson.dumps(["SYNCED", resumed])  # noqa: E731
    encoding = Encoding("pb", _pb_frames, synced)

    async def scenario() -> None:
        cache, streams, _ = setup(capacity=capacity)
        sink = cache.source("a")
        held: dict[str, str] = {}
        since, ops = None, before
        if resume:  # a client that held the view at some revision, and resumes from there
            for op in before[: len(before) // 2]:
                _apply(sink, op)
            since = cache.revision
            held = {p.uid: p.masked(view).pb.hex() for p in view.select(cache.snapshot().pods)}
            ops = before[len(before) // 2 :]
        for op in ops:
            _apply(sink, op)
        watch = streams.open(view, since)
        for op in after:
            _apply(sink, op)
        # Every view shows this pod, the newest event, so the last a client takes.
        sink.upsert(pod("end", "Running"))
        frames = watch.frames(encoding)
        while True:
            kind, *rest = orjson.loads(await asyncio.wait_for(anext(frames), TIMEOUT))
            if kind == "SYNCED":
                assert rest == [resume]  # the ring holds every event since: a replay
                continue
            uid, data = rest
            if kind == "ADDED":
                assert uid not in held
                held[uid] = data
                if uid == "end":
                    break
            elif kind == "MODIFIED":
                assert held[uid] != data  # never a change the view does not show
                held[uid] = data
            else:
                del held[uid]
        watch.close()
        want = {p.uid: p.masked(view).pb.hex() for p in view.select(cache.snapshot().pods)}
        assert held == want

    asyncio.run(scenario())


# -- DELETED on the kubelet's contracts ---------------------------------------------------------


def test_a_deleted_frame_carries_the_identity_encoded_once_for_every_view() -> None:
    """The kubelet's DELETED: a new pod with only name, namespace and uid, whatever the mask;
    encoded once per version (PodVersion.identity), not once per watcher or view."""
    version = pod("uid-1")
    identity = version.identity
    assert version.identity is identity
    assert pod_from_bytes(identity) == {"metadata": {"name": "pod-uid-1", "namespace": "ns", "uid": "uid-1"}}
    kubelet, lookup = (
        watch_encoding(ServiceName.V1ALPHA1),
        watch_encoding(ServiceName.V1ALPHA1, last_state=True),
    )
    assert kubelet.name != lookup.name  # the frame cache keeps the two meanings apart
    for mask in (None, "status.phase", "metadata.labels,spec.containers.image"):
        view = View(parse_mask(mask) if mask else None, None)
        frame = pods_v1alpha1_pb2.WatchPodsEvent.FromString(
            kubelet.event(EventType.DELETED, version, view, 7)
        )
        assert frame.pod == identity
        last = pods_v1alpha1_pb2.WatchPodsEvent.FromString(lookup.event(EventType.DELETED, version, view, 7))
        assert last.pod == version.masked(view).pb


async def test_the_frame_cache_holds_at_most_its_bytes_and_watchers_still_share_frames() -> None:
    """A server that sent a burst of large pods keeps no more than the bound of their frames,
    however many frames the count bound would allow, and two watchers of one view still get
    the very same frame of each event."""
    cache = PodCache(WatchHub(capacity=100, max_watchers=10))
    bound = 64 * 1024
    streams = WatchStreams(cache, frame_bytes=bound)
    sink = cache.source("a")
    pad = "x" * 8000  # a frame of ~8 KB: the bound holds 8 of them, the count bound 2,048
    with streams.open(View.EVERYTHING) as a, streams.open(View.EVERYTHING) as b:
        frames_a, frames_b = a.frames(PLAIN), b.frames(PLAIN)
        await take(frames_a, 1)
        await take(frames_b, 1)
        for i in range(40):
            sink.upsert(stored(str(i), annotations={"pad": pad}))
            first = await asyncio.wait_for(anext(frames_a), TIMEOUT)
            assert await asyncio.wait_for(anext(frames_b), TIMEOUT) is first
        kept, held = streams.frames_held
        assert 0 < held <= bound
        assert kept < 40


async def test_batches_carry_the_frames_that_are_ready_in_order_and_end_as_frames_do() -> None:
    """PodLookup's WatchPodBatches: each list is every frame ready when the one before it was
    taken, up to its bounds; the frames and their order are `frames`' own."""
    cache, streams, _ = setup()
    sink = cache.source("a")
    sink.replace([pod(str(i)) for i in range(5)])
    with streams.open(View.EVERYTHING) as watch, streams.open(View.EVERYTHING) as single:
        batches, frames = watch.batches(PLAIN, 4, 1 << 20), single.frames(PLAIN)
        start = [await anext(batches), await anext(batches)]
        assert [len(b) for b in start] == [4, 2], "the start (5 ADDED, SYNCED) in lists of at most 4"
        for i in range(3):
            sink.upsert(pod(str(i), "Unknown"))  # three changes, ready before the list is asked for
        live = await asyncio.wait_for(anext(batches), TIMEOUT)
        assert [orjson.loads(f)[:3] for f in live] == [
            ["MODIFIED", r, str(i)]
            for i, r in zip(range(3), range(cache.revision - 2, cache.revision + 1), strict=True)
        ]
        assert [*start[0], *start[1], *live] == [await anext(frames) for _ in range(9)]
        cache.hub.stop()
        with pytest.raises(ServerStopping):
            await anext(batches)


async def test_a_batch_holds_at_most_its_bytes_and_a_larger_frame_goes_alone() -> None:
    cache, streams, _ = setup()
    cache.source("a").replace([pod(str(i)) for i in range(3)])
    with streams.open(View.EVERYTHING) as watch:
        batches = watch.batches(PLAIN, 100, 1)
        sizes = [len(await anext(batches)) for _ in range(4)]
    assert sizes == [1, 1, 1, 1], "3 ADDED and SYNCED, each over the bound: each alone"
