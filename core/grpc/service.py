"""The Pods API handlers, shared by both contracts: the kubelet's `v1alpha1.Pods` and the
documentation's package-less `Pods`. List and Get are the same bytes on the wire in both; only
the watch message differs (type and pod swap field numbers).

Handlers return serialized bytes (the servers' response serializers pass them through), so a
pod is never re-encoded: responses are assembled from the cache's per-version encodings, and a
whole ListPodsResponse is kept per (snapshot, mask).

Rate limit, readiness and metrics are interceptors (core/grpc/interceptors.py), not here; so is
the status of a call: handlers raise domain errors (core/status.py), the interceptor aborts.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from enum import Enum

import grpc

from pods_api.core.cache import PodCache, Snapshot
from pods_api.core.fieldmask import FieldMask, parse_mask
from pods_api.core.lru import LRU
from pods_api.core.metrics import Metrics
from pods_api.core.pb import pods_doc_pb2, pods_v1alpha1_pb2
from pods_api.core.status import InvalidArgument, NotFound
from pods_api.core.watch import EventType, PodEvent

FIELDMASK_METADATA = "x-kubernetes-fieldmask"
# Watch frames kept for reuse across watchers (per event, contract and mask): enough for a burst
# of events to every watcher of a busy node, bounded so a quiet server holds nothing much.
_FRAMES_KEPT = 1024


class Contract(Enum):
    V1ALPHA1 = "v1alpha1.Pods"
    DOCUMENTED = "Pods"


def watch_frame(contract: Contract, kind: EventType, pod: bytes | None) -> bytes:
    if contract is Contract.V1ALPHA1:
        return pods_v1alpha1_pb2.WatchPodsEvent(type=kind.name, pod=pod or b"").SerializeToString()
    # PodWatchResponse{pod = 1, type = 2}: two messages' bytes concatenate into one message, and
    # GetPodResponse's field 1 is the same bytes as a Pod at field 1 (no re-parse of the pod).
    head = pods_v1alpha1_pb2.GetPodResponse(pod=pod).SerializeToString() if pod is not None else b""
    return head + pods_doc_pb2.PodWatchResponse(type=kind.name).SerializeToString()


class PodsService:
    """Answers List, Get and Watch from the cache. Both contracts share one instance."""

    def __init__(self, cache: PodCache, metrics: Metrics) -> None:
        self._cache = cache
        self._metrics = metrics
        self._frames: LRU[tuple[int, Contract, str], bytes | None] = LRU(_FRAMES_KEPT)

    async def list_pods(self, request: object, context: grpc.aio.ServicerContext) -> bytes:
        mask = await _mask(context)
        snapshot = self._cache.snapshot()
        return snapshot.memo(("grpc-list", mask and mask.key), lambda: _list_response(snapshot, mask))

    async def get_pod(
        self, request: pods_v1alpha1_pb2.GetPodRequest, context: grpc.aio.ServicerContext
    ) -> bytes:
        mask = await _mask(context)
        pod = self._cache.get(request.podUID)
        if pod is None:
            raise NotFound(f"pod {request.podUID!r} not found")
        return pods_v1alpha1_pb2.GetPodResponse(pod=pod.masked(mask).pb).SerializeToString()

    def watch_handler(self, contract: Contract) -> Callable[..., AsyncIterator[bytes]]:
        async def watch_pods(request: object, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
            async for frame in self._watch(contract, context):
                yield frame

        return watch_pods

    async def _watch(self, contract: Contract, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        mask = await _mask(context)
        snapshot, watcher = self._cache.watch()  # TooManyWatchers, ServerStopping: their status
        with watcher:
            key = ("grpc-watch", contract, mask and mask.key)
            for frame in snapshot.memo(key, lambda: _initial(contract, snapshot, mask)):
                yield frame
            while True:
                event = await watcher.get()  # FellBehind, ServerStopping: their status
                live = self._frame(contract, event, mask)
                if live is not None:
                    self._metrics.fanout_delay.observe(time.monotonic() - event.published)
                    yield live

    def _frame(self, contract: Contract, event: PodEvent, mask: FieldMask | None) -> bytes | None:
        """The frame for an event, made once per (event, contract, mask) for every watcher;
        None for a MODIFIED that the mask hides entirely."""

        def make() -> bytes | None:
            if _masked_unchanged(event, mask):
                return None
            return watch_frame(contract, event.type, event.pod.masked(mask).pb)

        return self._frames.get((event.revision, contract, mask.key if mask else ""), make)


def _masked_unchanged(event: PodEvent, mask: FieldMask | None) -> bool:
    """A MODIFIED that changes nothing the client asked to see is not sent."""
    if mask is None or event.type is not EventType.MODIFIED or event.previous is None:
        return False
    return event.previous.masked(mask).pb == event.pod.masked(mask).pb


def _list_response(snapshot: Snapshot, mask: FieldMask | None) -> bytes:
    pods = [pod.masked(mask).pb for pod in snapshot.pods]
    return pods_v1alpha1_pb2.ListPodsResponse(pods=pods).SerializeToString()


def _initial(contract: Contract, snapshot: Snapshot, mask: FieldMask | None) -> list[bytes]:
    frames = [watch_frame(contract, EventType.ADDED, pod.masked(mask).pb) for pod in snapshot.pods]
    frames.append(watch_frame(contract, EventType.INITIAL_SYNC_COMPLETE, None))
    return frames


async def _mask(context: grpc.aio.ServicerContext) -> FieldMask | None:
    values = [v for k, v in context.invocation_metadata() or () if k == FIELDMASK_METADATA]
    if not values:
        return None
    if len(values) > 1:
        raise InvalidArgument(f"{FIELDMASK_METADATA} must have one value, got {len(values)}")
    # A FieldMaskError is an InvalidArgument.
    return parse_mask(values[0] if isinstance(values[0], str) else values[0].decode())
