"""The node's pods as a read-only subset of the Kubernetes REST API, for the clients every agent
author already has (kubectl, client-go informers, the `kubernetes` Python client):

    GET /version, /api, /api/v1, /apis        discovery (and its aggregated v2 form)
    GET /api/v1/pods                          PodList, or ?watch=1
    GET /api/v1/namespaces/{ns}/pods          the same, in one namespace
    GET /api/v1/namespaces/{ns}/pods/{name}   one Pod (the cache's namespace/name index)

List, Get and Watch are the call table's ListPods, GetPod and WatchPods: the same rate limit,
readiness and metrics as every other surface; their errors are Kubernetes Status objects
(gateway/kube/errors.py). Anything else under /api and /apis is a Status 404, or 405 for a
write to the pods. resourceVersions are pods-api's revisions (gateway/kube/objects.py).

Content negotiation as the API server does it, in the client's order: JSON, YAML, and the
`meta.k8s.io/v1` Table (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`) that kubectl
prints. Protobuf (`application/vnd.kubernetes.protobuf`) is not served: every client that asks
for it also accepts JSON (client-go sends `application/vnd.kubernetes.protobuf,application/json`
and decodes by the response's Content-Type), and one that accepts only protobuf gets 406.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, cast

import orjson
from fastapi import APIRouter, Depends
from fastapi.params import Depends as Dependency
from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.store.cache import Snapshot
from pods_api.core.policy.calls import refusal
from pods_api.core.api.printer import IncludeObject
from pods_api.core.assembly import Core
from pods_api.core.query.selector import SelectorError, parse_selector
from pods_api.core.api.status import StatusError
from pods_api.core.query.view import View
from pods_api.core.store.watch import ServerStopping, TooManyWatchers
from pods_api.gateway import formats
from pods_api.gateway.kube import objects as kubeobjects
from pods_api.gateway.kube import watching as kubewatch
from pods_api.gateway.kube.errors import (
    KubeError,
    bad_request,
    expired,
    from_status,
    not_found,
    too_large,
)
from pods_api.gateway.admission import CALL_KEY, GET, LIST, WATCH, name_call
TABLE = "table"
# Recent list snapshots, by revision: a continue token or an Exact resourceVersion is served
# from the very snapshot it names while it is among these, else 410 Expired (list again).
SNAPSHOTS_KEPT = 16
# A watch slot frees only when another watch ends: retrying every second is pointless.
WATCH_LIMIT_RETRY_AFTER = 5.0
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_NOT_ACCEPTABLE = (
    "only the following media types are accepted: application/json, application/yaml, "
    "application/json;as=Table;v=v1;g=meta.k8s.io"
)
_WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


def _query(name: str, kind: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": {"type": kind},
        "description": description,
    }


# Parsed from the raw query (as the API server parses them: Go's booleans, unknown ones ignored),
# so documented here rather than declared as typed parameters.
LIST_PARAMETERS = [
    _query("labelSelector", "string", "Kubernetes label selector (`app=web,tier!=db`, `env in (a,b)`)."),
    _query("fieldSelector", "string", "Kubernetes field selector, on the fields the API server allows."),
    _query("limit", "integer", "At most this many pods; `metadata.continue` fetches the rest."),
    _query("continue", "string", "The `metadata.continue` of the previous page."),
    _query("resourceVersion", "string", "pods-api's revision: list at least this new; watch after it."),
    _query("resourceVersionMatch", "string", "`NotOlderThan` or `Exact`."),
    _query("watch", "boolean", "Stream events, one JSON object per line."),
    _query("allowWatchBookmarks", "boolean", "Watch: send BOOKMARK events."),
    _query("sendInitialEvents", "boolean", "Watch: the current pods first, ended by an annotated BOOKMARK."),
    _query("timeoutSeconds", "integer", "Watch: end after this many seconds."),
    _query("includeObject", "string", "Tables: `None`, `Metadata` (default) or `Object`."),
    _query("pretty", "boolean", "Indented JSON."),
]

# -- OpenAPI: what the routes answer --------------------------------------------------------

STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A Kubernetes meta/v1 Status: the error body of every Kubernetes path.",
    "required": ["kind", "apiVersion", "status", "message", "reason", "code"],
    "properties": {
        "kind": {"type": "string", "enum": ["Status"]},
        "apiVersion": {"type": "string", "enum": ["v1"]},
        "metadata": {"type": "object"},
        "status": {"type": "string", "enum": ["Failure"]},
        "message": {"type": "string"},
        "reason": {"type": "string"},
        "details": {"type": "object"},
        "code": {"type": "integer"},
    },
}
_STATUS_WHEN = {
    400: "BadRequest: a bad selector or parameter",
    404: "NotFound",
    406: "NotAcceptable: only protobuf was acceptable",
    410: "Expired: the resourceVersion or continue token is older than what is kept",
    429: "TooManyRequests (Retry-After)",
    503: "ServiceUnavailable: the pod sources have not synced yet (Retry-After)",
    504: "Timeout: a resourceVersion newer than the cache's",
}


def _responses(ok: str, schema: str | None, *errors: int) -> dict[int | str, dict[str, Any]]:
    body = {"$ref": f"#/components/schemas/{schema}"} if schema else {"type": "object"}
    docs: dict[int | str, dict[str, Any]] = {
        200: {"description": ok, "content": {"application/json": {"schema": body}}}
    }
    for code in errors:
        docs[code] = {
            "description": _STATUS_WHEN[code],
            "content": {"application/json": {"schema": STATUS_SCHEMA}},
        }
    return docs


LIST_DOC = (
    "A PodList (pods-api's revisions as resourceVersions), a meta.k8s.io/v1 Table with "
    "`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, or with `watch=1` newline-delimited "
    '`{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":...}` events.'
)
LIST_RESPONSES = _responses(LIST_DOC, "io.k8s.api.core.v1.PodList", 400, 406, 410, 429, 503, 504)
GET_RESPONSES = _responses("The Pod, or a Table.", "io.k8s.api.core.v1.Pod", 404, 406, 429, 503)
DISCOVERY_RESPONSES = _responses("The discovery document.", None)


# -- request parameters, parsed as the API server parses them --------------------------------

# A client's value is echoed in an error only this far: enough to recognise it, and a 1 MB
# value never makes the Status itself large.
ECHO_LIMIT = 128


def _echo(value: str) -> str:
    return value if len(value) <= ECHO_LIMIT else f"{value[:ECHO_LIMIT]}… ({len(value)} characters)"


def _bool(request: Request, name: str) -> bool | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    if value in _GO_TRUE:
        return True
    if value in _GO_FALSE:
        return False
    raise bad_request(f'{name}: Invalid value: "{_echo(value)}": must be a boolean')


def _int(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        raise bad_request(f'{name}: Invalid value: "{_echo(value)}": must be an integer') from None
    if number < 0:
        raise bad_request(f"{name}: Invalid value: {number}: must be greater than or equal to 0")
    return number


def _revision(request: Request) -> int | None:
    """resourceVersion: None when absent or "" (most recent), 0 for "0" (any)."""
    value = request.query_params.get("resourceVersion")
    if not value:
        return None
    try:
        revision = int(value)
    except ValueError:
        raise bad_request(f'resourceVersion: Invalid value: "{_echo(value)}": must be an integer') from None
    if revision < 0:
        raise bad_request(f'resourceVersion: Invalid value: "{_echo(value)}": must be non-negative')
    return revision


def _match(request: Request) -> str:
    match = request.query_params.get("resourceVersionMatch", "")
    if match not in ("", "Exact", "NotOlderThan"):
        raise bad_request(
            f'resourceVersionMatch: Unsupported value: "{_echo(match)}": '
            'supported values: "Exact", "NotOlderThan"'
        )
    return match


def _view(request: Request, namespace: str | None) -> View:
    labels = request.query_params.get("labelSelector", "")
    fields = request.query_params.get("fieldSelector", "")
    if namespace is not None:  # the namespace of the path is one more field requirement
        fields = ",".join(filter(None, [fields, f"metadata.namespace={namespace}"]))
    try:
        return View(selector=parse_selector(labels, fields))
    except SelectorError as exc:
        raise bad_request(str(exc)) from None


def _accepted(request: Request) -> str:
    """JSON, YAML or TABLE: the first the Accept header lists that this view serves (the API
    server's order: the client's), skipping what it does not (protobuf, other `as=` forms)."""
    accept = request.headers.get("accept")
    if not accept:
        return formats.JSON
    for part in accept.split(","):
        media, *raw = (p.strip() for p in part.split(";"))
        params = dict(p.partition("=")[::2] for p in raw)
        media = media.lower()
        if params.get("q", "1").strip() in ("0", "0.0", "0.00", "0.000"):
            continue
        if media in ("application/json", "application/*", "*/*"):
            conversion = params.get("as")
            if conversion is None:
                return formats.JSON
            group, version = params.get("g"), params.get("v")
            if conversion == "Table" and group == "meta.k8s.io" and version in ("v1", "v1beta1"):
                return TABLE
        elif media in ("application/yaml", "application/x-yaml", "text/yaml") and "as" not in params:
            return formats.YAML
    raise KubeError(406, "NotAcceptable", _NOT_ACCEPTABLE)


def _include(request: Request) -> IncludeObject:
    value = request.query_params.get("includeObject") or "Metadata"
    if value not in ("None", "Metadata", "Object"):
        raise bad_request(f'unrecognized includeObject value: "{_echo(value)}"')
    return cast(IncludeObject, value)


def _render(request: Request, obj: Any, media: str) -> Response:
    if media == formats.YAML:
        return Response(formats.render(obj, formats.Format.YAML), media_type=formats.YAML)
    if _bool(request, "pretty"):
        return Response(formats.render(obj, formats.Format.PRETTY), media_type=formats.JSON)
    return Response(orjson.dumps(obj), media_type=formats.JSON)


# -- the call table's admission, spoken as Status --------------------------------------------


def _admission(core: Core) -> Callable[[Request], Awaitable[None]]:
    async def admit(request: Request) -> None:
        refused = refusal(core.calls[request.scope[CALL_KEY]], core.limiter, core.cache)
        if refused is not None:
            raise from_status(refused)

    return admit


def _dependencies(core: Core, call: str | None) -> list[Dependency]:
    for name in (call,) if call else (LIST, WATCH):
        core.calls[name]  # a KeyError at start-up for a call the table lacks
    return [Depends(name_call(call)), Depends(_admission(core))]


# -- the router ------------------------------------------------------------------------------


def router(core: Core) -> APIRouter:
    kube = APIRouter(tags=["kubernetes"])
    snapshots: OrderedDict[int, Snapshot] = OrderedDict()

    def keep(snapshot: Snapshot) -> Snapshot:
        snapshots[snapshot.revision] = snapshot
        snapshots.move_to_end(snapshot.revision)
        while len(snapshots) > SNAPSHOTS_KEPT:
            snapshots.popitem(last=False)
        return snapshot

    def discovery(request: Request, legacy: Any, aggregated: Any) -> Response:
        accept = request.headers.get("accept", "")
        first = accept.split(",")[0].replace(" ", "")
        if first.startswith("application/json;") and "as=APIGroupDiscoveryList" in first and "v=v2" in first:
            return Response(orjson.dumps(aggregated), media_type=kubeobjects.AGGREGATED_MEDIA_TYPE)
        return Response(orjson.dumps(legacy), media_type=formats.JSON)

    @kube.get(
        "/version",
        operation_id="KubeVersion",
        responses=DISCOVERY_RESPONSES,
        summary="Kubernetes version info",
    )
    async def version() -> Response:
        return Response(orjson.dumps(kubeobjects.version_info()), media_type=formats.JSON)

    @kube.get(
        "/api",
        operation_id="KubeAPIVersions",
        responses=DISCOVERY_RESPONSES,
        summary="Kubernetes discovery: the core group",
    )
    async def api(request: Request) -> Response:
        return discovery(request, kubeobjects.API_VERSIONS, kubeobjects.AGGREGATED_CORE)

    @kube.get(
        "/apis",
        operation_id="KubeAPIGroups",
        responses=DISCOVERY_RESPONSES,
        summary="Kubernetes discovery: no named groups",
    )
    async def apis(request: Request) -> Response:
        return discovery(request, kubeobjects.API_GROUP_LIST, kubeobjects.AGGREGATED_GROUPS)

    @kube.get(
        "/api/v1",
        operation_id="KubeAPIResources",
        responses=DISCOVERY_RESPONSES,
        summary="Kubernetes discovery: pods",
    )
    async def api_v1() -> Response:
        return Response(orjson.dumps(kubeobjects.API_RESOURCE_LIST), media_type=formats.JSON)

    async def list_or_watch(request: Request, namespace: str | None) -> Response:
        try:
            if request.scope[CALL_KEY] == WATCH:
                return watch_pods(request, namespace)
            return list_pods(request, namespace)
        except StatusError as exc:
            raise from_status(exc) from None

    def list_pods(request: Request, namespace: str | None) -> Response:
        view, media = _view(request, namespace), _accepted(request)
        include = _include(request) if media == TABLE else "Metadata"
        limit = _int(request, "limit") or 0
        token = request.query_params.get("continue")
        snapshot, start = list_snapshot(request, token)
        pods = kubeobjects.in_key_order(snapshot, view)
        chosen, remaining = kubeobjects.page(pods, start, limit)
        next_token = kubeobjects.continue_token(snapshot.revision, chosen[-1]) if remaining else None
        if next_token is not None:
            keep(snapshot)
        if media == TABLE:
            body = kubeobjects.table(
                [(p, p.revision) for p in chosen],
                snapshot.revision,
                include,
                continue_=next_token,
                remaining=remaining,
            )
            return Response(body, media_type=formats.JSON)
        if media == formats.JSON and not _bool(request, "pretty"):
            # Assembled once per (snapshot, view, page): every client listing the same way until
            # the next change gets the same bytes object, as on the other surfaces.
            body = snapshot.memo(
                ("kube-list", view.key, start, limit),
                lambda: kubeobjects.list_bytes(snapshot.revision, chosen, next_token, remaining),
            )
            return Response(body, media_type=formats.JSON)
        listed = kubeobjects.list_object(snapshot.revision, chosen, next_token, remaining)
        return _render(request, listed, media)

    def list_snapshot(request: Request, token: str | None) -> tuple[Snapshot, tuple[str, str] | None]:
        """The snapshot a list reads, and where its page starts, by resourceVersion semantics:
        "" most recent; "0" any (the most recent); N with NotOlderThan (the default) at least N;
        N with Exact exactly N (while kept); a continue token the snapshot it came from."""
        revision, match = _revision(request), _match(request)
        if match and revision is None:
            raise bad_request("resourceVersionMatch is forbidden unless resourceVersion is provided")
        if match == "Exact" and revision == 0:
            raise bad_request('resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
        current = core.cache.snapshot()
        if token:
            if revision or match:
                raise bad_request("specifying resource version is not allowed when using continue")
            at, start = kubeobjects.parse_continue(token)
            snapshot = current if at == current.revision else snapshots.get(at)
            if snapshot is None:
                raise expired(
                    "The provided continue parameter is too old to display a consistent list result. "
                    "You can start a new list without the continue parameter."
                )
            return snapshot, start
        if not revision:
            return current, None
        if revision > current.revision:
            raise too_large(revision, current.revision)
        if match == "Exact" and revision != current.revision:
            kept = snapshots.get(revision)
            if kept is None:
                raise expired(f"too old resource version: {revision} ({current.revision})")
            return kept, None
        return current, None

    def watch_pods(request: Request, namespace: str | None) -> Response:
        view, media = _view(request, namespace), _accepted(request)
        revision, match = _revision(request), _match(request)
        initial = _bool(request, "sendInitialEvents")
        bookmarks = _bool(request, "allowWatchBookmarks") or False
        timeout = _int(request, "timeoutSeconds")
        if initial is not None:
            if match != "NotOlderThan":
                raise bad_request(
                    "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless "
                    "resourceVersionMatch is set to NotOlderThan"
                )
            if initial and not bookmarks:
                raise bad_request(
                    "allowWatchBookmarks: Forbidden: allowWatchBookmarks must be set to true when "
                    "sendInitialEvents is set to true"
                )
        elif match:
            raise bad_request(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless "
                "sendInitialEvents is provided"
            )
        current = core.cache.revision
        if revision and revision > current:
            raise too_large(revision, current)
        since: int | None = None  # a snapshot's ADDED first
        if initial is False:
            since = current  # NotOlderThan: no initial events, from now (already >= revision)
        elif initial is None and revision:
            if core.cache.events_since(revision) is None:
                return expired_watch(revision, current)
            since = revision
        encoding = kubewatch.INITIAL_EVENTS if initial else kubewatch.JSON
        if media == TABLE:
            encoding = kubewatch.table_encoding(_include(request))
        try:
            watch = core.streams.open(view, since)
        except TooManyWatchers as exc:
            raise KubeError(429, "TooManyRequests", str(exc), retry_after=WATCH_LIMIT_RETRY_AFTER) from None
        except ServerStopping as exc:
            raise KubeError(503, "ServiceUnavailable", str(exc)) from None
        frames = kubewatch.events(
            watch,
            encoding,
            request.scope,
            seconds=float(timeout) if timeout else kubewatch.default_timeout(),
            bookmarks=core.config.heartbeat if bookmarks else None,
            revision=lambda: core.cache.revision,
            headers_first=media == TABLE,
        )
        return kubewatch.WatchResponse(frames, watch)

    def expired_watch(revision: int, current: int) -> Response:
        """What the API server's watch cache answers for a revision it no longer holds: 200 and
        one ERROR event, 410 Expired (client-go's reflector relists; the Python client raises
        ApiException(410))."""
        status = expired(f"too old resource version: {revision} ({current})")
        return Response(kubeobjects.error_event(status.body()), media_type=formats.JSON)

    @kube.get(
        "/api/v1/pods",
        response_class=Response,
        operation_id="KubeListPods",
        summary="Kubernetes PodList of every namespace, or ?watch=1",
        dependencies=_dependencies(core, None),
        responses=LIST_RESPONSES,
        openapi_extra={"parameters": LIST_PARAMETERS},
    )
    async def all_pods(request: Request) -> Response:
        return await list_or_watch(request, None)

    @kube.get(
        "/api/v1/namespaces/{namespace}/pods",
        response_class=Response,
        operation_id="KubeListNamespacedPods",
        summary="Kubernetes PodList of one namespace, or ?watch=1",
        dependencies=_dependencies(core, None),
        responses=LIST_RESPONSES,
        openapi_extra={"parameters": LIST_PARAMETERS},
    )
    async def namespaced_pods(request: Request, namespace: str) -> Response:
        return await list_or_watch(request, namespace)

    @kube.get(
        "/api/v1/namespaces/{namespace}/pods/{name}",
        response_class=Response,
        operation_id="KubeGetPod",
        summary="One Kubernetes Pod, by namespace and name",
        dependencies=_dependencies(core, GET),
        responses=GET_RESPONSES,
    )
    async def get_pod(request: Request, namespace: str, name: str) -> Response:
        media = _accepted(request)
        hits = core.cache.by_name(namespace, name)
        if not hits:
            raise not_found(name)
        pod = hits[0].pod
        if media == TABLE:
            body = kubeobjects.table([(pod, pod.revision)], pod.revision, _include(request))
            return Response(body, media_type=formats.JSON)
        if media == formats.JSON and not _bool(request, "pretty"):
            return Response(kubeobjects.pod_bytes(pod, pod.revision), media_type=formats.JSON)
        return _render(request, kubeobjects.pod_object(pod, pod.revision), media)

    @kube.get("/api/v1/namespaces/{namespace}", include_in_schema=False)
    async def namespace(namespace: str) -> Response:
        """kubectl, told a pod is not found, asks whether its namespace is: answered from this
        node's pods (a namespace none of them is in is not found), so that it prints the pod's
        NotFound as against a cluster rather than the namespace's. Not in discovery."""
        pods = kubeobjects.in_key_order(core.cache.snapshot(), View.EVERYTHING)
        if not any(pod.namespace == namespace for pod in pods):
            raise KubeError(
                404,
                "NotFound",
                f'namespaces "{namespace}" not found',
                details={"name": namespace, "kind": "namespaces"},
            )
        return Response(orjson.dumps(kubeobjects.namespace(namespace)), media_type=formats.JSON)

    every = ["GET", "HEAD", *_WRITE_METHODS, "OPTIONS"]

    @kube.api_route("/api/{rest:path}", methods=every, include_in_schema=False)
    @kube.api_route("/apis/{rest:path}", methods=every, include_in_schema=False)
    async def elsewhere(request: Request, rest: str) -> Response:
        raise unsupported(request)

    return kube


def unsupported(request: Request) -> KubeError:
    """A write to the pods is 405, as for a resource without those verbs; any other path
    (other resources, subresources such as log, exec, status) is 404, as the API server says."""
    parts = str(request.scope.get("path", "")).strip("/").split("/")
    pods_path = parts[:3] == ["api", "v1", "pods"] and len(parts) == 3
    namespaced = len(parts) in (5, 6) and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods"
    if request.method != "GET" and (pods_path or namespaced):
        message = "the server does not allow this method on the requested resource"
        return KubeError(405, "MethodNotAllowed", message)
    return KubeError(404, "NotFound", "the server could not find the requested resource")
