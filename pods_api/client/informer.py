"""`Informer`: a local copy of a Pods API server's pods, kept current by list+watch, with
reconnects that never replay what did not change.

Local state is built only from what the server sends. Each (re)connection opens a watch and
takes a complete snapshot (the watch's ADDED events up to its INITIAL_SYNC_COMPLETE, which every
released kubelet and pods-api send); the snapshot is then reconciled against local state
by comparing pod bytes, so handlers see exactly the pods that were added, changed or removed
while the stream was down, and nothing for pods that did not change. Pods the snapshot does
not mention are pruned then (DELETED), and only then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType, TracebackType

from pods_api.client.client import Client, EventType, WatchEvent
from pods_api.client.exceptions import (
    InvalidArgument,
    NotReady,
    PermissionDenied,
    PodsAPIError,
    RateLimited,
    Unreachable,
)
from pods_api.client.pod import Pod
from pods_api.core.api.codec import CodecError

log = logging.getLogger(__name__)


class State(Enum):
    """Where the informer stands with its server now. `synced` says whether it ever synced."""

    DISCONNECTED = "disconnected"  # not connected yet, or the socket does not answer
    NOT_READY = "not ready"  # the server answered FAILED_PRECONDITION: its sources have not synced
    RATE_LIMITED = "rate limited"  # RESOURCE_EXHAUSTED: too many watches, or we fell behind
    DENIED = "denied"  # the socket does not admit this user
    READY = "ready"  # synced, and watching


@dataclass(frozen=True, slots=True)
class InformerEvent:
    """A change to the informer's local state.

    ADDED/MODIFIED/DELETED carry the pod (for DELETED, its last state as this informer held
    it: the server's DELETED names only the pod); MODIFIED also the version it replaced.
    INITIAL_SYNC_COMPLETE (no pod) follows each reconciled snapshot: after the first sync, and
    after each reconnect, once local state matches the server again.
    """

    type: EventType
    pod: Pod | None
    previous: Pod | None = None


@dataclass(frozen=True)
class Backoff:
    """Bounded, jittered exponential backoff between reconnects.

    The defaults suit a local socket: a retry costs one connect(), so the bound is short and a
    restarted server is picked up within seconds; jitter keeps many informers on one node from
    retrying in step.
    """

    initial: float = 0.1
    maximum: float = 5.0
    factor: float = 2.0
    jitter: float = 0.2  # each delay is scaled by a random factor in [1 - jitter, 1 + jitter]

    def delays(self) -> Iterator[float]:
        delay = self.initial
        while True:
            yield delay * random.uniform(1 - self.jitter, 1 + self.jitter)
            delay = min(delay * self.factor, self.maximum)


Handler = Callable[[InformerEvent], None]
StateHandler = Callable[[State, PodsAPIError | None], None]


class _StreamEnded(Unreachable):
    pass


class Informer:
    """List+watch one Pods API server into local state; reconnect and reconcile forever.

        async with Client(path) as client, Informer(client) as informer:
            async for event in informer:
                ...

    or `informer.add_handler(callback)` and `await informer.run()`. Handlers run on the event
    loop, in order, and must not block. `pods` is the local state (UID -> Pod), `synced` is true
    once the first snapshot is in, `state` says how the connection stands now.
    """

    def __init__(
        self,
        client: Client,
        *,
        fields: str | Sequence[str] | None = None,
        backoff: Backoff | None = None,
        on_unknown: Callable[[int], None] | None = None,
    ) -> None:
        self.client = client
        self.fields = fields
        self.backoff = backoff or Backoff()
        # Told the number of each watch frame of a type EventType does not name (skipped).
        self.on_unknown = on_unknown
        self.synced = False
        self.state = State.DISCONNECTED
        self.last_error: PodsAPIError | None = None
        self._pods: dict[str, Pod] = {}
        self._handlers: list[Handler] = []
        self._state_handlers: list[StateHandler] = []
        self._queues: list[asyncio.Queue[InformerEvent | BaseException]] = []
        self._synced_event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- what callers use ----------------------------------------------------------------------

    @property
    def pods(self) -> Mapping[str, Pod]:
        """Local state, UID -> Pod: a read-only view that follows changes."""
        return MappingProxyType(self._pods)

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def on_state(self, handler: StateHandler) -> None:
        """Told (state, the error that caused it or None) whenever `state` changes, or the
        error does (a missing socket that becomes a refused one); not for each retry."""
        self._state_handlers.append(handler)

    async def wait_synced(self) -> None:
        await self._synced_event.wait()

    async def run(self) -> None:
        """Connect, sync and follow changes, reconnecting with backoff; runs until cancelled.
        Raises InvalidArgument (a bad field mask): retrying would not help."""
        try:
            await self._run()
        except BaseException as exc:
            for queue in self._queues:
                queue.put_nowait(exc if isinstance(exc, Exception) else asyncio.CancelledError())
            raise

    async def __aenter__(self) -> Informer:
        self._task = asyncio.get_running_loop().create_task(self.run(), name="pods-api informer")
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def __aiter__(self) -> AsyncIterator[InformerEvent]:
        """Every event from now on (the first sync's ADDED events, if it has not happened yet)."""
        queue: asyncio.Queue[InformerEvent | BaseException] = asyncio.Queue()
        self._queues.append(queue)
        return self._iterate(queue)

    async def _iterate(
        self, queue: asyncio.Queue[InformerEvent | BaseException]
    ) -> AsyncIterator[InformerEvent]:
        try:
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    if isinstance(item, asyncio.CancelledError):
                        return
                    raise item
                yield item
        finally:
            self._queues.remove(queue)

    # -- the loop ------------------------------------------------------------------------------

    async def _run(self) -> None:
        delays = self.backoff.delays()
        while True:
            error: PodsAPIError
            try:
                await self._session()
                error = _StreamEnded(self.client.socket, "the server ended the watch")
            except InvalidArgument:
                raise
            except PodsAPIError as exc:
                error = exc
            if self.state is State.READY:
                delays = self.backoff.delays()  # it worked: the next outage starts from the start
            self._set_state(state_of(error), error)
            await asyncio.sleep(next(delays))

    async def _session(self) -> None:
        """One watch: its events up to INITIAL_SYNC_COMPLETE (a complete snapshot), reconciled,
        then its live events, each applied in the loop step that read it: no task or queue
        between the stream and the handlers, which are plain calls. Returns when the server ends
        the watch; raises its error. An upstream that never sends INITIAL_SYNC_COMPLETE (another
        version of the API) leaves the informer unsynced, never synced on a guess."""
        events = self.client.watch(self.fields, on_unknown=self.on_unknown)
        try:
            snapshot: dict[str, Pod] = {}
            async for event in events:
                if event.type is EventType.INITIAL_SYNC_COMPLETE:
                    break
                _change(snapshot, event)
            else:
                return  # ended before its snapshot was complete
            self._reconcile(snapshot)
            async for event in events:
                self._apply(event)
        finally:
            await events.aclose()  # cancels the call, whichever way the session ends

    # -- local state -----------------------------------------------------------------------------

    def _reconcile(self, snapshot: dict[str, Pod]) -> None:
        """Local state becomes the snapshot; only real differences become events."""
        events: list[InformerEvent] = []
        for uid in sorted(self._pods.keys() - snapshot.keys()):
            events.append(InformerEvent(EventType.DELETED, self._pods[uid]))
        for uid, pod in snapshot.items():
            old = self._pods.get(uid)
            if old is None:
                events.append(InformerEvent(EventType.ADDED, pod))
            elif old.raw != pod.raw:
                events.append(InformerEvent(EventType.MODIFIED, pod, old))
        self._pods = snapshot
        events.append(InformerEvent(EventType.INITIAL_SYNC_COMPLETE, None))
        self.synced = True
        self._synced_event.set()
        self._set_state(State.READY, None)
        for event in events:
            self._dispatch(event)

    def _apply(self, event: WatchEvent) -> None:
        if event.type is EventType.INITIAL_SYNC_COMPLETE:
            return  # one per watch, and this watch's came with its snapshot
        assert event.pod is not None
        uid = _uid(event.pod)
        if uid is None:
            return
        old = self._pods.get(uid)
        if event.type is EventType.DELETED:
            if old is not None:
                # The server's DELETED holds only the pod's identity (the kubelet's rule): the
                # handlers get the last state this informer knew instead.
                del self._pods[uid]
                self._dispatch(InformerEvent(EventType.DELETED, old))
            return
        if old is not None and old.raw == event.pod.raw:
            return  # nothing changed: handlers hear only real changes
        self._pods[uid] = event.pod
        kind = EventType.ADDED if old is None else EventType.MODIFIED
        self._dispatch(InformerEvent(kind, event.pod, old))

    def _dispatch(self, event: InformerEvent) -> None:
        for handler in self._handlers:
            try:
                handler(event)
            except Exception:
                log.exception("informer handler %r failed on %s", handler, event.type.name)
        for queue in self._queues:
            queue.put_nowait(event)

    def _set_state(self, state: State, error: PodsAPIError | None) -> None:
        same = state is self.state and _message(error) == _message(self.last_error)
        self.state, self.last_error = state, error
        if same:
            return  # a retry that failed as the last one did: nothing new to tell
        for handler in self._state_handlers:
            try:
                handler(state, error)
            except Exception:
                log.exception("informer state handler %r failed", handler)


def _change(snapshot: dict[str, Pod], event: WatchEvent) -> None:
    assert event.pod is not None
    uid = _uid(event.pod)
    if uid is None:
        pass
    elif event.type is EventType.DELETED:
        snapshot.pop(uid, None)
    else:
        snapshot[uid] = event.pod


def _uid(pod: Pod) -> str | None:
    """The pod's UID, or None (logged) for bytes that are not a pod: one bad pod from a server
    must not stop the informer."""
    try:
        return pod.uid
    except CodecError as exc:
        log.warning("skipping a pod that does not decode (%d bytes): %s", len(pod.raw), exc)
        return None


def _message(error: PodsAPIError | None) -> str | None:
    return None if error is None else error.message


def state_of(error: PodsAPIError) -> State:
    """Where a client stands with its server after `error` ended its watch or its attempt."""
    if isinstance(error, NotReady):
        return State.NOT_READY
    if isinstance(error, RateLimited):
        return State.RATE_LIMITED
    if isinstance(error, PermissionDenied):
        return State.DENIED
    return State.DISCONNECTED
