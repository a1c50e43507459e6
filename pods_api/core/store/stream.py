"""The one watch stream every surface serves (gRPC on both contracts, SSE, and any later one).

A watch opens from a snapshot or from a revision to resume after. It yields its start (the
snapshot's pods in the view as ADDED, then the start marker; or, resuming, the events since that
revision, then a "resumed" marker), then the live events as the view shows them, and ends by
raising why it ended: `ServerStopping` (core/store/watch.py). What a view shows of an
event is decided here, once, for every surface (`change`):

- a MODIFIED that changes nothing the view's mask selects is not sent;
- with a selector, a pod that starts matching is ADDED, one that stops matching is DELETED
  (carrying the last version that matched), and events of pods outside the view are not sent:
  the API server's watch semantics, so a client applying the events holds exactly the view.

A surface brings only an `Encoding` (event → frame bytes) and maps the ending exception to its
status. Each frame is made once per (revision, encoding, view) for every watcher, in one bounded
frame cache; a snapshot's start frames once per (snapshot, encoding, view), in the snapshot.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from pods_api.core.query.view import View
from pods_api.core.store.cache import PodCache
from pods_api.core.store.lru import LRU
from pods_api.core.store.snapshot import Snapshot
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import EventType, PodEvent, Watcher

# Frames kept for reuse across watchers, per (event, encoding, view): enough for a burst of
# events to every watcher of a busy node in the few encodings and views in use, bounded so a
# client cycling through masks cannot grow it, and a quiet server holds little.
FRAMES_KEPT = 2048
# And at most this many bytes of them. A frame is needed only until every watcher has sent it,
# and a watcher gets each event as published only while it is at most --watch-buffer events
# behind (100 by default; past that, one event per pod): 100 events of 50 KB pods in an
# unmasked gRPC and SSE frame each fit. By count alone, 1,768 frames of 24 KB pods held 29 MiB
# at the soak's plateau (RELIABILITY.md); a frame evicted early is only made again.
FRAME_BYTES = 16 * 1024 * 1024


# (revision, notice, encoding, view): a notice carries the revision of the change before it and
# a number of its own (core/store/watch.py PodEvent.notice).
_FrameKey = tuple[int, int, str, str]


@dataclass(frozen=True, slots=True)
class Encoding:
    """How one surface writes a watch. `name` is its part of every frame-cache key, so each
    encoding needs its own. A third surface (the Kubernetes watch's JSON lines) is one more of
    these and nothing else."""

    name: str
    # One event: its type, the pod (encode it with `pod.masked(view)`), the view, and its
    # revision (None for a snapshot's ADDED: a snapshot cannot be resumed half-way).
    event: Callable[[EventType, PodVersion, View, int | None], bytes]
    # The start marker (INITIAL_SYNC_COMPLETE): the revision the client holds once it arrives,
    # and whether the start was a replay after a resume rather than a snapshot.
    synced: Callable[[int, bool], bytes]
    # Hand the whole start to the surface as one chunk (one write for SSE) rather than one
    # message per frame (gRPC, whose every message is a frame).
    join_start: bool = False
    # The kubelet's contracts: an event is sent as its `told` says (core/store/watch.py `Told`:
    # the kubelet's own types and bytes where a source relays its watch, a finished pod's
    # DELETED), and notices are sent too. The others send the change of the served pods.
    kubelet: bool = False
    # Its frames are v1alpha1 WatchPodsEvents, the kubelet's own wire: a relayed event's
    # upstream frame (`Told.frame`) is its frame of that event for a whole view, sent as it came.
    upstream: bool = False


def change(event: PodEvent, view: View, kubelet: bool = False) -> tuple[EventType, PodVersion] | None:
    """What a watcher of `view` is told of a cache event: its type and pod, or None."""
    told = event.told
    if told is not None and kubelet:
        # As the kubelet's watch sends it, whatever the served pods' diff says; its contracts
        # take no selector, so only the encoding's mask applies. A coalesced MODIFIED that
        # brings its client back to what it holds is not sent.
        if told.type is None:
            return None
        pod = told.pod or event.pod
        if (
            told.type is EventType.MODIFIED
            and event.coalesced
            and event.previous is not None
            and _unchanged(event.previous, pod, view, True)
        ):
            return None
        return told.type, pod
    if event.notice:
        return None
    kind, pod, previous = event.type, event.pod, event.previous
    if kind is EventType.DELETED and previous is not None:
        # Coalesced (core/store/watch.py): the client holds `previous`; shown if the view did.
        if not view.shows(previous):
            return None
        return kind, (pod if view.shows(pod) else previous)
    if kind is EventType.MODIFIED and previous is not None and view.selector is not None:
        was, now = view.shows(previous), view.shows(pod)
        if not now:
            return (EventType.DELETED, previous) if was else None
        if not was:
            return EventType.ADDED, pod
    elif not view.shows(pod):
        return None
    if (
        kind is EventType.MODIFIED
        and previous is not None
        and _unchanged(previous, pod, view, event.coalesced)
    ):
        return None
    return kind, pod


def _unchanged(previous: PodVersion, pod: PodVersion, view: View, coalesced: bool) -> bool:
    """Whether the view shows no change. Decided on the masked protobuf, for every surface: it
    is the stricter of the two forms (the JSON is a function of the message, and a masked JSON
    is the masked message decoded, so equal protobuf means equal JSON but not the other way:
    protobuf tells a field set to its zero value from one not set, Go's JSON does not). So a
    gRPC client never misses a change its bytes would show, and an SSE client at worst gets a
    MODIFIED whose JSON looks the same, never a lost one. Without a mask the cache publishes
    only versions whose protobuf changed, so there is nothing to compare, except for a coalesced
    event: its pod may have changed back to the version the client holds."""
    if view.mask is None and not coalesced:
        return False
    return previous.masked(view).framed == pod.masked(view).framed


class WatchStreams:
    """Opens watches on the cache for every surface, and holds what they share: the frame
    cache, and where the delay of each delivered event is reported."""

    def __init__(
        self,
        cache: PodCache,
        on_delivery: Callable[[float], None] = lambda seconds: None,
        *,
        frames_kept: int = FRAMES_KEPT,
        frame_bytes: int = FRAME_BYTES,
    ) -> None:
        self._cache = cache
        # Told, per delivered live event, how long after the cache published it the stream
        # took it; the server points it at the fan-out delay histogram.
        self._on_delivery = on_delivery
        self._frames: LRU[_FrameKey, bytes | None] = LRU(frames_kept, _frame_size, frame_bytes)

    @property
    def frames_held(self) -> tuple[int, int]:
        """The frame cache's frames and their bytes."""
        return len(self._frames), self._frames.weight

    def open(self, view: View, since: int | None = None) -> Watch:
        """A watch from a snapshot, or resuming after revision `since` (from a snapshot again
        when the cache no longer holds every event since then). Raises TooManyWatchers at the
        watcher limit and ServerStopping once the server stops."""
        if since is None:
            snapshot, watcher = self._cache.watch()
            return Watch(self, view, watcher, snapshot, [], snapshot.revision)
        resumed, replay, watcher = self._cache.watch_from(since)
        if resumed is not None:
            return Watch(self, view, watcher, resumed, [], resumed.revision)
        return Watch(self, view, watcher, None, replay, self._cache.revision)

    def frame(self, event: PodEvent, encoding: Encoding, view: View) -> bytes | None:
        """The frame for a published event, made once per (event, encoding, view) for every
        watcher; None when the view shows nothing of it."""

        def make() -> bytes | None:
            shown = change(event, view, encoding.kubelet)
            return None if shown is None else encoding.event(shown[0], shown[1], view, event.revision)

        told = event.told
        if told is not None and told.frame is not None and encoding.upstream and view.mask is None:
            return told.frame  # the kubelet's own bytes of what its contracts are told
        if event.coalesced:
            return make()  # made for one watcher: what it replaces is what that watcher holds
        return self._frames.get((event.revision, event.notice, encoding.name, view.key), make)

    def _delivered(self, event: PodEvent) -> None:
        self._on_delivery(time.monotonic() - event.published)


def _frame_size(frame: bytes | None) -> int:
    return 0 if frame is None else len(frame)


class Watch:
    """One open watch of a view. Close it (or use it as a context manager) when done: it holds a
    place among the hub's watchers until then."""

    def __init__(
        self,
        streams: WatchStreams,
        view: View,
        watcher: Watcher,
        snapshot: Snapshot | None,
        replay: list[PodEvent],
        revision: int,
    ) -> None:
        self.view = view
        self.watcher = watcher
        self.snapshot = snapshot  # None when resuming with a replay
        self.replay = replay
        self.revision = revision  # what the client holds once the start is through
        self._streams = streams

    async def frames(self, encoding: Encoding) -> AsyncIterator[bytes]:
        """The start, then one frame per live event the view shows. Ends by raising
        ServerStopping (WatchEnded); never returns."""
        start = self._take_start(encoding)
        for chunk in start:
            yield chunk
        del start, chunk
        streams, view, watcher = self._streams, self.view, self.watcher
        while True:
            event = await watcher.get()
            frame = streams.frame(event, encoding, view)
            if frame is not None:
                streams._delivered(event)
                yield frame

    async def batches(self, encoding: Encoding, most: int, size: int) -> AsyncIterator[list[bytes]]:
        """The frames of `frames`, in lists: each of the frames that are ready when the
        previous list has been taken, at most `most` of them or `size` bytes (a larger frame
        goes alone). Never empty. Ends as `frames` does, once every frame ready is in a list."""
        start = self._take_start(encoding)
        batch = _Batch(most, size)
        for chunk in start:
            full = batch.add(chunk)
            if full is not None:
                yield full
        del start
        streams, view, watcher = self._streams, self.view, self.watcher
        while True:
            event = watcher.take()
            if event is None:
                if batch.frames:
                    yield batch.take()
                event = await watcher.get()
            frame = streams.frame(event, encoding, view)
            if frame is None:
                continue
            streams._delivered(event)
            full = batch.add(frame)
            if full is not None:
                yield full

    def _take_start(self, encoding: Encoding) -> Start:
        """The start, made; then the snapshot (or the replay) is let go, so a long-lived watch
        does not pin the pods and start frames of the revision it began at once the cache moves
        on."""
        start = self._start(encoding)
        if encoding.kubelet and self.snapshot is not None:
            # Told as the kubelet tells (watch.py): a watcher behind is brought to what a client
            # that kept up holds, from what this one holds.
            self.watcher.hold(self.view.select(self.snapshot.pods))
        self.snapshot, self.replay = None, []
        return start

    def _start(self, encoding: Encoding) -> Start:
        snapshot, view = self.snapshot, self.view
        if snapshot is not None:
            key = ("watch-start", encoding.name, view.key)
            return snapshot.memo(key, lambda: _joined(encoding, _snapshot_frames(snapshot, encoding, view)))
        replayed = (self._streams.frame(e, encoding, view) for e in self.replay)
        frames = [*(f for f in replayed if f is not None), encoding.synced(self.revision, True)]
        return _joined(encoding, frames)

    def close(self) -> None:
        self.watcher.close()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Batch:
    """The frames gathered for the next list of `Watch.batches`."""

    def __init__(self, most: int, size: int) -> None:
        self.most, self.size = most, size
        self.frames: list[bytes] = []
        self.held = 0

    def add(self, frame: bytes) -> list[bytes] | None:
        """Gathers `frame`; returns the frames before it if it would make them too many or too
        large (it then starts the next list)."""
        full = None
        if self.frames and (len(self.frames) >= self.most or self.held + len(frame) > self.size):
            full = self.take()
        self.frames.append(frame)
        self.held += len(frame)
        return full

    def take(self) -> list[bytes]:
        frames, self.frames, self.held = self.frames, [], 0
        return frames


def _snapshot_frames(snapshot: Snapshot, encoding: Encoding, view: View) -> list[bytes]:
    frames = [encoding.event(EventType.ADDED, pod, view, None) for pod in view.select(snapshot.pods)]
    frames.append(encoding.synced(snapshot.revision, False))
    return frames


class Start(list[bytes]):
    """A watch's start as it is sent; read-only. A list, which (unlike a tuple) can be referenced
    weakly: a snapshot too large to keep it still shares it with every watch that starts while
    one is sending it."""


def _joined(encoding: Encoding, frames: list[bytes]) -> Start:
    if not encoding.join_start:
        return Start(frames)
    # The start marker goes as a chunk of its own: what holds the last chunk a stream sent until
    # the next (the surface's loop, sse-starlette's) then holds the marker, not every pod of the
    # start until the view's next event (0.34 MiB per SSE watch of 50 pods, measured).
    *pods, marker = frames
    return Start((b"".join(pods), marker) if marker else (b"".join(frames),))
