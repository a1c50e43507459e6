"""The floor for the bridge benchmark: the least a Python bridge can do. One grpc.aio watch on
the upstream socket, every frame's bytes handed unchanged to every local watcher: no decoding,
no cache, no masks, no readiness.

    python bench/relay_floor.py UPSTREAM_SOCKET OUR_SOCKET     # prints "ready"
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator

import grpc

from pods_api.core.api.pb import pods_v1alpha1_pb2 as api

# The upstream's end of its snapshot: WatchPodsEvent{type: INITIAL_SYNC_COMPLETE}.
SYNC_FRAME = api.WatchPodsEvent(type="INITIAL_SYNC_COMPLETE").SerializeToString()


async def main(upstream: str, ours: str) -> None:
    watchers: set[asyncio.Queue[bytes]] = set()
    initial: list[bytes] = []  # the upstream's snapshot frames, replayed to each new watcher
    synced = asyncio.Event()

    async def relay() -> None:
        async with grpc.aio.insecure_channel(f"unix:{upstream}") as channel:
            async for frame in channel.unary_stream("/v1alpha1.Pods/WatchPods")(b""):
                if not synced.is_set():
                    initial.append(frame)
                    if frame == SYNC_FRAME:
                        synced.set()
                    continue
                for queue in watchers:
                    queue.put_nowait(frame)

    async def watch(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        watchers.add(queue)
        try:
            for frame in initial:
                yield frame
            while True:
                yield await queue.get()
        finally:
            watchers.discard(queue)

    server = grpc.aio.server()
    handler = grpc.unary_stream_rpc_method_handler(watch)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("v1alpha1.Pods", {"WatchPods": handler})]
    )
    server.add_insecure_port(f"unix:{ours}")
    task = asyncio.get_running_loop().create_task(relay())
    await synced.wait()
    await server.start()
    print("ready", flush=True)
    await task


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
