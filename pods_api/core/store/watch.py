"""Watch fan-out: every watcher has a queue; publishing never waits for a client, and a watcher
is never cut off for being behind.

A watcher's queue holds up to `capacity` events exactly as published (one change touching many
pods, a relist, is always taken whole by a watcher under capacity). Past that, what arrives is
*coalesced* per pod: at most one pending event per UID, made from the first and the newest of
that pod's events since the watcher went over, so that applying it moves the client from the
version it holds to the current one:

- it held the pod and the pod still exists: MODIFIED with the newest version (also after the pod
  was deleted and added again under the same UID);
- it held the pod and the pod is gone: DELETED with the last version (a DELETED wins);
- it did not hold the pod and the pod exists: ADDED with the newest version;
- it did not hold the pod and the pod is gone again: nothing (a client never hears of a pod it
  never saw, not even as DELETED).

On the kubelet's contracts (v1alpha1.Pods, Pods) a client is told what the kubelet's watch would
tell it (`Told`), which is not the served diff: a finished pod is DELETED yet stays listed, and
its later changes and its removal are not sent. So a watcher there keeps what its client holds
(the versions it was sent, by UID, from its snapshot on: `hold`), and each coalesced event is made
from that and from the last thing a client that kept up was told of the pod in the meantime:
nothing told, no event; told the pod (ADDED or MODIFIED), MODIFIED if held (none if it holds
that very version), else ADDED; told DELETED, DELETED if held, else nothing. A watcher behind
then ends holding what one that kept up holds (tests/unit/store/test_kubelet_coalescing.py).

Coalesced events go out in the order of their newest version, and each carries that version's
revision. So a watcher that falls behind misses only intermediate versions of a pod (and pods
that came and went while it was behind); once it has taken its queue it holds exactly the current
state. Its memory is bounded by pods, not events: `capacity` events plus one entry per pod that
exists or existed when it went over.

The revision a coalesced event carries is where its client resumes from (an SSE id, a
resourceVersion), and the cache replays every event after it (`PodCache.events_since`). Every
pod the client was sent has no event after its newest but before that revision (the order), so a
replay never sends a version older than one the client was given, nor a pod it was told was
deleted unless the pod is added again. A pod still pending may have changed before that revision
too; the replay sends only its later events, which end at its newest version all the same: the
client's state is the current one once it has taken them, though an event's type may then not
match what it holds (a MODIFIED or DELETED of a pod it never got, an ADDED of one it holds).
Carrying the revision up to which the client had every event instead (as this did before) made a
resume replay the versions a coalesced event had already skipped: pods went back in time, and a
deleted pod came back.

What ends a watch is its client, never the server's own pace: the surfaces end a stream whose
client has taken nothing for the send timeout (a write that has not completed); the hub ends
every watch when the server stops.

On request (`--watch-overflow=drop`, `Overflow.DROP`) the hub does what the kubelet does
instead: a change that finds a watcher's queue full drops the watcher. Its client still gets
what was queued, then the ending `Dropped` (a closed Go channel still yields what it holds).
The dropped-events count is then one per dropped watcher, as the kubelet counts it, and
nothing else.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from pods_api.core.api import kubelet_texts
from pods_api.core.api.eventtype import EventType as EventType  # its home; published with the watch
from pods_api.core.api.statuserrors import Code, ResourceExhausted, StatusError
from pods_api.core.policy.throttled_log import ThrottledLog
from pods_api.core.store.version import PodVersion

log = logging.getLogger(__name__)


class Overflow(Enum):
    """What a watcher whose queue is full gets: the rest coalesced per pod (ours, the default),
    or dropped, as the kubelet does it."""

    COALESCE = "coalesce"
    DROP = "drop"


@dataclass(frozen=True, slots=True)
class Told:
    """What the kubelet's contracts (v1alpha1.Pods, Pods) send of an event, where that is not
    the event itself. Their watch is the kubelet's status notifications, not a diff of its
    List: it sends ADDED again for a pod whose status it forgot, and DELETED for a pod that
    finished while ListPods still lists it (pkg/kubelet/apis/pods, pkg/kubelet/status)."""

    type: EventType | None  # None: the kubelet's watch sends nothing for this change
    pod: PodVersion | None = None  # the pod they send, when not the event's (a relayed DELETED's)
    # The upstream's own v1alpha1 WatchPodsEvent bytes of a relayed event, when its type and pod
    # are what is told: a whole view on v1alpha1 sends them as they came (core/store/stream.py).
    frame: bytes | None = None


@dataclass(frozen=True, slots=True)
class PodEvent:
    type: EventType
    pod: PodVersion
    # The cache revision of the event; for a coalesced one, that of the newest event it was made
    # from (where its client resumes from: the replay after it is all newer than what it sent).
    revision: int
    # For MODIFIED: the version this one replaces. For a coalesced DELETED: the version the
    # client held (a view with a selector shows the DELETED only if that version was in it).
    previous: PodVersion | None
    published: float  # time.monotonic() when the cache published it (the newest, if coalesced)
    coalesced: bool = False  # made for one watcher from the events of one pod since it went over
    told: Told | None = None  # what the kubelet's contracts send instead (None: this event)
    # Non-zero: only the kubelet's contracts send it (its `told`), and this numbers it among the
    # notices (its revision is the change's before it, so the frame cache keys it by both). The
    # served pods did not change: the other surfaces, the ring and the snapshot never see it.
    notice: int = 0

    def held(self) -> int:
        """The bytes of pod encodings this event keeps alive (its pod and the one it replaces)."""
        size = self.pod.held
        if self.previous is not None:
            size += self.previous.held
        if self.told is not None and self.told.frame is not None:
            size += len(self.told.frame)
        return size


class WatchEnded(StatusError):
    """The watch is over for a reason the client must hear (the server stopping)."""


class TookNothing(WatchEnded):
    """A surface's send to the client has waited `seconds`: the client stopped reading, and is
    cut off as one that fell behind (its events from here on are lost to it)."""

    code = Code.RESOURCE_EXHAUSTED

    def __init__(self, seconds: float) -> None:
        super().__init__(f"took nothing for {seconds:g} s; fell behind: list and watch again")


class Dropped(WatchEnded):
    """`Overflow.DROP`: the watcher's queue was full; the kubelet's code and text."""

    code = Code.RESOURCE_EXHAUSTED

    def __init__(self) -> None:
        super().__init__(kubelet_texts.CHANNEL_CLOSED)


class ServerStopping(WatchEnded):
    code = Code.UNAVAILABLE

    def __init__(self) -> None:
        super().__init__("server is shutting down")


class TooManyWatchers(ResourceExhausted):
    """At the watcher limit (`--max-watchers`). Every surface says when to retry: a watch slot
    frees only when another watch ends, so retrying every second is pointless."""

    retry_after = 5.0


# What the kubelet's contracts tell a client of an event: a type and a pod, or None (nothing).
Said = tuple[EventType, PodVersion] | None


def said(event: PodEvent) -> Said:
    """What a client of the kubelet's contracts that keeps up is told of `event`."""
    told = event.told
    if told is None:
        return None if event.notice else (event.type, event.pod)
    return None if told.type is None else (told.type, told.pod or event.pod)


class _Pending:
    """One pod's coalesced events: what the client held before them, and the newest; and the
    last thing a client of the kubelet's contracts that kept up was told of it (None: nothing)."""

    __slots__ = ("had", "held", "newest", "said")

    def __init__(self, event: PodEvent) -> None:
        self.had = event.type is not _ADDED
        # The version the client holds: a DELETED's pod is the last version it saw.
        self.held = event.pod if event.type is _DELETED else event.previous
        self.newest = event
        self.said = said(event)

    def tell(self, event: PodEvent) -> None:
        told = said(event)
        if told is not None:  # told nothing: a client that kept up holds what it held
            self.said = told

    def event(self) -> PodEvent | None:
        """The one event that takes the client from `held` to `newest`, at the newest's revision;
        None when the pod came and went unseen."""
        newest = self.newest
        gone = newest.type is _DELETED
        if not self.had:
            if gone:
                return None
            kind, previous = _ADDED, None
        else:
            kind, previous = (_DELETED if gone else EventType.MODIFIED), self.held
        return PodEvent(kind, newest.pod, newest.revision, previous, newest.published, coalesced=True)


# Drops come in bursts (every slow watcher at the same change): one line per period says so.
_DROPPED_LOG = ThrottledLog(log)

# Read once: a member looked up on an IntEnum class costs 0.2 µs, and the coalescing reads them
# per watcher and event.
_ADDED, _DELETED = EventType.ADDED, EventType.DELETED


class Watcher:
    def __init__(self, hub: WatchHub, capacity: int) -> None:
        self._hub = hub
        self._capacity = capacity
        self._queue: deque[PodEvent] = deque()  # exactly as published
        # Past capacity: one entry per pod, in the order of its newest event (dicts keep insertion
        # order; an entry that changes again moves to the end). A pod's first event is kept as
        # it is; only a second one makes a _Pending (1 µs, per watcher and event).
        self._pending: dict[str, PodEvent | _Pending] = {}
        # On the kubelet's contracts: what its client holds, by UID (`hold`): the versions it was
        # sent, which the cache shares. None: the served diff.
        self._held: dict[str, PodVersion] | None = None
        self._wakeup = asyncio.Event()
        self._ended: WatchEnded | None = None

    def hold(self, pods: Iterable[PodVersion]) -> None:
        """Its client is on the kubelet's contracts and holds these pods (its start): from here
        on each event it takes is followed, and a coalesced one made from what it holds."""
        self._held = {pod.uid: pod for pod in pods}

    async def get(self) -> PodEvent:
        """The next event; raises WatchEnded when the watch is over."""
        while True:
            event = self.take()
            if event is not None:
                return event
            if self._ended is not None:
                raise self._ended
            self._wakeup.clear()
            await self._wakeup.wait()

    def take(self) -> PodEvent | None:
        """The next event if one is here now, else None (then `get` waits for one, or says
        why the watch is over).

        Past capacity, a pod that changed once while the watcher was behind has its published
        event as it is (whose frame every watcher then shares): it is the coalesced event."""
        held = self._held
        if self._queue:
            queued = self._queue.popleft()
            if held is not None:
                _follow(held, said(queued))
            return queued
        pending = self._pending
        while pending:
            entry = pending.pop(next(iter(pending)))
            if held is not None:
                event = _retold(held, entry)
            elif isinstance(entry, PodEvent):
                return entry
            else:
                event = entry.event()
            if event is not None:
                return event
        return None

    def close(self) -> None:
        """The stream that read this watcher has ended: its place among the open watches frees.
        What it had not taken was never sent: it counts as dropped."""
        self._lose()
        self._hub._watchers.discard(self)
        self._hub._open.discard(self)

    def _offer(self, events: list[PodEvent]) -> None:
        if self._ended is not None:
            return
        if not self._pending and len(self._queue) < self._capacity:
            self._queue.extend(events)
        else:
            self._coalesce(events)
        self._wakeup.set()

    def _offer_or_drop(self, events: list[PodEvent]) -> None:
        """`Overflow.DROP`: a change that finds the queue full drops the watcher, and is not
        queued; its client gets what is queued, then `Dropped`. Under capacity a change is
        queued whole, as in coalesce mode: the kubelet's events come one pod at a time while its
        watchers drain, ours one change at a time (a relist of 150 pods is one), and a watcher
        that keeps up must not be dropped for the size of one change."""
        if self._ended is not None:
            return
        if len(self._queue) < self._capacity:
            self._queue.extend(events)
        else:
            self._ended = Dropped()
            self._hub._watchers.discard(self)
            self._hub.dropped += 1  # one per watcher, as the kubelet counts it
            _DROPPED_LOG.warning(f"dropped a watcher whose queue of {self._capacity} events was full")
        self._wakeup.set()

    def _coalesce(self, events: list[PodEvent]) -> None:
        pending, merged = self._pending, 0
        for event in events:
            uid = event.pod.uid
            if event.notice:
                # It changes no served pod, so is never sent as itself; what it tells the
                # kubelet's contracts is kept with its pod's change, which came just before it.
                merged += 1
                noticed = pending.get(uid)
                if noticed is not None:
                    if isinstance(noticed, PodEvent):
                        noticed = pending[uid] = _Pending(noticed)
                    noticed.tell(event)
                continue
            entry = pending.pop(uid, None)
            if entry is None:
                pending[uid] = event  # alone so far
                continue
            if isinstance(entry, PodEvent):
                entry = _Pending(entry)
            merged += 1  # the pending one will never be sent
            entry.newest = event
            entry.tell(event)
            # Came and went unseen: neither is sent. (Unless its client on the kubelet's
            # contracts holds the UID: a finished pod of its snapshot, removed unsaid, back again.)
            if not entry.had and event.type is _DELETED and (self._held is None or uid not in self._held):
                merged += 1
            else:
                pending[uid] = entry  # to the end: the order of newest events
        if merged:
            self._hub.coalesced += merged
            self._hub.dropped += merged

    def _end(self, reason: WatchEnded) -> None:
        self._lose()
        self._ended = reason
        self._wakeup.set()
        # No more events; but its stream still holds a place until it ends (close).
        self._hub._watchers.discard(self)

    def _lose(self) -> None:
        """What this watcher had not taken will never be sent: count it as dropped."""
        lost = len(self._queue) + len(self._pending)
        if lost:
            self._queue.clear()
            self._pending.clear()
            if self._hub.overflow is Overflow.COALESCE:  # the kubelet counts dropped watchers only
                self._hub.dropped += lost

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def caught_up(self) -> bool:
        """No event waits for this watcher: it has taken every one published so far (a
        Kubernetes BOOKMARK may then carry the cache's current revision)."""
        return not self._queue and not self._pending


def _follow(held: dict[str, PodVersion], told: Said) -> None:
    """What a client of the kubelet's contracts holds once told `told`."""
    if told is None:
        return
    kind, pod = told
    if kind is _DELETED:
        held.pop(pod.uid, None)
    else:
        held[pod.uid] = pod


def _retold(held: dict[str, PodVersion], entry: PodEvent | _Pending) -> PodEvent | None:
    """The coalesced event for a client of the kubelet's contracts that holds `held`: it takes
    the client to what one that kept up holds (`entry.said`, the last thing that one was told);
    None when it already does. An event alone, told as published to a client that holds what
    that one held, is sent as it is (its frame shared)."""
    told = said(entry) if isinstance(entry, PodEvent) else entry.said
    if told is None:
        return None
    kind, pod = told
    was = held.get(pod.uid)
    if kind is _DELETED:
        if was is None:
            return None
    else:
        kind = _ADDED if was is None else EventType.MODIFIED
    _follow(held, (kind, pod))
    if isinstance(entry, PodEvent):
        if kind is told[0]:
            return entry
        newest = entry
    else:
        newest = entry.newest
    # `previous`: what the client held, so that a MODIFIED bringing it back to that is not sent
    # (core/store/stream.py `change`).
    return PodEvent(
        newest.type, newest.pod, newest.revision, was, newest.published, coalesced=True, told=Told(kind, pod)
    )


class WatchHub:
    def __init__(self, *, capacity: int, max_watchers: int, overflow: Overflow = Overflow.COALESCE) -> None:
        self.capacity = capacity
        self.max_watchers = max_watchers
        self.overflow = overflow
        # Events never sent to a watcher (merged into a newer one, or not yet taken when its
        # watch ended), and of those the ones merged; with Overflow.DROP, watchers dropped. Read
        # by the metrics at scrape time, so the fan-out counts with an addition, not a call.
        self.dropped = 0
        self.coalesced = 0
        self._watchers: set[Watcher] = set()  # getting events
        self._open: set[Watcher] = set()  # whose streams have not ended: what max_watchers caps
        self._stopped = False
        # Set by stop(): for streams that wait before they watch (an SSE client accepted before
        # the sources synced), so they too end with UNAVAILABLE.
        self.stopping = asyncio.Event()

    def __len__(self) -> int:
        """Open watches: those getting events, and those ended whose streams have not."""
        return len(self._open)

    def subscribe(self) -> Watcher:
        """A new watcher; raises TooManyWatchers, or ServerStopping once stop() was called."""
        if self._stopped:
            raise ServerStopping()
        if len(self._open) >= self.max_watchers:
            raise TooManyWatchers(f"{self.max_watchers} watches are open; the limit is reached")
        watcher = Watcher(self, self.capacity)
        self._watchers.add(watcher)
        self._open.add(watcher)
        return watcher

    def publish(self, events: list[PodEvent]) -> None:
        """Hand one change (all the events of one source update) to every watcher."""
        offer = Watcher._offer if self.overflow is Overflow.COALESCE else Watcher._offer_or_drop
        for watcher in list(self._watchers):
            offer(watcher, events)

    def stop(self) -> None:
        """End every watch, and refuse new ones: the server is going away."""
        self._stopped = True
        self.stopping.set()
        for watcher in list(self._watchers):
            watcher._end(ServerStopping())
