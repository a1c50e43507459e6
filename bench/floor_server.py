"""The floor for bench/serve.py: a grpc.aio server that answers ListPods and GetPod with one
fixed bytes object each, doing nothing else. Same grpc, same socket kind, its own process."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import grpc


async def main(socket_path: str, list_bytes: bytes, get_bytes: bytes) -> None:

    async def list_pods(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return list_bytes

    async def get_pod(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return get_bytes

    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "v1alpha1.Pods",
                {
                    "ListPods": grpc.unary_unary_rpc_method_handler(list_pods),
                    "GetPod": grpc.unary_unary_rpc_method_handler(get_pod),
                },
            )
        ]
    )
    server.add_insecure_port(f"unix:{socket_path}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]).read_bytes(), Path(sys.argv[3]).read_bytes()))
