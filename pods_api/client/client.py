"""`Client`: List, Get and Watch over any Pods API socket (the kubelet's, or pods-api's), on
either contract, with field masks and typed errors; on pods-api's socket also `lookup` and
label and field selectors (its extension, pods_api/client/lookup_client.py).

Pods come back as the server's bytes (`Pod.raw`, the serialized `v1.Pod`, exactly as sent) and
are decoded only when asked: `Pod.message` (protobuf) or `Pod.json()` (Kubernetes JSON, as
kubectl prints it).
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from types import TracebackType

import grpc
from google.protobuf.unknown_fields import UnknownFieldSet

from pods_api.client.choices import KUBELET_SOCKET
from pods_api.client.exceptions import from_rpc_error
from pods_api.client.lookup_client import SERVICE as LOOKUP_SERVICE
from pods_api.client.lookup_client import Match, lookup_request, matched_container
from pods_api.client.pod import Pod
from pods_api.core.api.eventtype import EventType as EventType  # the server's own, re-exported
from pods_api.core.api.pb import pods_v1alpha1_pb2
from pods_api.core.api.pb import podsapi_v1_pb2 as lookup_pb

FIELDMASK_METADATA = "x-kubernetes-fieldmask"
# gRPC clients refuse a response over 4 MiB by default. A ListPodsResponse of 1,000 unmasked pods
# (~4.7 KiB each, a realistic pod with full status) is ~4.8 MB, so a default client fails on a
# busy bridge; etcd allows a single pod up to 1.5 MiB. 256 MiB takes any node's list (50,000 such
# pods) while still bounding what a misbehaving peer can make us buffer.
MAX_RECEIVE_BYTES = 256 * 1024 * 1024
# A safety net for List and Get (both answer from memory in milliseconds); watches have none.
CALL_TIMEOUT = 30.0
# The socket is local, so reconnecting costs one syscall: grpc's default backoff (1 s growing to
# 120 s) would only keep a restarted server's clients away. Callers' own retry loops set the pace.
# Despite its name, grpc.min_reconnect_backoff_ms is not part of that backoff: gRPC core gives
# each connection attempt until max(now + the backoff, now + this) to receive the server's
# SETTINGS frame (subchannel.cc, StartConnectingLocked). At 100 ms, a healthy server on a busy
# machine that answered a new connection later than that failed the call with "timed out before
# receiving SETTINGS frame". gRPC's default, 20 s, and the call's own timeout bounds the wait.
CONNECT_TIMEOUT_MS = 20_000
_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.min_reconnect_backoff_ms", CONNECT_TIMEOUT_MS),
]
# With `keepalive`: the longest a keepalive ping may go unanswered before the connection is
# taken for dead (grpc's own default).
KEEPALIVE_TIMEOUT = 20.0


class Contract(Enum):
    """Which service to call. Both carry the same pod bytes; only the watch frame differs."""

    KUBELET = "v1alpha1.Pods"  # k8s.io/kubelet/pkg/apis/pods/v1alpha1
    DOCUMENTED = "Pods"  # the Kubernetes documentation page's package-less service


_EVENT_TYPES = frozenset(int(t) for t in EventType)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch frame. `pod` is None only for INITIAL_SYNC_COMPLETE. `frame` is the message's
    bytes as the server sent them when they are a v1alpha1 `WatchPodsEvent` (None on the
    documented contract): a relay passes them on unchanged."""

    type: EventType
    pod: Pod | None
    frame: bytes | None = None


def _empty(request: bytes) -> bytes:
    return request


def _list_response(data: bytes) -> list[bytes]:
    # Both contracts' list responses are `repeated <pod> pods = 1`: read pods as bytes, unparsed.
    return list(pods_v1alpha1_pb2.ListPodsResponse.FromString(data).pods)


def _get_response(data: bytes) -> bytes:
    return pods_v1alpha1_pb2.GetPodResponse.FromString(data).pod


def _kubelet_frame(data: bytes) -> tuple[int, bytes, bytes | None]:
    event = pods_v1alpha1_pb2.WatchPodsEvent.FromString(data)
    return event.type, event.pod, data


def _batch_frames(data: bytes) -> list[tuple[int, bytes, bytes | None]]:
    # A WatchPodsBatch: its events each as `_kubelet_frame` reads one (the frame serialized again
    # from the type and the pod's bytes, which it holds unparsed: the same bytes).
    events = lookup_pb.WatchPodsBatch.FromString(data).events
    return [(event.type, event.pod, event.SerializeToString()) for event in events]


def _documented_frame(data: bytes) -> tuple[int, bytes, bytes | None]:
    # PodWatchResponse{Pod pod = 1; EventType type = 2}: read the pod as bytes (GetPodResponse has
    # the same field 1) so it is never re-encoded, and the type from the field left unknown.
    head = pods_v1alpha1_pb2.GetPodResponse.FromString(data)
    unknown = UnknownFieldSet(head)
    kinds = [unknown[i].data for i in range(len(unknown)) if unknown[i].field_number == 2]
    return (int(kinds[-1]) if kinds else 0), head.pod, None


def mask_metadata(fields: str | Sequence[str] | None) -> tuple[tuple[str, str], ...]:
    """The gRPC metadata for a field mask: `"status.phase,status.podIPs"` or a list of paths."""
    if fields is None:
        return ()
    value = fields if isinstance(fields, str) else ",".join(fields)
    return ((FIELDMASK_METADATA, value),)


class Client:
    """A Pods API client on one UNIX socket. Use as `async with Client(path) as client:`.

    `fields` masks what each pod carries (the server always keeps name, namespace and uid);
    every method raises the typed errors of `pods_api.client.exceptions`.
    """

    def __init__(
        self,
        socket: str | Path = KUBELET_SOCKET,
        *,
        contract: Contract = Contract.KUBELET,
        timeout: float = CALL_TIMEOUT,
        max_receive_bytes: int = MAX_RECEIVE_BYTES,
        keepalive: float | None = None,
    ) -> None:
        """`keepalive`: ping the server this often while a call is open (a watch), so a server
        that stopped answering with the connection still open (a frozen process) ends the call
        with UNAVAILABLE instead of leaving it silent for ever; a ping unanswered for
        KEEPALIVE_TIMEOUT (at most the interval) is a dead connection. None: no pings."""
        self.socket = str(socket)
        self.contract = contract
        self.timeout = timeout
        options: list[tuple[str, int]] = [
            (k, max_receive_bytes if k == "grpc.max_receive_message_length" else v)
            for k, v in _CHANNEL_OPTIONS
        ]
        if keepalive is not None:
            unanswered = int(min(KEEPALIVE_TIMEOUT, keepalive) * 1000)
            options += [
                ("grpc.keepalive_time_ms", int(keepalive * 1000)),
                ("grpc.keepalive_timeout_ms", unanswered),
                # grpc 1.85 times a sent ping by this one (60 s by default), not the above.
                ("grpc.http2.ping_timeout_ms", unanswered),
                # A watch's client sends no data after its request: without this, grpc stops
                # pinging after two pings.
                ("grpc.http2.max_pings_without_data", 0),
            ]
        self._channel = grpc.aio.insecure_channel(f"unix:{self.socket}", options=options)
        service = f"/{contract.value}/"
        self._list = self._channel.unary_unary(
            service + "ListPods", request_serializer=_empty, response_deserializer=_list_response
        )
        self._get = self._channel.unary_unary(
            service + "GetPod", request_serializer=_empty, response_deserializer=_get_response
        )
        frame = _kubelet_frame if contract is Contract.KUBELET else _documented_frame
        self._watch = self._channel.unary_stream(
            service + "WatchPods", request_serializer=_empty, response_deserializer=frame
        )
        # pods-api's extension; its watch frames are v1alpha1's whatever the contract.
        self._lookup = self._channel.unary_unary(
            LOOKUP_SERVICE + "Lookup",
            request_serializer=lookup_pb.LookupRequest.SerializeToString,
            response_deserializer=lookup_pb.LookupResponse.FromString,
        )
        self._select = self._channel.unary_unary(
            LOOKUP_SERVICE + "ListPods",
            request_serializer=lookup_pb.ListPodsRequest.SerializeToString,
            response_deserializer=_list_response,
        )
        self._select_watch = self._channel.unary_stream(
            LOOKUP_SERVICE + "WatchPods",
            request_serializer=lookup_pb.WatchPodsRequest.SerializeToString,
            response_deserializer=_kubelet_frame,
        )
        self._batch_watch = self._channel.unary_stream(
            LOOKUP_SERVICE + "WatchPodBatches",
            request_serializer=lookup_pb.WatchPodsRequest.SerializeToString,
            response_deserializer=_batch_frames,
        )

    async def list(
        self,
        fields: str | Sequence[str] | None = None,
        *,
        label_selector: str = "",
        field_selector: str = "",
    ) -> list[Pod]:
        """Every pod the server holds (in the server's order: pods-api sorts by UID); with a
        label or field selector (Kubernetes syntax, pods-api only), the pods they select."""
        metadata = mask_metadata(fields)
        try:
            if label_selector or field_selector:
                request = lookup_pb.ListPodsRequest(
                    label_selector=label_selector, field_selector=field_selector
                )
                raws: list[bytes] = await self._select(request, metadata=metadata, timeout=self.timeout)
            else:
                raws = await self._list(b"", metadata=metadata, timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(self.socket, exc) from None
        return [Pod(raw) for raw in raws]

    async def lookup(
        self,
        *,
        container_id: str | None = None,
        pod_ip: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        fields: str | Sequence[str] | None = None,
    ) -> builtins.list[Match]:  # `list` here is the method above
        """The pods one key names (pods-api only), in UID order; empty when none. The key is
        exactly one of `container_id` (`containerd://<id>`, the bare ID, or a unique prefix of
        12+ characters; the match says which container), `pod_ip` (host-network pods share the
        node's), or `namespace` with `name`. A too short or ambiguous prefix, a malformed IP or an
        invalid selector raises InvalidArgument naming it; several keys raise ValueError."""
        request = lookup_request(container_id, pod_ip, namespace, name, label_selector, field_selector)
        try:
            response = await self._lookup(request, metadata=mask_metadata(fields), timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(self.socket, exc) from None
        return [Match(Pod(m.pod), matched_container(m)) for m in response.matches]

    async def get(self, uid: str, fields: str | Sequence[str] | None = None) -> Pod:
        """One pod by UID; raises NotFound."""
        request = pods_v1alpha1_pb2.GetPodRequest(podUID=uid).SerializeToString()
        try:
            raw: bytes = await self._get(request, metadata=mask_metadata(fields), timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(self.socket, exc) from None
        return Pod(raw)

    async def watch(
        self,
        fields: str | Sequence[str] | None = None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        on_unknown: Callable[[int], None] | None = None,
        batched: bool = False,
    ) -> AsyncGenerator[WatchEvent, None]:
        """ADDED for each existing pod, INITIAL_SYNC_COMPLETE, then live changes, until the
        server ends the stream (then the iterator raises the typed error, or just stops). With a
        label or field selector (pods-api only), the pods they select: a pod that stops matching
        comes as DELETED (its last matching state), one that starts matching as ADDED.
        A frame whose type is not one of EventType's (UNSPECIFIED, or a number from another
        version of the API) is skipped, and its number told to `on_unknown`.
        `batched` (pods-api only): the same events, taken several to a message (PodLookup's
        WatchPodBatches), which costs the server one write per batch for a watcher behind a
        burst."""
        metadata = mask_metadata(fields)
        if label_selector or field_selector or batched:
            request = lookup_pb.WatchPodsRequest(label_selector=label_selector, field_selector=field_selector)
            call = (self._batch_watch if batched else self._select_watch)(request, metadata=metadata)
        else:
            call = self._watch(b"", metadata=metadata)
        try:
            async for message in call:
                for kind, raw, frame in message if batched else (message,):
                    if kind not in _EVENT_TYPES:
                        if on_unknown is not None:
                            on_unknown(kind)
                        continue  # as the kubelet's own clients skip it
                    event_type = EventType(kind)
                    pod = None if event_type is EventType.INITIAL_SYNC_COMPLETE else Pod(raw)
                    yield WatchEvent(event_type, pod, frame)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(self.socket, exc) from None
        finally:
            call.cancel()

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
