"""The objects of the Kubernetes view, assembled from the cache's encodings: a Pod whose
`metadata.resourceVersion` is pods-api's revision (spliced into the cached JSON, not re-encoded),
a PodList in the API server's order with paging, the pod Table (core/api/printer.py), watch
bookmarks, and the discovery documents kubectl and client-go read.

The resourceVersions are pods-api's own revisions (core/store/cache.py), not the API server's: a pod's
is the revision at which the version served began, a list's the revision of the snapshot. Within
one run of the process they order every change, so a client resuming a watch from the last one
it saw lands exactly after it; they start at the wall clock in milliseconds, so a revision kept
from an earlier run is older than all of this one's and gets 410 Expired, never a wrong resume.
"""

from __future__ import annotations

import base64
import binascii
import platform
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from pods_api import __version__
from pods_api.core.api.printer import printed_pod
from pods_api.core.api.table import (
    COLUMN_DEFINITIONS,
    NULL,
    TABLE_V1,
    EncodedRow,
    IncludeObject,
    encoded_row,
    metadata_object,
    row_json,
    table_json,
)
from pods_api.core.query.view import View
from pods_api.core.store.slices import collected, joined
from pods_api.core.store.snapshot import Snapshot
from pods_api.core.store.version import Masked, PodVersion
from pods_api.gateway.kube.apistatus import bad_request

# The ObjectMeta fields Go writes before resourceVersion (ObjectMeta field order): all plain
# strings, so the cached JSON's bytes up to resourceVersion are these keys' own encoding.
_BEFORE_RESOURCE_VERSION = ("name", "generateName", "namespace", "selfLink", "uid")
_POD_HEAD = b'{"kind":"Pod","apiVersion":"v1",'
# The annotation that ends a watch-list's initial events (k8s.io/apiserver storage).
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# Beside it, the API server's empty list of the resource, encoded as the request asked (JSON
# here, as Go's encoder writes it, newline included), base64: client-go's watch-list decoding
# builds its list from it and fails without it.
LIST_BLUEPRINT = "kubernetes.io/initial-events-list-blueprint"
_BLUEPRINT = base64.b64encode(b'{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}\n')
# What the API server's continue tokens say they are (apimachinery's storage continue key).
_CONTINUE_VERSION = "meta.k8s.io/v1"

# -- one pod ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Splice:
    """Where a version's JSON takes its resourceVersion: after `cut` bytes (then `before` and
    `after` around the stamp), and from `resume` on (a source's own resourceVersion between the
    two is replaced). Found once per version (PodVersion.kube_splice)."""

    cut: int
    resume: int
    before: bytes
    after: bytes


def pod_bytes(pod: PodVersion, revision: int) -> bytes:
    """The pod's JSON with kind, apiVersion and `metadata.resourceVersion` = revision, in Go's
    key order: the cached bytes with the revision spliced in after the fields that precede it."""
    splice = pod.kube_splice
    if not isinstance(splice, _Splice):
        splice = _splice(pod)
        if splice is None:  # not the codec's layout: say it by re-encoding (never seen)
            return _POD_HEAD + orjson.dumps(pod_object(pod, revision))[1:]
        pod.kube_splice = splice
    body = memoryview(pod.json_bytes)
    stamp = b'%s"resourceVersion":"%d"%s' % (splice.before, revision, splice.after)
    return b"".join((_POD_HEAD, body[1 : splice.cut], stamp, body[splice.resume :]))


def _splice(pod: PodVersion) -> _Splice | None:
    body = pod.json_bytes
    metadata = pod.json.get("metadata") or {}
    head = {}
    for key, value in metadata.items():
        if key not in _BEFORE_RESOURCE_VERSION:
            break
        head[key] = value
    prefix = orjson.dumps({"metadata": head})[:-2]  # `{"metadata":{...` without the closing `}}`
    if not body.startswith(prefix):
        return None
    cut = resume = len(prefix)
    separator = b"," if head else b""
    if "resourceVersion" in metadata:  # the source's own (an API server's): replaced, not kept
        old = separator + b'"resourceVersion":' + orjson.dumps(metadata["resourceVersion"])
        if not body.startswith(old, cut):
            return None
        resume += len(old)
    after = b"," if not head and not body.startswith((b",", b"}"), resume) else b""
    return _Splice(cut, resume, separator, after)


def pod_object(pod: Masked, revision: int) -> dict[str, Any]:
    """The same pod as a dict (for YAML, tables): resourceVersion in its place after uid."""
    body = pod.json  # decoded from its bytes on each use: once here
    metadata: dict[str, Any] = {}
    placed = False
    for key, value in (body.get("metadata") or {}).items():
        if key == "resourceVersion":
            continue
        if not placed and key not in _BEFORE_RESOURCE_VERSION:
            metadata["resourceVersion"] = str(revision)
            placed = True
        metadata[key] = value
    if not placed:
        metadata["resourceVersion"] = str(revision)
    return {"kind": "Pod", "apiVersion": "v1", **body, "metadata": metadata}


# -- lists -----------------------------------------------------------------------------------


def in_key_order(snapshot: Snapshot, view: View) -> list[PodVersion]:
    """The snapshot's pods in the view, in the API server's order (by namespace, then name),
    computed once per (snapshot, view)."""
    return snapshot.memo(("kube-order", view.key), lambda: _key_sorted(view.select(snapshot.pods)))


async def key_ordered(snapshot: Snapshot, view: View) -> list[PodVersion]:
    """`in_key_order`, the view's selection made in slices (core/store/slices.py)."""

    async def make() -> list[PodVersion]:
        return _key_sorted(await collected(view.select(snapshot.pods), _same))

    return await snapshot.assembled(("kube-order", view.key), make)


def _key_sorted(pods: Iterable[PodVersion]) -> list[PodVersion]:
    return sorted(pods, key=lambda p: (p.namespace, p.name))


def _same(pod: PodVersion) -> PodVersion:
    return pod


def continue_token(revision: int, after: PodVersion) -> str:
    """Where the next page starts: the shape of the API server's tokens (base64url JSON)."""
    key = {"v": _CONTINUE_VERSION, "rv": revision, "start": f"{after.namespace}/{after.name}\x00"}
    return base64.urlsafe_b64encode(orjson.dumps(key)).decode().rstrip("=")


def parse_continue(token: str) -> tuple[int, tuple[str, str]]:
    """(revision, (namespace, name) of the last pod sent) from a continue token; BadRequest
    otherwise."""
    try:
        key = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        revision, start = key["rv"], key["start"]
        if key.get("v") != _CONTINUE_VERSION or not isinstance(revision, int) or not isinstance(start, str):
            raise ValueError
        namespace, _, name = start.rstrip("\x00").partition("/")
    except (ValueError, TypeError, KeyError, binascii.Error, orjson.JSONDecodeError):
        raise bad_request(f"continue key is not valid: {token[:128]!r}") from None
    return revision, (namespace, name)


def page(
    pods: Sequence[PodVersion], after: tuple[str, str] | None, limit: int
) -> tuple[list[PodVersion], int]:
    """The pods after `after` (key order), at most `limit` (0: all), and how many remain."""
    first = 0
    if after is not None:
        first = next((i for i, p in enumerate(pods) if (p.namespace, p.name) > after), len(pods))
    chosen = list(pods[first:] if limit <= 0 else pods[first : first + limit])
    return chosen, len(pods) - first - len(chosen)


def list_bytes(revision: int, pods: Sequence[PodVersion], next_token: str | None, remaining: int) -> bytes:
    """A PodList, assembled from each pod's spliced bytes."""
    return _list_head(revision, next_token, remaining) + b",".join(_item(p) for p in pods) + b"]}"


async def list_bytes_sliced(
    revision: int, pods: Sequence[PodVersion], next_token: str | None, remaining: int
) -> bytes:
    """`list_bytes`, its items made in slices (core/store/slices.py)."""
    return await joined(pods, _item, b",", _list_head(revision, next_token, remaining), b"]}")


def _list_head(revision: int, next_token: str | None, remaining: int) -> bytes:
    metadata: dict[str, Any] = {"resourceVersion": str(revision)}
    if next_token is not None:
        metadata["continue"] = next_token
        if remaining:
            metadata["remainingItemCount"] = remaining
    return b'{"kind":"PodList","apiVersion":"v1","metadata":%s,"items":[' % orjson.dumps(metadata)


def _item(pod: PodVersion) -> bytes:
    return pod_bytes(pod, pod.revision)


def list_object(revision: int, pods: Sequence[PodVersion], next_token: str | None, remaining: int) -> Any:
    return orjson.loads(list_bytes(revision, pods, next_token, remaining))


# -- tables ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _TableRow:
    """What a Table needs of one pod version, made on the first Table that shows it and kept
    with it (PodVersion.table_row): the row's JSON but for the cells that change with the clock,
    and the pod's metadata as a Metadata row's object carries it."""

    revision: int
    row: EncodedRow
    metadata: bytes


def _table_row(pod: PodVersion, revision: int) -> _TableRow:
    kept = pod.table_row
    if isinstance(kept, _TableRow) and kept.revision == revision:
        return kept
    body = pod_object(pod, revision)  # the one JSON decode of this version for Tables
    made = _TableRow(revision, encoded_row(printed_pod(body)), orjson.dumps(body["metadata"]))
    if revision == pod.revision:  # a watch's DELETED row carries another revision: not kept
        pod.table_row = made
    return made


def table(
    pods: Sequence[tuple[PodVersion, int]],
    resource_version: int,
    include: IncludeObject,
    *,
    no_headers: bool = False,
    continue_: str | None = None,
    remaining: int = 0,
    group_version: str = TABLE_V1,
    now: datetime | None = None,
) -> bytes:
    """A meta.k8s.io/v1 (or v1beta1) Table of (pod, its revision), the printer's columns and
    STATUS rules: each version's row encoded once (core/api/table.py), finished at `now` (by
    default this moment) around its object."""
    row = _row_maker(include, group_version, now or datetime.now(UTC))
    rows = [row(entry) for entry in pods]
    return table_json(
        rows,
        resource_version=str(resource_version),
        continue_=continue_,
        remaining=remaining,
        no_headers=no_headers,
        group_version=group_version,
    )


async def table_sliced(
    pods: Sequence[tuple[PodVersion, int]],
    resource_version: int,
    include: IncludeObject,
    *,
    continue_: str | None = None,
    remaining: int = 0,
    group_version: str = TABLE_V1,
) -> bytes:
    """`table`, its rows made in slices (core/store/slices.py): a Table's first rows of 5,000
    pods are a printer's pass over each, ~0.1 ms a pod."""
    rows = await collected(pods, _row_maker(include, group_version, datetime.now(UTC)))
    return table_json(
        rows,
        resource_version=str(resource_version),
        continue_=continue_,
        remaining=remaining,
        group_version=group_version,
    )


def _row_maker(
    include: IncludeObject, group_version: str, now: datetime
) -> Callable[[tuple[PodVersion, int]], bytes]:
    def row(entry: tuple[PodVersion, int]) -> bytes:
        pod, revision = entry
        kept = _table_row(pod, revision)
        if include == "Metadata":
            obj = metadata_object(kept.metadata, group_version)
        elif include == "Object":
            obj = pod_bytes(pod, revision)
        else:
            obj = NULL
        return row_json(kept.row, now, obj)

    return row


COLUMNS_NULL = b'"columnDefinitions":null'
COLUMNS = b'"columnDefinitions":' + COLUMN_DEFINITIONS


# -- watch objects ---------------------------------------------------------------------------


def bookmark(revision: int, *, initial_events_end: bool = False) -> bytes:
    """A BOOKMARK event: an empty Pod carrying only the revision, as Go encodes an empty Pod."""
    annotations = b""
    if initial_events_end:  # map keys in Go's (sorted) order
        annotations = b',"annotations":{"%s":"true","%s":"%s"}' % (
            INITIAL_EVENTS_END.encode(),
            LIST_BLUEPRINT.encode(),
            _BLUEPRINT,
        )
    return (
        b'{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"%d",'
        b'"creationTimestamp":null%s},"spec":{"containers":null},"status":{}}}\n'
    ) % (revision, annotations)


def error_event(status: bytes) -> bytes:
    return b'{"type":"ERROR","object":%s}\n' % status


def namespace(name: str) -> dict[str, Any]:
    """A namespace some pod of this node is in, as the API server shows an active one."""
    return {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": name, "creationTimestamp": None},
        "spec": {},
        "status": {"phase": "Active"},
    }


# -- discovery -------------------------------------------------------------------------------

VERBS = ["get", "list", "watch"]
_POD_RESOURCE = {
    "name": "pods",
    "singularName": "pod",
    "namespaced": True,
    "kind": "Pod",
    "verbs": VERBS,
    "shortNames": ["po"],
    "categories": ["all"],
}
# This node and its pods' namespaces, read-only (gateway/kube/cluster.py).
READ = ["get", "list"]
NAMESPACES = {"name": "namespaces", "singularName": "namespace", "kind": "Namespace", "shortNames": ["ns"]}
NODES = {"name": "nodes", "singularName": "node", "kind": "Node", "shortNames": ["no"]}


def legacy_resource(resource: dict[str, Any]) -> dict[str, Any]:
    """The APIResourceList entry of a cluster-scoped, read-only resource."""
    return {**resource, "namespaced": False, "verbs": READ}


def aggregated_resource(resource: dict[str, Any]) -> dict[str, Any]:
    """The same in the aggregated (apidiscovery.k8s.io/v2) form."""
    return {
        "resource": resource["name"],
        "responseKind": {"group": "", "version": "v1", "kind": resource["kind"]},
        "scope": "Cluster",
        "singularResource": resource["singularName"],
        "verbs": READ,
        "shortNames": resource["shortNames"],
    }


_CLUSTER_RESOURCES = (NAMESPACES, NODES)
API_RESOURCE_LIST: dict[str, Any] = {
    "kind": "APIResourceList",
    "groupVersion": "v1",
    "resources": [_POD_RESOURCE, *(legacy_resource(r) for r in _CLUSTER_RESOURCES)],
}
API_VERSIONS = {
    "kind": "APIVersions",
    "versions": ["v1"],
    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
}
API_GROUP_LIST = {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
# What client-go asks for first (`Accept: ...;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`):
# one request answers /api and its resources. The response's Content-Type tells client-go which
# form it got.
AGGREGATED_MEDIA_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_CORE = {
    "kind": "APIGroupDiscoveryList",
    "apiVersion": "apidiscovery.k8s.io/v2",
    "metadata": {},
    "items": [
        {
            "metadata": {"creationTimestamp": None},
            "versions": [
                {
                    "version": "v1",
                    "resources": [
                        {
                            "resource": "pods",
                            "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                            "scope": "Namespaced",
                            "singularResource": "pod",
                            "verbs": VERBS,
                            "shortNames": ["po"],
                            "categories": ["all"],
                        },
                        *(aggregated_resource(r) for r in _CLUSTER_RESOURCES),
                    ],
                    "freshness": "Current",
                }
            ],
        }
    ],
}
AGGREGATED_GROUPS = {
    "kind": "APIGroupDiscoveryList",
    "apiVersion": "apidiscovery.k8s.io/v2",
    "metadata": {},
    "items": [],
}


# Go's names for the machines pods-api runs on (what the API server's platform says).
_GOARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x"}


def version_info() -> dict[str, str]:
    """/version: the Kubernetes minor whose Pods API this serves, and what is really answering."""
    return {
        "major": "1",
        "minor": "37",
        "gitVersion": f"v1.37.0+pods-api-{__version__}",
        "gitCommit": "",
        "gitTreeState": "",
        "buildDate": "",
        "goVersion": "",
        "compiler": "pods-api",
        "platform": f"linux/{_GOARCH.get(platform.machine(), platform.machine())}",
    }
