"""The pod cache: pods by UID, each owned by the source that produced it.

Sources hand over snapshots (`replace`) or deltas (`upsert`, `delete`); the cache computes
ADDED/MODIFIED/DELETED by comparing encoded versions, stamps each change with a revision,
keeps recent events in a ring for resumable watches, and publishes them to the watch hub.
Readiness: the cache is ready once every registered gate (each source, plus any hold such as
--ready-delay) has opened. Everything runs on one event loop; no method awaits.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pods_api.core.lru import LRU
from pods_api.core.pod import PodVersion
from pods_api.core.watch import EventType, PodEvent, Watcher, WatchHub

log = logging.getLogger(__name__)

T = TypeVar("T")

# Events kept for resuming an HTTP watch from a revision: a few minutes of churn on a busy node
# (a node runs at most a few hundred pods); older resumes get a fresh snapshot instead.
RING_SIZE = 4096
# What every surface says while the cache is not ready (gRPC FAILED_PRECONDITION, HTTP 503).
NOT_SYNCED = "pod sources have not finished their initial sync"
# Assembled responses kept per snapshot (one per distinct mask and surface): a handful in
# practice, bounded against a client that sends a new mask each time.
MEMO_PER_SNAPSHOT = 32


@dataclass(eq=False, slots=True)
class Snapshot:
    """The pods at one revision, in UID order; immutable. Surfaces memoise what they assemble
    from it (a whole ListPodsResponse, a JSON PodList) so that every request until the next
    change gets the same bytes object."""

    revision: int
    pods: tuple[PodVersion, ...]
    _memo: LRU[Any, Any] = field(default_factory=lambda: LRU(MEMO_PER_SNAPSHOT))

    def memo(self, key: Any, make: Callable[[], T]) -> T:
        value: T = self._memo.get(key, make)
        return value


@dataclass(slots=True)
class _Entry:
    pod: PodVersion
    source: str


class Gate:
    """One condition of readiness: a source's first sync, or a deliberate hold."""

    def __init__(self, cache: PodCache, name: str) -> None:
        self._cache = cache
        self.name = name
        self.open = False

    def set_open(self) -> None:
        if not self.open:
            self.open = True
            self._cache._gate_changed()


class SourceSink(Gate):
    """What a source writes to. Its pods are its own: a UID another source holds is refused."""

    def __init__(self, cache: PodCache, name: str) -> None:
        super().__init__(cache, name)
        self.uids: set[str] = set()
        self.refused: dict[str, PodVersion] = {}  # pods whose UID another source holds

    def replace(self, pods: Iterable[PodVersion]) -> None:
        """This source's complete set of pods now: relist, poll and resync all come here."""
        self._cache._replace(self, list(pods))

    def upsert(self, pod: PodVersion) -> None:
        self._cache._upsert(self, pod)

    def delete(self, uid: str) -> None:
        self._cache._delete(self, uid)

    def mark_synced(self) -> None:
        """The source has delivered its first complete state."""
        self.set_open()


class PodCache:
    def __init__(self, hub: WatchHub, *, ring_size: int = RING_SIZE) -> None:
        self.hub = hub
        # Revisions start at the wall clock in milliseconds, so a revision a client kept from an
        # earlier run of the process is older than every revision of this one.
        self._first_revision = self.revision = time.time_ns() // 1_000_000
        self._entries: dict[str, _Entry] = {}
        self._ring: deque[PodEvent] = deque(maxlen=ring_size)
        self._gates: list[Gate] = []
        self._sinks: dict[str, SourceSink] = {}
        self._snapshot: Snapshot | None = None
        self._readiness_listeners: list[Callable[[bool], None]] = []

    # -- readiness ---------------------------------------------------------------------------

    def source(self, name: str) -> SourceSink:
        if any(g.name == name for g in self._gates):
            raise ValueError(f"a pod source named {name!r} is already registered")
        sink = self._sinks[name] = SourceSink(self, name)
        self._gates.append(sink)
        return sink

    def hold(self, name: str) -> Gate:
        gate = Gate(self, name)
        self._gates.append(gate)
        return gate

    @property
    def ready(self) -> bool:
        return bool(self._gates) and all(g.open for g in self._gates)

    @property
    def gates(self) -> tuple[Gate, ...]:
        return tuple(self._gates)

    def on_readiness(self, listener: Callable[[bool], None]) -> None:
        self._readiness_listeners.append(listener)

    def _gate_changed(self) -> None:
        ready = self.ready
        for listener in self._readiness_listeners:
            listener(ready)

    # -- reading -----------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        if self._snapshot is None:
            pods = tuple(self._entries[uid].pod for uid in sorted(self._entries))
            self._snapshot = Snapshot(self.revision, pods)
        return self._snapshot

    def get(self, uid: str) -> PodVersion | None:
        entry = self._entries.get(uid)
        return entry.pod if entry else None

    def __len__(self) -> int:
        return len(self._entries)

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
        if self._ring and revision < self._ring[0].revision - 1:
            return None
        return [e for e in self._ring if e.revision > revision]

    # -- writing -----------------------------------------------------------------------------

    def _replace(self, sink: SourceSink, pods: list[PodVersion]) -> None:
        wanted: dict[str, PodVersion] = {}
        refused: dict[str, PodVersion] = {}
        for pod in pods:
            (refused if self._held_elsewhere(sink, pod.uid) else wanted)[pod.uid] = pod
        self._refuse(sink, refused)
        # Deletions first: a static pod edited changes UID, and watchers should see the old pod
        # go before the new one comes, as the kubelet kills before it starts.
        events: list[PodEvent | None] = []
        for uid in sorted(sink.uids - wanted.keys()):
            events += self._remove(uid)
        events += [self._store(sink, pod) for pod in wanted.values()]
        self._publish(events)

    def _upsert(self, sink: SourceSink, pod: PodVersion) -> None:
        if self._held_elsewhere(sink, pod.uid):
            self._refuse(sink, {**sink.refused, pod.uid: pod})
        else:
            self._publish([self._store(sink, pod)])

    def _delete(self, sink: SourceSink, uid: str) -> None:
        sink.refused.pop(uid, None)
        if uid in sink.uids:
            self._publish(list(self._remove(uid)))

    def _held_elsewhere(self, sink: SourceSink, uid: str) -> bool:
        entry = self._entries.get(uid)
        return entry is not None and entry.source != sink.name

    def _refuse(self, sink: SourceSink, refused: dict[str, PodVersion]) -> None:
        """Keep what a source was refused, to serve it if the holder lets go; say so once."""
        for uid in refused.keys() - sink.refused.keys():
            pod = refused[uid]
            log.warning(
                "pod %s/%s (uid %s) from source %s refused: source %s already serves that uid",
                pod.namespace,
                pod.name,
                uid,
                sink.name,
                self._entries[uid].source,
            )
        sink.refused = refused

    def _store(self, sink: SourceSink, pod: PodVersion) -> PodEvent | None:
        entry = self._entries.get(pod.uid)
        if entry is not None and entry.pod.pb == pod.pb:
            return None
        self._entries[pod.uid] = _Entry(pod, sink.name)
        sink.uids.add(pod.uid)
        if entry is None:
            return self._event(EventType.ADDED, pod, None)
        return self._event(EventType.MODIFIED, pod, entry.pod)

    def _remove(self, uid: str) -> list[PodEvent | None]:
        """Remove a pod; if another source was refused the same UID, it takes the UID now."""
        entry = self._entries.pop(uid)
        self._sinks[entry.source].uids.discard(uid)
        events: list[PodEvent | None] = [self._event(EventType.DELETED, entry.pod, None)]
        for sink in self._sinks.values():
            waiting = sink.refused.pop(uid, None)
            if waiting is not None:
                log.info(
                    "pod %s/%s (uid %s) now served from source %s",
                    waiting.namespace,
                    waiting.name,
                    uid,
                    sink.name,
                )
                events.append(self._store(sink, waiting))
                break
        return events

    def _event(self, kind: EventType, pod: PodVersion, previous: PodVersion | None) -> PodEvent:
        self.revision += 1
        self._snapshot = None
        return PodEvent(kind, pod, self.revision, previous, time.monotonic())

    def _publish(self, events: list[PodEvent | None]) -> None:
        real = [e for e in events if e is not None]
        if real:
            self._ring.extend(real)
            self.hub.publish(real)
