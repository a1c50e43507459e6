"""One version of one pod, encoded once: every List, Get and watcher reuses these bytes.

A version keeps only what is served and what is needed to diff: its protobuf bytes, already
framed as field 1 of a message (`0x0a <varint length> <pb>`: a GetPodResponse as it is, and a
ListPodsResponse is the concatenation of its pods' framed bytes), and its compact Kubernetes
JSON (for a version from upstream bytes, rendered when first read: a bridge serving only gRPC
never renders it). The protobuf message and the JSON dict tree (together ~4x the bytes) are made
again from those bytes when something needs them (a new mask, a selector, the identity policy,
an index), which is once per version and reader, never per request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from google.protobuf.message import DecodeError

from pods_api.core.api.codec import CodecError, check_renders, pod_from_message, pod_to_message
from pods_api.core.api.marshal import go_marshal
from pods_api.core.api.pb import k8s_core_v1_pb2, k8s_meta_v1_pb2
from pods_api.core.query.fieldmask import FieldMask
from pods_api.core.query.selector import selected_part
from pods_api.core.query.view import View
from pods_api.core.store.lru import LRU

# The largest pod the sources accept, encoded (protobuf): the API server's own limit on an
# object (etcd's default request size, 1.5 MiB). Every Get and watch event then fits in a
# default gRPC client's 4 MiB receive limit; a List of many pods may not (README: Limits).
MAX_POD_BYTES = 1536 * 1024
# Masked encodings kept per pod version. Clients use a handful of masks; the bound keeps a
# client cycling through masks from holding memory per pod.
MASKED_PER_POD = 8

# A pod's compact JSON is about twice its protobuf (5.7 against 2.9 KiB for bench/pods.py's
# pods): what a budget counts for a JSON not rendered yet.
JSON_PER_PB = 2

# A pod's phase once it has finished (pkg/apis/core: a terminal phase never changes again).
_FINISHED = ("Succeeded", "Failed")
_FINISHED_BYTES = tuple(phase.encode() for phase in _FINISHED)
# The message the kubelet gives a pod it refused at admission (pkg/kubelet: rejectPod), and no
# other: such a pod never reaches its pod workers, so it is not terminated when it fails.
_REJECTED = "Pod was rejected: "
_REJECTED_BYTES = _REJECTED.encode()

# The tag of field 1, length-delimited: ListPodsResponse.pods and GetPodResponse.pod.
_FIELD_1 = b"\x0a"

# The annotations of the kubelet's config the identity policy reads of a pod on every change:
# which config source a static pod is from, and the kubelet's UID a mirror names. Only they are
# kept with a version (the rest may be long: last-applied-configuration).
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
CONFIG_SOURCE = "kubernetes.io/config.source"
CONFIG_ANNOTATIONS = (MIRROR_ANNOTATION, CONFIG_SOURCE)
# The status lists that name containers, each entry with its runtime's container ID.
CONTAINER_LISTS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")


@dataclass(frozen=True, slots=True)
class Facts:
    """What the cache itself reads of a pod on every change (its indexes, the identity policy),
    decoded once from the message the version was made from: a version from upstream bytes is
    then parsed once, not again by each reader (a 5 KiB pod's parse is ~10 µs, and a relayed
    event was parsed six times: decode, both indexes for the old and the new version, the
    identity policy's annotations)."""

    config: Mapping[str, str]  # those of CONFIG_ANNOTATIONS the pod has
    pod_ips: tuple[str, ...]  # status.podIPs[].ip, then status.podIP; empty ones left out
    # (name, which list, containerID as stated) for each container status that names an ID
    containers: tuple[tuple[str, str, str], ...]

    @classmethod
    def of(cls, message: k8s_core_v1_pb2.Pod) -> Facts:
        status = message.status
        ips = (*(entry.ip for entry in status.podIPs), status.podIP)
        containers = tuple(
            (entry.name, list_name, entry.containerID)
            for list_name in CONTAINER_LISTS
            for entry in getattr(status, list_name)
            if entry.containerID
        )
        annotations = message.metadata.annotations
        config = {key: annotations[key] for key in CONFIG_ANNOTATIONS if key in annotations}
        return cls(config, tuple(ip for ip in ips if ip), containers)


def exact_json(value: Any) -> bytes:
    """`value` as compact JSON, in a bytes object of its own size. orjson returns one whose
    allocation is its reserve for the worst case of escaping, never shrunk: at least 4 KiB, and
    about 10x a document of long strings (a 24 KB pod held 253 KB). Kept for as long as a
    version is, that was 39.0 MiB resident for the 27.4 MiB of JSON of 5,000 pods (measured,
    orjson 3.13); the copy costs one memcpy per version."""
    return bytes(memoryview(orjson.dumps(value)))


def frame(pb: bytes) -> bytes:
    """`pb` as field 1 of a message: its tag, its length as a varint, then the bytes."""
    return field_1_head(len(pb)) + pb


def field_1_head(size: int) -> bytes:
    """What comes before `size` bytes that are field 1 of a message: its tag and the length."""
    head = bytearray(_FIELD_1)
    while size > 0x7F:
        head.append((size & 0x7F) | 0x80)
        size >>= 7
    head.append(size)
    return bytes(head)


@dataclass(eq=False, slots=True)
class Masked:
    """A pod's encoding as one mask shows it (or unmasked): framed protobuf and compact JSON."""

    framed: bytes  # `0x0a <varint len> <pb>`
    # The compact JSON; None until first read for a version made from upstream bytes, which a
    # gRPC-only server never renders (json_bytes renders it).
    _json: bytes | None

    @classmethod
    def of(cls, pb: bytes, json_bytes: bytes) -> Masked:
        return cls(frame(pb), json_bytes)

    @property
    def json_bytes(self) -> bytes:
        """The compact Kubernetes JSON, rendered from the protobuf bytes on first read if it
        was not made with them."""
        if self._json is None:
            self._json = exact_json(pod_from_message(k8s_core_v1_pb2.Pod.FromString(self.pb)))
        return self._json

    @property
    def held(self) -> int:
        """The bytes of encodings this holds: the framed protobuf and the JSON once rendered."""
        return len(self.framed) + (len(self._json) if self._json is not None else 0)

    @property
    def encoded(self) -> int:
        """The bytes of both encodings, the JSON's estimated until it is rendered: what a budget
        for the Lists of both surfaces leaves room for, without rendering anything."""
        framed = len(self.framed)
        return framed + (len(self._json) if self._json is not None else JSON_PER_PB * framed)

    @property
    def pb(self) -> bytes:
        """The protobuf bytes alone (a copy; the framed form is what is kept)."""
        framed = self.framed
        start = 2
        while framed[start - 1] & 0x80:
            start += 1
        return framed[start:]

    @property
    def get_response(self) -> bytes:
        """A GetPodResponse carrying this pod, as protobuf serializes it (empty bytes omitted)."""
        return self.framed if len(self.framed) > 2 else b""

    @property
    def json(self) -> dict[str, Any]:
        """The Kubernetes JSON as a new dict tree, decoded from `json_bytes` on each call: the
        caller may keep or change it."""
        value: dict[str, Any] = orjson.loads(self.json_bytes)
        return value


@dataclass(eq=False, slots=True)
class PodVersion(Masked):
    """A pod as stored: its framed protobuf bytes and Kubernetes JSON, made once.

    Treat every attribute as read-only: the same object is shared by every reader.
    """

    uid: str = ""
    name: str = ""
    namespace: str = ""
    # The cache revision at which this version began to be served (set by the cache when it
    # publishes it as ADDED or MODIFIED; 0 until then): the Kubernetes view's
    # metadata.resourceVersion of the pod.
    revision: int = 0
    _masked: LRU[str, Masked] | None = field(default=None, repr=False)
    _identity: bytes | None = field(default=None, repr=False)
    _facts: Facts | None = field(default=None, repr=False)
    _selectable: dict[str, Any] | None = field(default=None, repr=False)
    # The Kubernetes view's Table row of this version (gateway/kube/objects.py), made by the
    # first Table that shows it: every later Table, of any second, reuses its encoding.
    table_row: object | None = field(default=None, repr=False)
    # Where the Kubernetes view splices its resourceVersion into this version's JSON, found by
    # the first of its reads (gateway/kube/objects.py): a List of 5,000 pods decoded each one's
    # JSON to find it, ~25 µs a pod, on every List.
    kube_splice: object | None = field(default=None, repr=False)

    @property
    def message(self) -> k8s_core_v1_pb2.Pod:
        """The protobuf message, parsed again from the bytes (a few µs) on each call."""
        return k8s_core_v1_pb2.Pod.FromString(self.pb)

    @property
    def facts(self) -> Facts:
        """What the cache reads of this pod (indexes, identity policy), decoded once."""
        if self._facts is None:
            self._facts = Facts.of(self.message)
        return self._facts

    @property
    def selectable(self) -> dict[str, Any]:
        """What a selector reads of this version (core/query/selector.py SELECTED), decoded
        from its JSON on the first selector's read and kept: read-only, shared by every view."""
        if self._selectable is None:
            self._selectable = selected_part(self.json)
        return self._selectable

    @property
    def identity(self) -> bytes:
        """A new pod with only this one's metadata.name, namespace and uid, in Go's bytes (the
        rest at Go's zero values): what the kubelet sends for a deleted pod (so that no client
        acts on a stale end state), byte for byte. Made once per version, for every watcher,
        view and contract: a mask keeps these three fields whatever it names, so no view shows
        more or less of it."""
        if self._identity is None:
            meta = k8s_meta_v1_pb2.ObjectMeta(name=self.name, namespace=self.namespace, uid=self.uid)
            self._identity = go_marshal(k8s_core_v1_pb2.Pod(metadata=meta))
        return self._identity

    @classmethod
    def from_message(cls, message: k8s_core_v1_pb2.Pod) -> PodVersion:
        """The pod as Go's bytes of it (`go_marshal`), and the JSON those bytes decode to (made
        from the message, which renders the same with `go_zeros`, faster than the bytes): the
        same pod on every surface, whichever form a client reads."""
        meta = message.metadata
        return cls(
            frame(go_marshal(message)),
            exact_json(pod_from_message(message, go_zeros=True)),
            meta.uid,
            meta.name,
            meta.namespace,
            _facts=Facts.of(message),
        )

    @classmethod
    def from_bytes(cls, data: bytes, message: k8s_core_v1_pb2.Pod | None = None) -> PodVersion:
        """From a v1.Pod's wire bytes (what the kubelet sends), kept exactly: an unmasked reader
        gets these very bytes, never our re-encoding. The message (parsed here unless given,
        and then it must be `data` parsed) gives the identity; the JSON is rendered when first
        read (a mask, a selector, an HTTP reader), so a bridge serving gRPC alone passes each
        pod on without rendering it. Raises CodecError, also for what the JSON could not
        render, so that nothing accepted here fails later."""
        if message is None:
            try:
                message = k8s_core_v1_pb2.Pod.FromString(data)
            except DecodeError as exc:
                raise CodecError("", f"not a v1.Pod in protobuf: {exc}") from None
        check_renders(message)
        meta = message.metadata
        return cls(frame(data), None, meta.uid, meta.name, meta.namespace, _facts=Facts.of(message))

    @classmethod
    def deleted(cls, data: bytes, message: k8s_core_v1_pb2.Pod | None = None) -> PodVersion:
        """A DELETED event's pod as its upstream sent it (the kubelet: a fresh pod holding only
        the name, namespace and uid), as `from_bytes`; its `identity`, what a DELETED frame
        carries, is these very bytes, so a relayed DELETED is passed on as sent."""
        version = cls.from_bytes(data, message)
        version._identity = data
        return version

    @classmethod
    def from_json(cls, obj: Any, warnings: list[str] | None = None) -> PodVersion:
        """From a person's JSON/YAML; raises CodecError. The JSON stored is the canonical form."""
        decoded = pod_to_message(obj)
        if warnings is not None:
            warnings.extend(decoded.warnings)
        return cls.from_message(decoded.message)

    @property
    def finished(self) -> bool:
        """Whether the kubelet is done with it: its phase is Succeeded or Failed (no container
        will run again) and its sandbox is not ready (the kubelet stops the sandbox before it
        calls the pod terminated: pkg/kubelet SyncTerminatingPod, then TerminatePod). A pod
        whose status says nothing of its sandbox is finished by its phase. The bytes are
        searched before the message is parsed: a few µs for a pod that is not finished."""
        if not any(phase in self.framed for phase in _FINISHED_BYTES):
            return False
        status = self.message.status
        if status.phase not in _FINISHED:
            return False
        return not any(
            c.type == "PodReadyToStartContainers" and c.status == "True" for c in status.conditions
        )

    @property
    def rejected(self) -> bool:
        """Whether the kubelet refused it at admission: Failed with the kubelet's message for
        that. It finished without ever running, and the kubelet's watch follows it on: its
        changes are MODIFIED, its removal DELETED (seen beside a registered kubelet v1.37.2)."""
        if _REJECTED_BYTES not in self.framed:
            return False
        status = self.message.status
        return status.phase == "Failed" and status.message.startswith(_REJECTED)

    @property
    def terminated(self) -> bool:
        """Whether the kubelet's watch has said DELETED of it while it stays listed: it finished,
        and was not refused at admission (pkg/kubelet/status TerminatePod)."""
        return self.finished and not self.rejected

    def masked(self, view: View) -> Masked:
        """This version as the view shows it, computed once per (mask, version): only the mask
        shapes a pod, so views that differ in their selector share the encodings."""
        mask = view.mask
        if mask is None:
            return self
        if self._masked is None:
            self._masked = LRU(MASKED_PER_POD)
        return self._masked.get(mask.key, lambda: self._mask(mask))

    def _mask(self, mask: FieldMask) -> Masked:
        masked_json = mask.apply_json(self.json)
        # Go's bytes of the masked pod: what Go would write for a pod holding only these fields.
        pb = go_marshal(mask.apply_message(self.message))
        return Masked.of(pb, exact_json(masked_json))
