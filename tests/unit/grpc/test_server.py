"""The gRPC server's `_GenericOnly` (core/grpc/server.py): grpcio's generated `add_*_to_server`
registers a service both ways, generic and per method, and grpc.aio pays for every registered
method on every call; `_GenericOnly` passes the generic handlers on and drops the rest. Checked
against the generated code itself, so that a grpcio release that changes how it adds a service
fails here, and served for real, so that dropping the registered ones loses nothing."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from pods_api.core.grpc.server import _GenericOnly

HEALTH = "grpc.health.v1.Health"
# A safety net, not a synchronisation: a call on a local socket answers long before.
TIMEOUT = 10.0


class Added:
    """What a server is handed, each way."""

    def __init__(self) -> None:
        self.generic: list[grpc.GenericRpcHandler] = []
        self.registered: list[str] = []

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self.generic.extend(handlers)

    def add_registered_method_handlers(
        self, service: str, handlers: dict[str, grpc.RpcMethodHandler]
    ) -> None:
        self.registered.append(service)


def test_the_generated_code_adds_a_service_both_ways_and_generic_only_keeps_one() -> None:
    both = Added()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), both)  # type: ignore[arg-type]
    assert both.registered == [HEALTH], "grpcio's generated code no longer registers per method"
    assert len(both.generic) == 1
    one = Added()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), _GenericOnly(one))  # type: ignore[arg-type]
    assert one.registered == []
    assert len(one.generic) == 1


async def test_a_service_added_generic_only_is_served(tmp_path: Path) -> None:
    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, _GenericOnly(server))  # type: ignore[arg-type]
    target = f"unix://{tmp_path / 'grpc.sock'}"
    server.add_insecure_port(target)
    await server.start()
    try:
        await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        async with grpc.aio.insecure_channel(target) as channel:
            check = health_pb2_grpc.HealthStub(channel).Check
            reply = await check(health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await server.stop(None)
