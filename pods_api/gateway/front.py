"""The one layer every HTTP request passes through, in front of FastAPI: the loopback Host check
(TCP only), the routes that serve a Pods API call (List, Get, Watch, Lookup, on the pods paths and
the Kubernetes view), and each request's metrics, HTTP and per call, recorded once at its end.

Each call route is declared once, as a `CallRoute`: `GatewayApp.serve_call` declares it to
FastAPI (the OpenAPI document, and the query parameters it takes, come from that declaration)
and adds it to this layer's table, built from the declaration FastAPI made of it (its path
regex). A table that would answer a request differently from FastAPI's own routing (a
FastAPI route declared before it that the call route would swallow, or path parameters the
endpoint does not take) fails at start-up with `RouteDisagreement`.

Why serve call routes here rather than through FastAPI: in process (`python -m bench
httpmetrics`), a FastAPI route that only returns cached bytes costs 2-3x a whole call route
here (its request and response machinery, dependency solving, a middleware stack each layer of
which wraps `send`), for handlers that cost a few µs. And here a request's call is
a value (gateway/admission.py's `Call`), named once, admitted, handed to the endpoint and read
back when the request is over. Everything else (probes, /metrics, discovery, /openapi.json,
404s and 405s) is FastAPI's.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any, NoReturn

from fastapi.routing import APIRoute
from prometheus_fastapi_instrumentator.metrics import Info
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from pods_api.core.api.status import StatusError
from pods_api.core.assembly import Core
from pods_api.gateway import params
from pods_api.gateway.admission import Call, admit, record_call, response_code
from pods_api.gateway.errors import Code, error_response
from pods_api.gateway.hosts import host_refusal
from pods_api.gateway.httpmetrics import UNMATCHED, Recorder

# (request, call, **path parameters) -> the response; raises StatusError for an error response.
Endpoint = Callable[..., Awaitable[Response]]
# The parameters every endpoint takes before the path's.
_ENDPOINT_PARAMETERS = ("request", "call")
# A path parameter's stand-in when a template is turned into a path to route.
_SAMPLE = "x"
_TEMPLATE_PARAMETER = re.compile(r"{([^}:]+)(?::[^}]+)?}")


@dataclass(frozen=True, slots=True)
class Surface:
    """How one surface speaks an error: the error it is (a core error said its way), and the
    response carrying it."""

    translate: Callable[[StatusError], StatusError]
    respond: Callable[[StatusError], Response]


def _pods_error(exc: StatusError) -> Response:
    return error_response(exc.code, exc.message, retry_after=exc.retry_after)


PODS_SURFACE = Surface(lambda exc: exc, _pods_error)


@dataclass(frozen=True, slots=True)
class CallRoute:
    """A GET route that serves a Pods API call: declared once, served by the front layer."""

    path: str  # a Starlette path template: `/v1/pods/{uid}`
    name: str  # its route name and OpenAPI operation id
    calls: tuple[str, ...]  # the calls it serves, each in the call table
    call: Callable[[Request], Call]  # names the call (one of `calls`) from the raw request; never raises
    endpoint: Endpoint
    # A function whose signature FastAPI documents: the query parameters (and headers) the
    # endpoint reads, typed. Never called: the front layer answers every GET on the path.
    declaration: Callable[..., Any]
    surface: Surface = PODS_SURFACE
    # A query parameter the declaration does not take is a 400 (the Kubernetes view, as the API
    # server, ignores unknown ones).
    checks_parameters: bool = True
    unsynced_watch_waits: bool = False  # see admission.admit
    options: Mapping[str, Any] = field(default_factory=dict)  # summary, responses, tags, ...


class RouteDisagreement(ValueError):
    """The front layer's table would answer a request otherwise than FastAPI's routing."""


@dataclass(frozen=True, slots=True)
class _Served:
    route: CallRoute
    regex: re.Pattern[str]
    takes: frozenset[str] | None  # the query parameter names, when checked


def unreachable() -> NoReturn:
    """The body of a call route's declaration: the front layer answers all of its requests."""
    raise AssertionError("a call route is served by the front layer, never by FastAPI")


class Front:
    """Serves the call routes itself and hands every other request to `app` (FastAPI)."""

    def __init__(self, app: ASGIApp, core: Core, http: Recorder | None) -> None:
        self.app = app
        self.core = core
        self.http = http  # None: a layer outside records the HTTP series
        self.routes: list[_Served] = []

    def add(self, route: CallRoute, declared: APIRoute, before: list[BaseRoute]) -> None:
        """Serve `route`, as FastAPI declared it after `before`. Raises RouteDisagreement, or
        KeyError for a call the table lacks (at start-up, not per request)."""
        missing = [name for name in route.calls if name not in self.core.calls.by_name]
        if missing:
            raise KeyError(f"not in the call table: {', '.join(missing)}")
        agree(route, declared, before)
        takes = params.declared(declared) if route.checks_parameters else None
        self.routes.append(_Served(route, declared.path_regex, takes))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = perf_counter()
        refused = host_refusal(scope)
        if refused is not None:
            await self._respond(scope, receive, send, started, UNMATCHED, None, refused)
            return
        if scope["method"] == "GET":
            path = scope["path"]
            for served in self.routes:
                match = served.regex.match(path)
                if match is not None:
                    await self._serve(scope, receive, send, started, served, match.groupdict())
                    return
        await self._delegate(scope, receive, send)

    async def _serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        started: float,
        served: _Served,
        path: dict[str, str],
    ) -> None:
        route, request = served.route, Request(scope, receive)
        call = route.call(request)
        failure: Exception | None = None
        try:
            response = await self._answer(request, call, served, path)
        except StatusError as exc:
            error = route.surface.translate(exc)
            call.end(error.code)
            response = route.surface.respond(error)
        except Exception as exc:
            # As FastAPI's ServerErrorMiddleware: the client learns nothing internal, and the
            # exception goes on to the server, which logs its traceback.
            response, failure = error_response(Code.INTERNAL, "internal error"), exc
        await self._respond(scope, receive, send, started, route.path, call, response)
        if failure is not None:
            raise failure

    async def _answer(self, request: Request, call: Call, served: _Served, path: dict[str, str]) -> Response:
        """What every call route does first, in FastAPI's dependency order (the call is named
        first, so a request refused for its parameters is still counted): check the parameter
        names, admit, then the endpoint."""
        query = request.query_params
        if query and served.takes is not None:
            params.check(query, served.takes)
        admit(self.core, call, unsynced_watch_waits=served.route.unsynced_watch_waits)
        if call.problem is not None:
            raise call.problem
        return await served.route.endpoint(request, call, **path)

    async def _respond(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        started: float,
        handler: str,
        call: Call | None,
        response: Response,
    ) -> None:
        code = response_code(response.status_code, response.raw_headers)
        # A stream's time is to its first byte, which it sends as it starts. Its `send` is not
        # wrapped: every frame would pay for the wrapper.
        first_byte = perf_counter() if not hasattr(response, "body") else None
        try:
            await response(scope, receive, send)
        except asyncio.CancelledError:
            code = Code.CANCELLED
            raise
        finally:
            if call is not None:
                record_call(self.core.metrics, call, code)
            if self.http is not None:
                seconds = (first_byte or perf_counter()) - started
                method, status = scope["method"], str(response.status_code)
                self.http(Info(Request(scope), response, method, handler, status, seconds, seconds))

    async def _delegate(self, scope: Scope, receive: Receive, send: Send) -> None:
        """FastAPI answers: no call; its instrumentator middleware records the HTTP series."""
        await self.app(scope, receive, send)


def agree(route: CallRoute, declared: APIRoute, before: list[BaseRoute]) -> None:
    """Raises RouteDisagreement unless the front layer answers exactly the requests FastAPI's
    routing would give `declared`: no GET route declared before it (which FastAPI would prefer)
    has a path its regex matches, and the endpoint and the declaration take the path's
    parameters."""
    template = set(_TEMPLATE_PARAMETER.findall(route.path))
    takes = set(inspect.signature(route.endpoint).parameters) - set(_ENDPOINT_PARAMETERS)
    documents = set(inspect.signature(route.declaration).parameters)
    for what, differ in (("endpoint", template ^ takes), ("declaration", template - documents)):
        if differ:
            names = ", ".join(sorted(differ))
            raise RouteDisagreement(
                f"{route.name} ({route.path}): its {what} and its path disagree on {names}"
            )
    for earlier in before:
        if isinstance(earlier, Route) and "GET" in (earlier.methods or ()):
            sample = _TEMPLATE_PARAMETER.sub(_SAMPLE, earlier.path)
            if declared.path_regex.match(sample):
                raise RouteDisagreement(
                    f"{route.name} ({route.path}) would answer GET {earlier.path}, which FastAPI routes to "
                    f"{earlier.name}, declared before it"
                )
