"""Errors of the Kubernetes view as the API server words them: a `meta/v1` Status object with
`reason` and `code`, so that kubectl prints `Error from server (NotFound): pods "x" not found`
and client-go's `apierrors.IsNotFound`, `IsResourceExpired`, `IsTooManyRequests`, ... hold.

A `KubeError` is a domain error (core/api/statuserrors.py) that also carries the Kubernetes reason and
HTTP status; it keeps a gRPC code only for the call metrics. Core errors raised under the
Kubernetes paths (the call table's refusals, not-ready) are turned into one by `from_status`,
and answered by `respond`, the one handler the app installs for this view.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.api.statuserrors import Code, StatusError
from pods_api.gateway.http.head import ALLOW

JSON = "application/json"

# gRPC code of a core error -> (HTTP status, Kubernetes StatusReason).
_REASONS: dict[Code, tuple[int, str]] = {
    Code.INVALID_ARGUMENT: (400, "BadRequest"),
    Code.NOT_FOUND: (404, "NotFound"),
    Code.RESOURCE_EXHAUSTED: (429, "TooManyRequests"),
    # Here it only means "the pod sources have not synced yet": temporary, so 503 + Retry-After.
    Code.FAILED_PRECONDITION: (503, "ServiceUnavailable"),
    Code.UNAVAILABLE: (503, "ServiceUnavailable"),
    Code.UNIMPLEMENTED: (405, "MethodNotAllowed"),
}
# For the call metrics: the gRPC code a Kubernetes answer stands for.
_CODES: dict[int, Code] = {
    400: Code.INVALID_ARGUMENT,
    404: Code.NOT_FOUND,
    405: Code.UNIMPLEMENTED,
    406: Code.INVALID_ARGUMENT,
    410: Code.OUT_OF_RANGE,
    422: Code.INVALID_ARGUMENT,
    429: Code.RESOURCE_EXHAUSTED,
    503: Code.UNAVAILABLE,
    504: Code.DEADLINE_EXCEEDED,
}


class KubeError(StatusError):
    """A request of the Kubernetes view ends with this Status."""

    def __init__(
        self,
        http_status: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, code=_CODES.get(http_status, Code.UNKNOWN), retry_after=retry_after)
        self.http_status = http_status
        self.reason = reason
        self.details = details

    def body(self) -> bytes:
        return status_body(self.http_status, self.reason, self.message, self.details, self.retry_after)


def status_body(
    http_status: int,
    reason: str,
    message: str,
    details: dict[str, Any] | None = None,
    retry_after: float | None = None,
) -> bytes:
    """A Status in Go's field order (TypeMeta, metadata, status, message, reason, details, code)."""
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if retry_after is not None:
        details = {**(details or {}), "retryAfterSeconds": retry_after_seconds(retry_after)}
    if details:
        status["details"] = details
    status["code"] = http_status
    return orjson.dumps(status)


def retry_after_seconds(seconds: float) -> int:
    """Whole seconds, rounded up and at least 1: `Retry-After: 0` invites a busy loop."""
    return max(1, math.ceil(seconds))


def from_status(exc: StatusError) -> KubeError:
    """A core error as the API server would say it."""
    if isinstance(exc, KubeError):
        return exc
    http_status, reason = _REASONS.get(exc.code, (500, "InternalError"))
    return KubeError(http_status, reason, exc.message, retry_after=exc.retry_after)


def not_found(name: str) -> KubeError:
    """The API server's words, which kubectl prints after `Error from server (NotFound): `."""
    return KubeError(404, "NotFound", f'pods "{name}" not found', details={"name": name, "kind": "pods"})


# What a user asking a pod's subresource of this server can use instead.
_INSTEAD = {
    "log": "the node's runtime (`crictl logs`)",
    "exec": "the node's runtime (`crictl exec`)",
    "attach": "the node's runtime (`crictl attach`)",
    "portforward": "the node's runtime (`crictl port-forward`)",
}


def subresource_refusal(name: str, pod: str = "") -> str:
    """Why a pod's subresource (kubectl logs, exec, ...; k9s's log view) is not served, and what
    serves it: the same words for the request itself and for `kubectl auth can-i` asking first."""
    instead = _INSTEAD.get(name, "the cluster's API server")
    which = f" (pod {pod!r})" if pod else ""
    return (
        f"pods-api serves this node's pods read-only and does not serve pods/{name}{which}: "
        f"use the cluster's API server (kubectl with its kubeconfig) or {instead}"
    )


def bad_request(message: str) -> KubeError:
    return KubeError(400, "BadRequest", message)


@dataclass(frozen=True, slots=True)
class FieldError:
    """One cause of a 422, as apimachinery's field.Error has it: its type (the cause's reason),
    the field path, and the body its Error() prints after the path."""

    reason: str
    field: str
    body: str

    def __str__(self) -> str:
        return f"{self.field}: {self.body}"


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError("FieldValueForbidden", path, f"Forbidden: {detail}")


def not_supported(path: str, value: str, supported: tuple[str, ...]) -> FieldError:
    quoted = ", ".join(orjson.dumps(v).decode() for v in supported)
    body = f"Unsupported value: {orjson.dumps(value).decode()}: supported values: {quoted}"
    return FieldError("FieldValueNotSupported", path, body)


def invalid_list_options(causes: list[FieldError]) -> KubeError:
    """The API server's 422 for ListOptions its validation refuses (apimachinery's
    errors.NewInvalid over GroupKind meta.k8s.io/ListOptions, name ""): the message aggregates
    the causes as utilerrors does (one alone, several in brackets, repeats once)."""
    words = list(dict.fromkeys(str(cause) for cause in causes))
    aggregated = words[0] if len(words) == 1 else f"[{', '.join(words)}]"
    details = {
        "group": "meta.k8s.io",
        "kind": "ListOptions",
        "causes": [{"reason": c.reason, "message": c.body, "field": c.field} for c in causes],
    }
    return KubeError(422, "Invalid", f'ListOptions.meta.k8s.io "" is invalid: {aggregated}', details=details)


def expired(message: str) -> KubeError:
    """410: the revision asked for is older than what is kept; list again (client-go's
    IsResourceExpired, the reflector's cue to relist)."""
    return KubeError(410, "Expired", message)


def too_large(revision: int, current: int) -> KubeError:
    """The API server's answer for a revision it has not reached (client-go's
    IsTooLargeResourceVersion)."""
    return KubeError(
        504,
        "Timeout",
        f"Too large resource version: {revision}, current: {current}",
        details={"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]},
        retry_after=1,
    )


def response(error: KubeError) -> Response:
    headers = {}
    if error.retry_after is not None:
        headers["Retry-After"] = str(retry_after_seconds(error.retry_after))
    if error.http_status == 405:
        headers["Allow"] = ALLOW
    return Response(error.body(), status_code=error.http_status, media_type=JSON, headers=headers)


async def respond(request: Request, exc: Exception) -> Response:
    """The app's handler for KubeError: the Status."""
    assert isinstance(exc, KubeError)
    return response(exc)


def install(app: FastAPI) -> None:
    app.add_exception_handler(KubeError, respond)
