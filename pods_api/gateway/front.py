"""The one layer every HTTP request passes through, in front of FastAPI: the loopback Host check
(TCP only), the hot routes served as plain ASGI endpoints, and each request's metrics (the HTTP
series and the per-call counters) recorded once, at its end.

Why plain endpoints: a Get costs the bare Starlette floor ~10 µs in process; through FastAPI it
cost ~170 µs, of which the handler was a few: FastAPI's dependency solving, eight middleware
layers each wrapping `send`, and the instrumentator's middleware (`python -m bench requests`,
W3 in BENCHMARKS.md). A plain endpoint
(`PlainRoute`) names its call, checks its query parameters against the ones its FastAPI
declaration takes, admits the call through the call table and answers; FastAPI still declares
the route (the OpenAPI document, and the parameter names) and serves every other route and
method, so 404s, 405s and the error body stay FastAPI's and errors.py's.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from time import perf_counter

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pods_api.core.api.status import StatusError
from pods_api.core.policy.metrics import Metrics
from pods_api.gateway.admission import record_call, response_code
from pods_api.gateway.errors import Code, error_response
from pods_api.gateway.hosts import host_refusal
from pods_api.gateway.httpmetrics import UNMATCHED, HttpMetrics, content_length

Endpoint = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class PlainRoute:
    """A GET route answered without FastAPI. `endpoint` raises StatusError for an error response."""

    path: str  # a Starlette path template: `/v1/pods/{uid}`
    endpoint: Endpoint

    @property
    def regex(self) -> re.Pattern[str]:
        return compile_path(self.path)[0]


class Front:
    """Serves `routes` itself and hands every other request to `app` (FastAPI)."""

    def __init__(self, app: ASGIApp, routes: Sequence[PlainRoute], http: HttpMetrics, calls: Metrics) -> None:
        self.app = app
        self.routes = [(route.regex, route.path, route.endpoint) for route in routes]
        self.http = http
        self.calls = calls

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = perf_counter()
        refused = host_refusal(scope)
        if refused is not None:
            await self._respond(scope, receive, send, started, UNMATCHED, refused)
            return
        if scope["method"] == "GET":
            path = scope["path"]
            for regex, template, endpoint in self.routes:
                match = regex.match(path)
                if match is not None:
                    scope["path_params"] = match.groupdict()
                    await self._serve(scope, receive, send, started, template, endpoint)
                    return
        await self._delegate(scope, receive, send, started)

    async def _serve(
        self, scope: Scope, receive: Receive, send: Send, started: float, template: str, endpoint: Endpoint
    ) -> None:
        failure: Exception | None = None
        try:
            response = await endpoint(Request(scope, receive))
        except StatusError as exc:
            response = error_response(exc.code, exc.message, retry_after=exc.retry_after)
        except Exception as exc:
            # As FastAPI's ServerErrorMiddleware: the client learns nothing internal, and the
            # exception goes on to the server, which logs its traceback.
            response, failure = error_response(Code.INTERNAL, "internal error"), exc
        await self._respond(scope, receive, send, started, template, response)
        if failure is not None:
            raise failure

    async def _respond(
        self, scope: Scope, receive: Receive, send: Send, started: float, handler: str, response: Response
    ) -> None:
        headers = response.raw_headers
        code = response_code(response.status_code, headers)
        # A stream's time is to its first byte, which it sends as it starts; its size is 0. Its
        # `send` is not wrapped: every frame would pay for the wrapper.
        streams = not hasattr(response, "body")
        first_byte = perf_counter() if streams else None
        try:
            await response(scope, receive, send)
        except asyncio.CancelledError:
            code = Code.CANCELLED
            raise
        finally:
            record_call(self.calls, scope, code)
            self.http.observe(
                scope["method"],
                handler,
                response.status_code,
                (first_byte or perf_counter()) - started,
                content_length(scope["headers"]),
                0 if streams else content_length(headers),
            )

    async def _delegate(self, scope: Scope, receive: Receive, send: Send, started: float) -> None:
        """FastAPI answers; the status and the code are read from what it sends."""
        start: Message | None = None
        first_byte = 0.0

        async def observe(message: Message) -> None:
            nonlocal start, first_byte
            if start is None and message["type"] == "http.response.start":
                start, first_byte = message, perf_counter()
            await send(message)

        code = Code.UNKNOWN
        try:
            await self.app(scope, receive, observe)
        except asyncio.CancelledError:
            code = Code.CANCELLED
            raise
        except BaseException:
            code = Code.INTERNAL
            raise
        finally:
            headers = start.get("headers", []) if start is not None else []
            status = start["status"] if start is not None else 500
            if start is not None and code is not Code.CANCELLED:
                code = response_code(status, headers)
            record_call(self.calls, scope, code)
            route = scope.get("route")
            self.http.observe(
                scope["method"],
                getattr(route, "path", UNMATCHED),
                status,
                (first_byte or perf_counter()) - started,
                content_length(scope["headers"]),
                content_length(headers),
            )
