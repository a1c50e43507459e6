"""The floor for bench/serve.py, in its own process: a grpc.aio server and a bare Starlette app
under uvicorn, each answering List and Get with one fixed bytes object and doing nothing else.
Same libraries and socket kinds as pods-api, none of its work.

    python bench/floor_server.py DIR   (reads DIR/<surface>-<call>.bin, serves DIR/floor*.sock)
"""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import grpc
import uvicorn
from prometheus_fastapi_instrumentator import Instrumentator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

_ONE_OF_EACH = {
    "grpc-list": ("gRPC-List", "gRPC-masked-List"),
    "grpc-get": ("gRPC-Get",),
    "http-list": ("HTTP-List", "HTTP-masked-List"),
    "http-get": ("HTTP-Get",),
}


def grpc_server(read: dict[str, bytes]) -> grpc.aio.Server:
    get_bytes = read.get("gRPC-Get", b"")

    async def list_pods(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        masked = any(k == "x-kubernetes-fieldmask" for k, _ in context.invocation_metadata() or ())
        return read.get("gRPC-masked-List" if masked else "gRPC-List", b"")

    async def get_pod(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return get_bytes

    handlers = {
        "ListPods": grpc.unary_unary_rpc_method_handler(list_pods),
        "GetPod": grpc.unary_unary_rpc_method_handler(get_pod),
    }
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("v1alpha1.Pods", handlers)])
    return server


def http_app(read: dict[str, bytes]) -> Starlette:
    async def list_pods(request: Request) -> Response:
        name = "HTTP-masked-List" if "fields" in request.query_params else "HTTP-List"
        return Response(read.get(name, b""), media_type="application/json")

    async def kube_list(request: Request) -> Response:
        name = "HTTP-kube-Table" if "as=Table" in request.headers.get("accept", "") else "HTTP-kube-List"
        return Response(read.get(name, b""), media_type="application/json")

    async def get_pod(request: Request) -> Response:
        return Response(read.get("HTTP-Get", b""), media_type="application/json")

    routes = [
        Route("/v1/pods", list_pods),
        Route("/v1/pods/{uid}", get_pod),
        Route("/api/v1/pods", kube_list),
    ]
    app = Starlette(routes=routes)
    # The gateway's metrics layer (gateway/httpmetrics.py uses the same library), so that the
    # library's own cost per request is not counted against pods-api.
    Instrumentator().instrument(app)
    return app


def _read(directory: Path) -> dict[str, bytes]:
    return {path.stem: path.read_bytes() for path in directory.glob("*.bin")}


async def main(directory: Path) -> None:
    read = _read(directory)
    # bench/serve.py and bench/memory.py name one List and one Get per surface.
    for old, names in _ONE_OF_EACH.items():
        if old in read:
            for name in names:
                read.setdefault(name, read[old])
    server = grpc_server(read)
    server.add_insecure_port(f"unix:{directory / 'floor.sock'}")
    await server.start()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(directory / "floor-http.sock"))
    config = uvicorn.Config(http_app(read), log_config=None, access_log=False)
    http = asyncio.create_task(uvicorn.Server(config).serve(sockets=[sock]))
    print("ready", flush=True)
    await asyncio.gather(server.wait_for_termination(), http)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
