"""The call routes: every GET that serves a Pods API call (List, Get, Watch, Lookup, on the pods
paths and the Kubernetes view), served by one plain Starlette `Router` that the gateway
(gateway/app.py) puts ahead of FastAPI, which answers every other path.

A call route is declared once, as a `CallRoute`: its path, the calls it serves, its parameters
(gateway/http/params.py's `Param`s) and its endpoint. From that one declaration come the router's
`Route` (`routes`), the parameters it parses and checks, and its OpenAPI operation
(`CallRoute.operation`, which gateway/openapi.py adds to FastAPI's document).

One request on a call route, in order, each step once: the call named from the raw request and
its parsed parameters (so a request refused for its parameters is still counted); the query's
names checked; the call admitted (the call table's rate limit and readiness); the values'
problems raised; the endpoint; the response sent; the call's counter and the HTTP series
recorded at its end. A method other than GET (HEAD arrives as GET, gateway/http/head.py) is the
surface's 405.

Why not FastAPI for these: in process (`python -m bench httpmetrics`), a FastAPI route that only
returns cached bytes costs 2-3x a whole call route here (its request and response machinery,
dependency solving, a middleware stack each layer of which wraps `send`), for handlers that cost
a few µs.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

from prometheus_fastapi_instrumentator.metrics import Info
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import Receive, Scope, Send

from pods_api.core.api.statuserrors import StatusError
from pods_api.core.assembly import Core
from pods_api.core.policy.metrics import Metrics
from pods_api.gateway.http import params
from pods_api.gateway.http.admission import Call, admit, record_call, response_code
from pods_api.gateway.http.errors import Code, error_response, method_not_allowed
from pods_api.gateway.http.params import Args, Param
from pods_api.gateway.httpmetrics import Recorder

# (request, call, args, **path parameters) -> the response; raises StatusError for an error.
Endpoint = Callable[..., Awaitable[Response]]
# Names a request's call from the raw request and its parsed parameters; never raises.
Namer = Callable[[Request, Args], Call]
Doc = dict[str, Any]
# A path template's parameter: `{uid}`, or with a convertor, `{rest:path}`.
_TEMPLATE_PARAMETER = re.compile(r"{([^}:]+)(?::[^}]+)?}")


@dataclass(frozen=True, slots=True)
class Surface:
    """How one surface speaks an error: the error it is (a core error said its way), the response
    carrying it, and its answer to a method other than GET."""

    translate: Callable[[StatusError], StatusError]
    respond: Callable[[StatusError], Response]
    wrong_method: Callable[[Request], Response]


def _pods_error(exc: StatusError) -> Response:
    return error_response(exc.code, exc.message, retry_after=exc.retry_after)


def _pods_wrong_method(request: Request) -> Response:
    return method_not_allowed(request.method, request.scope.get("path", ""))


PODS_SURFACE = Surface(lambda exc: exc, _pods_error, _pods_wrong_method)


@dataclass(frozen=True, slots=True)
class CallRoute:
    """A GET route that serves a Pods API call, declared once."""

    path: str  # a Starlette path template: `/v1/pods/{uid}`
    name: str  # its OpenAPI operation id
    calls: tuple[str, ...]  # the calls it serves, each in the call table
    call: Namer  # which of `calls` a request is
    endpoint: Endpoint
    params: tuple[Param[Any], ...] = ()
    surface: Surface = PODS_SURFACE
    # A query parameter not in `params` is a 400 (the Kubernetes view, as the API server,
    # ignores unknown ones).
    checks_parameters: bool = True
    unsynced_watch_waits: bool = False  # see admission.admit
    summary: str = ""
    responses: dict[int | str, Doc] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    deprecated: bool = False

    def path_names(self) -> list[str]:
        """The path's parameters, in their order in the template."""
        return _TEMPLATE_PARAMETER.findall(self.path)

    def operation(self) -> Doc:
        """Its OpenAPI operation, as FastAPI writes one."""
        operation: Doc = {
            "tags": list(self.tags),
            "summary": self.summary,
            "operationId": self.name,
            "parameters": params.operation_parameters(self.path_names(), self.params),
            "responses": {str(code): doc for code, doc in self.responses.items()},
        }
        if self.deprecated:
            operation["deprecated"] = True
        return operation


class Responder:
    """Sends a response and records it at its end: the call's counter (when there is a call) and
    the HTTP series, by route template (when `http` records them: a layer outside may)."""

    def __init__(self, metrics: Metrics, http: Recorder | None) -> None:
        self.metrics = metrics
        self.http = http

    async def __call__(
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
                record_call(self.metrics, call, code)
            if self.http is not None:
                seconds = (first_byte or perf_counter()) - started
                method, status = scope["method"], str(response.status_code)
                self.http(Info(Request(scope), response, method, handler, status, seconds, seconds))


class CallEndpoint:
    """The ASGI app of one call route (a Starlette `Route` takes it as its endpoint)."""

    def __init__(self, route: CallRoute, core: Core, responder: Responder) -> None:
        missing = [name for name in route.calls if name not in core.calls.by_name]
        if missing:  # at start-up, not per request
            raise KeyError(f"not in the call table: {', '.join(missing)}")
        self.route = route
        self.core = core
        self.respond = responder
        self.takes = params.query_names(route.params) if route.checks_parameters else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started, route, request = perf_counter(), self.route, Request(scope, receive)
        if scope["method"] != "GET":
            refused = route.surface.wrong_method(request)
            await self.respond(scope, receive, send, started, route.path, None, refused)
            return
        args, problem = params.parse(request, route.params)
        call = route.call(request, args)
        failure: Exception | None = None
        try:
            response = await self._answer(request, call, args, problem)
        except StatusError as exc:
            error = route.surface.translate(exc)
            call.end(error.code)
            response = route.surface.respond(error)
        except Exception as exc:
            # As FastAPI's ServerErrorMiddleware: the client learns nothing internal, and the
            # exception goes on to the server, which logs its traceback.
            response, failure = error_response(Code.INTERNAL, "internal error"), exc
        await self.respond(scope, receive, send, started, route.path, call, response)
        if failure is not None:
            raise failure

    async def _answer(
        self, request: Request, call: Call, args: Args, problem: StatusError | None
    ) -> Response:
        if self.takes is not None and request.scope.get("query_string"):
            params.check(request.query_params, self.takes)
        admit(self.core, call, unsynced_watch_waits=self.route.unsynced_watch_waits)
        if problem is not None:
            raise problem
        return await self.route.endpoint(request, call, args, **request.path_params)


class _Route(Route):
    """A Starlette Route, matched on the path alone: the gateway serves no root path, and its
    path parameters are strings, so the route's root-path and convertor work is left out (the
    router asks each call route in turn, for every request)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match = self.path_regex.match(scope["path"]) if scope["type"] == "http" else None
        if match is None:
            return Match.NONE, {}
        return Match.FULL, {"endpoint": self.endpoint, "path_params": match.groupdict()}


def routes(core: Core, declared: Sequence[CallRoute], responder: Responder) -> list[Route]:
    """The router's routes: each answers every method on its path (a wrong one with its
    surface's 405), so no other route is asked about a call route's path."""
    return [_Route(route.path, CallEndpoint(route, core, responder), name=route.name) for route in declared]
