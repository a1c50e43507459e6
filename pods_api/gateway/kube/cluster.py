"""The two cluster-scoped resources a node can answer for without an API server, read-only:

    GET /api/v1/namespaces[/{ns}]   the namespaces this node's pods are in, each Active
    GET /api/v1/nodes[/{name}]      this node (--node-name), as far as pods-api knows it

A node has no record of the cluster's namespaces, only of the ones its pods are in: a namespace
with no pod here is not found, as it would be for a client that can see only these. Nor does
pods-api observe the node's health: the Node it serves has its name and no conditions, so
kubectl prints its STATUS as `Unknown`, its ROLES `<none>`, its AGE `<unknown>`, as it does for a
node whose kubelet has never reported. Both are in discovery (`get`, `list`), and both answer
JSON, YAML and the meta.k8s.io/v1 Table kubectl prints.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.assembly import Core
from pods_api.core.query.view import View
from pods_api.gateway.http import formats
from pods_api.gateway.kube import listoptions
from pods_api.gateway.kube import objects as kubeobjects
from pods_api.gateway.kube.apistatus import KubeError

# The columns kubectl's printers give these kinds (k8s.io/kubernetes pkg/printers/internalversion).
_NAMESPACE_COLUMNS = (("Name", "name"), ("Status", "string"), ("Age", "string"))
_NODE_COLUMNS = (
    ("Name", "name"),
    ("Status", "string"),
    ("Roles", "string"),
    ("Age", "string"),
    ("Version", "string"),
)
# kubectl's printer words for what a Node without a Ready condition, roles or creation time shows.
_UNKNOWN_STATUS, _NO_ROLES, _UNKNOWN_AGE = "Unknown", "<none>", "<unknown>"


def _namespace_names(core: Core) -> list[str]:
    pods = kubeobjects.in_key_order(core.cache.snapshot(), View.EVERYTHING)
    return sorted({pod.namespace for pod in pods})


def node(name: str) -> dict[str, Any]:
    """This node as pods-api knows it: its name, and nothing it has not observed."""
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"name": name, "creationTimestamp": None},
        "spec": {},
        "status": {"addresses": [{"type": "Hostname", "address": name}]},
    }


def _table(
    columns: tuple[tuple[str, str], ...],
    rows: list[tuple[dict[str, Any], list[str]]],
    revision: int,
    group_version: str,
) -> bytes:
    definitions = [
        {
            "name": name,
            "type": kind,
            "format": "name" if kind == "name" else "",
            "description": "",
            "priority": 0,
        }
        for name, kind in columns
    ]
    table_rows = [
        {
            "cells": cells,
            "object": {
                "kind": "PartialObjectMetadata",
                "apiVersion": group_version,
                "metadata": obj["metadata"],
            },
        }
        for obj, cells in rows
    ]
    table = {
        "kind": "Table",
        "apiVersion": group_version,
        "metadata": {"resourceVersion": str(revision)},
        "columnDefinitions": definitions,
        "rows": table_rows,
    }
    return orjson.dumps(table)


def _answer(
    request: Request,
    objects: list[dict[str, Any]],
    kind: str,
    revision: int,
    cells: Any,
    columns: Any,
    one: bool,
) -> Response:
    media = listoptions.accepted(request)
    if media in listoptions.TABLES:
        rows = [(o, cells(o)) for o in objects]
        return Response(
            _table(columns, rows, revision, listoptions.table_version(media)), media_type=formats.JSON
        )
    if one:
        return listoptions.render(objects[0], media, listoptions.pretty(request))
    listed = {
        "kind": f"{kind}List",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(revision)},
        "items": objects,
    }
    return listoptions.render(listed, media, listoptions.pretty(request))


def _namespace_cells(obj: dict[str, Any]) -> list[str]:
    return [obj["metadata"]["name"], obj["status"]["phase"], _UNKNOWN_AGE]


def _node_cells(obj: dict[str, Any]) -> list[str]:
    return [obj["metadata"]["name"], _UNKNOWN_STATUS, _NO_ROLES, _UNKNOWN_AGE, ""]


class ClusterRoutes:
    def __init__(self, core: Core) -> None:
        self.core = core

    async def namespaces(self, request: Request) -> Response:
        revision = self.core.cache.snapshot().revision
        objects = [kubeobjects.namespace(name) for name in _namespace_names(self.core)]
        return _answer(
            request, objects, "Namespace", revision, _namespace_cells, _NAMESPACE_COLUMNS, one=False
        )

    async def namespace(self, request: Request, namespace: str) -> Response:
        """kubectl, told a pod is not found, also asks whether its namespace is: a namespace none
        of this node's pods is in is not found, so it reports the pod's NotFound as against a
        cluster rather than the namespace's."""
        if namespace not in _namespace_names(self.core):
            raise KubeError(
                404,
                "NotFound",
                f'namespaces "{namespace}" not found',
                details={"name": namespace, "kind": "namespaces"},
            )
        revision = self.core.cache.snapshot().revision
        obj = kubeobjects.namespace(namespace)
        return _answer(request, [obj], "Namespace", revision, _namespace_cells, _NAMESPACE_COLUMNS, one=True)

    async def nodes(self, request: Request) -> Response:
        revision = self.core.cache.snapshot().revision
        return _answer(
            request,
            [node(self.core.config.node_name)],
            "Node",
            revision,
            _node_cells,
            _NODE_COLUMNS,
            one=False,
        )

    async def node(self, request: Request, name: str) -> Response:
        if name != self.core.config.node_name:
            raise KubeError(
                404, "NotFound", f'nodes "{name}" not found', details={"name": name, "kind": "nodes"}
            )
        revision = self.core.cache.snapshot().revision
        return _answer(request, [node(name)], "Node", revision, _node_cells, _NODE_COLUMNS, one=True)
