"""Pod and PodList bodies, assembled from the cache's per-version encodings without
re-serialising a pod: the cached compact JSON gets `kind`/`apiVersion` spliced in front, and a list
is the concatenation of its items. One assembled list is kept per (snapshot, mask, format), so
every request until the cache changes gets the same bytes object."""

from __future__ import annotations

from typing import Any

from pods_api.core.cache import Snapshot
from pods_api.core.fieldmask import FieldMask
from pods_api.core.pod import PodVersion
from pods_api.gateway.formats import Format, render

# Kubernetes JSON puts TypeMeta first, as the API server does for a single object.
_POD_HEAD = b'{"kind":"Pod","apiVersion":"v1"'
_LIST_HEAD = b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"%d"},"items":['
_LIST_TAIL = b"]}"


def pod_bytes(pod: PodVersion, mask: FieldMask | None) -> bytes:
    """The pod's compact JSON with kind and apiVersion, as Get, list items and SSE data carry it."""
    body = pod.masked(mask).json_bytes
    return _POD_HEAD + (b"}" if body == b"{}" else b"," + body[1:])


def pod_object(pod: PodVersion, mask: FieldMask | None) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1", **pod.masked(mask).json}


def list_object(snapshot: Snapshot, mask: FieldMask | None) -> dict[str, Any]:
    return {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(snapshot.revision)},
        "items": [pod_object(pod, mask) for pod in snapshot.pods],
    }


def pod_body(pod: PodVersion, mask: FieldMask | None, fmt: Format) -> bytes:
    if fmt is Format.JSON:
        return pod_bytes(pod, mask)
    return render(pod_object(pod, mask), fmt)


def list_body(snapshot: Snapshot, mask: FieldMask | None, fmt: Format) -> bytes:
    key = ("http-list", fmt, mask.key if mask else "")
    return snapshot.memo(key, lambda: _make_list(snapshot, mask, fmt))


def _make_list(snapshot: Snapshot, mask: FieldMask | None, fmt: Format) -> bytes:
    if fmt is not Format.JSON:
        return render(list_object(snapshot, mask), fmt)
    items = b",".join(pod_bytes(pod, mask) for pod in snapshot.pods)
    return b"".join((_LIST_HEAD % snapshot.revision, items, _LIST_TAIL))
