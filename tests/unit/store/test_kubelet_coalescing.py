"""A watcher behind on the kubelet's contracts is told what the kubelet would tell it: whatever it
missed, once it has taken its queue it holds exactly what a watcher that kept up holds
(docs/grpc-api.md, slow watchers). Both are read side by side from one cache: the one keeping
up takes every event as it is published, the other only at the end, past its queue."""

from __future__ import annotations

from typing import Any

import orjson
from builders import stored
from hypothesis import given, settings
from hypothesis import strategies as st

from pods_api.core.query.view import View
from pods_api.core.store.cache import PodCache
from pods_api.core.store.stream import Encoding, Watch, WatchStreams
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import EventType, WatchHub

REFUSED = {"reason": "OutOfcpu", "message": "Pod was rejected: Node didn't have enough resource: cpu"}


def _event(kind: EventType, version: PodVersion, view: View, revision: int | None) -> bytes:
    pb = version.identity if kind is EventType.DELETED else version.masked(view).pb
    return orjson.dumps([kind.name, version.uid, pb.hex()])


KUBELET = Encoding("test kubelet", _event, lambda revision, resumed: b"", kubelet=True)


class Client:
    """What a client of one watch holds, from the frames it takes; each must make sense to it:
    ADDED of a pod it does not hold, MODIFIED (a change) and DELETED of one it does."""

    def __init__(self, streams: WatchStreams, cache: PodCache) -> None:
        self.watch: Watch = streams.open(View.EVERYTHING)
        self.held: dict[str, str] = {}
        self.ops: list[Any] = []  # what the test did, for a failure's message
        for frame in self.watch._take_start(KUBELET):
            if frame:
                self._apply(frame)

    def take_all(self) -> None:
        """Every event waiting for it now (take() does not wait)."""
        while (event := self.watch.watcher.take()) is not None:
            frame = self.watch._streams.frame(event, KUBELET, View.EVERYTHING)
            if frame is not None:
                self._apply(frame)

    def finished(self, uid: str) -> bool:
        return PodVersion.from_bytes(bytes.fromhex(self.held[uid])).finished

    def _apply(self, frame: bytes) -> None:
        kind, uid, data = orjson.loads(frame)
        if kind == "ADDED":
            # An ADDED again is an update, as the kubelet sends it: of a finished pod a client
            # still holds (from its snapshot, or refused) that runs again.
            assert uid not in self.held or self.finished(uid), f"ADDED of {uid}, which it holds: {self.ops}"
            self.held[uid] = data
        elif kind == "MODIFIED":
            assert uid in self.held, f"MODIFIED of {uid}, which it does not hold: {self.ops}"
            assert self.held[uid] != data, f"a MODIFIED of {uid} that changed nothing: {self.ops}"
            self.held[uid] = data
        else:
            assert uid in self.held, f"DELETED of {uid}, which it does not hold: {self.ops}"
            del self.held[uid]


_UIDS = ("1", "2", "3")
_PHASES = ("Pending", "Running", "Succeeded", "Failed")
# Two labels only: a pod often changes back to bytes a watcher behind still holds.
_OPS = st.one_of(
    st.tuples(st.just("upsert"), st.sampled_from(_UIDS), st.sampled_from(_PHASES), st.sampled_from("ab")),
    st.tuples(st.just("delete"), st.sampled_from(_UIDS), st.just(""), st.just("")),
    st.tuples(st.just("refuse"), st.sampled_from(_UIDS), st.just("Failed"), st.just("")),
)


def _version(uid: str, phase: str, label: str) -> PodVersion:
    return stored(uid, phase, name=f"pod-{uid}", labels={"l": label})


def _apply(sink: Any, op: tuple[str, str, str, str]) -> None:
    kind, uid, phase, label = op
    if kind == "upsert":
        sink.upsert(_version(uid, phase, label))
    elif kind == "refuse":
        sink.upsert(stored(uid, phase, name=f"pod-{uid}", status=REFUSED))
    else:
        sink.delete(uid)


@settings(max_examples=300, deadline=None)
@given(
    before=st.lists(_OPS, max_size=6),
    after=st.lists(_OPS, min_size=1, max_size=30),
    capacity=st.sampled_from([1, 2, 5]),
)
def test_a_watcher_behind_ends_holding_what_one_that_kept_up_holds(
    before: list[Any], after: list[Any], capacity: int
) -> None:
    cache = PodCache(WatchHub(capacity=capacity, max_watchers=10))
    streams = WatchStreams(cache)
    sink = cache.source("fixtures")
    for op in before:
        _apply(sink, op)
    reading, paused = Client(streams, cache), Client(streams, cache)
    for op in after:
        _apply(sink, op)
        reading.ops.append(op)
        reading.take_all()
    paused.take_all()
    assert paused.held == reading.held, (before, after)


def test_a_watcher_that_kept_up_and_one_behind_agree_on_the_issues_two_sequences() -> None:
    """The two the churn found: a finished pod changed twice then removed, and a finished pod
    that runs again then changes, each while one watcher is behind."""
    cache = PodCache(WatchHub(capacity=1, max_watchers=10))
    streams = WatchStreams(cache)
    sink = cache.source("fixtures")
    sink.replace(
        [_version("1", "Running", "a"), _version("2", "Running", "a"), _version("f", "Running", "a")]
    )
    reading, paused = Client(streams, cache), Client(streams, cache)
    for version in (_version("1", "Succeeded", "a"), _version("2", "Failed", "a")):
        sink.upsert(version)
        reading.take_all()
        paused.take_all()
    sink.upsert(_version("f", "Running", "b"))  # fills the paused one's queue
    reading.take_all()
    for op in (
        ("upsert", "1", "Succeeded", "b"),
        ("upsert", "1", "Succeeded", "a"),
        ("delete", "1", "", ""),
        ("upsert", "2", "Running", "a"),
        ("upsert", "2", "Running", "b"),
    ):
        _apply(sink, op)
        reading.take_all()
    paused.take_all()
    assert paused.held == reading.held
    assert set(paused.held) == {"2", "f"}
