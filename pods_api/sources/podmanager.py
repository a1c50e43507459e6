"""An API pod as the kubelet keeps it (pkg/kubelet/config/config.go, `checkAndUpdatePod`), which is
what its Pods API serves, with the status manager's status: the object as it was first seen, of
which a later version changes the spec, the labels, the annotations (the kubelet's own kept),
`deletionTimestamp` and `deletionGracePeriodSeconds`, and only when one of those differs. The
rest of its metadata (resourceVersion, managedFields, ownerReferences, finalizers, generation)
stays as first seen; the status is always the newest.

Kept as JSON bytes, a few KiB a pod, and decoded only when a version comes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from pods_api.core.store.identity import MIRROR_ANNOTATION
from pods_api.sources.firstseen import CONFIG_SEEN
from pods_api.sources.staticpod import CONFIG_SOURCE

# The annotations the kubelet sets itself, kept from the first version (config.go's
# localAnnotations), and left out of the comparison.
LOCAL = (CONFIG_SOURCE, MIRROR_ANNOTATION, CONFIG_SEEN)
# Of the metadata, what a later version changes (with the annotations).
UPDATED = ("labels", "deletionTimestamp", "deletionGracePeriodSeconds")


@dataclass(frozen=True, slots=True)
class Kept:
    """A pod's metadata and spec as the kubelet keeps them (JSON)."""

    metadata: bytes
    spec: bytes

    @classmethod
    def first(cls, obj: dict[str, Any]) -> Kept:
        return cls(orjson.dumps(obj.get("metadata") or {}), orjson.dumps(obj.get("spec")))

    def update(self, obj: dict[str, Any]) -> Kept:
        """What the kubelet keeps once `obj`, a later version, comes."""
        kept, new = orjson.loads(self.metadata), obj.get("metadata") or {}
        spec = orjson.dumps(obj.get("spec"))
        if spec == self.spec and not _differ(kept, new):
            return self
        for key in UPDATED:
            if key in new:
                kept[key] = new[key]
            else:
                kept.pop(key, None)
        ours = {k: v for k, v in (kept.get("annotations") or {}).items() if k in LOCAL}
        theirs = {k: v for k, v in (new.get("annotations") or {}).items() if k not in LOCAL}
        kept["annotations"] = {**theirs, **ours}
        return Kept(orjson.dumps(kept), spec)

    def served(self, obj: dict[str, Any]) -> dict[str, Any]:
        """`obj` (its status the newest) with the metadata and spec the kubelet keeps."""
        return {**obj, "metadata": orjson.loads(self.metadata), "spec": orjson.loads(self.spec)}


def _differ(kept: dict[str, Any], new: dict[str, Any]) -> bool:
    """config.go's podsDifferSemantically, but for the spec (compared by the caller)."""
    if any(kept.get(key) != new.get(key) for key in UPDATED):
        return True
    ours = {k: v for k, v in (kept.get("annotations") or {}).items() if k not in LOCAL}
    theirs = {k: v for k, v in (new.get("annotations") or {}).items() if k not in LOCAL}
    return ours != theirs
