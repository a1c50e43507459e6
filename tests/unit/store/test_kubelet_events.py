"""The kubelet's watch is its status notifications, not a diff of its List (pkg/kubelet/apis/pods,
pkg/kubelet/status): DELETED for a pod that finished while ListPods still lists it, ADDED again
for a pod whose status it forgot. The kubelet's contracts send exactly that; our other surfaces
are told the change of the served pods. Both read the same watch; these tests read it through a
kubelet-contract encoding and a plain one side by side."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
from builders import stored

from pods_api.core.api.pb import k8s_core_v1_pb2, k8s_meta_v1_pb2
from pods_api.core.query.view import View
from pods_api.core.store.cache import PodCache
from pods_api.core.store.stream import Encoding, WatchStreams
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import EventType, WatchHub

TIMEOUT = 5.0


def _event(kind: EventType, version: PodVersion, view: View, revision: int | None) -> bytes:
    pb = version.identity if kind is EventType.DELETED else version.masked(view).pb
    return orjson.dumps([kind.name, version.uid, pb.hex()])


def _synced(revision: int, resumed: bool) -> bytes:
    return orjson.dumps(["SYNCED", "", ""])


# [type, uid, the pod's protobuf in hex]: the kubelet's contracts, and the state surfaces.
KUBELET = Encoding("test kubelet", _event, _synced, kubelet=True)
STATE = Encoding("test state", _event, _synced)


def setup(capacity: int = 100) -> tuple[PodCache, WatchStreams]:
    cache = PodCache(WatchHub(capacity=capacity, max_watchers=10))
    return cache, WatchStreams(cache)


async def take(frames: AsyncIterator[bytes], count: int) -> list[list[str]]:
    return [orjson.loads(await asyncio.wait_for(anext(frames), TIMEOUT)) for _ in range(count)]


async def started(streams: WatchStreams, encoding: Encoding, pods: int) -> AsyncIterator[bytes]:
    frames = streams.open(View.EVERYTHING).frames(encoding)
    await take(frames, pods + 1)  # the snapshot and its marker
    return frames


def deleted_as_sent(uid: str) -> PodVersion:
    """A DELETED's pod as the kubelet marshals it, with bytes ours would not write (an empty
    spec and status), so that relaying them is told from re-encoding them."""
    meta = k8s_meta_v1_pb2.ObjectMeta(name=f"pod-{uid}", namespace="ns", uid=uid)
    message = k8s_core_v1_pb2.Pod(
        metadata=meta, spec=k8s_core_v1_pb2.PodSpec(), status=k8s_core_v1_pb2.PodStatus()
    )
    return PodVersion.deleted(message.SerializeToString())


async def test_a_pod_that_finishes_is_deleted_on_the_kubelets_contracts_and_stays_listed() -> None:
    cache, streams = setup()
    sink = cache.source("fixtures")
    sink.replace([stored("1", name="pod-1")])
    kubelet, state = await started(streams, KUBELET, 1), await started(streams, STATE, 1)
    since = cache.revision
    sink.upsert(stored("1", "Failed", name="pod-1"))
    sink.upsert(stored("2", name="pod-2"))  # a later change, to show what came between
    modified, gone, added = await take(kubelet, 3)
    assert (modified[:2], gone[:2], added[:2]) == (["MODIFIED", "1"], ["DELETED", "1"], ["ADDED", "2"])
    assert bytes.fromhex(gone[2]) == cache.get("1").identity  # name, namespace and uid only
    assert [f[:2] for f in await take(state, 2)] == [["MODIFIED", "1"], ["ADDED", "2"]]
    assert [p.uid for p in cache.snapshot().pods] == ["1", "2"]
    # A resume replays the changes alone: the notice changed nothing to resume from.
    replay = cache.events_since(since)
    assert replay is not None
    assert [(e.type, e.pod.uid, e.revision) for e in replay] == [
        (EventType.MODIFIED, "1", since + 1),
        (EventType.ADDED, "2", since + 2),
    ]


async def test_the_kubelets_events_are_relayed_with_their_types_and_bytes() -> None:
    cache, streams = setup()
    sink = cache.source("kubelet")
    sink.replace([stored("1", name="pod-1"), stored("2", name="pod-2")])
    kubelet, state = await started(streams, KUBELET, 2), await started(streams, STATE, 2)
    again = stored("1", name="pod-1")
    sink.relay(EventType.ADDED, again, listed=again)  # again, the same bytes
    changed = stored("2", "Pending", name="pod-2")
    sink.relay(EventType.ADDED, changed, listed=changed)  # again, changed
    finished = stored("1", "Failed", name="pod-1")
    sink.relay(EventType.MODIFIED, finished, listed=finished)
    sink.relay(EventType.DELETED, deleted_as_sent("1"), listed=finished)  # finished: still listed
    sink.relay(EventType.DELETED, deleted_as_sent("2"), listed=None)  # gone from its List
    got = await take(kubelet, 5)
    assert [f[:2] for f in got] == [
        ["ADDED", "1"],
        ["ADDED", "2"],
        ["MODIFIED", "1"],  # no DELETED of ours after it: the kubelet's own follows
        ["DELETED", "1"],
        ["DELETED", "2"],
    ]
    assert bytes.fromhex(got[3][2]) == deleted_as_sent("1").pb  # as sent, not re-encoded
    assert bytes.fromhex(got[4][2]) == deleted_as_sent("2").pb
    assert [f[:2] for f in await take(state, 3)] == [["MODIFIED", "2"], ["MODIFIED", "1"], ["DELETED", "2"]]
    assert [p.uid for p in cache.snapshot().pods] == ["1"]
    assert cache.get("1").framed == finished.framed


async def test_what_the_kubelets_watch_never_announces_reaches_the_other_surfaces_only() -> None:
    cache, streams = setup()
    sink = cache.source("kubelet")
    sink.replace([stored("1", "Failed", name="pod-1"), stored("2", name="pod-2")])
    kubelet, state = await started(streams, KUBELET, 2), await started(streams, STATE, 2)
    sink.amend(gone=["1"])  # its kubelet let the finished pod go, without an event
    pending = stored("2", "Pending", name="pod-2")
    sink.relay(EventType.MODIFIED, pending, listed=pending)
    assert [f[:2] for f in await take(kubelet, 1)] == [["MODIFIED", "2"]]
    assert [f[:2] for f in await take(state, 2)] == [["DELETED", "1"], ["MODIFIED", "2"]]
    assert [p.uid for p in cache.snapshot().pods] == ["2"]


async def test_a_watcher_behind_is_told_that_a_pod_finished() -> None:
    """Past its queue, the pod's change and its DELETED notice are one event: the DELETED, as a
    watcher that kept up ends told (it got the MODIFIED, then the DELETED)."""
    cache, streams = setup(capacity=1)
    sink = cache.source("fixtures")
    sink.replace([stored("1", name="pod-1")])
    watch = streams.open(View.EVERYTHING)
    frames = watch.frames(KUBELET)
    await take(frames, 2)
    sink.upsert(stored("2", name="pod-2"))  # fills its queue
    sink.upsert(stored("1", "Failed", name="pod-1"))  # past capacity, and its notice
    got = await take(frames, 2)
    assert [f[:2] for f in got] == [["ADDED", "2"], ["DELETED", "1"]]
    assert bytes.fromhex(got[1][2]) == cache.get("1").identity
    assert watch.watcher.caught_up
    assert cache.hub.dropped == 1  # the notice, merged into the one event sent


async def behind(capacity: int, *pods: PodVersion) -> tuple[PodCache, Any, Any, Any]:
    """A cache serving `pods`, a watcher that reads every event as it comes and one whose queue
    of `capacity` is full (a filler pod's changes fill it), both on the kubelet's contracts."""
    cache, streams = setup(capacity=capacity)
    sink = cache.source("fixtures")
    sink.replace([*pods, stored("filler", name="filler")])
    reading = streams.open(View.EVERYTHING).frames(KUBELET)
    paused = streams.open(View.EVERYTHING).frames(KUBELET)
    await take(reading, len(pods) + 2)
    await take(paused, len(pods) + 2)
    for n in range(capacity):
        sink.upsert(stored("filler", name="filler", labels={"n": str(n)}))
    await take(reading, capacity)
    return cache, sink, reading, paused


async def test_a_pod_that_finishes_changes_and_goes_while_a_watcher_is_behind() -> None:
    """A watcher that keeps up gets MODIFIED and DELETED when it finishes, then nothing for its
    changes and its removal; one behind gets the DELETED alone (it was sent a DELETED of a UID
    it did not hold, from the served diff)."""
    _, sink, reading, paused = await behind(1, stored("1", name="pod-1"))
    sink.upsert(stored("1", "Succeeded", name="pod-1"))
    sink.upsert(stored("1", "Succeeded", name="pod-1", labels={"a": "1"}))
    sink.upsert(stored("1", "Succeeded", name="pod-1", labels={"a": "2"}))
    sink.delete("1")
    sink.upsert(stored("2", name="pod-2"))  # a later change, to show what came between
    assert [f[:2] for f in await take(reading, 3)] == [["MODIFIED", "1"], ["DELETED", "1"], ["ADDED", "2"]]
    assert [f[:2] for f in await take(paused, 3)] == [
        ["MODIFIED", "filler"],
        ["DELETED", "1"],
        ["ADDED", "2"],
    ]


async def test_a_pod_finished_while_watched_that_runs_again_is_added_to_a_watcher_behind() -> None:
    """Told DELETED when it finished, a watcher that keeps up gets ADDED when it runs again,
    then MODIFIED; one behind gets the ADDED, with the newest version (it was sent a MODIFIED
    of a UID it did not hold, from the served diff)."""
    cache, streams = setup(capacity=1)
    sink = cache.source("fixtures")
    sink.replace([stored("1", name="pod-1"), stored("filler", name="filler")])
    reading = streams.open(View.EVERYTHING).frames(KUBELET)
    paused = streams.open(View.EVERYTHING).frames(KUBELET)
    for frames in (reading, paused):
        await take(frames, 3)
    sink.upsert(stored("1", "Failed", name="pod-1"))
    for frames in (reading, paused):
        assert [f[:2] for f in await take(frames, 2)] == [["MODIFIED", "1"], ["DELETED", "1"]]
    changes = [
        stored("filler", name="filler", labels={"n": "1"}),  # fills the paused one's queue
        stored("1", "Running", name="pod-1"),
        stored("1", "Running", name="pod-1", labels={"a": "b"}),
    ]
    told = []
    for change in changes:
        sink.upsert(change)
        told += [f[:2] for f in await take(reading, 1)]
    assert told == [["MODIFIED", "filler"], ["ADDED", "1"], ["MODIFIED", "1"]]
    got = await take(paused, 2)
    assert [f[:2] for f in got] == [["MODIFIED", "filler"], ["ADDED", "1"]]
    assert bytes.fromhex(got[1][2]) == cache.get("1").pb


async def test_after_its_deleted_a_finished_pod_is_out_of_the_kubelets_watch() -> None:
    cache, streams = setup()
    sink = cache.source("fixtures")
    sink.replace([stored("1", "Succeeded", name="pod-1"), stored("2", name="pod-2")])
    kubelet, state = await started(streams, KUBELET, 2), await started(streams, STATE, 2)
    sink.upsert(stored("1", "Succeeded", name="pod-1", labels={"a": "b"}))  # still finished
    sink.upsert(stored("1", "Running", name="pod-1"))  # runs again (a fixture edited back)
    sink.upsert(stored("1", "Failed", name="pod-1"))
    sink.replace([stored("2", name="pod-2")])  # the finished pod's source lets it go
    sink.upsert(stored("2", "Pending", name="pod-2"))
    assert [f[:2] for f in await take(kubelet, 4)] == [
        ["ADDED", "1"],  # back in the watch
        ["MODIFIED", "1"],
        ["DELETED", "1"],  # finished again; its removal later is not sent
        ["MODIFIED", "2"],
    ]
    assert [f[:2] for f in await take(state, 5)] == [
        ["MODIFIED", "1"],
        ["MODIFIED", "1"],
        ["MODIFIED", "1"],
        ["DELETED", "1"],
        ["MODIFIED", "2"],
    ]


async def test_a_pod_refused_at_admission_is_followed_until_it_is_removed() -> None:
    """The kubelet refuses it with phase Failed and "Pod was rejected: ..." and never starts it,
    so does not terminate it then: its watch sends no DELETED when it fails, its changes are
    MODIFIED, and its removal is DELETED (seen beside a registered kubelet v1.37.2)."""
    cache, streams = setup()
    sink = cache.source("apiserver")
    sink.replace([stored("1", "Pending", name="pod-1")])
    kubelet, state = await started(streams, KUBELET, 1), await started(streams, STATE, 1)
    refused = {"message": "Pod was rejected: Node didn't have enough resource: cpu", "reason": "OutOfcpu"}
    sink.upsert(stored("1", "Failed", name="pod-1", status=refused))
    sink.upsert(stored("1", "Failed", name="pod-1", status=refused, labels={"deleting": "yes"}))
    sink.delete("1")
    sink.upsert(stored("2", name="pod-2"))  # a later change, to show what came between
    told = [["MODIFIED", "1"], ["MODIFIED", "1"], ["DELETED", "1"], ["ADDED", "2"]]
    assert [f[:2] for f in await take(kubelet, 4)] == told
    assert [f[:2] for f in await take(state, 4)] == told


async def test_the_last_statuses_of_a_pod_the_kubelet_no_longer_lists_go_to_its_contracts_alone() -> None:
    cache, streams = setup()
    sink = cache.source("kubelet")
    sink.replace([stored("1", name="pod-1"), stored("2", name="pod-2")])
    kubelet, state = await started(streams, KUBELET, 2), await started(streams, STATE, 2)
    stopping = stored("1", "Running", name="pod-1", labels={"stopping": "yes"})
    sink.relay(EventType.ADDED, stopping, listed=None)  # its manifest removed: torn down
    sink.relay(EventType.MODIFIED, stopping, listed=None)
    sink.relay(EventType.DELETED, deleted_as_sent("1"), listed=None)
    got = await take(kubelet, 3)
    assert [f[:2] for f in got] == [["ADDED", "1"], ["MODIFIED", "1"], ["DELETED", "1"]]
    assert bytes.fromhex(got[0][2]) == stopping.pb == bytes.fromhex(got[1][2])  # the kubelet's
    assert [f[:2] for f in await take(state, 1)] == [["DELETED", "1"]]  # gone from the List at once
    assert [p.uid for p in cache.snapshot().pods] == ["2"]
