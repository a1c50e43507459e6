"""The Pods API over HTTP: List (`GET /v1/pods`), Get (`GET /v1/pods/{uid}`) and Watch
(`GET /v1/pods?watch=true` or `Accept: text/event-stream`); List and Watch take label and field
selectors. Our lookups: `GET /v1/pods?containerID=…` or `?podIP=…` (a PodList of the matches)
and `GET /v1/namespaces/{namespace}/pods/{name}` (one pod).

`query_view` is the one reading of `fields`, `labelSelector` and `fieldSelector` into a View;
any route serving pods (the Kubernetes view too) takes its view from it.

Handlers and dependencies are `async def` on purpose: FastAPI runs plain `def` in a thread pool,
and the cache belongs to the event loop.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Annotated

from fastapi import Depends, Header, Query
from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.api.status import InvalidArgument, NotFound, quote
from pods_api.core.assembly import Core
from pods_api.core.query.view import View, parse_view
from pods_api.core.store.lookup import CONTAINER_ID, POD_IP, LookupKey, find
from pods_api.gateway import formats, openapi, params, sse
from pods_api.gateway.admission import GET, LIST, LOOKUP, WATCH, Call, named
from pods_api.gateway.assemble import list_body, lookup_body, pod_body
from pods_api.gateway.body import SharedBody
from pods_api.gateway.front import CallRoute, unreachable

FIELDS_DOC = (
    "Only these fields of each pod, as comma-separated JSON paths (`status.phase,spec.nodeName`); "
    "repeatable. `metadata.name`, `metadata.namespace` and `metadata.uid` are always kept. "
    "The rules of the gRPC `x-kubernetes-fieldmask` header."
)
PRETTY_DOC = "Indented JSON."
WATCH_DOC = "Stream events (Server-Sent Events) instead of listing; so does `Accept: text/event-stream`."
LABEL_SELECTOR_DOC = (
    "Only pods whose labels match, in Kubernetes label selector syntax: `app=web,tier!=db`, "
    "`env in (a,b)`, `env notin (c)`, `canary`, `!canary`. On a watch, a pod that stops matching "
    "is sent as DELETED and one that starts matching as ADDED."
)
FIELD_SELECTOR_DOC = (
    "Only pods whose fields match, in Kubernetes field selector syntax (`status.phase=Running,"
    "spec.hostNetwork!=true`), on the fields the API server allows for pods: metadata.name, "
    "metadata.namespace, spec.nodeName, spec.restartPolicy, spec.schedulerName, "
    "spec.serviceAccountName, spec.hostNetwork, status.phase, status.podIP, status.nominatedNodeName."
)
CONTAINER_ID_DOC = (
    "Lookup: the pods with this container (`containerd://<id>`, the bare ID, or a unique prefix of "
    "at least 12 characters) in any of status.containerStatuses, initContainerStatuses or "
    "ephemeralContainerStatuses. The PodList's `matches` says which container. Not with `watch`."
)
POD_IP_DOC = (
    "Lookup: the pods with this IP in status.podIPs (host-network pods share the node's). Not with `watch`."
)
# The route name (and operation id) of the lookup by namespace and name.
BY_NAME = "GetPodByName"
RESOURCE_VERSION_DOC = (
    "Watch only: resume after this revision (an `id` of an earlier event); `Last-Event-ID` wins "
    "when both are given. Too old a revision gets a full snapshot."
)


def query_view(
    fields: list[str] | None, label_selector: str | None = None, field_selector: str | None = None
) -> View:
    """The view a request's query asks for. An empty `fields` parameter (`?fields=`) asks for no
    mask, as if it were absent; within a value, an empty path is invalid as in the gRPC header.
    Raises FieldMaskError or SelectorError (InvalidArgument: 400 naming the problem and where)."""
    mask = ",".join(value for value in fields or () if value.strip())
    label_selector, field_selector = label_selector or "", field_selector or ""
    if len(mask) + len(label_selector) + len(field_selector) > _VIEW_CACHED_LENGTH:
        return parse_view(mask, label_selector, field_selector)
    return _cached_view(mask, label_selector, field_selector)


# Views remembered by their query text: agents send the same few, and parsing one (the mask's
# paths sorted, the View built) cost a third of a masked List's handler. Errors are not kept
# (lru_cache keeps only returned values); long texts are not kept, so the cache stays small.
_VIEWS_KEPT = 256
_VIEW_CACHED_LENGTH = 1024
_cached_view = functools.lru_cache(maxsize=_VIEWS_KEPT)(parse_view)


async def field_view(
    fields: Annotated[list[str] | None, Query(description=FIELDS_DOC)] = None,
) -> View:
    return query_view(fields)


async def selector_view(
    fields: Annotated[list[str] | None, Query(description=FIELDS_DOC)] = None,
    label_selector: Annotated[
        str | None, Query(alias="labelSelector", description=LABEL_SELECTOR_DOC)
    ] = None,
    field_selector: Annotated[
        str | None, Query(alias="fieldSelector", description=FIELD_SELECTOR_DOC)
    ] = None,
) -> View:
    return query_view(fields, label_selector, field_selector)


def resume_revision(last_event_id: str | None, resource_version: str | None) -> int | None:
    """The revision a watch resumes after; the header wins, since a browser's EventSource sends
    the newest id there while its URL keeps the first one. What is not a non-negative integer
    is InvalidArgument, as the Kubernetes view answers it. One ahead of the cache is not
    refused (the Kubernetes view's 504): after a restart, a revision the earlier process
    reached may be ahead of the new one's count, and an EventSource cannot retry after an
    error status; such a resume gets a full snapshot, as one too old does."""
    for name, value in (("Last-Event-ID", last_event_id), ("resourceVersion", resource_version)):
        if value:
            try:
                revision = int(value)
            except ValueError:
                raise InvalidArgument(f"{name} {quote(value)} is not a revision") from None
            if revision < 0:
                raise InvalidArgument(f"{name} {quote(value)} is not a revision: it must be non-negative")
            return revision
    return None


def list_call(request: Request) -> Call:
    """Which call a request for the pods collection is (Watch, Lookup or List) and the form of
    its answer, from one reading of `watch`, `pretty` and Accept."""
    query = request.query_params
    (pretty, watch), problem = params.read_flags(query, "pretty", "watch")
    fmt = formats.answer(request.headers.get("accept"), pretty)
    if watch or fmt is None:
        return Call(WATCH, problem=problem)
    lookup = any(p in query for p in LOOKUP_PARAMETERS)
    return Call(LOOKUP if lookup else LIST, fmt=fmt, problem=problem)


# Query parameters that make `GET /v1/pods` a Lookup (by an index) rather than a List.
LOOKUP_PARAMETERS = (CONTAINER_ID, POD_IP)


class PodsRoutes:
    """The pods routes of one core, as call routes (gateway/front.py): each endpoint does what
    FastAPI's dependencies would, in their order, after the front layer has named the call,
    checked the parameter names and admitted it: reads the view, then the other parameters."""

    def __init__(self, core: Core) -> None:
        self.core = core
        # Set while the pod sources have synced: what a watch accepted before then waits for.
        self.synced = asyncio.Event()
        core.cache.on_readiness(self._follow)
        self._follow(core.cache.ready)

    def _follow(self, ready: bool) -> None:
        self.synced.set() if ready else self.synced.clear()

    def routes(self) -> list[CallRoute]:
        return [
            CallRoute(
                "/v1/pods",
                LIST,
                (LIST, WATCH, LOOKUP),
                list_call,
                self.list_pods,
                declare_list,
                unsynced_watch_waits=True,
                options={
                    "summary": "List the node's pods, watch them, or look them up by container ID or pod IP",
                    "response_class": Response,
                    "responses": openapi.list_responses(),
                    "tags": ["pods"],
                },
            ),
            CallRoute(
                "/v1/pods/{uid}",
                GET,
                (GET,),
                named(GET),
                self.get_pod,
                declare_get,
                options={
                    "summary": "One pod, by UID",
                    "response_class": Response,
                    "responses": openapi.get_responses(),
                    "tags": ["pods"],
                },
            ),
            CallRoute(
                "/v1/namespaces/{namespace}/pods/{name}",
                BY_NAME,
                (LOOKUP,),
                named(LOOKUP),
                self.get_pod_by_name,
                declare_get_by_name,
                options={
                    "summary": "One pod, by namespace and name (a Lookup)",
                    "response_class": Response,
                    "responses": openapi.get_responses(),
                    "tags": ["pods"],
                },
            ),
        ]

    async def list_pods(self, request: Request, call: Call) -> Response:
        query = request.query_params
        view = query_view(query.getlist("fields"), query.get("labelSelector"), query.get("fieldSelector"))
        if call.problem is not None:
            raise call.problem
        container_id, pod_ip = query.get(CONTAINER_ID), query.get(POD_IP)
        core = self.core
        if call.name == WATCH:
            if container_id is not None or pod_ip is not None:
                raise InvalidArgument(
                    f"{CONTAINER_ID} and {POD_IP} look pods up once; they cannot be watched "
                    "(watch with labelSelector or fieldSelector)"
                )
            return self._watch(request, call, view)
        fmt = call.fmt or formats.Format.JSON
        if call.name == LOOKUP:
            hits = find(core.cache, LookupKey(container_id=container_id, pod_ip=pod_ip), view)
            return Response(lookup_body(core.cache.revision, hits, view, fmt), media_type=fmt.media_type)
        core.http_lists.check()
        body = await list_body(core.cache.snapshot(), view, fmt)
        return SharedBody(body, media_type=fmt.media_type, lists=core.http_lists)

    def _watch(self, request: Request, call: Call, view: View) -> Response:
        query, core = request.query_params, self.core
        since = resume_revision(request.headers.get("last-event-id"), query.get("resourceVersion"))
        if call.waits_for_sync:
            stopping = core.cache.hub.stopping
            waiting = sse.when_synced(core.streams, self.synced, stopping, view, since)
            return sse.watch_body(waiting, None, call, core.config)
        # TooManyWatchers and ServerStopping are refusals the surface answers (with Retry-After).
        opened = core.streams.open(view, since)
        return sse.watch_body(opened.frames(sse.ENCODING), opened, call, core.config)

    async def get_pod(self, request: Request, call: Call, uid: str) -> Response:
        query = request.query_params
        view = query_view(query.getlist("fields"))
        (pretty,) = params.flags(query, "pretty")
        pod = self.core.cache.get(uid)
        if pod is None:
            raise NotFound(f"pod {quote(uid)} not found")
        fmt = formats.choose(request.headers.get("accept"), pretty)
        return Response(pod_body(pod, view, fmt), media_type=fmt.media_type)

    async def get_pod_by_name(self, request: Request, call: Call, namespace: str, name: str) -> Response:
        query = request.query_params
        view = query_view(query.getlist("fields"))
        (pretty,) = params.flags(query, "pretty")
        hits = find(self.core.cache, LookupKey(name=(namespace, name)))
        if not hits:
            raise NotFound(f"pod {namespace}/{name} not found")
        # Two sources can serve one name under two UIDs; the lowest UID answers, as List orders.
        fmt = formats.choose(request.headers.get("accept"), pretty)
        return Response(pod_body(hits[0].pod, view, fmt), media_type=fmt.media_type)


# -- the declarations: what the OpenAPI document says each route takes ---------------------------


async def declare_list(
    view: Annotated[View, Depends(selector_view)],
    pretty: Annotated[bool, Query(description=PRETTY_DOC)] = False,
    watch: Annotated[bool, Query(description=WATCH_DOC)] = False,
    container_id: Annotated[str | None, Query(alias=CONTAINER_ID, description=CONTAINER_ID_DOC)] = None,
    pod_ip: Annotated[str | None, Query(alias=POD_IP, description=POD_IP_DOC)] = None,
    resource_version: Annotated[
        str | None, Query(alias="resourceVersion", description=RESOURCE_VERSION_DOC)
    ] = None,
    last_event_id: Annotated[
        str | None,
        Header(alias="Last-Event-ID", description="Watch only: resume after this event id."),
    ] = None,
) -> Response:
    unreachable()


async def declare_get(
    uid: str,
    view: Annotated[View, Depends(field_view)],
    pretty: Annotated[bool, Query(description=PRETTY_DOC)] = False,
) -> Response:
    unreachable()


async def declare_get_by_name(
    namespace: str,
    name: str,
    view: Annotated[View, Depends(field_view)],
    pretty: Annotated[bool, Query(description=PRETTY_DOC)] = False,
) -> Response:
    unreachable()
