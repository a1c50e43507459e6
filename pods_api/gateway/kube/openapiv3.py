"""The OpenAPI v3 documents of the Kubernetes view, which `kubectl explain` reads:

    GET /openapi/v3           the discovery: one path, `api/v1`, and the URL of its document
    GET /openapi/v3/api/v1    that document: the pod paths' read operations and the Pod schemas
                              the gateway already describes (gateway/podschema.py), both marked
                              with the `x-kubernetes-group-version-kind` by which kubectl finds
                              a resource's kind (from its paths) and the kind's schema

kubectl asks v3 first and falls back to /openapi/v2 only when v3 is absent, so v2 is not served.
The discovery's URL carries the document's hash, as the API server's does: kubectl caches the
document under that URL, and a new pods-api version with another schema gets another URL.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from pods_api import __version__
from pods_api.gateway import podschema
from pods_api.gateway.http import formats
from pods_api.gateway.kube.apistatus import KubeError

GROUP_VERSION = "api/v1"
# The API server's extension: which kinds a schema is the object of.
GVK = "x-kubernetes-group-version-kind"
_KINDS = {podschema.POD: "Pod", podschema.POD_LIST: "PodList"}


@functools.cache
def document() -> bytes:
    """The `api/v1` document, encoded once: it depends only on the code."""
    schemas: dict[str, Any] = {}
    for name, schema in podschema.components().items():
        schemas[name] = (
            {**schema, GVK: [{"group": "", "kind": _KINDS[name], "version": "v1"}]}
            if name in _KINDS
            else schema
        )
    body = {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (pods-api)", "version": __version__},
        "paths": _paths(),
        "components": {"schemas": schemas},
    }
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


def _paths() -> dict[str, Any]:
    """The pod paths with their read operations, each naming the kind it answers with: kubectl
    finds a resource's kind by its paths, then the kind's schema by the extension."""
    pod = {"group": "", "kind": "Pod", "version": "v1"}
    operations = {
        "/api/v1/pods": ("listCoreV1PodForAllNamespaces", podschema.POD_LIST),
        "/api/v1/namespaces/{namespace}/pods": ("listCoreV1NamespacedPod", podschema.POD_LIST),
        "/api/v1/namespaces/{namespace}/pods/{name}": ("readCoreV1NamespacedPod", podschema.POD),
    }
    paths: dict[str, Any] = {}
    for path, (operation, schema) in operations.items():
        ok = {"description": "OK", "content": {formats.JSON: {"schema": podschema.ref(schema)}}}
        get = {"operationId": operation, "responses": {"200": ok}, GVK: pod}
        paths[path] = {"get": get}
    return paths


@functools.cache
def _hash() -> str:
    """As the API server names its documents: the SHA-512 of the bytes, upper-case hex."""
    return hashlib.sha512(document()).hexdigest().upper()


def discovery() -> dict[str, Any]:
    return {"paths": {GROUP_VERSION: {"serverRelativeURL": f"/openapi/v3/{GROUP_VERSION}?hash={_hash()}"}}}


async def root() -> Response:
    return Response(orjson.dumps(discovery()), media_type=formats.JSON)


async def group_version(request: Request, path: str) -> Response:
    if path != GROUP_VERSION:
        raise KubeError(
            404, "NotFound", f"the server has no OpenAPI document for {path!r}; only {GROUP_VERSION!r}"
        )
    # Immutable under its hashed URL (the API server says the same of a hashed request).
    hashed = request.query_params.get("hash") == _hash()
    headers = {"Cache-Control": "public, immutable" if hashed else "no-cache, private"}
    return Response(document(), media_type=formats.JSON, headers=headers)
