"""Pod and PodList bodies, assembled from the cache's per-version encodings without
re-serialising a pod: the cached compact JSON gets `kind`/`apiVersion` spliced in front, and a list
is the concatenation of its items. One assembled list is kept per (snapshot, view, format), so
every request until the cache changes gets the same bytes object."""

from __future__ import annotations

from typing import Any

import orjson

from pods_api.core.query.view import View
from pods_api.core.store.index import Hit
from pods_api.core.store.slices import collected, joined
from pods_api.core.store.snapshot import Snapshot
from pods_api.core.store.version import PodVersion
from pods_api.gateway.http.formats import Format, render

# Kubernetes JSON puts TypeMeta first, as the API server does for a single object.
_POD_HEAD = b'{"kind":"Pod","apiVersion":"v1"'
_LIST_HEAD = b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"%d"},"items":['
_LIST_TAIL = b"]}"
# A lookup's PodList says which pod (and container) each item matched in a `matches` field of
# its own, beside `items`: the items stay plain Pods, and every PodList reader (client-go, the
# kubernetes Python client, kubectl, jq) reads the list as before, skipping a field it does not know.
_KINDS = {
    "containerStatuses": "container",
    "initContainerStatuses": "initContainer",
    "ephemeralContainerStatuses": "ephemeralContainer",
}


def pod_bytes(pod: PodVersion, view: View) -> bytes:
    """The pod's compact JSON with kind and apiVersion, as Get, list items and SSE data carry it."""
    body = pod.masked(view).json_bytes
    return _POD_HEAD + (b"}" if body == b"{}" else b"," + body[1:])


def pod_object(pod: PodVersion, view: View) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1", **pod.masked(view).json}


def list_object(revision: int, items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(revision)},
        "items": items,
    }


def pod_body(pod: PodVersion, view: View, fmt: Format) -> bytes:
    if fmt is Format.JSON:
        return pod_bytes(pod, view)
    return render(pod_object(pod, view), fmt)


async def list_body(snapshot: Snapshot, view: View, fmt: Format) -> bytes:
    """Made once per (snapshot, format, view), in slices (core/store/slices.py)."""
    return await snapshot.assembled(("http-list", fmt, view.key), lambda: _make_list(snapshot, view, fmt))


async def _make_list(snapshot: Snapshot, view: View, fmt: Format) -> bytes:
    if fmt is not Format.JSON:
        items = await collected(view.select(snapshot.pods), lambda pod: pod_object(pod, view))
        return render(list_object(snapshot.revision, items), fmt)
    head = _LIST_HEAD % snapshot.revision
    return await joined(view.select(snapshot.pods), lambda pod: pod_bytes(pod, view), b",", head, _LIST_TAIL)


def match_object(hit: Hit) -> dict[str, Any]:
    """Which pod a lookup matched, and for a container ID which container."""
    match: dict[str, Any] = {"uid": hit.pod.uid}
    if hit.container is not None:
        ref = hit.container
        match["container"] = {"name": ref.name, "kind": _KINDS[ref.list], "containerID": ref.container_id}
    return match


def lookup_body(revision: int, hits: list[Hit], view: View, fmt: Format) -> bytes:
    """A PodList of a lookup's pods, with `matches` (one per item, in item order)."""
    if fmt is not Format.JSON:
        return render(
            {
                "kind": "PodList",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(revision)},
                "items": [pod_object(hit.pod, view) for hit in hits],
                "matches": [match_object(hit) for hit in hits],
            },
            fmt,
        )
    items = b",".join(pod_bytes(hit.pod, view) for hit in hits)
    matches = orjson.dumps([match_object(hit) for hit in hits])
    return b"".join((_LIST_HEAD % revision, items, b'],"matches":', matches, b"}"))
