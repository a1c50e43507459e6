"""Each call route is declared once (gateway/front.py's CallRoute): FastAPI's declaration is what
the OpenAPI document shows and what the front layer's table is built from, and an app whose
table would answer a request otherwise than FastAPI's routing does not start."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Match

from pods_api.core.assembly import Core, build_core
from pods_api.core.config import Config
from pods_api.gateway.admission import GET, Call, named
from pods_api.gateway.app import GatewayApp, create_app
from pods_api.gateway.front import CallRoute, RouteDisagreement, unreachable
from pods_api.gateway.pods import PodsRoutes


@pytest.fixture
def core() -> Iterator[Core]:
    core = build_core(Config(node_name="test"))
    yield core
    core.cache.hub.stop()


def bare_app(core: Core) -> GatewayApp:
    app = GatewayApp()
    app.serve_front(core, None)
    return app


async def summary() -> Response:
    return PlainTextResponse("summary")


def test_a_route_fastapi_would_prefer_stops_the_start(core: Core) -> None:
    """A FastAPI route declared before a call route whose path the call route's would swallow:
    FastAPI routes GET /v1/pods/summary to it, the front layer would answer it as a Get."""
    app = bare_app(core)
    app.add_api_route("/v1/pods/summary", summary)
    with pytest.raises(RouteDisagreement, match=re.escape("would answer GET /v1/pods/summary")):
        for route in PodsRoutes(core).routes():
            app.serve_call(route)


def test_a_route_declared_after_is_fastapis_choice_too(core: Core) -> None:
    app = bare_app(core)
    for route in PodsRoutes(core).routes():
        app.serve_call(route)
    app.add_api_route("/v1/pods/summary", summary)  # FastAPI, too, gives GET to /v1/pods/{uid}


def test_an_endpoint_without_the_paths_parameters_stops_the_start(core: Core) -> None:
    async def get(request: Request, call: Call) -> Response:  # no `uid`
        return PlainTextResponse("")

    async def declaration(uid: str) -> Response:
        unreachable()

    route = CallRoute("/v1/things/{uid}", "GetThing", (GET,), named(GET), get, declaration)
    with pytest.raises(RouteDisagreement, match="its endpoint and its path disagree on uid"):
        bare_app(core).serve_call(route)


def test_a_declaration_without_the_paths_parameters_stops_the_start(core: Core) -> None:
    async def get(request: Request, call: Call, uid: str) -> Response:
        return PlainTextResponse(uid)

    async def declaration() -> Response:
        unreachable()

    route = CallRoute("/v1/things/{uid}", "GetThing", (GET,), named(GET), get, declaration)
    with pytest.raises(RouteDisagreement, match="its declaration and its path disagree on uid"):
        bare_app(core).serve_call(route)


def test_the_table_is_the_declared_routes(core: Core) -> None:
    """Every call route the front layer serves is a FastAPI route by the same path and name (the
    OpenAPI document's operation), and every GET path FastAPI would give one of them, the front
    layer gives the same one."""
    app = create_app(core)
    declared = {route.name: route for route in app.routes if isinstance(route, APIRoute)}
    served = {entry.route.name: entry for entry in app.front.routes}
    assert set(served) == {
        "ListPods", "GetPod", "GetPodByName", "KubeListPods", "KubeListNamespacedPods", "KubeGetPod",
        "KubeWatchPods", "KubeWatchNamespacedPods", "KubeWatchNamespacedPod",
    }  # fmt: skip
    for name, entry in served.items():
        assert declared[name].path == entry.route.path
        assert declared[name].path_regex is entry.regex
    for route in app.routes:
        if not isinstance(route, APIRoute) or "GET" not in route.methods:
            continue
        path = re.sub(r"{[^}]+}", "x", route.path)
        scope = {"type": "http", "method": "GET", "path": path, "root_path": ""}
        fastapi = next(r for r in app.routes if r.matches(scope)[0] is Match.FULL)
        front = next((e.route.name for e in app.front.routes if e.regex.match(path)), None)
        if front is not None:
            assert getattr(fastapi, "name", None) == front, path
        else:
            assert fastapi.name not in served, path
