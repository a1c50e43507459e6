"""The gateway's HTTP metrics, and `/metrics`: them and every core metric in one exposition (one
registry, the core's).

The HTTP series are prometheus-fastapi-instrumentator's default ones, by the same names, labels
and buckets, so what was built on them keeps working. They are recorded here rather than by
its middleware, in the gateway's one request layer (gateway/front.py) beside the per-call
counters: measured in process, its middleware cost ~55 µs per request (it matches the route a
second time and builds a Request, a Response and an Info for each), more than five times
what the whole bare Starlette app costs; recording the same series here costs ~4 µs.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from prometheus_client import CollectorRegistry, Counter, Histogram, Summary
from prometheus_client.exposition import choose_encoder
from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.assembly import Core
from pods_api.gateway import openapi
from pods_api.gateway.params import known_parameters

# The instrumentator's buckets: a fine one without labels for percentiles, a coarse one by route.
LATENCY_FINE_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 7.5, 10, 30, 60,
)  # fmt: skip
LATENCY_BUCKETS = (0.1, 0.5, 1)
# The `method` label takes these; any other token a client sends is counted as OTHER, so a
# client inventing methods cannot grow the series without bound (the route and the status are
# bounded already: a route template or `none`, and the statuses this app sends).
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"})
OTHER_METHOD = "OTHER"
# `handler` of a request no route matched (or refused before routing): one series for all.
UNMATCHED = "none"


class HttpMetrics:
    """http_requests_total, http_request_size_bytes, http_response_size_bytes,
    http_request_duration_highr_seconds and http_request_duration_seconds, by route template
    (unmatched paths are one `none` handler, so scanning for paths cannot grow the series) and
    exact status. Call once per registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.requests = Counter(
            "http_requests",
            "HTTP requests by method, status and route.",
            ("method", "status", "handler"),
            registry=r,
        )
        self.request_size = Summary(
            "http_request_size_bytes",
            "Request Content-Length by route (0 without one).",
            ("handler",),
            registry=r,
        )
        self.response_size = Summary(
            "http_response_size_bytes",
            "Response Content-Length by route (0 for a stream).",
            ("handler",),
            registry=r,
        )
        self.latency_fine = Histogram(
            "http_request_duration_highr_seconds",
            "Time to the response's first byte, in many buckets and no labels.",
            buckets=LATENCY_FINE_BUCKETS,
            registry=r,
        )
        self.latency = Histogram(
            "http_request_duration_seconds",
            "Time to the response's first byte, by method and route (a watch: until it starts streaming).",
            ("method", "handler"),
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        # The labelled children, looked up once per (method, handler, status): labels() takes a
        # lock and checks its arguments on every call.
        self._children: dict[tuple[str, str, int], tuple[Counter, Summary, Summary, Histogram]] = {}

    def observe(
        self, method: str, handler: str, status: int, seconds: float, request_size: int, response_size: int
    ) -> None:
        """One finished request (or one started stream): `seconds` to its response's start."""
        if method not in METHODS:
            method = OTHER_METHOD
        key = (method, handler, status)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (
                self.requests.labels(method, str(status), handler),
                self.request_size.labels(handler),
                self.response_size.labels(handler),
                self.latency.labels(method, handler),
            )
        requests, request_sizes, response_sizes, latency = children
        requests.inc()
        request_sizes.observe(request_size)
        response_sizes.observe(response_size)
        self.latency_fine.observe(seconds)
        latency.observe(seconds)


def content_length(headers: list[tuple[bytes, bytes]]) -> int:
    """A message's Content-Length, 0 without a valid one."""
    for name, value in headers:
        if name.lower() == b"content-length":
            return int(value) if value.isdigit() else 0
    return 0


def router(core: Core) -> APIRouter:
    exposition = APIRouter(tags=["metrics"], dependencies=[Depends(known_parameters)])

    @exposition.get(
        "/metrics",
        operation_id="Metrics",
        summary="Prometheus metrics",
        response_class=Response,
        responses=openapi.metrics_responses(),
    )
    async def metrics(request: Request) -> Response:
        # OpenMetrics when the scraper asks for it, the classic text format otherwise.
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(core.metrics.registry), headers={"Content-Type": content_type})

    return exposition
