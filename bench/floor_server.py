"""The floor for bench/serve.py, in its own process: a grpc.aio server and a bare Starlette app
under uvicorn, each answering List and Get with one fixed bytes object and doing nothing else.
Same libraries and socket kinds as pods-api, none of its work.

    python bench/floor_server.py DIR   (reads DIR/{grpc,http}-{list,get}.bin, serves DIR/floor*.sock)
"""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import grpc
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def grpc_server(list_bytes: bytes, get_bytes: bytes) -> grpc.aio.Server:
    async def list_pods(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return list_bytes

    async def get_pod(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return get_bytes

    handlers = {
        "ListPods": grpc.unary_unary_rpc_method_handler(list_pods),
        "GetPod": grpc.unary_unary_rpc_method_handler(get_pod),
    }
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("v1alpha1.Pods", handlers)])
    return server


def http_app(list_bytes: bytes, get_bytes: bytes) -> Starlette:
    async def list_pods(request: Request) -> Response:
        return Response(list_bytes, media_type="application/json")

    async def get_pod(request: Request) -> Response:
        return Response(get_bytes, media_type="application/json")

    return Starlette(routes=[Route("/v1/pods", list_pods), Route("/v1/pods/{uid}", get_pod)])


async def main(directory: Path) -> None:
    read = {
        name: (directory / f"{name}.bin").read_bytes()
        for name in ("grpc-list", "grpc-get", "http-list", "http-get")
    }
    server = grpc_server(read["grpc-list"], read["grpc-get"])
    server.add_insecure_port(f"unix:{directory / 'floor.sock'}")
    await server.start()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(directory / "floor-http.sock"))
    config = uvicorn.Config(http_app(read["http-list"], read["http-get"]), log_config=None, access_log=False)
    http = asyncio.create_task(uvicorn.Server(config).serve(sockets=[sock]))
    print("ready", flush=True)
    await asyncio.gather(server.wait_for_termination(), http)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
