"""One version of one pod, encoded once: every List, Get and watcher reuses these bytes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from google.protobuf.message import DecodeError

from pods_api.core.codec import CodecError, pod_from_message, pod_to_message
from pods_api.core.fieldmask import FieldMask
from pods_api.core.lru import LRU
from pods_api.core.pb import k8s_core_v1_pb2
from pods_api.core.view import View

# Masked encodings kept per pod version. Clients use a handful of masks; the bound keeps a
# client cycling through masks from holding memory per pod.
MASKED_PER_POD = 8


@dataclass(frozen=True, slots=True)
class Masked:
    pb: bytes
    json: dict[str, Any]
    json_bytes: bytes


@dataclass(eq=False, slots=True)
class PodVersion:
    """A pod as stored: its message, protobuf bytes and Kubernetes JSON, made once.

    Treat every attribute as read-only: the same object is shared by every reader.
    """

    message: k8s_core_v1_pb2.Pod
    pb: bytes
    json: dict[str, Any]
    json_bytes: bytes
    _masked: LRU[str, Masked] = field(default_factory=lambda: LRU(MASKED_PER_POD), repr=False)
    _whole: Masked = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._whole = Masked(self.pb, self.json, self.json_bytes)

    @property
    def uid(self) -> str:
        return self.message.metadata.uid

    @property
    def name(self) -> str:
        return self.message.metadata.name

    @property
    def namespace(self) -> str:
        return self.message.metadata.namespace

    @classmethod
    def from_message(cls, message: k8s_core_v1_pb2.Pod) -> PodVersion:
        pod_json = pod_from_message(message)
        return cls(message, message.SerializeToString(deterministic=True), pod_json, orjson.dumps(pod_json))

    @classmethod
    def from_bytes(cls, data: bytes, message: k8s_core_v1_pb2.Pod | None = None) -> PodVersion:
        """From a v1.Pod's wire bytes (what the kubelet sends), kept exactly: an unmasked reader
        gets these very bytes, never our re-encoding. The message (parsed here unless given,
        and then it must be `data` parsed) is only for indexing, masks and JSON. Raises
        CodecError."""
        if message is None:
            try:
                message = k8s_core_v1_pb2.Pod.FromString(data)
            except DecodeError as exc:
                raise CodecError("", f"not a v1.Pod in protobuf: {exc}") from None
        pod_json = pod_from_message(message)
        return cls(message, data, pod_json, orjson.dumps(pod_json))

    @classmethod
    def from_json(cls, obj: Any, warnings: list[str] | None = None) -> PodVersion:
        """From a person's JSON/YAML; raises CodecError. The JSON stored is the canonical form."""
        decoded = pod_to_message(obj)
        if warnings is not None:
            warnings.extend(decoded.warnings)
        return cls.from_message(decoded.message)

    def masked(self, view: View) -> Masked:
        """This version as the view shows it, computed once per (mask, version): only the mask
        shapes a pod, so views that differ in their selector share the encodings."""
        mask = view.mask
        if mask is None:
            return self._whole
        return self._masked.get(mask.key, lambda: self._mask(mask))

    def _mask(self, mask: FieldMask) -> Masked:
        masked_json = mask.apply_json(self.json)
        pb = mask.apply_message(self.message).SerializeToString(deterministic=True)
        return Masked(pb, masked_json, orjson.dumps(masked_json))
