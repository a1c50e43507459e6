"""The HTTP/JSON gateway: `create_app(core)` is the whole of it.

Middleware, outermost first: HTTP metrics (every request, rejected ones included), the loopback
Host check (TCP only), Pods call metrics. No CORS: browsers may not read this API cross-origin.
No /docs or /redoc: they load their JavaScript from a CDN; /openapi.json is served.
"""

from __future__ import annotations

from fastapi import FastAPI

from pods_api.core.runtime import Core
from pods_api.gateway import errors, health, kube, kubestatus, metrics, openapi, pods
from pods_api.gateway.hosts import LoopbackHostMiddleware
from pods_api.gateway.rpcs import CallMetricsMiddleware


def create_app(core: Core) -> FastAPI:
    """Call once per core: the HTTP metrics register in the core's registry, where a second app's
    would clash (the instrumentator then quietly leaves that app without them)."""
    app = FastAPI(
        title=openapi.TITLE,
        version=openapi.VERSION,
        openapi_url="/openapi.json",
        docs_url=None,
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
    )
    errors.install(app)
    kubestatus.install(app)  # the Kubernetes view's errors are Status objects
    app.include_router(pods.router(core))
    app.include_router(kube.router(core))
    app.include_router(health.router(core))
    app.include_router(metrics.router(core))
    # add_middleware puts each one outside the ones before it.
    app.add_middleware(CallMetricsMiddleware, metrics=core.metrics)
    app.add_middleware(LoopbackHostMiddleware)
    metrics.instrument(app, core)
    openapi.install(app)
    return app
