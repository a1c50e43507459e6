"""The pod cache: the pods served, by UID, merged from what every source contributes.

Sources hand over snapshots (`replace`) or deltas (`upsert`, `delete`) of their own pods;
overlays (`cache.overlay(name)`) hand over statuses for pods others own. The identity policy
(core/store/identity.py) keeps each source's contributions, decides under which UID a pod is
served (`policy.place`, at the cache's one write point for sources) and merges what is said of
one UID (`policy.settle`, at `_settle`, the one place a served pod changes): first claim wins,
a static pod is one pod whoever reports it (its mirror, the kubelet's view), an overlay's
status fields win as its precedence table says. Whether a source's pods are static pods as
configured is said when it registers (`source(name, configures_static_pods=True)`). A UID is
merged again only when one of its contributions changed. The cache computes
ADDED/MODIFIED/DELETED by comparing encoded versions, keeps its named indexes
(core/store/index.py) current at that same point, stamps each change with a revision, keeps
recent events in a ring for resumable watches, and publishes them to the watch hub.
Readiness: the cache is ready once every registered gate (each source, plus any hold such as
--ready-delay) has opened (core/store/readiness.py). Its snapshots are core/store/snapshot.py's.
Everything runs on one event loop; no method awaits.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pods_api.core.api.codec import CodecError
from pods_api.core.store.identity import IdentityPolicy, Overlay, Served
from pods_api.core.store.index import (
    BY_CONTAINER_ID,
    BY_NAME,
    BY_POD_IP,
    ContainerRef,
    Hit,
    Index,
    default_indexes,
)
from pods_api.core.store.observations import NodeEvents, Observation
from pods_api.core.store.readiness import Gate, Readiness
from pods_api.core.store.snapshot import Snapshot
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import EventType, PodEvent, Told, Watcher, WatchHub

log = logging.getLogger(__name__)

# Events kept for resuming an HTTP watch from a revision, and at most this many bytes of pod
# encodings they reference (each event counts its pod and the version it replaced): a few
# minutes of churn on a busy node; older resumes get a fresh snapshot instead. 4,096 events of
# ~10 KiB pods would pin ~80 MiB; the byte bound keeps about 1,600 of them.
RING_SIZE = 4096
RING_BYTES = 32 * 1024 * 1024

_UNTOLD = Told(None)
_TOLD_DELETED = Told(EventType.DELETED)
_TOLD_ADDED = Told(EventType.ADDED)


class _Sink(Gate):
    """A gate of readiness that also writes to the cache, from the event loop's thread only."""

    def __init__(self, cache: PodCache, name: str) -> None:
        super().__init__(cache.readiness, name)
        self._cache = cache
        self._thread = threading.get_ident()  # the event loop's, where sources are registered
        self._warnings: dict[str, str] = {}  # key -> one thing clients should hear (`warn`)

    def _check_thread(self) -> None:
        """Sinks are called on the event loop's thread only: the cache takes no lock, so a call
        from another thread (a thread-based client library's callback) would corrupt it quietly."""
        if threading.get_ident() != self._thread:
            raise RuntimeError(
                f"pod source {self.name} called its sink from another thread; sinks are called on "
                "the event loop's thread only (use loop.call_soon_threadsafe)"
            )

    def warn(self, warning: str | None, *, key: str = "") -> None:
        """What a client should hear of this source besides its pods (an upstream that speaks
        another version of the API than ours; pods that may be stale), or None once it no
        longer holds. Each `key` is one such thing, so one clearing leaves the others. Surfaces
        pass them on (`PodCache.warnings`, one text per source: gRPC trailing metadata that
        `pods-api check` prints, and `/readyz`'s detail)."""
        self._check_thread()
        if warning is None:
            self._warnings.pop(key, None)
        else:
            self._warnings[key] = warning
        if self._warnings:
            self._cache.warnings[self.name] = "; ".join(self._warnings[k] for k in sorted(self._warnings))
        else:
            self._cache.warnings.pop(self.name, None)

    def observe(self, seen: Observation) -> None:
        """Something the node saw happen to a served pod's container (core/store/observations.py)."""
        self._check_thread()
        self._cache.events.record(seen)


class SourceSink(_Sink):
    """What a source writes to: its pods, by their own UIDs. Which of them are served, and
    under which UID, is the cache's identity policy's decision (core/store/identity.py).

    Called on the event loop's thread only (the thread that registered the source); a call from
    any other thread raises RuntimeError instead of corrupting the cache."""

    def __init__(
        self, cache: PodCache, name: str, *, configures_static_pods: bool = False, runtime: bool = False
    ) -> None:
        super().__init__(cache, name)
        self.configures_static_pods = configures_static_pods
        self.runtime = runtime  # an overlay's word on static pods' uids (OverlaySink.report_static)
        # Where the source's pod of a UID (its own) comes from, for log lines (a manifest file);
        # set by a source that knows.
        self.origin_of: Callable[[str], str | None] = lambda uid: None

    @property
    def served_as(self) -> Mapping[str, str]:
        """This source's pod UIDs -> the UID each is served under (the policy's decision)."""
        return self._cache.policy.served_as(self.name)

    @property
    def uids(self) -> set[str]:
        """The UIDs of this source's pods (as the source has them)."""
        return set(self.served_as)

    def pod(self, uid: str) -> PodVersion | None:
        """The pod served for this source's `uid` (under the UID the policy serves it as)."""
        served = self.served_as.get(uid)
        return None if served is None else self._cache.get(served)

    def replace(self, pods: Iterable[PodVersion]) -> None:
        """This source's complete set of pods now: relist, poll and resync all come here."""
        self._check_thread()
        self._cache._replace(self, list(pods))

    def upsert(self, pod: PodVersion) -> None:
        self._check_thread()
        self._cache._publish(self._cache._change(self, [pod], []))

    def delete(self, uid: str) -> None:
        self._check_thread()
        if uid in self.served_as:
            self._cache._publish(self._cache._change(self, [], [uid]))

    def relay(
        self, kind: EventType, pod: PodVersion, *, listed: PodVersion | None, frame: bytes | None = None
    ) -> None:
        """One event of the kubelet's own watch (`pod` as sent), passed on to the kubelet's
        contracts with its type and, where it is not what is served, its bytes, whatever the
        served pods' diff says: the kubelet's watch is its status notifications, not a diff of
        its List. It sends ADDED again for a pod whose status it forgot, DELETED for a pod that
        finished while its ListPods still lists it, and the last statuses of a pod it no longer
        lists. `listed` is the pod as the kubelet's List has it now (served), or None when it
        no longer lists it (withdrawn). `frame`: the event's v1alpha1 WatchPodsEvent bytes as
        the kubelet sent them, passed on as they are where they say what is told."""
        self._cache._publish(self._cache._relay(self, kind, pod, listed, frame))

    def amend(self, pods: Iterable[PodVersion] = (), gone: Iterable[str] = ()) -> None:
        """Changes to this source's pods that the kubelet's watch never announces (a finished
        pod its kubelet no longer lists): the other surfaces are told, the kubelet's contracts
        are not, as the kubelet's own watchers are not."""
        self._check_thread()
        withdrawn = [uid for uid in gone if uid in self.served_as]
        events = self._cache._change(self, list(pods), withdrawn, finish_notices=False)
        self._cache._publish([dataclasses.replace(e, told=_UNTOLD) for e in events])

    def mark_synced(self) -> None:
        """The source has delivered its first complete state."""
        self._check_thread()
        self.set_open()

    def observe(self, seen: Observation) -> None:
        """As the base, under the UID the pod is served as (which the client asks by)."""
        served = self.served_as.get(seen.involved.uid, seen.involved.uid)
        super().observe(dataclasses.replace(seen, involved=dataclasses.replace(seen.involved, uid=served)))


class OverlaySink(_Sink):
    """What a status overlay (the CRI source) writes to: a PodStatus per UID, for pods other
    sources own. It never makes a pod exist; the identity policy's precedence table says which
    of its fields win. Statuses are Kubernetes JSON (as in a Pod's `status`); a malformed one
    raises CodecError naming the path, and changes nothing."""

    def __init__(self, cache: PodCache, name: str) -> None:
        super().__init__(cache, name)
        self.statuses: dict[str, Overlay] = {}
        self._given: dict[str, Mapping[str, Any]] = {}  # as handed over, to skip re-decoding
        # Contributions of kind "runtime" (core/store/identity.py): not a gate of its own.
        self._static = SourceSink(cache, name, runtime=True)

    def report_static(self, pods: Iterable[PodVersion]) -> None:
        """The static pods the runtime runs now, each a pod holding only its namespace, name,
        uid and `kubernetes.io/config.source` (one per static pod); the identity policy serves
        each static pod under the uid given here. Call before `replace`, so the statuses
        handed over then find the pods under those uids."""
        self._check_thread()
        self._cache._replace(self._static, list(pods))

    def expect_static(self, wait: float) -> None:
        """This overlay will report the static pods the runtime runs (`report_static`): a new
        static pod is held back until it does, for at most `wait` seconds (the identity
        policy's "Held back"). Call before the first report."""
        self._check_thread()
        touched = self._cache.policy.expect_runtime(wait)
        self._cache._publish([event for uid in touched for event in self._cache._settle(uid)])

    def set_status(self, uid: str, status: Mapping[str, Any]) -> None:
        self._check_thread()
        canonical = self._canonical(uid, status)
        if canonical is not None:
            self._given[uid] = copy.deepcopy(dict(status))
            self._cache._publish(self._cache._overlay(self, uid, canonical))

    def clear(self, uid: str) -> None:
        """This overlay has nothing more to say about `uid`."""
        self._check_thread()
        self._given.pop(uid, None)
        if self.statuses.pop(uid, None) is not None:
            self._cache._publish(self._cache._settle(uid))

    def replace(self, statuses: Mapping[str, Mapping[str, Any]]) -> None:
        """The overlay's complete set of statuses now; all are checked before any is used."""
        self._check_thread()
        checked = {uid: self._canonical(uid, status) for uid, status in statuses.items()}
        events: list[PodEvent] = []
        for uid in sorted(self.statuses.keys() - statuses.keys()):
            del self.statuses[uid]
            self._given.pop(uid, None)
            events += self._cache._settle(uid)
        for uid, canonical in checked.items():
            if canonical is not None:
                self._given[uid] = copy.deepcopy(dict(statuses[uid]))
                events += self._cache._overlay(self, uid, canonical)
        self._cache._publish(events)

    def pod(self, uid: str) -> PodVersion | None:
        """The pod served under `uid` (its spec and metadata are the owner's), if any."""
        return self._cache.get(uid)

    def mark_synced(self) -> None:
        self._check_thread()
        self.set_open()

    def _canonical(self, uid: str, status: Mapping[str, Any]) -> dict[str, Any] | None:
        """The status in canonical JSON, or None when it is what was last handed over."""
        if self._given.get(uid) == status:
            return None
        try:
            decoded = PodVersion.from_json({"status": status})
        except CodecError as e:
            raise CodecError(f"{self.name}: pod {uid}: {e.path}", e.problem) from None
        canonical: dict[str, Any] = decoded.json.get("status") or {}
        return canonical


class PodCache:
    """Pods by UID, merged from every source's contribution by an identity policy, with named
    indexes kept current at the one place a served pod changes (`_settle`)."""

    def __init__(
        self,
        hub: WatchHub,
        *,
        ring_size: int = RING_SIZE,
        ring_bytes: int = RING_BYTES,
        policy: IdentityPolicy | None = None,
        indexes: Iterable[Index] | None = None,
    ) -> None:
        self.hub = hub
        self.policy = policy or IdentityPolicy()
        self.policy.origin = self._origin
        # Revisions start at the wall clock in milliseconds, so a revision a client kept from an
        # earlier run of the process is older than every revision of this one.
        self._first_revision = self.revision = time.time_ns() // 1_000_000
        self._served: dict[str, Served] = {}
        self._notices = 0  # numbers the notices (_notice)
        self._said_refused: set[tuple[str, str, str]] = set()
        self._indexes: dict[str, Index] = {}
        self._ring: deque[tuple[PodEvent, int]] = deque()  # with the bytes each event counts
        self.ring_size, self.ring_bytes = ring_size, ring_bytes
        self._ring_held = 0
        self.readiness = Readiness()
        self._sinks: dict[str, SourceSink] = {}
        # Source name -> its warning (SourceSink.warn); read-only outside the sinks.
        self.warnings: dict[str, str] = {}
        self._overlays: dict[str, OverlaySink] = {}
        self._snapshot: Snapshot | None = None
        # What sources observed happen to containers (SourceSink.observe); read-only outside.
        self.events = NodeEvents()
        for index in default_indexes() if indexes is None else indexes:
            self.add_index(index)

    # -- registering: each source and overlay is a gate of readiness -------------------------

    def source(self, name: str, *, configures_static_pods: bool = False) -> SourceSink:
        """Register a pod source. `configures_static_pods`: its pods are static pods as their
        manifests make them (--manifests, --manifest-url), which the identity policy matches
        with what other sources report of the same static pods."""
        sink = SourceSink(self, name, configures_static_pods=configures_static_pods)
        self.readiness.add(sink)
        self._sinks[name] = sink
        return sink

    def _origin(self, source: str, uid: str) -> str | None:
        sink = self._sinks.get(source)
        return sink.origin_of(uid) if sink is not None else None

    def overlay(self, name: str) -> OverlaySink:
        """Register a status overlay (e.g. the CRI source); a gate of readiness like a source."""
        sink = OverlaySink(self, name)
        self.readiness.add(sink)
        self._overlays[name] = sink
        return sink

    def hold(self, name: str) -> Gate:
        return self.readiness.hold(name)

    @property
    def ready(self) -> bool:
        return self.readiness.ready

    @property
    def gates(self) -> tuple[Gate, ...]:
        return self.readiness.gates

    def on_readiness(self, listener: Callable[[bool], None]) -> None:
        self.readiness.on_change(listener)

    # -- reading -----------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        if self._snapshot is None:
            pods = tuple(self._served[uid].pod for uid in sorted(self._served))
            self._snapshot = Snapshot(self.revision, pods)
        return self._snapshot

    def get(self, uid: str) -> PodVersion | None:
        served = self._served.get(uid)
        return served.pod if served else None

    def owner(self, uid: str) -> str | None:
        """The source whose pod is served under `uid` (None: not served, or a mirror alone)."""
        served = self._served.get(uid)
        return served.owner if served else None

    def __len__(self) -> int:
        return len(self._served)

    def add_index(self, index: Index) -> None:
        """Register a named index; it is filled from the pods served now and kept current."""
        if index.name in self._indexes:
            raise ValueError(f"an index named {index.name!r} is already registered")
        self._indexes[index.name] = index
        for uid, served in self._served.items():
            index.update(uid, None, served.pod)

    def by_index(self, name: str, value: Any) -> list[Hit]:
        """The served pods an index holds under `value`, in UID order (empty when none);
        raises KeyError for an unknown index and InvalidLookup for a value it cannot answer
        (a malformed IP, a too short or ambiguous container ID prefix)."""
        index = self._indexes[name]
        return [
            Hit(self._served[uid].pod, detail if isinstance(detail, ContainerRef) else None)
            for uid, detail in index.lookup(value)
        ]

    def by_name(self, namespace: str, name: str) -> list[Hit]:
        return self.by_index(BY_NAME, (namespace, name))

    def by_container_id(self, container_id: str) -> list[Hit]:
        return self.by_index(BY_CONTAINER_ID, container_id)

    def by_pod_ip(self, ip: str) -> list[Hit]:
        return self.by_index(BY_POD_IP, ip)

    def watch(self) -> tuple[Snapshot, Watcher]:
        """A snapshot and a watcher that gets every event after it: no gap, no duplicate,
        since nothing can change the cache between the two lines (one event loop)."""
        watcher = self.hub.subscribe()
        return self.snapshot(), watcher

    def watch_from(self, revision: int) -> tuple[Snapshot | None, list[PodEvent], Watcher]:
        """Resume after `revision`: the events since then and a watcher for what follows, or,
        when the ring no longer holds them all, a full snapshot (and no events) instead."""
        watcher = self.hub.subscribe()
        replay = self.events_since(revision)
        if replay is None:
            return self.snapshot(), [], watcher
        return None, replay, watcher

    def events_since(self, revision: int) -> list[PodEvent] | None:
        """The events after `revision`, or None when the ring no longer holds them all."""
        if revision < self._first_revision or revision > self.revision:
            return None
        oldest = self._ring[0][0].revision if self._ring else self.revision + 1
        if revision < oldest - 1:
            return None
        return [e for e, _ in self._ring if e.revision > revision]

    def snapshot_at(self, revision: int) -> Snapshot | None:
        """The pods as they were at `revision`: the current ones with the ring's events after it
        undone, newest first. None when the ring no longer reaches back that far (or the
        revision is not of this process): exactly the window a watch can resume from, and no
        memory besides the ring's."""
        if revision == self.revision:
            return self.snapshot()
        after = self.events_since(revision)
        if after is None:
            return None
        pods = {pod.uid: pod for pod in self.snapshot().pods}
        for event in reversed(after):
            if event.type is EventType.ADDED:
                pods.pop(event.pod.uid, None)
            elif event.type is EventType.DELETED:
                pods[event.pod.uid] = event.pod  # the ring's DELETED holds the last state
            elif event.type is EventType.MODIFIED and event.previous is not None:
                pods[event.pod.uid] = event.previous
            else:
                return None
        return Snapshot(revision, tuple(pods[uid] for uid in sorted(pods)))

    # -- writing: contributions to the policy, which places and merges; _settle serves -----

    def _replace(self, sink: SourceSink, pods: list[PodVersion]) -> None:
        wanted = {pod.uid: pod for pod in pods}
        gone = sorted(sink.served_as.keys() - wanted.keys())
        self._publish(self._change(sink, list(wanted.values()), gone))

    def _change(
        self, sink: SourceSink, pods: list[PodVersion], gone: list[str], *, finish_notices: bool = True
    ) -> list[PodEvent]:
        """Take a source's new or changed `pods` and withdraw its pods `gone`: the policy places
        them, and every served UID it says changed is settled, in its order."""
        touched = self.policy.place(
            sink.name, pods, gone, configured=sink.configures_static_pods, runtime=sink.runtime
        )
        events: list[PodEvent] = []
        for uid in touched:
            events += self._settle(uid, finish_notices=finish_notices)
        return events

    def _relay(
        self,
        sink: SourceSink,
        kind: EventType,
        pod: PodVersion,
        listed: PodVersion | None,
        frame: bytes | None = None,
    ) -> list[PodEvent]:
        """The kubelet's event as its contracts send it, on the change it makes to the served
        pods (or on a notice, when it makes none). Its own word on a finished pod replaces
        ours, so no notice of ours is added. Its frame goes with it only where the pod told is
        the kubelet's as sent (not one merged with an overlay's status, or served under another
        UID)."""
        uid = sink.served_as.get(pod.uid, pod.uid)
        told = Told(kind, None if listed is pod else pod)
        as_sent = Told(kind, told.pod, frame) if frame is not None else told
        if listed is not None:
            events = self._change(sink, [listed], [], finish_notices=False)
        else:
            gone = [pod.uid] if pod.uid in sink.served_as else []
            events = self._change(sink, [], gone, finish_notices=False)
        for i in range(len(events) - 1, -1, -1):
            if events[i].pod.uid == uid:
                sent = as_sent if told.pod is not None or events[i].pod is pod else told
                events[i] = dataclasses.replace(events[i], told=sent)
                return events
        served = self._served.get(uid)
        if served is None and listed is not None:
            return events  # not served (another source holds the uid): nothing to pass on
        shown = served.pod if served else pod
        return [*events, self._notice(shown, as_sent if told.pod is not None or shown is pod else told)]

    def _overlay(self, sink: OverlaySink, uid: str, status: dict[str, Any]) -> list[PodEvent]:
        old = sink.statuses.get(uid)
        if old is not None and old.status == status:
            return []
        sink.statuses[uid] = Overlay(sink.name, status)
        return self._settle(uid)

    def _settle(self, uid: str, *, finish_notices: bool = True) -> list[PodEvent]:
        """Merge what every source says about `uid` and serve the result: the one place a
        served pod changes, so events and indexes follow from here. What the kubelet's
        contracts are told of it follows the kubelet's rule for finished pods (`_as_kubelet`),
        unless the change is the kubelet's own word, relayed (`finish_notices=False`)."""
        events = self._settled(uid)
        return self._as_kubelet(events) if finish_notices and events else events

    def _as_kubelet(self, events: list[PodEvent]) -> list[PodEvent]:
        """The kubelet's watch follows a pod until it finishes (phase Succeeded or Failed): then
        it sends DELETED, and nothing more of it, while its List keeps the pod until its source
        lets it go (pkg/kubelet/status: TerminatePod). So, on its contracts: a pod that finishes
        is its change then a DELETED notice; a change of a finished pod is not sent, nor is its
        removal; one that runs again (a fixture edited back) is ADDED again. A pod refused at
        admission finished without running, and is not terminated then: it is followed as a
        running pod is, until it is removed (seen beside a registered kubelet)."""
        told: list[PodEvent] = []
        for event in events:
            if event.type is EventType.DELETED:
                told.append(dataclasses.replace(event, told=_UNTOLD) if event.pod.terminated else event)
                continue
            if event.previous is not None and event.previous.terminated:
                # Back to running (or refused) it is ADDED again: an update to a client that
                # still holds it from its snapshot, as the kubelet's ADDED again is.
                told.append(dataclasses.replace(event, told=_UNTOLD if event.pod.terminated else _TOLD_ADDED))
                continue
            told.append(event)
            if event.pod.terminated:
                told.append(self._notice(event.pod, _TOLD_DELETED))
        return told

    def _settled(self, uid: str) -> list[PodEvent]:
        overlays = [sink.statuses[uid] for sink in self._overlays.values() if uid in sink.statuses]
        served = self.policy.settle(uid, overlays)
        self._say_refused(uid, served)
        old = self._served.get(uid)
        if served is None:
            if old is None:
                return []
            del self._served[uid]
            self._reindex(uid, old.pod, None)
            return [self._event(EventType.DELETED, old.pod, None)]
        if old is not None and old.pod.framed == served.pod.framed:
            # Same bytes: keep the old object, and the encodings memoised on it.
            self._served[uid] = Served(old.pod, served.owner, served.refused)
            return []
        self._served[uid] = served
        self._reindex(uid, old.pod if old else None, served.pod)
        if old is None:
            return [self._event(EventType.ADDED, served.pod, None)]
        if old.owner is not None and served.owner is not None and old.owner != served.owner:
            pod = served.pod
            log.info(
                "pod %s/%s (uid %s) now served from source %s", pod.namespace, pod.name, uid, served.owner
            )
            return [
                self._event(EventType.DELETED, old.pod, None),
                self._event(EventType.ADDED, served.pod, None),
            ]
        return [self._event(EventType.MODIFIED, served.pod, old.pod)]

    def _say_refused(self, uid: str, served: Served | None) -> None:
        """Say once per lasting conflict that a source's pod was refused its UID."""
        now = {(uid, c.source, c.pod.uid) for c in served.refused} if served else set()
        for contribution in served.refused if served else ():
            said = (uid, contribution.source, contribution.pod.uid)
            if said not in self._said_refused:
                log.warning(
                    "pod %s/%s (uid %s) from source %s refused: source %s already serves that uid",
                    contribution.pod.namespace,
                    contribution.pod.name,
                    uid,
                    contribution.source,
                    served.owner if served else None,
                )
        self._said_refused = {s for s in self._said_refused if s[0] != uid} | now

    def _reindex(self, uid: str, old: PodVersion | None, new: PodVersion | None) -> None:
        for index in self._indexes.values():
            index.update(uid, old, new)

    def _event(self, kind: EventType, pod: PodVersion, previous: PodVersion | None) -> PodEvent:
        self.revision += 1
        self._snapshot = None
        if kind is not EventType.DELETED:
            pod.revision = self.revision  # a deleted version keeps the revision it was served at
        return PodEvent(kind, pod, self.revision, previous, time.monotonic())

    def _notice(self, pod: PodVersion, told: Told) -> PodEvent:
        """An event only the kubelet's contracts send. It changes neither the served pods nor
        the snapshot, so it has no revision of its own: it carries the current one."""
        self._notices += 1
        return PodEvent(
            EventType.MODIFIED, pod, self.revision, pod, time.monotonic(), told=told, notice=self._notices
        )

    def _publish(self, events: list[PodEvent]) -> None:
        if events:
            # The bytes each event keeps alive bound the ring; a notice changes nothing to
            # resume from, so the ring does not keep it.
            self._remember([(event, event.held()) for event in events if not event.notice])
            self.hub.publish(events)

    def _remember(self, held: list[tuple[PodEvent, int]]) -> None:
        ring = self._ring
        for event, size in held:
            ring.append((event, size))
            self._ring_held += size
        while ring and (len(ring) > self.ring_size or self._ring_held > self.ring_bytes):
            self._ring_held -= ring.popleft()[1]
