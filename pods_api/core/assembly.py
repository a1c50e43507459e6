"""The `Core` every surface is built on, and how one is made from a config. It imports no surface
(no grpc server, no uvicorn, no FastAPI): the gRPC server, the gateway and the tests take a
`Core`, and only the composition root (pods_api/serve/process.py) knows them all."""

from __future__ import annotations

from dataclasses import dataclass, field

from pods_api.core.config import Config
from pods_api.core.policy.calls import CALLS, Calls
from pods_api.core.policy.inflight import BytesInFlight
from pods_api.core.policy.metrics import Metrics
from pods_api.core.policy.ratelimit import TokenBucket
from pods_api.core.store.cache import PodCache
from pods_api.core.store.stream import WatchStreams
from pods_api.core.store.watch import WatchHub


@dataclass(eq=False)
class Core:
    """What every surface is built on: the gRPC server and the gateway take this and nothing else."""

    config: Config
    cache: PodCache
    limiter: TokenBucket | None  # shared by the limited calls on every surface; None: no limit
    metrics: Metrics
    calls: Calls  # what each call is: limited, gated, counted
    streams: WatchStreams  # every surface's watches: one frame cache for all of them
    # The List responses each surface is sending, against --list-budget.
    http_lists: BytesInFlight = field(default_factory=lambda: BytesInFlight("HTTP"))
    grpc_lists: BytesInFlight = field(default_factory=lambda: BytesInFlight("gRPC"))


def build_core(config: Config, calls: Calls = CALLS) -> Core:
    hub = WatchHub(
        capacity=config.watch_buffer, max_watchers=config.max_watchers, overflow=config.watch_overflow
    )
    cache = PodCache(hub)
    metrics = Metrics(cache, calls)
    limiter = TokenBucket(config.qps, config.burst) if config.qps > 0 else None
    streams = WatchStreams(cache, metrics.fanout_delay.observe)
    budget = config.list_budget
    return Core(
        config,
        cache,
        limiter,
        metrics,
        calls,
        streams,
        BytesInFlight("HTTP", budget),
        BytesInFlight("gRPC", budget),
    )
