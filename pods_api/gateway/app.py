"""The HTTP/JSON gateway: `create_app(core)` is the whole of it.

One path for every request (`GatewayApp.__call__`): HEAD is answered as the GET without its
body (gateway/http/head.py); over TCP, the loopback Host check (gateway/http/hosts.py); then one plain
Starlette router (gateway/http/router.py) holding the call routes, each parameter of which is declared
once, the pods paths and the Kubernetes view's List, Get and Watch; what it does not route is
FastAPI's (probes, /metrics, discovery, /openapi.json, 404s), behind the instrumentator's
middleware. No CORS: browsers may not read this API cross-origin. No /docs or /redoc: they load
their JavaScript from a CDN; /openapi.json is served.
"""

from __future__ import annotations

from time import perf_counter

from fastapi import FastAPI
from starlette.routing import Route, Router
from starlette.types import Receive, Scope, Send

from pods_api.core.assembly import Core
from pods_api.gateway import health, openapi, pods
from pods_api.gateway import httpmetrics as metrics
from pods_api.gateway.http import errors, router
from pods_api.gateway.http.head import head_as_get
from pods_api.gateway.http.hosts import host_refusal
from pods_api.gateway.http.router import CallRoute, Responder
from pods_api.gateway.kube import apistatus as kubestatus
from pods_api.gateway.kube import routes as kube


class GatewayApp(FastAPI):
    """FastAPI, with the call routes' router ahead of it (and of its middleware stack)."""

    core: Core
    responder: Responder  # records what the router answers (its `http`: the HTTP series)
    calls: Router
    # The call routes whose path has no parameter, by path (where no route before them matches
    # it): one dict lookup, where the router asks each of its routes in turn, a Python call per
    # route (BENCHMARKS.md, W3). The router holds only the routes with parameters: a path that
    # is not a key here matches none of these.
    exact: dict[str, Route]
    call_routes: list[CallRoute]  # as declared, for the OpenAPI document

    def serve_calls(self, core: Core, responder: Responder) -> None:
        """Put the call routes' router ahead of FastAPI, with no routes yet."""
        self.core, self.responder, self.call_routes, self.exact = core, responder, [], {}
        self.calls = Router(redirect_slashes=False, default=self._rest)

    def serve_call(self, route: CallRoute) -> None:
        """Serve `route` from the router (raises KeyError for a call the core's table lacks)."""
        for served in router.routes(self.core, [route], self.responder):
            if "{" in served.path:
                self.calls.routes.append(served)
                continue
            # A route before it that matches its path answers it: then it never does.
            earlier = served.path in self.exact or any(
                r.path_regex.match(served.path) for r in self.calls.routes if isinstance(r, Route)
            )
            if not earlier:
                self.exact[served.path] = served
        self.call_routes.append(route)
        self.openapi_schema = None  # the document shows it

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await FastAPI.__call__(self, scope, receive, send)
        elif scope["method"] == "HEAD":
            await head_as_get(self._http, scope, receive, send)
        else:
            await self._http(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = host_refusal(scope)
        if refused is not None:
            await self.responder(scope, receive, send, perf_counter(), metrics.UNMATCHED, None, refused)
            return
        route = self.exact.get(scope["path"])
        if route is None:
            await self.calls(scope, receive, send)
            return
        # What the router would set when this route matched (its match has no path parameters).
        scope.update(router=self.calls, route=route, endpoint=route.endpoint, path_params={})
        await route.handle(scope, receive, send)

    async def _rest(self, scope: Scope, receive: Receive, send: Send) -> None:
        """What the router does not route: FastAPI's (its instrumentator middleware records the
        HTTP series). The router named itself the request's router, which is FastAPI's."""
        del scope["router"]
        await FastAPI.__call__(self, scope, receive, send)


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
    app.serve_calls(core, Responder(core.metrics, record))
    views = kube.KubeRoutes(core)
    for route in [*pods.PodsRoutes(core).routes(), *views.calls()]:
        app.serve_call(route)
    views.declare(app)
    app.include_router(health.router(core))
    app.include_router(metrics.router(core))
    openapi.install(app, app.call_routes)
    return app
