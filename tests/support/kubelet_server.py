"""A Pods API server standing in for the kubelet's: real gRPC on a UNIX socket, `v1alpha1.Pods`
ListPods and WatchPods, serving whatever pod bytes the test gives it (the shared vectors', which
leave Go's zero fields out: our encoder would not write them the same). Its watch is the
kubelet's: ADDED per pod, INITIAL_SYNC_COMPLETE, then changes. The test changes its pods; every
watch hears. (The Go stand-in, tests/go/kubelet/cmd/standin, is the one built from the kubelet's
own stubs.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
from released import ADDED, DELETED, MODIFIED, SYNCED

from pods_api.core.api.marshal import go_marshal
from pods_api.core.api.pb import k8s_core_v1_pb2, k8s_meta_v1_pb2
from pods_api.core.api.pb import pods_v1alpha1_pb2 as pb

# The kubelet's field-mask header; a path it does not know is INVALID_ARGUMENT.
FIELDMASK = "x-kubernetes-fieldmask"


class KubeletServer:
    def __init__(self, path: Path, pods: dict[str, bytes], *, refuse_masks: bool = False) -> None:
        self.path = path
        self.pods = dict(pods)  # uid -> v1.Pod bytes
        self.lists = 0
        # While true, a new watch sends its pods but never INITIAL_SYNC_COMPLETE: an upstream
        # that answers yet never syncs (a kubelet whose own sources are stuck).
        self.hold_sync = False
        # A kubelet whose Pod lacks some field a mask names (an older or a newer one) refuses
        # the mask, as the kubelet refuses an unknown path.
        self.refuse_masks = refuse_masks
        self._watches: set[asyncio.Queue[bytes]] = set()
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers([self._handlers()])
        server.add_insecure_port(f"unix:{self.path}")
        await server.start()
        self._server = server

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(0)
            self._server = None
            self._watches.clear()

    def put(self, uid: str, pod: bytes) -> None:
        kind = MODIFIED if uid in self.pods else ADDED
        self.pods[uid] = pod
        self._send(kind, pod)

    def remove(self, uid: str) -> None:
        """DELETED as the kubelet sends it: Go's bytes of a new pod with only the name, namespace
        and uid."""
        meta = k8s_core_v1_pb2.Pod.FromString(self.pods.pop(uid)).metadata
        gone = k8s_meta_v1_pb2.ObjectMeta(name=meta.name, namespace=meta.namespace, uid=meta.uid)
        self._send(DELETED, go_marshal(k8s_core_v1_pb2.Pod(metadata=gone)))

    def put_framed(self, uid: str, pod: bytes, frame: bytes) -> None:
        """As `put`, with the watch frame given as bytes: a WatchPodsEvent written otherwise than
        our encoder writes it."""
        self.pods[uid] = pod
        self._send_frame(frame)

    def _send(self, kind: int, pod: bytes) -> None:
        self._send_frame(pb.WatchPodsEvent(type=kind, pod=pod).SerializeToString())  # type: ignore[arg-type]

    def _send_frame(self, frame: bytes) -> None:
        for queue in self._watches:
            queue.put_nowait(frame)

    def _handlers(self) -> grpc.GenericRpcHandler:
        async def list_pods(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            self.lists += 1
            mask = dict(context.invocation_metadata() or ()).get(FIELDMASK)
            if self.refuse_masks and mask:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown field in mask: {mask}")
            return pb.ListPodsResponse(pods=list(self.pods.values())).SerializeToString()

        async def watch_pods(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
            queue: asyncio.Queue[bytes] = asyncio.Queue()
            self._watches.add(queue)
            try:
                for pod in list(self.pods.values()):
                    yield pb.WatchPodsEvent(type=ADDED, pod=pod).SerializeToString()  # type: ignore[arg-type]
                if self.hold_sync:
                    await asyncio.Event().wait()  # until the watch is cancelled
                yield pb.WatchPodsEvent(type=SYNCED).SerializeToString()  # type: ignore[arg-type]
                while True:
                    yield await queue.get()
            finally:
                self._watches.discard(queue)

        return grpc.method_handlers_generic_handler(
            "v1alpha1.Pods",
            {
                "ListPods": grpc.unary_unary_rpc_method_handler(list_pods),
                "WatchPods": grpc.unary_stream_rpc_method_handler(watch_pods),
            },
        )
