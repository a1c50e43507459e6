"""Identity and precedence: which pod the cache serves under a UID, built from what sources say.

The cache keeps every source's *contribution* (a whole pod from a source that owns pods, a
`status` from an overlay) and asks the policy to merge the contributions for one UID into the
one PodVersion it serves. It asks again only when a contribution for that UID changed, so a pod
is re-encoded only then, and a pod with a single contribution is served as its source made it.

Identity (`IdentityPolicy.identity`):
  - A pod is served under its own `metadata.uid`...
  - ...except a **mirror pod**: the API server's copy of a static pod, carrying the annotation
    `kubernetes.io/config.mirror: <static pod uid>` (the kubelet writes the static pod's
    config hash, which is its UID). It is the same pod as that static pod, so it is served under
    the static pod's UID, never twice. Any source's pod with the annotation is a mirror; in
    practice only the API server source sends them.

Who owns a UID (the pod's spec and metadata):
  1. the first source to claim it, among sources that are not mirrors ("first claim wins"); the
     others are refused, kept, and the earliest of them is served when the holder lets go;
  2. with no such source, the earliest mirror, served under the static pod's UID (its
     `metadata.uid` rewritten; everything else as the API server has it).
A change of owning source is a different pod under the same UID: the cache sends DELETED then
ADDED. A mirror served alone has no owning source, so a static pod appearing for it, or going
away from under it, is a MODIFIED.

Status precedence. A served pod's `status` is merged, field by field, from up to three layers:
  - overlay: a status-only contribution keyed by UID (the CRI source: the container runtime's
    local view); overlays never make a pod exist;
  - mirror: the API server's mirror of a static pod that a local source owns (the kubelet's
    reported status, through the control plane);
  - owner: the owning source's own status (a static pod file says only `phase: Pending`).
For each field the first layer in its row that has a value (not absent, empty or null) wins:

  | status field(s)                                        | precedence                  |
  | ------------------------------------------------------ | --------------------------- |
  | containerStatuses, initContainerStatuses,              | overlay > mirror > owner    |
  |   ephemeralContainerStatuses (each list as a whole)    |   (see readiness below)     |
  | podIP + podIPs (together), hostIP + hostIPs (together) | overlay > mirror > owner    |
  | phase, startTime                                       | overlay > mirror > owner    |
  |   ...but a terminal phase (Succeeded, Failed) of mirror or owner stays, with its        |
  |   reason and message: the kubelet never moves a pod out of a terminal phase            |
  | conditions, merged per `type`: Ready, ContainersReady  | mirror > owner > overlay    |
  | conditions of every other type                         | overlay > mirror > owner    |
  | everything else (reason, message, qosClass,            | mirror > owner > overlay    |
  |   nominatedNodeName, resize, resourceClaimStatuses...) |                             |

Readiness depends on probes only the kubelet runs: a container status taken from the overlay
keeps `ready` and `started` from the mirror's or owner's status for the same container (same
name and same `containerID`, so a restarted container does not inherit its predecessor's).
Several overlays for one UID: the one registered first is used, the others wait for it to clear.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pods_api.core.pod import PodVersion

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


class Layer(Enum):
    OVERLAY = "overlay"
    MIRROR = "mirror"
    OWNER = "owner"


_LOCAL_FIRST = (Layer.OVERLAY, Layer.MIRROR, Layer.OWNER)
_REPORTED_FIRST = (Layer.MIRROR, Layer.OWNER, Layer.OVERLAY)

# The precedence table above, as data: field groups taken whole from one layer.
STATUS_PRECEDENCE: tuple[tuple[tuple[str, ...], tuple[Layer, ...]], ...] = (
    (("containerStatuses",), _LOCAL_FIRST),
    (("initContainerStatuses",), _LOCAL_FIRST),
    (("ephemeralContainerStatuses",), _LOCAL_FIRST),
    (("podIP", "podIPs"), _LOCAL_FIRST),
    (("hostIP", "hostIPs"), _LOCAL_FIRST),
    (("phase",), _LOCAL_FIRST),
    (("startTime",), _LOCAL_FIRST),
)
DEFAULT_PRECEDENCE = _REPORTED_FIRST
# Conditions that depend on probe results, which only the kubelet has.
PROBED_CONDITIONS = frozenset({"Ready", "ContainersReady"})
CONTAINER_STATUS_LISTS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class Contribution:
    """One source's pod for a served UID. `order` counts claims: lower claimed first."""

    source: str
    pod: PodVersion
    order: int


@dataclass(frozen=True, slots=True)
class Overlay:
    """One overlay's status (canonical Kubernetes JSON of a PodStatus) for a served UID."""

    name: str
    status: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Served:
    """What the cache serves for a UID: the pod, the source that owns it (None for a mirror
    served alone), and the owner-role contributions that lost the claim (to say so once)."""

    pod: PodVersion
    owner: str | None
    refused: tuple[Contribution, ...] = ()


class IdentityPolicy:
    """Decides under which UID a source's pod is served, and merges the contributions for one
    UID into the served pod (see the module docstring for the rules and the table).

    `mirror_pods=False` is the plain rule "first source to claim a UID wins", nothing merged.
    """

    def __init__(self, *, name: str = "mirrors+overlays", mirror_pods: bool = True) -> None:
        self.name = name
        self.mirror_pods = mirror_pods

    def identity(self, pod: PodVersion) -> str:
        """The UID this pod is served under."""
        static_uid = self.mirror_of(pod)
        return static_uid if static_uid is not None else pod.uid

    def mirror_of(self, pod: PodVersion) -> str | None:
        """The static pod's UID if this pod is a mirror pod (and mirrors are recognised)."""
        if not self.mirror_pods:
            return None
        annotations = pod.json.get("metadata", {}).get("annotations") or {}
        static_uid = annotations.get(MIRROR_ANNOTATION)
        if isinstance(static_uid, str) and static_uid and static_uid != pod.uid:
            return static_uid
        return None

    def merge(
        self, uid: str, contributions: Sequence[Contribution], overlays: Sequence[Overlay]
    ) -> Served | None:
        """The pod served under `uid`, or None when no source owns or mirrors it."""
        owners = sorted((c for c in contributions if self.mirror_of(c.pod) is None), key=lambda c: c.order)
        mirrors = sorted(
            (c for c in contributions if self.mirror_of(c.pod) is not None), key=lambda c: c.order
        )
        if owners:
            base, owner = owners[0], owners[0].source
        elif mirrors:
            base, owner = mirrors[0], None
        else:
            return None
        mirror = mirrors[0] if owners and mirrors else None
        refused = tuple(owners[1:])
        if mirror is None and not overlays and owner is not None:
            return Served(base.pod, owner, refused)  # as the source made it: no re-encoding
        layers: dict[Layer, Mapping[str, Any]] = {Layer.OWNER: base.pod.json.get("status") or {}}
        if mirror is not None:
            layers[Layer.MIRROR] = mirror.pod.json.get("status") or {}
        if overlays:
            layers[Layer.OVERLAY] = overlays[0].status
        pod_json = dict(base.pod.json)
        if owner is None:
            pod_json["metadata"] = {**pod_json["metadata"], "uid": uid}
        pod_json["status"] = merge_status(layers)
        return Served(PodVersion.from_json(pod_json), owner, refused)


def _has(value: Any) -> bool:
    return value is not None and value != "" and value != [] and value != {}


def _first(
    layers: Mapping[Layer, Mapping[str, Any]], order: Sequence[Layer], keys: Sequence[str]
) -> Layer | None:
    for layer in order:
        status = layers.get(layer)
        if status is not None and any(_has(status.get(k)) for k in keys):
            return layer
    return None


def merge_status(layers: Mapping[Layer, Mapping[str, Any]]) -> dict[str, Any]:
    """Merge PodStatus JSON from the layers present, by the precedence table."""
    grouped = {k for keys, _ in STATUS_PRECEDENCE for k in keys}
    out: dict[str, Any] = {}
    for keys, order in STATUS_PRECEDENCE:
        layer = _first(layers, order, keys)
        if layer is not None:
            out.update({k: layers[layer][k] for k in keys if _has(layers[layer].get(k))})
    every = {k for status in layers.values() for k in status}
    for key in sorted(every - grouped - {"conditions"}):
        layer = _first(layers, DEFAULT_PRECEDENCE, (key,))
        if layer is not None:
            out[key] = layers[layer][key]
    _keep_terminal_phase(layers, out)
    conditions = _merge_conditions(layers)
    if conditions:
        out["conditions"] = conditions
    for key in CONTAINER_STATUS_LISTS:
        if key in out and layers.get(Layer.OVERLAY, {}).get(key) is out[key]:
            out[key] = _keep_readiness(out[key], layers, key)
    return out


def _keep_terminal_phase(layers: Mapping[Layer, Mapping[str, Any]], out: dict[str, Any]) -> None:
    for layer in (Layer.MIRROR, Layer.OWNER):
        status = layers.get(layer)
        if status is not None and status.get("phase") in TERMINAL_PHASES:
            out["phase"] = status["phase"]
            for key in ("reason", "message"):
                if _has(status.get(key)):
                    out[key] = status[key]
            return


def _merge_conditions(layers: Mapping[Layer, Mapping[str, Any]]) -> list[dict[str, Any]]:
    by_layer = {
        layer: {c.get("type"): c for c in status.get("conditions") or []} for layer, status in layers.items()
    }
    types: list[Any] = []
    for layer in _LOCAL_FIRST:
        for kind in by_layer.get(layer, {}):
            if kind not in types:
                types.append(kind)
    merged = []
    for kind in types:
        order = _REPORTED_FIRST if kind in PROBED_CONDITIONS else _LOCAL_FIRST
        merged.append(next(by_layer[layer][kind] for layer in order if kind in by_layer.get(layer, {})))
    return merged


def _keep_readiness(
    statuses: list[dict[str, Any]], layers: Mapping[Layer, Mapping[str, Any]], key: str
) -> list[dict[str, Any]]:
    reported: dict[tuple[Any, Any], dict[str, Any]] = {}
    for layer in (Layer.OWNER, Layer.MIRROR):  # the mirror's word last, so it wins
        for status in layers.get(layer, {}).get(key) or []:
            reported[(status.get("name"), status.get("containerID"))] = status
    out = []
    for status in statuses:
        known = reported.get((status.get("name"), status.get("containerID")))
        if known is not None and status.get("containerID"):
            status = {**status, **{k: known[k] for k in ("ready", "started") if k in known}}
        out.append(status)
    return out
