"""The OpenAPI document: FastAPI's, with real Pod/PodList/Error schemas, the event stream
documented, and FastAPI's 422 (which this API never sends: bad input is a 400) removed.

The committed copy, openapi/openapi.json, is written by `python -m pods_api.serve.openapi_writer`
(serve/openapi_writer.py); tests/unit/gateway/test_openapi.py fails when it differs from what the
app serves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.routing import Route

from pods_api.gateway import podschema
from pods_api.gateway.http.errors import HTTP_STATUS, Code
from pods_api.gateway.podschema import POD, POD_LIST, ref

Doc = dict[str, Any]

TITLE = "pods-api HTTP gateway"
VERSION = "v1"
DESCRIPTION = """\
The kubelet's node-local Pods API as JSON over HTTP: the same pods, masks, limits and errors as
the gRPC API, on a UNIX socket of its own (and optionally loopback TCP). Read-only.

Errors carry their gRPC status: a JSON body `{"error": {"code", "status", "grpcCode", "message"}}`
and a `Grpc-Status` header. 429 and 503 come with `Retry-After`.
"""
ERROR = "Error"
LOOKUP_LIST = "PodLookupList"
JSON = "application/json"
WATCH_DESCRIPTION = """\
The pods (JSON, `application/json` or `application/yaml`), or with `watch=true` or
`Accept: text/event-stream` a stream of Server-Sent Events:

    id: <revision>
    event: ADDED | MODIFIED | DELETED | INITIAL_SYNC_COMPLETE | ERROR
    data: <a Pod, or for INITIAL_SYNC_COMPLETE {} / {"resumed":true}, or for ERROR an Error>

First the current pods as ADDED (no `id`), then INITIAL_SYNC_COMPLETE (`id`: the snapshot's
revision), then live events. `Last-Event-ID` (or `resourceVersion`) resumes: the events after that
revision, then INITIAL_SYNC_COMPLETE with `{"resumed":true}`; a revision too old for the event
history gets a full snapshot instead. Prune local state only at an INITIAL_SYNC_COMPLETE that is
not `resumed`. A watch that falls behind ends with ERROR (RESOURCE_EXHAUSTED); at shutdown, ERROR
(UNAVAILABLE). A comment line is sent every heartbeat (15 s by default).
"""


# -- response documentation, used by the routes ------------------------------------------------


def _errors(*codes: Code) -> dict[int | str, Doc]:
    docs: dict[int | str, Doc] = {}
    for code in codes:
        headers = {"Grpc-Status": {"description": "The gRPC status code.", "schema": {"type": "integer"}}}
        if HTTP_STATUS[code] in (429, 503):
            headers["Retry-After"] = {"description": "Seconds to wait.", "schema": {"type": "integer"}}
        entry = docs.setdefault(
            HTTP_STATUS[code], {"description": "", "content": {JSON: {"schema": ref(ERROR)}}}
        )
        entry["description"] = " or ".join(filter(None, [entry["description"], code.name]))
        entry.setdefault("headers", {}).update(headers)
    docs["default"] = {"description": "Any other error.", "content": {JSON: {"schema": ref(ERROR)}}}
    return docs


_ADMISSION = (Code.PERMISSION_DENIED, Code.RESOURCE_EXHAUSTED, Code.FAILED_PRECONDITION)


LOOKUP_DESCRIPTION = """
With `containerID` or `podIP` (a Lookup), a PodList of the pods found (an empty one when none)
with one more field, `matches`: one entry per item, in item order, with the pod's `uid` and, for
a container ID, which container matched. The items stay plain Pods, and readers of a PodList
skip the field.
"""


def list_responses() -> dict[int | str, Doc]:
    lists = {"anyOf": [ref(POD_LIST), ref(LOOKUP_LIST)]}
    return {
        200: {
            "description": WATCH_DESCRIPTION + LOOKUP_DESCRIPTION,
            "content": {
                JSON: {"schema": lists},
                "application/yaml": {"schema": lists},
                "text/event-stream": {"schema": {"type": "string"}},
            },
        },
        **_errors(Code.INVALID_ARGUMENT, *_ADMISSION),
    }


def get_responses() -> dict[int | str, Doc]:
    return {
        200: {
            "description": "The pod.",
            "content": {JSON: {"schema": ref(POD)}, "application/yaml": {"schema": ref(POD)}},
        },
        **_errors(Code.INVALID_ARGUMENT, Code.NOT_FOUND, *_ADMISSION),
    }


def probe_responses(*, ready: bool) -> dict[int | str, Doc]:
    ok: dict[int | str, Doc] = {
        200: {"description": "ok", "content": {"text/plain": {"schema": {"type": "string"}}}}
    }
    return {**ok, **_errors(Code.PERMISSION_DENIED, *((Code.UNAVAILABLE,) if ready else ()))}


def metrics_responses() -> dict[int | str, Doc]:
    exposition = {"schema": {"type": "string"}}
    return {
        200: {
            "description": "Prometheus text format, or OpenMetrics when the Accept header asks for it.",
            "content": {"text/plain": exposition, "application/openmetrics-text": exposition},
        },
        **_errors(Code.PERMISSION_DENIED),
    }


def _error_schema() -> Doc:
    return {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "status", "grpcCode", "message"],
                "properties": {
                    "code": {"type": "integer", "description": "The HTTP status."},
                    "status": {"type": "string", "enum": [code.name for code in Code if code is not Code.OK]},
                    "grpcCode": {"type": "integer", "minimum": 1, "maximum": 16},
                    "message": {"type": "string"},
                },
            }
        },
    }


def _lookup_list_schema() -> Doc:
    container = {
        "type": "object",
        "description": "The container whose ID matched (container ID lookups only).",
        "required": ["name", "kind", "containerID"],
        "properties": {
            "name": {"type": "string"},
            "kind": {"type": "string", "enum": ["container", "initContainer", "ephemeralContainer"]},
            "containerID": {"type": "string", "description": "As the pod's status states it."},
        },
    }
    match = {
        "type": "object",
        "required": ["uid"],
        "properties": {"uid": {"type": "string"}, "container": container},
    }
    return {
        "description": "A PodList with `matches`: which pod, and container, each item matched.",
        "allOf": [
            ref(POD_LIST),
            {
                "type": "object",
                "required": ["matches"],
                "properties": {"matches": {"type": "array", "items": match}},
            },
        ],
    }


# -- the document ----------------------------------------------------------------------------


class CallOperation(Protocol):
    """A route FastAPI does not serve, documented by its own operation (a call route)."""

    @property
    def path(self) -> str: ...

    def operation(self) -> Doc: ...


def install(app: FastAPI, calls: Sequence[CallOperation] = ()) -> None:
    """Serve the document of `app`, with `calls` (the list itself: a call added later shows)."""

    def document() -> Doc:
        if app.openapi_schema is None:
            app.openapi_schema = build(app, calls)
        return app.openapi_schema

    app.openapi = document  # type: ignore[method-assign]
    # Starlette lets HEAD into a GET route it made itself; every other route here is GET only.
    for route in app.router.routes:
        if isinstance(route, Route) and route.path == app.openapi_url and route.methods:
            route.methods.discard("HEAD")


def build(app: FastAPI, calls: Sequence[CallOperation] = ()) -> Doc:
    """FastAPI's document of its routes, with the call routes' operations (gateway/http/router.py)."""
    doc = get_openapi(title=TITLE, version=VERSION, description=DESCRIPTION, routes=app.routes)
    paths = doc.setdefault("paths", {})
    for call in calls:
        paths.setdefault(call.path, {})["get"] = call.operation()
    for path in doc.get("paths", {}).values():
        for operation in path.values():
            responses = operation.get("responses", {})
            # FastAPI's own (no route here validates with pydantic); the Kubernetes view's 422
            # Invalid is a Status and stays.
            if responses.get("422", {}).get("description") == "Validation Error":
                del responses["422"]
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    schemas.update(podschema.components())
    schemas[ERROR] = _error_schema()
    schemas[LOOKUP_LIST] = _lookup_list_schema()
    return doc
