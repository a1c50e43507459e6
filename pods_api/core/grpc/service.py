"""The Pods API handlers, shared by both contracts: the kubelet's `v1alpha1.Pods` and the
documentation's package-less `Pods`. List and Get are the same bytes on the wire in both; only
the watch message differs (type and pod swap field numbers).

Handlers return serialized bytes (the servers' response serializers pass them through), so a
pod is never re-encoded: responses are assembled from the cache's per-version encodings, and a
whole ListPodsResponse is kept per (snapshot, view). Watch is the shared stream (core/store/stream.py):
this module only says how an event is a frame on each contract.

Rate limit, readiness and metrics are interceptors (core/grpc/interceptors.py), not here; so is
the status of a call: handlers raise domain errors (core/api/statuserrors.py), the interceptor aborts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from enum import Enum

import grpc

from pods_api.core.api import kubelet_texts
from pods_api.core.api.pb import pods_doc_pb2, pods_v1alpha1_pb2
from pods_api.core.api.statuserrors import InvalidArgumentError, NotFoundError
from pods_api.core.policy.connections import DEFAULT_SEND_TIMEOUT
from pods_api.core.policy.inflight import BytesInFlight
from pods_api.core.policy.stall import StallTimer
from pods_api.core.policy.throttled_log import ThrottledLog
from pods_api.core.query.fieldmask import parse_mask
from pods_api.core.query.view import View
from pods_api.core.store.cache import PodCache
from pods_api.core.store.slices import joined
from pods_api.core.store.snapshot import Snapshot
from pods_api.core.store.stream import Encoding, WatchStreams
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import EventType, TookNothing

log = logging.getLogger(__name__)

FIELDMASK_METADATA = "x-kubernetes-fieldmask"


class ServiceName(Enum):
    V1ALPHA1 = "v1alpha1.Pods"
    DOCUMENTED = "Pods"


# The gRPC services that are the kubelet's contract: their refusals carry the kubelet's texts
# (core/api/kubelet_texts.py).
KUBELET_SERVICES = frozenset(contract.value for contract in ServiceName)


def watch_frame(contract: ServiceName, kind: EventType, pod: bytes | None) -> bytes:
    if contract is ServiceName.V1ALPHA1:
        return pods_v1alpha1_pb2.WatchPodsEvent(type=kind.name, pod=pod or b"").SerializeToString()
    # PodWatchResponse{pod = 1, type = 2}: two messages' bytes concatenate into one message, and
    # GetPodResponse's field 1 is the same bytes as a Pod at field 1 (no re-parse of the pod).
    head = pods_v1alpha1_pb2.GetPodResponse(pod=pod).SerializeToString() if pod is not None else b""
    return head + pods_doc_pb2.PodWatchResponse(type=kind.name).SerializeToString()


def watch_encoding(contract: ServiceName, *, last_state: bool = False) -> Encoding:
    """How a watch is written on one contract: the frames the stream caches for it.

    A DELETED carries only the pod's identity (`PodVersion.identity`), as the kubelet sends it,
    unless `last_state`: then its last state as the view shows it, the API server's meaning
    (our lookup service's watch, whose DELETED is also "stopped matching the selectors")."""

    def event(kind: EventType, pod: PodVersion, view: View, revision: int | None) -> bytes:
        if kind is EventType.DELETED and not last_state:
            return watch_frame(contract, kind, pod.identity)
        return watch_frame(contract, kind, pod.masked(view).pb)

    def synced(revision: int, resumed: bool) -> bytes:
        return watch_frame(contract, EventType.INITIAL_SYNC_COMPLETE, None)

    # The name keys the shared frame cache: the two meanings of DELETED must not share frames.
    name = f"grpc {contract.value}{' last-state' if last_state else ''}"
    kubelet = not last_state
    return Encoding(
        name, event, synced, kubelet=kubelet, upstream=kubelet and contract is ServiceName.V1ALPHA1
    )


class PodsService:
    """Answers List, Get and Watch from the cache. Both contracts share one instance."""

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
        self._encodings = {contract: watch_encoding(contract) for contract in ServiceName}

    async def list_pods(self, request: object, context: grpc.aio.ServicerContext) -> bytes:
        view = _view(context)
        return await held_list(self._lists, self._cache.snapshot(), view, context)

    async def get_pod(
        self, request: pods_v1alpha1_pb2.GetPodRequest, context: grpc.aio.ServicerContext
    ) -> bytes:
        view = _view(context)
        pod = self._cache.get(request.podUID)
        if pod is None:
            raise NotFoundError(kubelet_texts.pod_not_found(request.podUID))
        return pod.masked(view).get_response

    def watch_handler(self, contract: ServiceName) -> Callable[..., Awaitable[None]]:
        encoding = self._encodings[contract]

        async def watch_pods(request: object, context: grpc.aio.ServicerContext) -> None:
            # TooManyWatchers and ServerStopping carry their status (core/api/statuserrors.py).
            with self._streams.open(_view(context)) as watch:
                await send_bounded(context, watch.frames(encoding), self._send_timeout)

        return watch_pods


async def send_bounded(
    context: grpc.aio.ServicerContext, frames: AsyncIterator[bytes], send_timeout: float
) -> None:
    """Writes the frames of a watch, each of which the client must take within `send_timeout`:
    the stall guard of every gRPC watch (both contracts and the lookup service).

    A frame handed to grpc returns here only once the client's flow control took it: a client
    that reads nothing would hold the stream (and its buffers) for ever, its watcher long cut
    off. So a send that takes longer than the send timeout is given up, and the watch ends with
    `TookNothing` (RESOURCE_EXHAUSTED), which the interceptor sends as the call's status. That
    status is queued behind the frame whose send was given up: a client that reads again gets
    what was on its way, then the status. (Cancelling the call's task alone sends nothing:
    grpc.aio then neither sends a status nor resets the stream, and the client waits for ever.)

    Frames are written with `context.write` (no generator between the stream and grpc), under
    the stream's one stall timer (core/policy/stall.py)."""
    # The headers go on their own first: grpc otherwise adds them to the first write, and a
    # status sent while that write is pending would carry a second set (a refused batch).
    await context.send_initial_metadata(())
    task = asyncio.current_task()
    assert task is not None  # a handler runs in its call's task

    def stalled() -> None:
        _STALLED_LOG.warning(f"ending a gRPC watch whose client took nothing for {send_timeout:g} s")
        task.cancel()

    timer = StallTimer(send_timeout, stalled)
    write, begin, end = context.write, timer.begin, timer.end
    try:
        async for frame in frames:
            sending = begin()
            await write(frame)
            end(sending)
    except asyncio.CancelledError:
        if not timer.fired or task.uncancel():
            raise  # cancelled by grpc (the client went away), not (only) by the stall timer
        raise TookNothing(send_timeout) from None
    finally:
        timer.close()


_STALLED_LOG = ThrottledLog(log)


async def held_list(
    lists: BytesInFlight, snapshot: Snapshot, view: View, context: grpc.aio.ServicerContext
) -> bytes:
    """The ListPodsResponse of `view` (made once per snapshot and view, in slices), counted in
    flight until its call ends (grpc has sent it, or the client went); refused past the budget."""
    lists.check()
    body = await snapshot.assembled(("grpc-list", view.key), lambda: list_response(snapshot, view))
    release = lists.hold(body)
    context.add_done_callback(lambda _: release())
    return body


async def list_response(snapshot: Snapshot, view: View) -> bytes:
    # ListPodsResponse{repeated bytes pods = 1}: each pod is kept framed as field 1, so the whole
    # response is one join, with no message built.
    return await joined(view.select(snapshot.pods), lambda pod: pod.masked(view).framed)


def mask_text(context: grpc.aio.ServicerContext) -> str | None:
    """The call's field mask metadata (None: absent); two values are InvalidArgument."""
    values = [v for k, v in context.invocation_metadata() or () if k == FIELDMASK_METADATA]
    if not values:
        return None
    if len(values) > 1:
        raise InvalidArgumentError(f"{FIELDMASK_METADATA} must have one value, got {len(values)}")
    return values[0] if isinstance(values[0], str) else values[0].decode()


def _view(context: grpc.aio.ServicerContext) -> View:
    # A FieldMaskError is an InvalidArgument.
    return View(parse_mask(mask_text(context)))
