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

This module declares the routes and answers discovery and Get; List is gateway/kube/lists.py,
Watch gateway/kube/watching.py, the parameters gateway/kube/params.py, and what the OpenAPI
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
from fastapi import APIRouter, Depends
from fastapi.params import Depends as Dependency
from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.api.status import StatusError
from pods_api.core.assembly import Core
from pods_api.core.policy.calls import refusal
from pods_api.core.query.view import View
from pods_api.gateway import formats
from pods_api.gateway.admission import CALL_KEY, GET, LIST, WATCH, name_call
from pods_api.gateway.kube import objects as kubeobjects
from pods_api.gateway.kube import params, watching
from pods_api.gateway.kube.apidoc import DISCOVERY_RESPONSES, GET_RESPONSES, LIST_PARAMETERS, LIST_RESPONSES
from pods_api.gateway.kube.errors import KubeError, from_status, not_found
from pods_api.gateway.kube.lists import Lists

_WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
_EVERY_METHOD = ["GET", "HEAD", *_WRITE_METHODS, "OPTIONS"]


class KubeRoutes:
    """The Kubernetes view of one core: `router()` declares its routes."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.lists = Lists(core)

    def router(self) -> APIRouter:
        kube = APIRouter(tags=["kubernetes"])
        route = kube.add_api_route
        documents: dict[str, Any] = {"responses": DISCOVERY_RESPONSES}
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
        lists: dict[str, Any] = {
            "response_class": Response,
            "dependencies": _dependencies(self.core, None),
            "responses": LIST_RESPONSES,
            "openapi_extra": {"parameters": LIST_PARAMETERS},
        }
        route(
            "/api/v1/pods",
            self.all_pods,
            operation_id="KubeListPods",
            summary="Kubernetes PodList of every namespace, or ?watch=1",
            **lists,
        )
        route(
            "/api/v1/namespaces/{namespace}/pods",
            self.namespaced_pods,
            operation_id="KubeListNamespacedPods",
            summary="Kubernetes PodList of one namespace, or ?watch=1",
            **lists,
        )
        route(
            "/api/v1/namespaces/{namespace}/pods/{name}",
            self.get_pod,
            response_class=Response,
            operation_id="KubeGetPod",
            summary="One Kubernetes Pod, by namespace and name",
            dependencies=_dependencies(self.core, GET),
            responses=GET_RESPONSES,
        )
        route("/api/v1/namespaces/{namespace}", self.namespace, include_in_schema=False)
        for prefix in ("/apis", "/api"):
            route(f"{prefix}/{{rest:path}}", elsewhere, methods=_EVERY_METHOD, include_in_schema=False)
        return kube

    async def version(self) -> Response:
        return Response(orjson.dumps(kubeobjects.version_info()), media_type=formats.JSON)

    async def api(self, request: Request) -> Response:
        return discovery(request, kubeobjects.API_VERSIONS, kubeobjects.AGGREGATED_CORE)

    async def apis(self, request: Request) -> Response:
        return discovery(request, kubeobjects.API_GROUP_LIST, kubeobjects.AGGREGATED_GROUPS)

    async def api_v1(self) -> Response:
        return Response(orjson.dumps(kubeobjects.API_RESOURCE_LIST), media_type=formats.JSON)

    async def all_pods(self, request: Request) -> Response:
        return self._list_or_watch(request, None)

    async def namespaced_pods(self, request: Request, namespace: str) -> Response:
        return self._list_or_watch(request, namespace)

    def _list_or_watch(self, request: Request, namespace: str | None) -> Response:
        try:
            if request.scope[CALL_KEY] == WATCH:
                return watching.respond(self.core, request, namespace)
            return self.lists.respond(request, namespace)
        except StatusError as exc:
            raise from_status(exc) from None

    async def get_pod(self, request: Request, namespace: str, name: str) -> Response:
        media = params.accepted(request)
        hits = self.core.cache.by_name(namespace, name)
        if not hits:
            raise not_found(name)
        pod = hits[0].pod
        if media == params.TABLE:
            body = kubeobjects.table([(pod, pod.revision)], pod.revision, params.include(request))
            return Response(body, media_type=formats.JSON)
        if media == formats.JSON and not params.flag(request, "pretty"):
            return Response(kubeobjects.pod_bytes(pod, pod.revision), media_type=formats.JSON)
        return params.render(request, kubeobjects.pod_object(pod, pod.revision), media)

    async def namespace(self, namespace: str) -> Response:
        """kubectl, told a pod is not found, asks whether its namespace is: answered from this
        node's pods (a namespace none of them is in is not found), so that it prints the pod's
        NotFound as against a cluster rather than the namespace's. Not in discovery."""
        pods = kubeobjects.in_key_order(self.core.cache.snapshot(), View.EVERYTHING)
        if not any(pod.namespace == namespace for pod in pods):
            raise KubeError(
                404,
                "NotFound",
                f'namespaces "{namespace}" not found',
                details={"name": namespace, "kind": "namespaces"},
            )
        return Response(orjson.dumps(kubeobjects.namespace(namespace)), media_type=formats.JSON)


def router(core: Core) -> APIRouter:
    return KubeRoutes(core).router()


def discovery(request: Request, legacy: Any, aggregated: Any) -> Response:
    """The aggregated (v2) document when the client asks for it first, else the legacy one."""
    accept = request.headers.get("accept", "")
    first = accept.split(",")[0].replace(" ", "")
    if first.startswith("application/json;") and "as=APIGroupDiscoveryList" in first and "v=v2" in first:
        return Response(orjson.dumps(aggregated), media_type=kubeobjects.AGGREGATED_MEDIA_TYPE)
    return Response(orjson.dumps(legacy), media_type=formats.JSON)


async def elsewhere(request: Request, rest: str) -> Response:
    raise unsupported(request)


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
