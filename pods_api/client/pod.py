"""`Pod`: one pod as a Pods API server sent it, its bytes kept and decoded only when asked."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError

from pods_api.core.api.pb import k8s_core_v1_pb2

# The codec is loaded when a pod is asked for as JSON (or does not decode): a table reads the
# messages themselves (core/api/messageview.py).


class Pod:
    """One pod as the server sent it. `raw` is the exact bytes; equality compares them."""

    __slots__ = ("_message", "raw")

    def __init__(self, raw: bytes, message: k8s_core_v1_pb2.Pod | None = None) -> None:
        self.raw = raw
        self._message = message

    @property
    def message(self) -> k8s_core_v1_pb2.Pod:
        """The decoded protobuf (parsed once, on first use; CodecError if the bytes are not a
        v1.Pod). Treat it as read-only."""
        if self._message is None:
            try:
                self._message = k8s_core_v1_pb2.Pod.FromString(self.raw)
            except DecodeError as exc:
                from pods_api.core.api.codec import CodecError

                raise CodecError("", f"not a v1.Pod in protobuf: {exc}") from None
        return self._message

    @property
    def uid(self) -> str:
        return self.message.metadata.uid

    @property
    def name(self) -> str:
        return self.message.metadata.name

    @property
    def namespace(self) -> str:
        return self.message.metadata.namespace

    def json(self) -> dict[str, Any]:
        """Kubernetes JSON, as `kubectl get -o json` prints it; a fresh dict on each call."""
        from pods_api.core.api.codec import pod_from_message

        return pod_from_message(self.message)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pod) and other.raw == self.raw

    def __hash__(self) -> int:
        return hash(self.raw)

    def __repr__(self) -> str:
        return f"Pod({self.namespace}/{self.name}, uid={self.uid}, {len(self.raw)} bytes)"
