"""The HTTP/JSON gateway: `create_app(core)` is the whole of it.

Every request first passes the one front layer (gateway/front.py): the loopback Host check (TCP
only), the pods routes answered as plain endpoints, and every request's metrics, HTTP and per
call. The rest (probes, /metrics, the Kubernetes view, /openapi.json, 404s and 405s) is FastAPI's.
No CORS: browsers may not read this API cross-origin. No /docs or /redoc: they load their
JavaScript from a CDN; /openapi.json is served.
"""

from __future__ import annotations

import functools

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from pods_api.core.assembly import Core
from pods_api.gateway import errors, health, openapi, pods
from pods_api.gateway import httpmetrics as metrics
from pods_api.gateway.front import Front, PlainRoute
from pods_api.gateway.kube import errors as kubestatus
from pods_api.gateway.kube import routes as kube


class GatewayApp(FastAPI):
    """FastAPI, with the front layer ahead of it (and of its middleware stack)."""

    front: ASGIApp

    def serve_first(self, routes: list[PlainRoute], http: metrics.HttpMetrics, core: Core) -> None:
        fastapi = functools.partial(FastAPI.__call__, self)
        self.front = Front(fastapi, routes, http, core.metrics)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.front(scope, receive, send)


def create_app(core: Core) -> FastAPI:
    """Call once per core: the HTTP metrics register in the core's registry, where a second app's
    would clash."""
    app = GatewayApp(
        title=openapi.TITLE,
        version=openapi.VERSION,
        openapi_url="/openapi.json",
        docs_url=None,
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
    )
    errors.install(app)
    kubestatus.install(app)  # the Kubernetes view's errors are Status objects
    pod_routes = pods.PodsRoutes(core)
    app.include_router(pod_routes.router())
    app.include_router(kube.router(core))
    app.include_router(health.router(core))
    app.include_router(metrics.router(core))
    openapi.install(app)
    app.serve_first(pod_routes.plain(), metrics.HttpMetrics(core.metrics.registry), core)
    return app
