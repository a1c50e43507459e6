"""A fake container runtime speaking the real CRI runtime.v1 protocol (grpc.aio, UNIX socket),
for what a real containerd here cannot show: 110 pods at once, and GetContainerEvents (Debian's
containerd 1.6 answers UNIMPLEMENTED). Used by tests/e2e/test_cri_views.py and bench/cri.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc

from pods_api.sources.cri.pb import cri_runtime_v1_pb2 as cri
from pods_api.sources.cri.pb import cri_runtime_v1_pb2_grpc as cri_grpc

IMAGE = "registry.example/team/app:1.2.3"


class FakeRuntime(cri_grpc.RuntimeServiceServicer):  # type: ignore[misc]
    """An in-memory runtime: `pods` sandboxes, `containers` containers spread over them."""

    def __init__(self, pods: int, containers: int, *, events: bool) -> None:
        self.events = events
        self.subscribers: list[asyncio.Queue[cri.ContainerEventResponse]] = []
        self.subscribed = asyncio.Event()
        # Else: every relist (ListPodSandbox) is refused with this code, the connection still up.
        self.failing: grpc.StatusCode | None = None
        now = time.time_ns()
        self.sandboxes: dict[str, cri.PodSandboxStatus] = {}
        self.containers: dict[str, cri.ContainerStatus] = {}
        self.sandbox_of: dict[str, str] = {}
        for i in range(pods):
            uid = f"00000000-0000-0000-0000-{i:012d}"
            labels = {
                "io.kubernetes.pod.uid": uid,
                "io.kubernetes.pod.name": f"app-{i}",
                "io.kubernetes.pod.namespace": "default",
                "app": f"app-{i % 7}",
            }
            self.sandboxes[f"sb{i}"] = cri.PodSandboxStatus(
                id=f"sb{i}",
                metadata=cri.PodSandboxMetadata(name=f"app-{i}", uid=uid, namespace="default"),
                state=cri.SANDBOX_READY,
                created_at=now,
                network=cri.PodSandboxNetworkStatus(ip=f"10.0.{i // 250}.{i % 250 + 1}"),
                labels=labels,
                annotations={"kubernetes.io/config.source": "api"},
            )
        for j in range(containers):
            i = j % pods
            sandbox = self.sandboxes[f"sb{i}"]
            cid = f"c{j:063d}"
            self.sandbox_of[cid] = sandbox.id
            self.containers[cid] = cri.ContainerStatus(
                id=cid,
                metadata=cri.ContainerMetadata(name=f"c{j // pods}"),
                state=cri.CONTAINER_RUNNING,
                created_at=now,
                started_at=now,
                image=cri.ImageSpec(image=IMAGE),
                image_ref="sha256:" + "ab" * 32,
                labels={
                    **{k: v for k, v in sandbox.labels.items() if k.startswith("io.")},
                    "io.kubernetes.container.name": f"c{j // pods}",
                },
                annotations={
                    "io.kubernetes.container.restartCount": "0",
                    "io.kubernetes.container.type": "container",
                },
            )

    def exit(self, cid: str, code: int) -> None:
        status = self.containers[cid]
        status.state, status.exit_code = cri.CONTAINER_EXITED, code
        status.finished_at, status.reason = time.time_ns(), "Error" if code else "Completed"
        self._emit(cid, cri.CONTAINER_STOPPED_EVENT)

    def restart(self, cid: str) -> None:
        status = self.containers[cid]
        status.state, status.exit_code, status.reason, status.finished_at = cri.CONTAINER_RUNNING, 0, "", 0
        self._emit(cid, cri.CONTAINER_STARTED_EVENT)

    def _emit(self, cid: str, kind: int) -> None:
        event = cri.ContainerEventResponse(
            container_id=cid, container_event_type=kind, created_at=time.time_ns()
        )
        for queue in self.subscribers:
            queue.put_nowait(event)

    async def Version(self, request: Any, context: Any) -> cri.VersionResponse:
        return cri.VersionResponse(
            version="0.1.0", runtime_name="fake", runtime_version="1", runtime_api_version="v1"
        )

    async def ListPodSandbox(self, request: Any, context: Any) -> cri.ListPodSandboxResponse:
        if self.failing is not None:
            await context.abort(self.failing, "the runtime is failing (a test asked it to)")
        items = [
            cri.PodSandbox(
                id=s.id, metadata=s.metadata, state=s.state, created_at=s.created_at, labels=s.labels
            )
            for s in self.sandboxes.values()
        ]
        return cri.ListPodSandboxResponse(items=items)

    async def ListContainers(self, request: Any, context: Any) -> cri.ListContainersResponse:
        items = [
            cri.Container(
                id=c.id,
                pod_sandbox_id=self.sandbox_of[c.id],
                metadata=c.metadata,
                image=c.image,
                image_ref=c.image_ref,
                state=c.state,
                created_at=c.created_at,
                labels=c.labels,
                annotations=c.annotations,
            )
            for c in self.containers.values()
        ]
        return cri.ListContainersResponse(containers=items)

    async def PodSandboxStatus(self, request: Any, context: Any) -> cri.PodSandboxStatusResponse:
        return cri.PodSandboxStatusResponse(status=self.sandboxes[request.pod_sandbox_id])

    async def ContainerStatus(self, request: Any, context: Any) -> cri.ContainerStatusResponse:
        return cri.ContainerStatusResponse(status=self.containers[request.container_id])

    async def GetContainerEvents(
        self, request: Any, context: Any
    ) -> AsyncIterator[cri.ContainerEventResponse]:
        if not self.events:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "method GetContainerEvents not implemented")
        queue: asyncio.Queue[cri.ContainerEventResponse] = asyncio.Queue()
        self.subscribers.append(queue)
        self.subscribed.set()
        try:
            while True:
                yield await queue.get()
        finally:
            self.subscribers.remove(queue)


async def start(runtime: FakeRuntime, socket: Path) -> grpc.aio.Server:
    server = grpc.aio.server()
    cri_grpc.add_RuntimeServiceServicer_to_server(runtime, server)
    server.add_insecure_port(f"unix:{socket}")
    await server.start()
    return server
