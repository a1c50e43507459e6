"""The W4 fan-out floor, in its own process: the least any file-fed watch server does.

watchfiles on the directory with pods-api's debounce and step (pods_api/sources/dirwatch.py);
for each changed file, read that file only, make one WatchPodsEvent frame and one SSE frame of
its bytes (once, shared by every watcher), and hand them to every watcher's queue. Watchers are
bare grpc.aio streaming calls (identity serializers: the frame is pre-encoded bytes) and bare
Starlette `StreamingResponse`s under uvicorn's h11 protocol, on UNIX sockets, as pods-api's.
No decoding, no cache, no interceptors, no middleware, no cut-off (the queues are unbounded):
so its delay is what watchfiles, grpc.aio, uvicorn and the machine cost.

    python bench/fanout_floor.py DIR RUN   (serves RUN/floor.sock and RUN/floor-http.sock)
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route
from watchfiles import awatch

from pods_api.core.api.pb import pods_v1alpha1_pb2 as api
from pods_api.sources.dirwatch import DEBOUNCE_MS, STEP_MS

GRPC_SYNCED = api.WatchPodsEvent(type="INITIAL_SYNC_COMPLETE").SerializeToString()
SSE_SYNCED = b"retry: 1000\n\nevent: INITIAL_SYNC_COMPLETE\ndata: {}\n\n"


class Fanout:
    """Every open watcher's queue, per surface; one shared frame per change to each."""

    def __init__(self) -> None:
        self.grpc: set[asyncio.Queue[bytes]] = set()
        self.sse: set[asyncio.Queue[bytes]] = set()
        self.revision = 0

    def publish(self, data: bytes) -> None:
        self.revision += 1
        grpc_frame = api.WatchPodsEvent(type="MODIFIED", pod=data).SerializeToString()
        # SSE's data field is one line; a YAML file's lines go as one `data:` line each, which
        # the client joins back (the WHATWG rule): the same framing, no decoding.
        lines = data.rstrip(b"\n").replace(b"\n", b"\ndata: ")
        sse_frame = b"id: %d\nevent: MODIFIED\ndata: %s\n\n" % (self.revision, lines)
        for queue in self.grpc:
            queue.put_nowait(grpc_frame)
        for queue in self.sse:
            queue.put_nowait(sse_frame)


async def follow(directory: Path, fanout: Fanout, started: asyncio.Event) -> None:
    async for batch in awatch(
        directory, debounce=DEBOUNCE_MS, step=STEP_MS, recursive=False, watch_filter=None
    ):
        started.set()
        for _, path in batch:
            if Path(path).name.startswith("."):
                continue  # the writer's file written aside, then renamed over the real one
            try:
                data = Path(path).read_bytes()  # noqa: ASYNC240 - a small read, on the loop as ours's floor does
            except OSError:
                continue  # renamed away again already
            fanout.publish(data)


def grpc_server(fanout: Fanout) -> grpc.aio.Server:
    async def watch_pods(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        fanout.grpc.add(queue)
        try:
            yield GRPC_SYNCED
            while True:
                yield await queue.get()
        finally:
            fanout.grpc.discard(queue)

    handlers = {"WatchPods": grpc.unary_stream_rpc_method_handler(watch_pods)}
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("v1alpha1.Pods", handlers)])
    return server


def http_app(fanout: Fanout) -> Starlette:
    async def frames(queue: asyncio.Queue[bytes]) -> AsyncIterator[bytes]:
        try:
            yield SSE_SYNCED
            while True:
                yield await queue.get()
        finally:
            fanout.sse.discard(queue)

    async def watch(request: Request) -> StreamingResponse:
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        fanout.sse.add(queue)
        return StreamingResponse(frames(queue), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/pods", watch)])


async def main(directory: Path, run: Path) -> None:
    fanout = Fanout()
    server = grpc_server(fanout)
    server.add_insecure_port(f"unix:{run / 'floor.sock'}")
    await server.start()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(run / "floor-http.sock"))
    config = uvicorn.Config(http_app(fanout), http="h11", lifespan="off", log_config=None, access_log=False)
    http = asyncio.create_task(uvicorn.Server(config).serve(sockets=[sock]))
    started = asyncio.Event()
    watching = asyncio.create_task(follow(directory, fanout, started))
    # watchfiles sets its watch up in a thread; touching a file and seeing it come back is the
    # proof that changes are being seen from here on.
    while not started.is_set():
        (directory / ".floor-ready").write_bytes(b"")
        try:
            await asyncio.wait_for(started.wait(), 1.0)
        except TimeoutError:
            continue
    print("ready", flush=True)
    await asyncio.gather(server.wait_for_termination(), http, watching)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
