"""Each call route's parameters are declared once (gateway/http/params.py's `Param`), and that one list
is what the router parses and checks and what the OpenAPI document shows; the call routes are
served by one router ahead of FastAPI (gateway/http/router.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from gatewayharness import serving, unix_client
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from pods_api.core.assembly import Core, build_core
from pods_api.core.config import Config
from pods_api.gateway.app import GatewayApp, create_app
from pods_api.gateway.http import params
from pods_api.gateway.http.admission import GET, Call, named
from pods_api.gateway.http.params import FLAG, TEXT, TEXTS, Args, Param
from pods_api.gateway.http.router import CallRoute
from pods_api.serve.sockets import bind_unix, claim

LOUD = Param("loud", FLAG, "Shout.")
TAGS = Param("tag", TEXTS, "Tags; repeatable.")
TOKEN = Param("X-Token", TEXT, "A header.", where="header")
UNDECLARED = Param("quiet", FLAG, "Read without being declared.")


@pytest.fixture
def core() -> Iterator[Core]:
    core = build_core(Config(node_name="test", qps=0))
    core.cache.source("test").mark_synced()
    yield core
    core.cache.hub.stop()


def _things(params_: tuple[Param[object], ...]) -> CallRoute:
    async def get(request: Request, call: Call, args: Args, uid: str) -> Response:
        return PlainTextResponse(f"{uid} loud={args[LOUD]} tags={','.join(args[TAGS])} token={args[TOKEN]}")

    return CallRoute("/v1/things/{uid}", "GetThing", (GET,), named(GET), get, params_, summary="A thing")


@pytest.fixture
async def served(core: Core, tmp_path: Path) -> AsyncIterator[tuple[GatewayApp, httpx.AsyncClient]]:
    app = create_app(core)
    app.serve_call(_things((LOUD, TAGS, TOKEN)))
    listener = bind_unix(claim(tmp_path / "http.sock"), 0o600, None)
    async with serving(app, [listener]), unix_client(tmp_path / "http.sock") as client:
        yield app, client


async def test_a_routes_parameters_are_parsed_checked_and_documented_from_one_list(
    served: tuple[GatewayApp, httpx.AsyncClient],
) -> None:
    client = served[1]
    r = await client.get("/v1/things/a?loud=yes&tag=x&tag=y", headers={"x-token": "t"})
    assert r.text == "a loud=True tags=x,y token=t"  # pydantic's booleans; repeated; headers by any case
    assert (await client.get("/v1/things/a")).text == "a loud=False tags= token=None"
    bad = (await client.get("/v1/things/a?loud=maybe")).json()["error"]
    assert bad["status"] == "INVALID_ARGUMENT"
    assert bad["message"].startswith('query parameter "loud": ')
    unknown = (await client.get("/v1/things/a?quiet=1")).json()["error"]["message"]
    assert unknown == "unknown query parameter 'quiet' (this path takes: loud, tag)"
    operation = (await client.get("/openapi.json")).json()["paths"]["/v1/things/{uid}"]["get"]
    documented = [(p["name"], p["in"]) for p in operation["parameters"]]
    assert documented == [("uid", "path"), ("loud", "query"), ("tag", "query"), ("X-Token", "header")]
    assert operation["operationId"] == "GetThing"


async def test_every_bad_value_is_named_at_once() -> None:
    scope = {"type": "http", "query_string": b"loud=maybe&loud=no&x=1", "headers": []}
    args, problem = params.parse(Request(scope), (LOUD, Param("other", FLAG, ""), TAGS))
    assert problem is None  # a repeated scalar is its last value, as FastAPI reads it
    assert args[LOUD] is False
    scope["query_string"] = b"loud=maybe&other=perhaps"
    args, problem = params.parse(Request(scope), (LOUD, Param("other", FLAG, "")))
    assert problem is not None
    assert problem.message.count("query parameter") == 2 and '"other"' in problem.message
    assert args[LOUD] is False  # a bad value reads as its default, for naming the call


async def test_an_endpoint_reading_a_parameter_it_does_not_declare_is_a_bug(
    core: Core, tmp_path: Path
) -> None:
    """A 500, never a silent default: what a route reads, it declares (and so documents)."""

    async def get(request: Request, call: Call, args: Args, uid: str) -> Response:
        return PlainTextResponse(str(args[UNDECLARED]))

    app = create_app(core)
    app.serve_call(CallRoute("/v1/things/{uid}", "GetThing", (GET,), named(GET), get))
    listener = bind_unix(claim(tmp_path / "http.sock"), 0o600, None)
    async with serving(app, [listener]), unix_client(tmp_path / "http.sock") as client:
        r = await client.get("/v1/things/a")
    assert (r.status_code, r.json()["error"]["status"]) == (500, "INTERNAL")


async def test_a_call_route_is_answered_ahead_of_fastapi(
    core: Core, served: tuple[GatewayApp, httpx.AsyncClient]
) -> None:
    """A FastAPI route on a call route's path never answers it: the router is first, for every
    method (a write is the surface's 405, counted under the call route's template)."""
    app, client = served

    async def shadow() -> Response:
        return PlainTextResponse("fastapi")

    app.add_api_route("/v1/things/{uid}", shadow, methods=["GET", "POST"])
    assert (await client.get("/v1/things/a")).text.startswith("a loud=")
    r = await client.post("/v1/things/a")
    refused = (r.status_code, r.headers["allow"], r.json()["error"]["status"])
    assert refused == (405, "GET, HEAD", "UNIMPLEMENTED")
    labels = {"handler": "/v1/things/{uid}", "method": "POST", "status": "405"}
    assert core.metrics.registry.get_sample_value("http_requests_total", labels) == 1


async def test_a_path_without_parameters_is_answered_by_the_first_route_that_matches_it(
    core: Core, tmp_path: Path
) -> None:
    """The router keeps a path-to-route index of parameterless paths (one lookup instead of a
    match per route); a parameter route declared before one still answers its path first, as
    the router's own order says, and every other path still reaches its route."""

    def answering(text: str) -> object:
        async def get(request: Request, call: Call, args: Args, **path: str) -> Response:
            return PlainTextResponse(f"{text} {path}")

        return get

    app = create_app(core)
    for path, text in (("/v1/things/{uid}", "by-uid"), ("/v1/things/all", "all"), ("/v1/every", "every")):
        app.serve_call(CallRoute(path, "GetThing", (GET,), named(GET), answering(text)))  # type: ignore[arg-type]
    assert "/v1/every" in app.exact and "/v1/things/all" not in app.exact
    listener = bind_unix(claim(tmp_path / "http.sock"), 0o600, None)
    async with serving(app, [listener]), unix_client(tmp_path / "http.sock") as client:
        answers = [(await client.get(p)).text for p in ("/v1/every", "/v1/things/all", "/v1/things/a")]
        missing = await client.get("/v1/nothing")
    assert answers == ["every {}", "by-uid {'uid': 'all'}", "by-uid {'uid': 'a'}"]
    assert missing.status_code == 404
