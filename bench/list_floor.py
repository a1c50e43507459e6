"""The floor of `python -m bench listmemory`, in its own process: a bare grpc.aio server and a
bare Starlette app under uvicorn holding what any cache serving both surfaces must hold, each
pod's framed protobuf and its JSON as a list item, and nothing else. ListPods joins the framed
pods per call; `/v1/pods` and `/api/v1/pods` join the items a slice at a time as they are sent.
Its C heap is handled as pods-api's (pods_api/serve/heap.py: two arenas, trimmed every 10 s), so
the difference is what pods-api keeps, not what glibc does. It imports nothing of pods-api.

    python bench/list_floor.py DIR   (reads DIR/grpc-list.bin and DIR/http-list.bin, the Lists
                                      pods-api answered; serves DIR/floor*.sock)
"""

from __future__ import annotations

import asyncio
import ctypes
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

# What one send hands the connection, as pods-api's (gateway/http/body.py).
SLICE = 512 * 1024
# pods-api's heap policy (pods_api/serve/heap.py): two malloc arenas, trimmed every 10 s.
_LIBC = ctypes.CDLL("libc.so.6")
_M_ARENA_MAX = -8
TRIM_EVERY = 10.0
_LIST_HEAD = b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":['


def _held(directory: Path) -> tuple[list[bytes], list[bytes]]:
    """Each pod's framed protobuf, and its JSON as a list item (exact-size bytes each)."""
    framed = _frames((directory / "grpc-list.bin").read_bytes())
    items = [orjson.dumps(item) for item in orjson.loads((directory / "http-list.bin").read_bytes())["items"]]
    return framed, [bytes(memoryview(item)) for item in items]


def _frames(listed: bytes) -> list[bytes]:
    """A ListPodsResponse's pods, each still framed as field 1 (tag, varint length, bytes)."""
    out, at = [], 0
    while at < len(listed):
        start, at, size, shift = at, at + 1, 0, 0
        while True:
            byte = listed[at]
            at += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        out.append(listed[start : at + size])
        at += size
    return out


def grpc_server(framed: list[bytes]) -> grpc.aio.Server:
    async def list_pods(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return b"".join(framed)

    handlers = {"ListPods": grpc.unary_unary_rpc_method_handler(list_pods)}
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("v1alpha1.Pods", handlers)])
    return server


def http_app(items: list[bytes]) -> Starlette:
    size = len(_LIST_HEAD) + sum(map(len, items)) + max(len(items) - 1, 0) + 2

    async def slices() -> AsyncIterator[bytes]:
        per = max(1, SLICE * len(items) // size)
        for start in range(0, len(items), per):
            head = _LIST_HEAD if not start else b","
            tail = b"]}" if start + per >= len(items) else b""
            yield b"".join((head, b",".join(items[start : start + per]), tail))

    async def list_pods(request: Request) -> StreamingResponse:
        headers = {"content-length": str(size)}
        return StreamingResponse(slices(), media_type="application/json", headers=headers)

    return Starlette(routes=[Route("/v1/pods", list_pods), Route("/api/v1/pods", list_pods)])


async def _trimmed() -> None:
    while True:
        await asyncio.sleep(TRIM_EVERY)
        _LIBC.malloc_trim(0)


async def main(directory: Path) -> None:
    _LIBC.mallopt(_M_ARENA_MAX, 2)
    framed, items = _held(directory)
    _LIBC.malloc_trim(0)
    server = grpc_server(framed)
    server.add_insecure_port(f"unix:{directory / 'floor.sock'}")
    await server.start()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(directory / "floor-http.sock"))
    config = uvicorn.Config(http_app(items), log_config=None, access_log=False, ws="none")
    http = asyncio.create_task(uvicorn.Server(config).serve(sockets=[sock]))
    trimming = asyncio.create_task(_trimmed())
    print("ready", flush=True)
    await asyncio.gather(server.wait_for_termination(), http, trimming)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
