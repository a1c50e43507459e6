"""Benchmark the CRI source: relist cost at the kubelet's default maximum of 110 pods (300
containers), and the delay from a container's exit to the MODIFIED a watcher gets, relisting on
the period only and following GetContainerEvents.

    python bench/cri.py [--trials 10]

The runtime is a fake CRI server speaking the real runtime.v1 protocol on a UNIX socket, in the
same process and event loop as the source (a real containerd here runs a handful of pods, not
110). Floor: the two list calls every relist makes, ListPodSandbox + ListContainers, against the
same server in the same run; a relist can cost no less.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc

from pods_api.core.cache import PodCache
from pods_api.core.pb import cri_runtime_v1_pb2 as cri
from pods_api.core.pb import cri_runtime_v1_pb2_grpc as cri_grpc
from pods_api.core.sources.cri import CRISource, RuntimeReader
from pods_api.core.watch import EventType, WatchHub

PODS, CONTAINERS = 110, 300
IMAGE = "registry.example/team/app:1.2.3"


class FakeRuntime(cri_grpc.RuntimeServiceServicer):  # type: ignore[misc]
    """An in-memory runtime: `pods` sandboxes, `containers` containers spread over them."""

    def __init__(self, pods: int, containers: int, *, events: bool) -> None:
        self.events = events
        self.subscribers: list[asyncio.Queue[cri.ContainerEventResponse]] = []
        self.subscribed = asyncio.Event()
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


async def best_ms(make: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await make()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


async def relist_cost(socket: Path, runtime: FakeRuntime, repeat: int) -> None:
    async with grpc.aio.insecure_channel(f"unix:{socket}") as channel:
        stub = cri_grpc.RuntimeServiceStub(channel)
        source = CRISource(socket, node_name="node-1")

        async def floor() -> None:
            await stub.ListPodSandbox(cri.ListPodSandboxRequest())
            await stub.ListContainers(cri.ListContainersRequest())

        async def cold() -> None:
            source._built = {}
            source.pods(await RuntimeReader(stub, "fake").relist())

        reader = RuntimeReader(stub, "fake")
        source.pods(await reader.relist())

        async def steady() -> None:
            source.pods(await reader.relist())

        some = list(runtime.containers)

        async def one_changed() -> None:
            cid = random.choice(some)
            runtime.exit(cid, 1)
            source.pods(await reader.relist())
            runtime.restart(cid)
            source.pods(await reader.relist())

        floor_ms = await best_ms(floor, repeat)
        print(f"{PODS} pods / {CONTAINERS} containers; floor: the two list calls, {floor_ms:.2f} ms")
        print(f"{'relist':34} {'ms':>8} {'ratio':>6}")
        for label, make, per in (
            ("cold (every status asked, built)", cold, 1),
            ("steady (nothing changed)", steady, 1),
            ("one container changed (x2)", one_changed, 2),
        ):
            ms = await best_ms(make, max(3, repeat // 4) if make is cold else repeat) / per
            print(f"{label:34} {ms:8.2f} {ms / floor_ms:6.1f}")


async def exit_to_modified(events: bool, trials: int, relist: float) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        socket = Path(tmp) / "cri.sock"
        runtime = FakeRuntime(PODS, CONTAINERS, events=events)
        server = await start(runtime, socket)
        cache = PodCache(WatchHub(capacity=10_000, max_watchers=10))
        sink = cache.source("cri")
        source = CRISource(socket, node_name="node-1", relist=relist)
        task = asyncio.get_running_loop().create_task(source.run(sink))
        ready = asyncio.Event()
        cache.on_readiness(lambda now_ready: now_ready and ready.set())
        await ready.wait()
        if events:
            await runtime.subscribed.wait()
        delays = []
        watcher = cache.hub.subscribe()
        for _ in range(trials):
            cid = random.choice(list(runtime.containers))
            await asyncio.sleep(random.uniform(0, relist))  # exit at any point of the period
            t0 = time.perf_counter()
            runtime.exit(cid, 3)
            while True:
                event = await watcher.get()
                if event.type is EventType.MODIFIED:
                    break
            delays.append(time.perf_counter() - t0)
            runtime.restart(cid)
            await watcher.get()
        watcher.close()
        task.cancel()
        await server.stop(0)
        return delays


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        socket = Path(tmp) / "cri.sock"
        runtime = FakeRuntime(PODS, CONTAINERS, events=False)
        server = await start(runtime, socket)
        await relist_cost(socket, runtime, args.repeat)
        await server.stop(0)
    print()
    print(f"exit -> MODIFIED, --cri-relist 1, {args.trials} trials   median ms   max ms")
    for events in (False, True):
        delays = await exit_to_modified(events, args.trials, 1.0)
        label = "GetContainerEvents" if events else "relist period only"
        print(f"{label:44} {statistics.median(delays) * 1e3:9.1f} {max(delays) * 1e3:8.1f}")


if __name__ == "__main__":
    asyncio.run(main())
