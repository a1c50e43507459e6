"""Errors keep their gRPC status: the same code a gRPC client would get, carried in the body and in a
`Grpc-Status` header, with the HTTP status of the standard gRPC<->HTTP table (one exception:
FAILED_PRECONDITION, which here only means "not synced yet", is a temporary 503). The codes and
the domain errors are the core's (core/api/statuserrors.py); this module is only their HTTP mapping, and
the one place where a domain error raised in a request becomes its response.

Body: {"error": {"code": <http>, "status": "<GRPC_CODE_NAME>", "grpcCode": <n>, "message": "..."}}
"""

from __future__ import annotations

import logging
import math

import orjson
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.api.statuserrors import Code, StatusError, quote
from pods_api.gateway.http.head import ALLOW

__all__ = [
    "HTTP_STATUS",
    "ApiError",
    "Code",
    "error_body",
    "error_response",
    "http_status",
    "install",
    "method_not_allowed",
]

log = logging.getLogger(__name__)

ERROR_MEDIA_TYPE = "application/json"


# gRPC code -> HTTP status: the standard gRPC<->HTTP table, with one exception.
HTTP_STATUS = {
    Code.OK: 200,
    Code.CANCELLED: 499,
    Code.UNKNOWN: 500,
    Code.INVALID_ARGUMENT: 400,
    Code.DEADLINE_EXCEEDED: 504,
    Code.NOT_FOUND: 404,
    Code.ALREADY_EXISTS: 409,
    Code.PERMISSION_DENIED: 403,
    Code.RESOURCE_EXHAUSTED: 429,
    # The table says 400; here it only ever means "the pod sources have not synced yet", which
    # passes on its own: 503 + Retry-After makes clients and proxies retry instead of giving up.
    Code.FAILED_PRECONDITION: 503,
    Code.ABORTED: 409,
    Code.OUT_OF_RANGE: 400,
    Code.UNIMPLEMENTED: 501,
    Code.INTERNAL: 500,
    Code.UNAVAILABLE: 503,
    Code.DATA_LOSS: 500,
    Code.UNAUTHENTICATED: 401,
}
# For errors Starlette raises itself (no route, wrong method): which gRPC code they are.
_BY_HTTP = {
    400: Code.INVALID_ARGUMENT,
    401: Code.UNAUTHENTICATED,
    403: Code.PERMISSION_DENIED,
    404: Code.NOT_FOUND,
    405: Code.UNIMPLEMENTED,
    409: Code.ABORTED,
    429: Code.RESOURCE_EXHAUSTED,
    499: Code.CANCELLED,
    501: Code.UNIMPLEMENTED,
    503: Code.UNAVAILABLE,
    504: Code.DEADLINE_EXCEEDED,
}


def http_status(code: Code) -> int:
    return HTTP_STATUS[code]


def code_of_number(number: int) -> Code:
    try:
        return Code(number)
    except ValueError:
        return Code.UNKNOWN


class ApiError(StatusError):
    """A domain error spelled code first, as the gateway's call sites read best."""

    def __init__(self, code: Code, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message, code=code, retry_after=retry_after)


def error_body(code: Code, message: str, http_status: int | None = None) -> bytes:
    return orjson.dumps(
        {
            "error": {
                "code": http_status or HTTP_STATUS[code],
                "status": code.name,
                "grpcCode": code.number,
                "message": message,
            }
        }
    )


def retry_after_header(seconds: float) -> str:
    """Whole seconds, rounded up and at least 1: `Retry-After: 0` invites a busy loop."""
    return str(max(1, math.ceil(seconds)))


def error_response(
    code: Code,
    message: str,
    *,
    http_status: int | None = None,
    retry_after: float | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    all_headers = {"Grpc-Status": str(code.number), **(headers or {})}
    if retry_after is not None:
        all_headers["Retry-After"] = retry_after_header(retry_after)
    return Response(
        error_body(code, message, http_status),
        status_code=http_status or HTTP_STATUS[code],
        media_type=ERROR_MEDIA_TYPE,
        headers=all_headers,
    )


def install(app: FastAPI) -> None:
    """Every error the app can produce gets the one error body."""
    app.add_exception_handler(StatusError, _status_error)
    app.add_exception_handler(HTTPException, _http_exception)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected)


async def _status_error(request: Request, exc: Exception) -> Response:
    """The HTTP surface's one translation of a domain error."""
    assert isinstance(exc, StatusError)
    return error_response(exc.code, exc.message, retry_after=exc.retry_after)


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return method_not_allowed(request.method, request.scope.get("path", ""))
    code = _BY_HTTP.get(exc.status_code, Code.UNKNOWN)
    if exc.status_code == 404:
        # The path as the client sent it: request.url would build it from the server address,
        # which on a UNIX socket is its file path (and a request target like `*` is no URL).
        message = f"no such path: {quote(request.scope.get('path', ''))}"
    else:
        message = str(exc.detail)
    # Keep the status Starlette chose.
    return error_response(code, message, http_status=exc.status_code, headers=dict(exc.headers or {}))


def method_not_allowed(method: str, path: str) -> Response:
    """405 UNIMPLEMENTED for a method other than GET (and HEAD) on a path that has a route."""
    message = f"method {quote(method, 16)} is not allowed on {quote(path)}; this API is read-only"
    # Every route answers GET, and HEAD on each too: what the Allow header names.
    return error_response(Code.UNIMPLEMENTED, message, http_status=405, headers={"Allow": ALLOW})


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return error_response(Code.INVALID_ARGUMENT, validation_message(exc))


def validation_message(exc: RequestValidationError) -> str:
    """One line naming each bad parameter: `query parameter "pretty": Input should be a valid boolean`."""
    parts = []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ())]
        where = f'{loc[0]} parameter "{".".join(loc[1:])}"' if len(loc) > 1 else ".".join(loc)
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


async def _unexpected(request: Request, exc: Exception) -> Response:
    # Starlette logs the traceback after this response is sent; the client learns nothing internal.
    return error_response(Code.INTERNAL, "internal error")
