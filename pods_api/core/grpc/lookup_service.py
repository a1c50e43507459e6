"""podsapi.v1.PodLookup, our extension on the Pods API socket (proto/podsapi_v1.proto): Lookup by
container ID, pod IP or namespace and name, and ListPods and WatchPods with label and field
selectors (WatchPodBatches: WatchPods' events, several to a message). The kubelet's
v1alpha1.Pods stays exactly the kubelet's.

Same rules as the Pods handlers (core/grpc/service.py): the mask comes from the
`x-kubernetes-fieldmask` metadata, pods are the cache's encoded bytes, a list is assembled once
per (snapshot, view) and shared with v1alpha1's ListPods of the same view (the same bytes on the
wire), and the watch is the one stream in v1alpha1's frames. Rate limit, readiness and metrics
are the interceptors', from the call table.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from pods_api.core.api.pb import podsapi_v1_pb2 as lookup_pb
from pods_api.core.grpc.requests import parser
from pods_api.core.grpc.service import ServiceName, held_list, mask_text, send_bounded, watch_encoding
from pods_api.core.policy.connections import DEFAULT_SEND_TIMEOUT
from pods_api.core.policy.inflight import BytesInFlight
from pods_api.core.query.view import View, parse_view
from pods_api.core.store.cache import PodCache
from pods_api.core.store.index import ContainerRef
from pods_api.core.store.lookup import LookupKey, find
from pods_api.core.store.stream import WatchStreams
from pods_api.core.store.version import field_1_head

SERVICE = lookup_pb.DESCRIPTOR.services_by_name["PodLookup"].full_name
# A WatchPodBatches message holds at most this many events: past a few hundred, one more event
# saves nothing of a write's cost, and a client takes a message whole before it reads an event.
BATCH_EVENTS = 256
# And this many bytes of them: a quarter of grpc's default 4 MiB receive limit, which every
# client has unless it raises it (one pod larger than this goes alone, as on WatchPods).
BATCH_BYTES = 1 << 20

_KINDS = {
    "containerStatuses": lookup_pb.CONTAINER,
    "initContainerStatuses": lookup_pb.INIT_CONTAINER,
    "ephemeralContainerStatuses": lookup_pb.EPHEMERAL_CONTAINER,
}


def _key(request: lookup_pb.LookupRequest) -> LookupKey:
    match request.WhichOneof("key"):
        case "container_id":
            return LookupKey(container_id=request.container_id)
        case "pod_ip":
            return LookupKey(pod_ip=request.pod_ip)
        case "name":
            return LookupKey(name=(request.name.namespace, request.name.name))
    return LookupKey()  # none given: LookupKey says so


def container(ref: ContainerRef) -> lookup_pb.Container:
    return lookup_pb.Container(name=ref.name, kind=_KINDS[ref.list], container_id=ref.container_id)


class LookupService:
    def __init__(
        self,
        cache: PodCache,
        streams: WatchStreams,
        send_timeout: float = DEFAULT_SEND_TIMEOUT,
        lists: BytesInFlight | None = None,
    ) -> None:
        self._cache = cache
        self._streams = streams
        self._send_timeout = send_timeout
        self._lists = lists or BytesInFlight("gRPC")
        self._encoding = watch_encoding(ServiceName.V1ALPHA1, last_state=True)

    async def lookup(self, request: lookup_pb.LookupRequest, context: grpc.aio.ServicerContext) -> bytes:
        view = parse_view(mask_text(context), request.label_selector, request.field_selector)
        matches = [
            lookup_pb.Match(
                pod=hit.pod.masked(view).pb,
                container=container(hit.container) if hit.container is not None else None,
            )
            for hit in find(self._cache, _key(request), view)
        ]
        return lookup_pb.LookupResponse(matches=matches).SerializeToString()

    async def list_pods(self, request: lookup_pb.ListPodsRequest, context: grpc.aio.ServicerContext) -> bytes:
        view = parse_view(mask_text(context), request.label_selector, request.field_selector)
        return await held_list(self._lists, self._cache.snapshot(), view, context)

    async def watch_pods(
        self, request: lookup_pb.WatchPodsRequest, context: grpc.aio.ServicerContext
    ) -> None:
        view: View = parse_view(mask_text(context), request.label_selector, request.field_selector)
        with self._streams.open(view) as watch:
            await send_bounded(context, watch.frames(self._encoding), self._send_timeout)

    async def watch_pod_batches(
        self, request: lookup_pb.WatchPodsRequest, context: grpc.aio.ServicerContext
    ) -> None:
        """WatchPods, every event that is ready in one WatchPodsBatch: a watcher behind a burst
        takes one write per batch."""
        view: View = parse_view(mask_text(context), request.label_selector, request.field_selector)
        with self._streams.open(view) as watch:
            batches = watch.batches(self._encoding, BATCH_EVENTS, BATCH_BYTES)
            await send_bounded(context, _messages(batches), self._send_timeout)


async def _messages(batches: AsyncIterator[list[bytes]]) -> AsyncIterator[bytes]:
    """Each list of WatchPodsEvent frames as a WatchPodsBatch: its events as field 1, as
    protobuf serializes it, with no message built."""
    async for batch in batches:
        parts: list[bytes] = []
        for event in batch:
            parts += (field_1_head(len(event)), event)
        yield b"".join(parts)


METHODS = ("Lookup", "ListPods", "WatchPods", "WatchPodBatches")


def handlers(service: LookupService) -> grpc.GenericRpcHandler:
    """The service's methods; requests parse as grpc-go does (core/grpc/requests.py)."""
    methods = {
        "Lookup": grpc.unary_unary_rpc_method_handler(service.lookup, parser(lookup_pb.LookupRequest)),
        "ListPods": grpc.unary_unary_rpc_method_handler(service.list_pods, parser(lookup_pb.ListPodsRequest)),
        "WatchPods": grpc.unary_stream_rpc_method_handler(
            service.watch_pods, parser(lookup_pb.WatchPodsRequest)
        ),
        "WatchPodBatches": grpc.unary_stream_rpc_method_handler(
            service.watch_pod_batches, parser(lookup_pb.WatchPodsRequest)
        ),
    }
    return grpc.method_handlers_generic_handler(SERVICE, methods)
