"""The node's pods as a read-only subset of the Kubernetes REST API, for the clients every agent
author already has (kubectl, client-go informers, the `kubernetes` Python client):

    GET /version, /api, /api/v1, /apis        discovery (and its aggregated v2 form)
    GET /api/v1/pods                          PodList, or ?watch=1
    GET /api/v1/namespaces/{ns}/pods          the same, in one namespace
    GET /api/v1/namespaces/{ns}/pods/{name}   one Pod (the cache's namespace/name index)
    GET /api/v1/watch/pods, /api/v1/watch/namespaces/{ns}/pods[/{name}]
                                              the watches, by the paths the API server still
                                              serves though deprecated since 1.11
    GET /api/v1[/namespaces/{ns}]/events      what the node observed of its containers, for
                                              `kubectl describe` (gateway/kube/events.py)
    GET /openapi/v3[/api/v1]                  the OpenAPI v3 documents (gateway/kube/openapiv3.py)
    POST the self-reviews                     `kubectl auth can-i|whoami` (gateway/kube/reviews.py)

List, Get and Watch are the call table's ListPods, GetPod and WatchPods: the same rate limit,
readiness and metrics as every other surface; their errors are Kubernetes Status objects
(gateway/kube/apistatus.py). Anything else under /api and /apis is a Status 404, or 405 for a
write to the pods. resourceVersions are pods-api's revisions (gateway/kube/objects.py).

This module declares the routes and answers discovery and Get; List is gateway/kube/lists.py,
Watch gateway/kube/watching.py, the parameters gateway/kube/listoptions.py, and what the OpenAPI
document says of them gateway/kube/apidoc.py.

Content negotiation as the API server does it, in the client's order: JSON, YAML, and the
`meta.k8s.io/v1` Table (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`) that kubectl
prints. Protobuf (`application/vnd.kubernetes.protobuf`) is not served: every client that asks
for it also accepts JSON (client-go sends `application/vnd.kubernetes.protobuf,application/json`
and decodes by the response's Content-Type), and one that accepts only protobuf gets 406.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.api.statuserrors import StatusError
from pods_api.core.assembly import Core
from pods_api.gateway.http import formats
from pods_api.gateway.http.admission import GET, LIST, WATCH, Call, named
from pods_api.gateway.http.params import Args
from pods_api.gateway.http.router import CallRoute, Surface
from pods_api.gateway.kube import apistatus as kubeerrors
from pods_api.gateway.kube import events as kubeevents
from pods_api.gateway.kube import listoptions, openapiv3, reviews, watching
from pods_api.gateway.kube import objects as kubeobjects
from pods_api.gateway.kube.apidoc import (
    DISCOVERY_RESPONSES,
    GET_RESPONSES,
    LIST_RESPONSES,
    WATCH_RESPONSES,
)
from pods_api.gateway.kube.apistatus import KubeError, from_status, not_found
from pods_api.gateway.kube.cluster import ClusterRoutes
from pods_api.gateway.kube.lists import Lists

_WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
_EVERY_METHOD = ["GET", "HEAD", *_WRITE_METHODS, "OPTIONS"]
_TAGS = ["kubernetes"]


def _status(exc: StatusError) -> Response:
    assert isinstance(exc, KubeError)
    return kubeerrors.response(exc)


def _wrong_method(request: Request) -> Response:
    return kubeerrors.response(unsupported(request))


# Every error of a call, core ones included (the call table's refusals), is a Status.
SURFACE = Surface(from_status, _status, _wrong_method)


def list_call(request: Request, args: Args) -> Call:
    """List or Watch, by `watch` read as the API server reads it (a bad value: a List, whose
    reading of its options answers 400)."""
    try:
        watch = listoptions.flag(args, listoptions.WATCH)
    except KubeError:
        return Call(LIST)
    return Call(WATCH if watch else LIST)


class KubeRoutes:
    """The Kubernetes view of one core: `declare(app)` declares its routes in FastAPI, and
    `calls()` its List, Watch and Get as call routes (gateway/http/router.py)."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.lists = Lists(core)

    def declare(self, app: FastAPI) -> None:
        """Declare the routes other than the call routes in `app`, in routing order."""
        documents: dict[str, Any] = {"responses": DISCOVERY_RESPONSES, "tags": _TAGS}
        route = app.add_api_route
        route(
            "/version",
            self.version,
            operation_id="KubeVersion",
            summary="Kubernetes version info",
            **documents,
        )
        route(
            "/api",
            self.api,
            operation_id="KubeAPIVersions",
            summary="Kubernetes discovery: the core group",
            **documents,
        )
        route(
            "/apis",
            self.apis,
            operation_id="KubeAPIGroups",
            summary="Kubernetes discovery: no named groups",
            **documents,
        )
        route(
            "/api/v1",
            self.api_v1,
            operation_id="KubeAPIResources",
            summary="Kubernetes discovery: pods",
            **documents,
        )
        # The API server answers its discovery paths with a trailing slash too; kr8s asks so.
        slashed: dict[str, Callable[..., Awaitable[Response]]] = {
            "/version/": self.version,
            "/api/": self.api,
            "/apis/": self.apis,
            "/api/v1/": self.api_v1,
        }
        for path, answer in slashed.items():
            route(path, answer, include_in_schema=False)
        cluster = ClusterRoutes(self.core)
        route("/api/v1/namespaces", cluster.namespaces, include_in_schema=False)
        route("/api/v1/namespaces/{namespace}", cluster.namespace, include_in_schema=False)
        route("/api/v1/nodes", cluster.nodes, include_in_schema=False)
        route("/api/v1/nodes/{name}", cluster.node, include_in_schema=False)
        route("/api/v1/events", self.all_events, include_in_schema=False)
        route("/api/v1/namespaces/{namespace}/events", self.namespaced_events, include_in_schema=False)
        route("/openapi/v3", openapiv3.root, include_in_schema=False)
        route("/openapi/v3/{path:path}", openapiv3.group_version, include_in_schema=False)
        reviews_at = {
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews": reviews.access_review,
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews": reviews.rules_review,
            "/apis/authentication.k8s.io/v1/selfsubjectreviews": reviews.self_review,
        }
        for path, review in reviews_at.items():
            route(path, review, methods=["POST"], include_in_schema=False)
        for prefix in ("/apis", "/api"):
            route(f"{prefix}/{{rest:path}}", elsewhere, methods=_EVERY_METHOD, include_in_schema=False)

    def calls(self) -> list[CallRoute]:
        lists: dict[str, Any] = {"params": listoptions.LIST_PARAMS, "responses": LIST_RESPONSES}
        common: dict[str, Any] = {"surface": SURFACE, "checks_parameters": False, "tags": _TAGS}
        return [
            CallRoute(
                "/api/v1/pods",
                "KubeListPods",
                (LIST, WATCH),
                list_call,
                self.all_pods,
                summary="Kubernetes PodList of every namespace, or ?watch=1",
                **lists,
                **common,
            ),
            CallRoute(
                "/api/v1/namespaces/{namespace}/pods",
                "KubeListNamespacedPods",
                (LIST, WATCH),
                list_call,
                self.namespaced_pods,
                summary="Kubernetes PodList of one namespace, or ?watch=1",
                **lists,
                **common,
            ),
            CallRoute(
                "/api/v1/namespaces/{namespace}/pods/{name}",
                "KubeGetPod",
                (GET,),
                named(GET),
                self.get_pod,
                listoptions.GET_PARAMS,
                summary="One Kubernetes Pod, by namespace and name",
                responses=GET_RESPONSES,
                **common,
            ),
            # Last: no path of theirs is another's, and the router asks each route in turn.
            *self.watch_calls(common),
        ]

    def watch_calls(self, common: dict[str, Any]) -> list[CallRoute]:
        """The deprecated watch paths (apiserver endpoints/installer.go MethodWatchList and
        MethodWatch): a watch whatever `watch` says, though validated as a list without it."""
        watches: dict[str, Any] = {
            "params": listoptions.LIST_PARAMS,
            "responses": WATCH_RESPONSES,
            "deprecated": True,
        }
        return [
            CallRoute(
                "/api/v1/watch/pods",
                "KubeWatchPods",
                (WATCH,),
                named(WATCH),
                self.watch_all,
                summary="Watch the pods of every namespace (use ?watch=1)",
                **watches,
                **common,
            ),
            CallRoute(
                "/api/v1/watch/namespaces/{namespace}/pods",
                "KubeWatchNamespacedPods",
                (WATCH,),
                named(WATCH),
                self.watch_namespaced,
                summary="Watch the pods of one namespace (use ?watch=1)",
                **watches,
                **common,
            ),
            CallRoute(
                "/api/v1/watch/namespaces/{namespace}/pods/{name}",
                "KubeWatchNamespacedPod",
                (WATCH,),
                named(WATCH),
                self.watch_named,
                summary="Watch one pod (use ?watch=1&fieldSelector=metadata.name=)",
                **watches,
                **common,
            ),
        ]

    async def watch_all(self, request: Request, call: Call, args: Args) -> Response:
        return watching.respond(self.core, request, args, call, None)

    async def watch_namespaced(self, request: Request, call: Call, args: Args, namespace: str) -> Response:
        return watching.respond(self.core, request, args, call, namespace)

    async def watch_named(
        self, request: Request, call: Call, args: Args, namespace: str, name: str
    ) -> Response:
        return watching.respond(self.core, request, args, call, namespace, name)

    async def version(self) -> Response:
        return Response(orjson.dumps(kubeobjects.version_info()), media_type=formats.JSON)

    async def api(self, request: Request) -> Response:
        return discovery(request, kubeobjects.API_VERSIONS, kubeobjects.AGGREGATED_CORE)

    async def apis(self, request: Request) -> Response:
        return discovery(request, kubeobjects.API_GROUP_LIST, kubeobjects.AGGREGATED_GROUPS)

    async def api_v1(self) -> Response:
        return Response(orjson.dumps(kubeobjects.API_RESOURCE_LIST), media_type=formats.JSON)

    async def all_pods(self, request: Request, call: Call, args: Args) -> Response:
        return await self._list_or_watch(request, args, call, None)

    async def namespaced_pods(self, request: Request, call: Call, args: Args, namespace: str) -> Response:
        return await self._list_or_watch(request, args, call, namespace)

    async def _list_or_watch(
        self, request: Request, args: Args, call: Call, namespace: str | None
    ) -> Response:
        if call.name == WATCH:
            return watching.respond(self.core, request, args, call, namespace)
        return await self.lists.respond(request, args, namespace)

    async def get_pod(self, request: Request, call: Call, args: Args, namespace: str, name: str) -> Response:
        media = listoptions.accepted(request)
        hits = self.core.cache.by_name(namespace, name)
        if not hits:
            raise not_found(name)
        pod = hits[0].pod
        if media in listoptions.TABLES:
            version = listoptions.table_version(media)
            include = listoptions.include(args)
            body = kubeobjects.table([(pod, pod.revision)], pod.revision, include, group_version=version)
            return Response(body, media_type=formats.JSON)
        pretty = listoptions.flag(args, listoptions.PRETTY)
        if media == formats.JSON and not pretty:
            return Response(kubeobjects.pod_bytes(pod, pod.revision), media_type=formats.JSON)
        return listoptions.render(kubeobjects.pod_object(pod, pod.revision), media, pretty)

    async def all_events(self, request: Request) -> Response:
        """What this node observed of its containers (gateway/kube/events.py)."""
        return await kubeevents.events(self.core, request, None)

    async def namespaced_events(self, request: Request, namespace: str) -> Response:
        """`kubectl describe pod` lists the pod's events here, by its name and uid."""
        return await kubeevents.events(self.core, request, namespace)


def discovery(request: Request, legacy: Any, aggregated: Any) -> Response:
    """The aggregated (v2) document when the client asks for it first, else the legacy one."""
    accept = request.headers.get("accept", "")
    first = accept.split(",")[0].replace(" ", "")
    if first.startswith("application/json;") and "as=APIGroupDiscoveryList" in first and "v=v2" in first:
        return Response(orjson.dumps(aggregated), media_type=kubeobjects.AGGREGATED_MEDIA_TYPE)
    return Response(orjson.dumps(legacy), media_type=formats.JSON)


async def elsewhere(request: Request, rest: str) -> Response:
    raise unsupported(request)


def unsupported(request: Request) -> KubeError:
    """A write to the pods is 405, as for a resource without those verbs; a pod's subresource
    is 404 saying what serves it instead; any other path (other resources) is 404, as the API
    server says."""
    parts = str(request.scope.get("path", "")).strip("/").split("/")
    pods_path = parts[:3] == ["api", "v1", "pods"] and len(parts) == 3
    namespaced = len(parts) in (5, 6) and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods"
    if len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods":
        return subresource(parts[6], parts[5])
    if request.method != "GET" and (pods_path or namespaced):
        message = "the server does not allow this method on the requested resource"
        return KubeError(405, "MethodNotAllowed", message)
    return KubeError(404, "NotFound", "the server could not find the requested resource")


def subresource(name: str, pod: str) -> KubeError:
    """kubectl logs, exec, attach, port-forward: not served here, and said so plainly."""
    message = kubeerrors.subresource_refusal(name, pod)
    return KubeError(404, "NotFound", message, details={"name": pod, "kind": f"pods/{name}"})
