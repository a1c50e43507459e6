"""`--kubelet-socket PATH`: bridge the kubelet's own Pods API (v1.37+, or v1.36 with the gate on).

One upstream watch fans out to any number of local clients, and List and Get are answered from
our cache without spending the kubelet's 100 qps. Pods pass through byte-exact: the kubelet's
bytes are what an unmasked client gets; we decode them only to index, mask and render JSON.

Two things are kept, as the kubelet keeps them, and they are not the same:
- **what it lists**: each (re)connection's snapshot (the watch's ADDED events up to its
  INITIAL_SYNC_COMPLETE) is its ListPods, handed over whole; the cache diffs it into real
  changes only. Two changes to what it lists come with no event, since its watch carries its
  status manager's changes and its List the pod manager's pods: a finished pod let go (it stays
  listed after its DELETED, GetPod says so, until then), and an API pod's labels or annotations
  edited (the pod manager takes the edit, the status does not change). So the bridge lists again
  every RECHECK seconds while it holds finished pods, and every RESYNC seconds in any case, and
  amends what differs (`sink.amend`, which the kubelet's contracts are not told, as the
  kubelet's own watchers are not).
- **what its watch says**: each live event goes to the kubelet's contracts as the kubelet sent
  it (`sink.relay`): its type (an ADDED again for a pod whose status it forgot) and, for a
  DELETED, its bytes. Our other surfaces (SSE, the Kubernetes view, PodLookup) are told the
  change of the listed pods instead: docs/sources.md.

Ready once the upstream has synced: its watch's INITIAL_SYNC_COMPLETE, which every released
kubelet sends. Until then an upstream that is absent, refuses us or answers FAILED_PRECONDITION
keeps this source not ready, and is retried with the informer's backoff. Afterwards an outage
changes nothing our clients see: the last state stays served, and on reconnect only what really
changed meanwhile becomes events.

An event of a type the kubelet's released API never sends (UNSPECIFIED) or does not define is
an upstream that speaks another version of the API. It is not guessed at and no re-list papers
over it: it is skipped, counted (pods_api_upstream_unknown_events_total{source,type}), logged
at most once per interval, and told to clients as a warning (`pods-api check` prints it). An
upstream whose INITIAL_SYNC_COMPLETE is such a number never syncs, so this source stays not
ready, and says why.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pods_api.client import Client, EventType, PodsAPIError, State
from pods_api.client.client import WatchEvent
from pods_api.client.exceptions import InvalidArgument, NotFound, Unreachable
from pods_api.client.informer import Backoff, state_of
from pods_api.client.pod import Pod
from pods_api.core.api.codec import CodecError
from pods_api.core.policy.throttled_log import ThrottledLog
from pods_api.core.store.cache import SourceSink
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import EventType as CacheEvent  # the same numbers
from pods_api.sources import ErrorCounter, Source, SourceContext, connected_gauge
from pods_api.sources.staleness import ConnectedGauge, Staleness

log = logging.getLogger(__name__)

FLAG = "--kubelet-socket"
# Its resync: a synced watch is current however quiet it is; once the watch is down (or
# reconnected but not synced again), this long. A kubelet restart takes its Pods API away
# until the kubelet's own sources have synced, seconds on a healthy node, and the informer
# retries at least every 5 s; an outage longer than this may have missed changes.
STALE_AFTER = 30.0
# How often the bridge pings the kubelet while its watch is open: a quiet watch and a frozen
# kubelet (SIGSTOP, a hung process) look the same until a ping goes unanswered. Over 5 minutes,
# grpc-go's default keepalive MinTime, which a kubelet's server enforces with GOAWAY
# "too_many_pings" on a client that pings more often.
KEEPALIVE = 360.0
# How often the bridge lists again while the kubelet lists finished pods: it lets one go (its
# manifest removed) without an event. The kubelet's housekeeping runs every 2 s; a ListPods
# every 2 s is 0.5 of its 100 qps, and none while no finished pod is listed.
RECHECK = 2.0
# How often the bridge lists again in any case, for an API pod's labels or annotations edited:
# the kubelet's List shows the edit at once and its watch never does. A ListPods every 10 s is
# 0.1 of its 100 qps; an informer's resync, at the cost of an edit being served up to 10 s late.
RESYNC = 10.0
SOURCE_FLAGS: tuple[str, ...] = (f"{FLAG} PATH",)


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        FLAG,
        type=Path,
        metavar="PATH",
        help="bridge the kubelet's Pods API socket (v1.37+), e.g. /var/lib/kubelet/pods-api/pods-api.sock",
    )


def from_args(args: argparse.Namespace, context: SourceContext) -> list[Source]:
    socket: Path | None = args.kubelet_socket
    if socket is None:
        return []
    source = KubeletSocketSource(
        socket,
        on_error=context.on_error,
        on_unknown_event=context.on_unknown_event,
        on_connected=connected_gauge(context, source_name(socket)),
    )
    return [source]


def source_name(socket: Path) -> str:
    return f"kubelet:{socket}"


class KubeletSocketSource:
    def __init__(
        self,
        socket: Path,
        *,
        on_error: ErrorCounter | None = None,
        on_unknown_event: Callable[[str, int], None] | None = None,
        on_connected: ConnectedGauge | None = None,
        stale_after: float = STALE_AFTER,
        keepalive: float = KEEPALIVE,
        recheck: float = RECHECK,
        resync: float = RESYNC,
        backoff: Backoff | None = None,
    ) -> None:
        self.name = source_name(socket)
        self.socket = socket
        self._staleness = Staleness(self.name, stale_after=stale_after, on_connected=on_connected)
        self._staleness.upstream = str(socket)
        self._keepalive = keepalive
        self._recheck = recheck
        self._resync = resync
        # Live events relayed per pod: a List's answer is not applied to a pod an event reached
        # while the List was on its way, as the event is the newer.
        self._relayed: Counter[str] = Counter()
        self._backoff = backoff or Backoff()
        self._on_error = on_error
        self._on_unknown_event = on_unknown_event
        self._sink: SourceSink | None = None
        # Pods the kubelet lists though they finished (its DELETED came, or its snapshot had
        # them finished): the ones a recheck asks about.
        self._held: set[str] = set()
        # Pods the kubelet no longer lists whose DELETED has not come yet: their events go to
        # the kubelet's contracts alone.
        self._unlisted: set[str] = set()
        self._state: tuple[State, str] | None = None  # as last told: a retry that fails alike is not
        # Unknown event types seen, by number, for the life of the process: a mismatch is what
        # the deployment is, not something a reconnect clears.
        self._unknown: Counter[int] = Counter()
        self._unknown_log = ThrottledLog(log)

    async def run(self, sink: SourceSink) -> None:
        self._sink = sink
        with self._staleness.running(sink):
            async with Client(self.socket, keepalive=self._keepalive) as client:
                delays = self._backoff.delays()
                while True:
                    error: PodsAPIError
                    try:
                        await self._session(client)
                        error = Unreachable(str(self.socket), "the kubelet ended the watch")
                    except InvalidArgument:
                        raise
                    except PodsAPIError as exc:
                        error = exc
                    if self._state is not None and self._state[0] is State.READY:
                        delays = self._backoff.delays()  # it worked: the next outage starts afresh
                    self._on_state(state_of(error), error)
                    await asyncio.sleep(next(delays))

    async def _session(self, client: Client) -> None:
        """One watch: its snapshot handed over whole (so a reconnect drops what vanished
        meanwhile), then its live events relayed, each in the loop step that read it. Returns
        when the kubelet ends the watch; raises its error."""
        sink = self._sink
        assert sink is not None
        events = client.watch(on_unknown=self._on_unknown)
        rechecks: asyncio.Task[None] | None = None
        try:
            snapshot: dict[str, PodVersion] = {}
            async for event in events:
                if event.type is EventType.INITIAL_SYNC_COMPLETE:
                    break
                version = self._decode(event)
                if version is None:
                    continue
                if event.type is EventType.DELETED:
                    snapshot.pop(version.uid, None)
                else:
                    snapshot[version.uid] = version
            else:
                return  # ended before its snapshot was complete
            sink.replace(snapshot.values())
            self._held = {uid for uid, version in snapshot.items() if version.finished}
            self._unlisted = set()
            sink.mark_synced()
            self._on_state(State.READY, None)
            rechecks = asyncio.get_running_loop().create_task(self._rechecks(client))
            async for event in events:
                await self._relay(client, event)
        finally:
            if rechecks is not None:
                rechecks.cancel()
            await events.aclose()  # cancels the call, whichever way the session ends

    def _decode(self, event: WatchEvent) -> PodVersion | None:
        pod = event.pod
        assert pod is not None
        try:
            if event.type is EventType.DELETED:
                version = PodVersion.deleted(pod.raw, pod.message)
            else:
                version = PodVersion.from_bytes(pod.raw, pod.message)
        except CodecError as exc:
            self._reject(f"pod {_uid_of(pod)} does not decode: {exc}")
            return None
        if not version.uid:
            self._reject(f"pod {version.namespace}/{version.name} has no metadata.uid")
            return None
        return version

    async def _relay(self, client: Client, event: WatchEvent) -> None:
        sink = self._sink
        assert sink is not None
        if event.type is EventType.INITIAL_SYNC_COMPLETE:
            return  # one per watch, and this watch's came with its snapshot
        version = self._decode(event)
        if version is None:
            return
        uid, kind = version.uid, CacheEvent(event.type.value)
        self._relayed[uid] += 1
        if kind is CacheEvent.DELETED:
            # The pod finished, or the kubelet no longer has it: only its List tells which.
            listed = await self._listed(client, uid)
            self._unlisted.discard(uid)
        elif uid in self._unlisted:
            listed = None  # the last statuses of a pod it no longer lists, before its DELETED
        elif kind is CacheEvent.ADDED and sink.pod(uid) is not None:
            # Its status forgotten: the kubelet is tearing the pod down (its manifest removed),
            # or its status manager started again. Only its List tells which.
            listed = await self._listed(client, uid)
            if listed is None:
                self._unlisted.add(uid)
        else:
            listed = version
        sink.relay(kind, version, listed=listed, frame=event.frame)
        if listed is not None and listed.finished:
            self._held.add(uid)
        else:
            self._held.discard(uid)

    async def _listed(self, client: Client, uid: str) -> PodVersion | None:
        """The pod as the kubelet lists it now (GetPod), or None when it does not. When it cannot
        say, the pod stays as it is served until the next recheck: never "no pod" on a guess."""
        sink = self._sink
        assert sink is not None
        try:
            found = await client.get(uid)
            return PodVersion.from_bytes(found.raw, found.message)
        except NotFound:
            return None
        except (PodsAPIError, CodecError) as exc:
            log.warning("%s: GetPod %s failed: %s", self.name, uid, exc)
            return sink.pod(uid)

    async def _rechecks(self, client: Client) -> None:
        """List again every `recheck` s while finished pods are listed, and every `resync` s in
        any case: withdraw the finished pods the kubelet let go, and amend each pod it lists
        otherwise than it is served (its labels or annotations edited), both of which its watch
        never says."""
        sink = self._sink
        assert sink is not None
        last = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(self._recheck)
            now = asyncio.get_running_loop().time()
            if not self._held and now - last < self._resync:
                continue
            last = now
            relayed = self._relayed.copy()
            try:
                listed = {pod.uid: pod for pod in await client.list()}
            except (PodsAPIError, CodecError) as exc:
                log.warning("%s: ListPods to recheck the kubelet's pods failed: %s", self.name, exc)
                continue
            gone = sorted(self._held - set(listed))
            self._held.difference_update(gone)
            changed = [
                PodVersion.from_bytes(pod.raw, pod.message)
                for uid, pod in listed.items()
                if self._relayed[uid] == relayed[uid]
                and uid not in self._unlisted
                and _differs(sink, uid, pod)
            ]
            if gone or changed:
                sink.amend(changed, gone=gone)

    def _on_unknown(self, number: int) -> None:
        self._unknown[number] += 1
        if self._on_unknown_event is not None:
            self._on_unknown_event(self.name, number)
        seen = ", ".join(f"{_type_name(n)} x{count}" for n, count in sorted(self._unknown.items()))
        warning = (
            f"upstream {self.socket} speaks another version of the Pods API: it sent watch events "
            f"of types the kubelet's released v1alpha1 does not send ({seen}); they were skipped"
        )
        self._unknown_log.warning(f"{self.name}: {warning}")
        assert self._sink is not None
        self._sink.warn(warning)

    def _reject(self, reason: str) -> None:
        log.warning("%s: %s; keeping its last good version", self.name, reason)
        if self._on_error is not None:
            self._on_error(self.name, reason)

    def _on_state(self, state: State, error: PodsAPIError | None) -> None:
        why = error.message if error is not None else ""
        if self._state == (state, why):
            return  # a retry that failed as the last one did: nothing new to tell
        self._state = (state, why)
        if state is State.READY:
            log.info("%s: upstream synced", self.name)
            self._staleness.current(live=True)  # its watch is current however quiet it is
        else:
            log.warning("%s: upstream %s: %s; retrying", self.name, state.value, why)
            self._staleness.failed(f"upstream {state.value}: {why}")
            # Counted once per new failure, not per retry: pods_api_source_errors_total{source}
            # tells operators the upstream is down, refusing or not ready.
            if self._on_error is not None:
                self._on_error(self.name, f"upstream {state.value}: {why}")


def _uid_of(pod: Pod) -> str:
    try:
        return pod.uid or "(no uid)"
    except CodecError:
        return "(no uid)"


def _version(pod: Pod) -> PodVersion:
    return PodVersion.from_bytes(pod.raw, pod.message)


def _differs(sink: SourceSink, uid: str, pod: Pod) -> bool:
    """Whether the kubelet lists a pod it serves otherwise than it is served now."""
    served = sink.pod(uid)
    return served is not None and served.pb != pod.raw


def _type_name(number: int) -> str:
    return "UNSPECIFIED (0)" if number == 0 else str(number)
