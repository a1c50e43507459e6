"""The gateway's HTTP metrics, and `/metrics`: them and every core metric in one exposition (one
registry, the core's).

The HTTP series are prometheus-fastapi-instrumentator's default five (http_requests_total,
http_request_size_bytes, http_response_size_bytes, http_request_duration_highr_seconds,
http_request_duration_seconds), by its names, labels and buckets, made by its `metrics.default`
and recorded by its middleware for every request FastAPI answers: by route template (`none`
for no route, so scanning for paths cannot grow the series), exact status, and a stream's
time to its first byte. Two settings of ours, both in `recorder`: a method outside the
standard ones is counted as OTHER (a client inventing methods cannot grow the series either),
and the call routes (gateway/http/router.py), answered ahead of FastAPI, hand the same recorder the
same `Info` the middleware would build, rather than pass through the middleware: measured in
process (`python -m bench httpmetrics`), the middleware costs a Get more than the whole
route (it matches the route a second time and wraps `send`), while recording costs a few µs.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Depends, FastAPI
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_fastapi_instrumentator import Instrumentator
from prometheus_fastapi_instrumentator import metrics as instrumentator_metrics
from prometheus_fastapi_instrumentator.metrics import Info
from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.assembly import Core
from pods_api.gateway import openapi
from pods_api.gateway.http.params import no_parameters

# The `method` label takes these; any other token a client sends is counted as OTHER (the route
# and the status are bounded already: a route template or `none`, and the statuses this app sends).
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"})
OTHER_METHOD = "OTHER"
# The instrumentator's `handler` of a request no route matched (or refused before routing).
UNMATCHED = "none"

Recorder = Callable[[Info], None]


def recorder(registry: CollectorRegistry) -> Recorder:
    """The instrumentator's default series in `registry`, recorded with the method bounded. Call
    once per registry: the series register in it."""
    record = instrumentator_metrics.default(should_exclude_streaming_duration=True, registry=registry)
    assert record is not None  # None only when the series are in the registry already

    def bounded(info: Info) -> None:
        if info.method not in METHODS:
            info.method = OTHER_METHOD
        record(info)

    return bounded


def instrument(app: FastAPI, record: Recorder) -> None:
    """The instrumentator's middleware in `app`, recording with `record`."""
    Instrumentator(should_group_status_codes=False, should_exclude_streaming_duration=True).add(
        record
    ).instrument(app)


def router(core: Core) -> APIRouter:
    exposition = APIRouter(tags=["metrics"], dependencies=[Depends(no_parameters)])

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
