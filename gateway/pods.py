"""The Pods API over HTTP: List (`GET /v1/pods`), Get (`GET /v1/pods/{uid}`) and Watch
(`GET /v1/pods?watch=true` or `Accept: text/event-stream`).

Handlers and dependencies are `async def` on purpose: FastAPI runs plain `def` in a thread pool,
and the cache belongs to the event loop.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query
from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.fieldmask import parse_mask
from pods_api.core.runtime import Core
from pods_api.core.status import InvalidArgument, NotFound
from pods_api.core.view import View
from pods_api.gateway import formats, openapi
from pods_api.gateway.assemble import list_body, pod_body
from pods_api.gateway.rpcs import CALL_KEY, GET, LIST, WATCH, call_dependencies
from pods_api.gateway.sse import WatchResponse, open_watch, stream

FIELDS_DOC = (
    "Only these fields of each pod, as comma-separated JSON paths (`status.phase,spec.nodeName`); "
    "repeatable. `metadata.name`, `metadata.namespace` and `metadata.uid` are always kept. "
    "The rules of the gRPC `x-kubernetes-fieldmask` header."
)
PRETTY_DOC = "Indented JSON."
WATCH_DOC = "Stream events (Server-Sent Events) instead of listing; so does `Accept: text/event-stream`."
RESOURCE_VERSION_DOC = (
    "Watch only: resume after this revision (an `id` of an earlier event); `Last-Event-ID` wins "
    "when both are given. Too old a revision gets a full snapshot."
)


async def field_view(
    fields: Annotated[list[str] | None, Query(description=FIELDS_DOC)] = None,
) -> View:
    # An empty parameter (`?fields=`) asks for no mask, as if it were absent; within a value, an
    # empty path is invalid as in the gRPC header. A FieldMaskError is an InvalidArgument.
    return View(parse_mask(",".join(value for value in fields or () if value.strip())))


def resume_revision(last_event_id: str | None, resource_version: str | None) -> int | None:
    """The revision a watch resumes after; the header wins, since a browser's EventSource sends
    the newest id there while its URL keeps the first one."""
    for name, value in (("Last-Event-ID", last_event_id), ("resourceVersion", resource_version)):
        if value:
            try:
                return int(value)
            except ValueError:
                raise InvalidArgument(f"{name} {value!r} is not a revision") from None
    return None


def router(core: Core) -> APIRouter:
    pods = APIRouter(tags=["pods"])

    @pods.get(
        "/v1/pods",
        name=LIST,
        operation_id="ListPods",
        summary="List the node's pods, or watch them",
        response_class=Response,
        responses=openapi.list_responses(),
        dependencies=call_dependencies(core, None),
    )
    async def list_pods(
        request: Request,
        view: Annotated[View, Depends(field_view)],
        pretty: Annotated[bool, Query(description=PRETTY_DOC)] = False,
        watch: Annotated[bool, Query(description=WATCH_DOC)] = False,
        resource_version: Annotated[
            str | None, Query(alias="resourceVersion", description=RESOURCE_VERSION_DOC)
        ] = None,
        last_event_id: Annotated[
            str | None, Header(alias="Last-Event-ID", description="Watch only: resume after this event id.")
        ] = None,
    ) -> Response:
        # name_call decided List or Watch (it also saw the Accept header); `watch` is declared
        # for validation and the schema.
        if request.scope[CALL_KEY] == WATCH:
            opened = open_watch(core.streams, view, resume_revision(last_event_id, resource_version))
            return WatchResponse(stream(opened, request.scope), opened, core.config.heartbeat)
        fmt = formats.choose(request.headers.get("accept"), pretty)
        return Response(list_body(core.cache.snapshot(), view, fmt), media_type=fmt.media_type)

    @pods.get(
        "/v1/pods/{uid}",
        name=GET,
        operation_id="GetPod",
        summary="One pod, by UID",
        response_class=Response,
        responses=openapi.get_responses(),
        dependencies=call_dependencies(core, GET),
    )
    async def get_pod(
        request: Request,
        uid: str,
        view: Annotated[View, Depends(field_view)],
        pretty: Annotated[bool, Query(description=PRETTY_DOC)] = False,
    ) -> Response:
        pod = core.cache.get(uid)
        if pod is None:
            raise NotFound(f"pod {uid!r} not found")
        fmt = formats.choose(request.headers.get("accept"), pretty)
        return Response(pod_body(pod, view, fmt), media_type=fmt.media_type)

    return pods
