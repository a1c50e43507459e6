"""The Pods API over HTTP: List (`GET /v1/pods`), Get (`GET /v1/pods/{uid}`) and Watch
(`GET /v1/pods?watch=true` or `Accept: text/event-stream`); List and Watch take label and field
selectors. Our lookups: `GET /v1/pods?containerID=…` or `?podIP=…` (a PodList of the matches)
and `GET /v1/namespaces/{namespace}/pods/{name}` (one pod).

`query_view` is the one reading of `fields`, `labelSelector` and `fieldSelector` into a View;
any route serving pods (the Kubernetes view too) takes its view from it.

Each route's parameters are declared once, in the lists below (gateway/http/params.py's `Param`):
the router (gateway/http/router.py) parses and checks them, and the OpenAPI document shows them.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.api.statuserrors import InvalidArgumentError, NotFoundError, quote
from pods_api.core.assembly import Core
from pods_api.core.query.view import View, parse_view
from pods_api.core.store.lookup import CONTAINER_ID, POD_IP, LookupKey, find
from pods_api.gateway import openapi, sse
from pods_api.gateway.assemble import list_body, lookup_body, pod_body
from pods_api.gateway.http import formats
from pods_api.gateway.http.admission import GET, LIST, LOOKUP, WATCH, Call, named
from pods_api.gateway.http.body import SharedBody
from pods_api.gateway.http.params import FLAG, TEXT, TEXTS, Args, Param
from pods_api.gateway.http.router import CallRoute

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


# Each route's parameters, declared once (gateway/http/params.py): parsed, checked and documented
# from these lists.
FIELDS = Param("fields", TEXTS, FIELDS_DOC)
PRETTY = Param("pretty", FLAG, PRETTY_DOC)
WATCH_FLAG = Param("watch", FLAG, WATCH_DOC)
BY_CONTAINER_ID = Param(CONTAINER_ID, TEXT, CONTAINER_ID_DOC)
BY_POD_IP = Param(POD_IP, TEXT, POD_IP_DOC)
RESOURCE_VERSION = Param("resourceVersion", TEXT, RESOURCE_VERSION_DOC)
LABEL_SELECTOR = Param("labelSelector", TEXT, LABEL_SELECTOR_DOC)
FIELD_SELECTOR = Param("fieldSelector", TEXT, FIELD_SELECTOR_DOC)
LAST_EVENT_ID = Param("Last-Event-ID", TEXT, "Watch only: resume after this event id.", where="header")
LIST_PARAMS = (
    PRETTY,
    WATCH_FLAG,
    BY_CONTAINER_ID,
    BY_POD_IP,
    RESOURCE_VERSION,
    FIELDS,
    LABEL_SELECTOR,
    FIELD_SELECTOR,
    LAST_EVENT_ID,
)
GET_PARAMS = (PRETTY, FIELDS)


def query_view(
    fields: Sequence[str] | None, label_selector: str | None = None, field_selector: str | None = None
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
                raise InvalidArgumentError(f"{name} {quote(value)} is not a revision") from None
            if revision < 0:
                raise InvalidArgumentError(
                    f"{name} {quote(value)} is not a revision: it must be non-negative"
                )
            return revision
    return None


def list_call(request: Request, args: Args) -> Call:
    """Which call a request for the pods collection is (Watch, Lookup or List) and the form of
    its answer, from `watch`, `pretty` and Accept."""
    fmt = formats.answer(request.headers.get("accept"), args[PRETTY])
    if args[WATCH_FLAG] or fmt is None:
        return Call(WATCH)
    lookup = args[BY_CONTAINER_ID] is not None or args[BY_POD_IP] is not None
    return Call(LOOKUP if lookup else LIST, fmt=fmt)


class PodsRoutes:
    """The pods routes of one core, as call routes (gateway/http/router.py): each endpoint runs once
    the router has named the call, checked and parsed its parameters and admitted it."""

    def __init__(self, core: Core) -> None:
        self.core = core
        # Set while the pod sources have synced: what a watch accepted before then waits for.
        self.synced = asyncio.Event()
        core.cache.on_readiness(self._follow)
        self._follow(core.cache.ready)

    def _follow(self, ready: bool) -> None:
        self.synced.set() if ready else self.synced.clear()

    def routes(self) -> list[CallRoute]:
        tags = ("pods",)
        return [
            CallRoute(
                "/v1/pods",
                LIST,
                (LIST, WATCH, LOOKUP),
                list_call,
                self.list_pods,
                LIST_PARAMS,
                unsynced_watch_waits=True,
                summary="List the node's pods, watch them, or look them up by container ID or pod IP",
                responses=openapi.list_responses(),
                tags=tags,
            ),
            CallRoute(
                "/v1/pods/{uid}",
                GET,
                (GET,),
                named(GET),
                self.get_pod,
                GET_PARAMS,
                summary="One pod, by UID",
                responses=openapi.get_responses(),
                tags=tags,
            ),
            CallRoute(
                "/v1/namespaces/{namespace}/pods/{name}",
                BY_NAME,
                (LOOKUP,),
                named(LOOKUP),
                self.get_pod_by_name,
                GET_PARAMS,
                summary="One pod, by namespace and name (a Lookup)",
                responses=openapi.get_responses(),
                tags=tags,
            ),
        ]

    async def list_pods(self, request: Request, call: Call, args: Args) -> Response:
        view = query_view(args[FIELDS], args[LABEL_SELECTOR], args[FIELD_SELECTOR])
        container_id, pod_ip = args[BY_CONTAINER_ID], args[BY_POD_IP]
        core = self.core
        if call.name == WATCH:
            if container_id is not None or pod_ip is not None:
                raise InvalidArgumentError(
                    f"{CONTAINER_ID} and {POD_IP} look pods up once; they cannot be watched "
                    "(watch with labelSelector or fieldSelector)"
                )
            return self._watch(call, args, view)
        fmt = call.fmt or formats.Format.JSON
        if call.name == LOOKUP:
            hits = find(core.cache, LookupKey(container_id=container_id, pod_ip=pod_ip), view)
            return Response(lookup_body(core.cache.revision, hits, view, fmt), media_type=fmt.media_type)
        core.http_lists.check()
        body = await list_body(core.cache.snapshot(), view, fmt)
        return SharedBody(body, media_type=fmt.media_type, lists=core.http_lists)

    def _watch(self, call: Call, args: Args, view: View) -> Response:
        core = self.core
        since = resume_revision(args[LAST_EVENT_ID], args[RESOURCE_VERSION])
        if call.waits_for_sync:
            stopping = core.cache.hub.stopping
            waiting = sse.when_synced(core.streams, self.synced, stopping, view, since)
            return sse.watch_body(waiting, None, call, core.config)
        # TooManyWatchers and ServerStopping are refusals the surface answers (with Retry-After).
        opened = core.streams.open(view, since)
        return sse.watch_body(opened.frames(sse.ENCODING), opened, call, core.config)

    async def get_pod(self, request: Request, call: Call, args: Args, uid: str) -> Response:
        view = query_view(args[FIELDS])
        pod = self.core.cache.get(uid)
        if pod is None:
            raise NotFoundError(f"pod {quote(uid)} not found")
        fmt = formats.choose(request.headers.get("accept"), args[PRETTY])
        return Response(pod_body(pod, view, fmt), media_type=fmt.media_type)

    async def get_pod_by_name(
        self, request: Request, call: Call, args: Args, namespace: str, name: str
    ) -> Response:
        view = query_view(args[FIELDS])
        hits = find(self.core.cache, LookupKey(name=(namespace, name)))
        if not hits:
            raise NotFoundError(f"pod {namespace}/{name} not found")
        # Two sources can serve one name under two UIDs; the lowest UID answers, as List orders.
        fmt = formats.choose(request.headers.get("accept"), args[PRETTY])
        return Response(pod_body(hits[0].pod, view, fmt), media_type=fmt.media_type)
