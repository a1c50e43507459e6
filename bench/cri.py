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
import contextlib
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from pods_api.core.store.cache import PodCache
from pods_api.sources.cri.pb import cri_runtime_v1_pb2 as cri
from pods_api.sources.cri.pb import cri_runtime_v1_pb2_grpc as cri_grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fakecri import FakeRuntime, start

from pods_api.core.store.watch import EventType, WatchHub
from pods_api.sources.cri.source import CRISource, RuntimeReader

PODS, CONTAINERS = 110, 300


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
        with contextlib.suppress(asyncio.CancelledError):
            await task
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
