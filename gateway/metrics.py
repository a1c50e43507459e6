"""`/metrics`: the gateway's HTTP metrics and every core metric in one exposition, because the
instrumentator registers into the core's registry rather than the global one."""

from __future__ import annotations

from fastapi import APIRouter, Depends, FastAPI
from prometheus_client.exposition import choose_encoder
from prometheus_fastapi_instrumentator import Instrumentator
from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.runtime import Core
from pods_api.gateway import openapi
from pods_api.gateway.params import known_parameters


def instrument(app: FastAPI, core: Core) -> None:
    """http_requests_total, http_request_duration_seconds, ... by route template (unmatched paths
    are one `none` handler, so scanning for paths cannot grow the series), exact status. A watch's
    duration is its time to first byte: hours of streaming would drown the latency histograms."""
    Instrumentator(
        should_group_status_codes=False,
        should_exclude_streaming_duration=True,
        registry=core.metrics.registry,
    ).instrument(app)


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
