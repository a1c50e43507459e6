"""`--kubelet-socket PATH`: bridge the kubelet's own Pods API (v1.37+, or v1.36 with the gate on).

One upstream watch (a `pods_api.client.Informer`) fans out to any number of local clients, and
List and Get are answered from our cache without spending the kubelet's 100 qps. Pods pass
through byte-exact: the kubelet's bytes are what an unmasked client gets; we decode them only to
index, mask and render JSON.

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
import logging
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pods_api.client import Client, EventType, Informer, InformerEvent, PodsAPIError, State
from pods_api.core.api.codec import CodecError
from pods_api.core.policy.throttled_log import ThrottledLog
from pods_api.core.store.cache import SourceSink
from pods_api.core.store.pod import PodVersion
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
    ) -> None:
        self.name = source_name(socket)
        self.socket = socket
        self._staleness = Staleness(self.name, stale_after=stale_after, on_connected=on_connected)
        self._staleness.upstream = str(socket)
        self._keepalive = keepalive
        self._on_error = on_error
        self._on_unknown_event = on_unknown_event
        self._sink: SourceSink | None = None
        self._first: dict[str, PodVersion] | None = {}  # the first snapshot, handed over whole
        # Unknown event types seen, by number, for the life of the process: a mismatch is what
        # the deployment is, not something a reconnect clears.
        self._unknown: Counter[int] = Counter()
        self._unknown_log = ThrottledLog(log)

    async def run(self, sink: SourceSink) -> None:
        self._sink = sink
        # Each run's first snapshot goes in whole (`replace`), so a run restarted by the
        # supervisor drops what vanished meanwhile; the cache diffs it into real changes only.
        self._first = {}
        with self._staleness.running(sink):
            async with Client(self.socket, keepalive=self._keepalive) as client:
                informer = Informer(client, on_unknown=self._on_unknown)
                informer.add_handler(self._on_event)
                informer.on_state(self._on_state)
                await informer.run()

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

    def _on_event(self, event: InformerEvent) -> None:
        assert self._sink is not None
        if event.type is EventType.INITIAL_SYNC_COMPLETE:
            if self._first is not None:
                self._sink.replace(self._first.values())
                self._first = None
                self._sink.mark_synced()
            return
        pod = event.pod
        assert pod is not None
        if event.type is EventType.DELETED:
            if self._first is not None:
                self._first.pop(pod.uid, None)
            else:
                self._sink.delete(pod.uid)
            return
        try:
            version = PodVersion.from_bytes(pod.raw, pod.message)
        except CodecError as exc:
            self._reject(f"pod {pod.uid or '(no uid)'} does not decode: {exc}")
            return
        if not version.uid:
            self._reject(f"pod {version.namespace}/{version.name} has no metadata.uid")
        elif self._first is not None:
            self._first[version.uid] = version
        else:
            self._sink.upsert(version)

    def _reject(self, reason: str) -> None:
        log.warning("%s: %s; keeping its last good version", self.name, reason)
        if self._on_error is not None:
            self._on_error(self.name, reason)

    def _on_state(self, state: State, error: PodsAPIError | None) -> None:
        if state is State.READY:
            log.info("%s: upstream synced", self.name)
            self._staleness.current(live=True)  # its watch is current however quiet it is
        else:
            why = error.message if error is not None else ""
            log.warning("%s: upstream %s: %s; retrying", self.name, state.value, why)
            self._staleness.failed(f"upstream {state.value}: {why}")
            # Counted once per new failure, not per retry: pods_api_source_errors_total{source}
            # tells operators the upstream is down, refusing or not ready.
            if self._on_error is not None:
                self._on_error(self.name, f"upstream {state.value}: {why}")


def _type_name(number: int) -> str:
    return "UNSPECIFIED (0)" if number == 0 else str(number)
