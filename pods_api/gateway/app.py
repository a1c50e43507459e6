"""The HTTP/JSON gateway: `create_app(core)` is the whole of it.

Every request first passes the one front layer (gateway/front.py): the loopback Host check (TCP
only), the routes serving a Pods API call (the pods paths and the Kubernetes view's List, Get
and Watch), and every request's metrics, HTTP and per call. The rest (probes, /metrics,
discovery, /openapi.json, 404s and 405s) is FastAPI's. HEAD is every GET without its body
(gateway/head.py). No CORS: browsers may not read this API
cross-origin. No /docs or /redoc: they load their JavaScript from a CDN; /openapi.json is served.
"""

from __future__ import annotations

import functools

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.types import Receive, Scope, Send

from pods_api.core.assembly import Core
from pods_api.gateway import errors, health, openapi, pods
from pods_api.gateway import httpmetrics as metrics
from pods_api.gateway.front import CallRoute, Front
from pods_api.gateway.head import head_as_get
from pods_api.gateway.kube import errors as kubestatus
from pods_api.gateway.kube import routes as kube


class GatewayApp(FastAPI):
    """FastAPI, with the front layer ahead of it (and of its middleware stack)."""

    front: Front

    def serve_front(self, core: Core, http: metrics.Recorder | None) -> None:
        """Put the front layer ahead; `http` records the HTTP series of what it answers."""
        self.front = Front(functools.partial(FastAPI.__call__, self), core, http)

    def serve_call(self, route: CallRoute) -> None:
        """Declare `route` (documented by its declaration) and serve it from the front layer.
        Raises RouteDisagreement when the two would answer a request differently."""
        before = list(self.router.routes)
        self.add_api_route(
            route.path,
            route.declaration,
            methods=["GET"],
            name=route.name,
            operation_id=route.name,
            **route.options,
        )
        declared = self.router.routes[-1]
        assert isinstance(declared, APIRoute)
        self.front.add(route, declared, before)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "HEAD":
            await head_as_get(self.front, scope, receive, send)
            return
        await self.front(scope, receive, send)


def create_app(core: Core) -> GatewayApp:
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
    record = metrics.recorder(core.metrics.registry)
    metrics.instrument(app, record)
    app.serve_front(core, record)
    for route in pods.PodsRoutes(core).routes():
        app.serve_call(route)
    kube.KubeRoutes(core).declare(app, app.serve_call)
    app.include_router(health.router(core))
    app.include_router(metrics.router(core))
    openapi.install(app)
    return app
