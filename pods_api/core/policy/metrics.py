"""Prometheus metrics: the kubelet's Pods API names, plus our own. One registry per process
(not the global one), exposed by the gateway's /metrics or by --metrics-listen."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from itertools import accumulate

from prometheus_client import CollectorRegistry, Counter, Gauge, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from pods_api.core.api.statuserrors import Code
from pods_api.core.policy.calls import Calls
from pods_api.core.store.cache import OverlaySink, PodCache, SourceSink
from pods_api.core.store.watch import Overflow

_REQUEST_LABELS = ("server_api_version", "status_code")

# The kubelet's exposition has no *_created series; scrapers of its Pods API metrics expect the
# same names and nothing more.
disable_created_metrics()  # type: ignore[no-untyped-call]


class Metrics:
    def __init__(self, cache: PodCache, calls: Calls) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "kubelet_pod_requests", "Requests to the Pods API.", _REQUEST_LABELS, registry=r
        )
        # One counter per metric of the call table, so a new call is counted without an edit
        # here; calls that are one kind of request (WatchPods, WatchPodBatches) share theirs.
        by_metric: dict[str, Counter] = {}
        for call in calls:
            if call.metric not in by_metric:
                name = f"kubelet_pod_requests_{call.metric}"
                by_metric[call.metric] = Counter(name, f"{call.name} requests.", _REQUEST_LABELS, registry=r)
        self.requests_by_method = {call.name: by_metric[call.metric] for call in calls}
        self.fanout_delay = Delays(
            "pods_api_watch_event_delay_seconds",
            "From the cache publishing an event to a watcher's stream taking it.",
            # Sub-millisecond is the normal case; the tail shows a starved event loop.
            (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0),
        )
        r.register(self.fanout_delay)
        self.source_errors = Counter(
            "pods_api_source_errors",
            "Inputs a pod source rejected (unparsable files, invalid pods, failed fetches).",
            ("source",),
            registry=r,
        )
        self.source_restarts = Counter(
            "pods_api_source_restarts",
            "Pod sources restarted after an unexpected failure (each is logged with its reason).",
            ("source",),
            registry=r,
        )
        self.source_connected = Gauge(
            "pods_api_source_connected",
            "1 while a pod source with an upstream (the API server, a manifest URL, the kubelet's "
            "/pods or Pods API, the container runtime) has a working connection and is current; 0 "
            "while it fails, or once it has applied nothing for longer than its resync (stale: "
            "its last good pods stay served, and clients are warned).",
            ("source",),
            registry=r,
        )
        self.upstream_unknown_events = Counter(
            "pods_api_upstream_unknown_events",
            "Watch events from an upstream Pods API (--kubelet-socket) of a type the kubelet's "
            "released v1alpha1 never sends (UNSPECIFIED) or does not define: skipped. Any at all "
            "means the upstream speaks another version of the Pods API than this server.",
            ("source", "type"),
            registry=r,
        )
        r.register(_CacheCollector(cache))
        # The labelled counters of each (api version, call, code), looked up once: labels() takes
        # a lock and checks its arguments, 3 µs a call on the hot path. Bounded by the table.
        self._request_counters: dict[tuple[str, str, Code], tuple[Counter, Counter]] = {}

    def record_request(self, api_version: str, method: str, code: Code) -> None:
        """Count one finished call, by the Go name of the code it ended with (as the kubelet)."""
        key = (api_version, method, code)
        counters = self._request_counters.get(key)
        if counters is None:
            counters = self._request_counters[key] = (
                self.requests.labels(api_version, code.go_name),
                self.requests_by_method[method].labels(api_version, code.go_name),
            )
        total, by_method = counters
        total.inc()
        by_method.inc()


# Numbers past this are labelled "other": the upstream chooses them, and each label value is a
# series kept for the life of the process.
_LABELLED_EVENT_TYPES = 16


def event_type_label(number: int) -> str:
    """The `type` label of pods_api_upstream_unknown_events: UNSPECIFIED, a small number, or other."""
    if number == 0:
        return "UNSPECIFIED"
    return str(number) if 0 < number < _LABELLED_EVENT_TYPES else "other"


class Delays(Collector):
    """A histogram observed on one thread (the event loop's) and read at scrape time: for the
    fan-out delay, observed once per frame of every watcher. prometheus_client's Histogram takes
    a lock for its bucket and another for its sum on each observation (2.4 µs; this is 0.5 µs),
    which was 3% of a starved server's CPU per frame (W7). A scrape from another thread copies
    the counts in one step; its sum may lag them by the observation under way."""

    def __init__(self, name: str, documentation: str, bounds: tuple[float, ...]) -> None:
        self._name, self._documentation = name, documentation
        self._bounds = sorted(bounds)
        self._labels = [floatToGoString(b) for b in self._bounds] + ["+Inf"]  # type: ignore[no-untyped-call]
        self._counts = [0] * (len(self._bounds) + 1)  # per bucket, not cumulative; the last: +Inf
        self._sum = 0.0

    def observe(self, seconds: float) -> None:
        self._counts[bisect_left(self._bounds, seconds)] += 1  # le: the bound is inclusive
        self._sum += seconds

    def collect(self) -> Iterator[HistogramMetricFamily]:
        counts, total = self._counts.copy(), self._sum
        family = HistogramMetricFamily(self._name, self._documentation)
        family.add_metric([], list(zip(self._labels, accumulate(counts), strict=True)), total)
        yield family


# What kubelet_pod_watch_events_dropped_total counts depends on --watch-overflow; its help says which.
_DROPPED_HELP = {
    Overflow.COALESCE: "Watch events never sent to a watcher: merged into a newer event of the same pod "
    "while it was behind, or not yet taken when its watch ended.",
    Overflow.DROP: "Watchers dropped because their queue was full (--watch-overflow drop), one each, "
    "as the kubelet counts them.",
}


class _CacheCollector(Collector):
    """Gauges read from the cache at scrape time, so the cache itself knows nothing of metrics."""

    def __init__(self, cache: PodCache) -> None:
        self._cache = cache

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        cache = self._cache
        yield CounterMetricFamily(
            "kubelet_pod_watch_events_dropped", _DROPPED_HELP[cache.hub.overflow], value=cache.hub.dropped
        )
        yield CounterMetricFamily(
            "pods_api_watch_events_coalesced",
            "Watch events merged into a newer event of the same pod for a watcher that was behind "
            "(also counted as dropped): it missed that intermediate version, not the state.",
            value=cache.hub.coalesced,
        )
        yield GaugeMetricFamily("pods_api_pods", "Pods in the cache.", value=len(cache))
        yield GaugeMetricFamily("pods_api_watchers", "Open watches.", value=len(cache.hub))
        yield GaugeMetricFamily("pods_api_ready", "1 once every pod source has synced.", value=cache.ready)
        ready = GaugeMetricFamily(
            "pods_api_source_synced", "1 once a pod source has delivered its first state.", labels=["source"]
        )
        for gate in cache.gates:
            if isinstance(gate, SourceSink | OverlaySink):
                ready.add_metric([gate.name], gate.open)
        yield ready
