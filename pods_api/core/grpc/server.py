"""The grpc.aio server: both Pods contracts, our PodLookup extension, the standard health service
and reflection."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from pods_api.core.api.pb import pods_doc_pb2, pods_v1alpha1_pb2
from pods_api.core.assembly import Core
from pods_api.core.config import Config
from pods_api.core.grpc import corelog, reflection
from pods_api.core.grpc import lookup_service as lookup
from pods_api.core.grpc.interceptors import PodsInterceptor
from pods_api.core.grpc.requests import parser
from pods_api.core.grpc.service import PodsService, ServiceName
from pods_api.core.policy.calls import Calls
from pods_api.core.policy.connections import MAX_CONNECTIONS_CEILING
from pods_api.core.store.cache import PodCache

# Server keepalive pings find peers that vanished without a FIN (a frozen VM, a killed
# container's network namespace) on connections that hold a watch.
KEEPALIVE_TIME = 60.0
KEEPALIVE_TIMEOUT = 20.0
# A connection is sent GOAWAY after this long, so none lives for ever; its open streams (watches)
# go on (the grace is unlimited, as in grpc-go), only new calls move to a new connection.
MAX_CONNECTION_AGE = 3600.0
# What health and reflection name: every service of the API.
SERVICES = (*(c.value for c in ServiceName), lookup.SERVICE)

_REQUESTS = {
    ServiceName.V1ALPHA1: (
        pods_v1alpha1_pb2.ListPodsRequest,
        pods_v1alpha1_pb2.GetPodRequest,
        pods_v1alpha1_pb2.WatchPodsRequest,
    ),
    ServiceName.DOCUMENTED: (
        pods_doc_pb2.PodListRequest,
        pods_doc_pb2.PodGetRequest,
        pods_doc_pb2.PodWatchRequest,
    ),
}


def _handlers(contract: ServiceName, service: PodsService, calls: Calls) -> grpc.GenericRpcHandler:
    list_req, get_req, watch_req = _REQUESTS[contract]
    # No response serializer: the handlers return wire bytes assembled from cached encodings.
    # Requests parse without raising (core/grpc/requests.py): a bad one is answered as grpc-go does.
    handlers = {
        "ListPods": grpc.unary_unary_rpc_method_handler(service.list_pods, parser(list_req)),
        "GetPod": grpc.unary_unary_rpc_method_handler(service.get_pod, parser(get_req)),
        "WatchPods": grpc.unary_stream_rpc_method_handler(service.watch_handler(contract), parser(watch_req)),
    }
    _check_table(calls, contract.value, handlers)
    return grpc.method_handlers_generic_handler(contract.value, handlers)


def _check_table(calls: Calls, service: str, methods: Iterable[str]) -> None:
    """Every method is in the call table, which says how it is limited, gated and counted."""
    missing = [name for name in methods if name not in calls.by_name]
    missing += [] if service in calls.services else [service]
    if missing:
        raise KeyError(f"not in the call table: {', '.join(missing)}")


def grpc_options(config: Config) -> list[tuple[str, Any]]:
    """grpc core channel arguments for the server: the connection rules of
    core/policy/connections.py, as grpc core takes them."""
    ms = 1000
    max_connections = config.max_connections or MAX_CONNECTIONS_CEILING
    return [
        ("grpc.max_allowed_incoming_connections", max_connections),
        ("grpc.server_handshake_timeout_ms", int(config.header_timeout * ms)),
        ("grpc.max_connection_idle_ms", int(config.idle_timeout * ms)),
        ("grpc.max_connection_age_ms", int(MAX_CONNECTION_AGE * ms)),
        ("grpc.keepalive_time_ms", int(KEEPALIVE_TIME * ms)),
        ("grpc.keepalive_timeout_ms", int(KEEPALIVE_TIMEOUT * ms)),
    ]


def create_server(core: Core) -> grpc.aio.Server:
    """The Pods services (both contracts), PodLookup, health and reflection; the caller adds a
    port."""
    corelog.install()
    cache = core.cache
    interceptors = [PodsInterceptor(core)]
    server = grpc.aio.server(interceptors=interceptors, options=grpc_options(core.config))
    service = PodsService(cache, core.streams, core.config.send_timeout, core.grpc_lists)
    extension = lookup.handlers(
        lookup.LookupService(cache, core.streams, core.config.send_timeout, core.grpc_lists)
    )
    _check_table(core.calls, lookup.SERVICE, lookup.METHODS)
    server.add_generic_rpc_handlers([*(_handlers(c, service, core.calls) for c in ServiceName), extension])
    _add_health(server, cache)
    names = [*SERVICES, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name]
    reflection.enable(names, server)
    return server


class _GenericOnly:
    """A server that takes generic handlers only. grpcio's generated `add_*_to_server` adds a
    service both ways; but grpc.aio keeps one pending request per registered method and awaits
    them all beside the generic one for every incoming call (`asyncio.wait` over the set), so
    each registered health method made every Pods call dearer
    (docs/perf-notes/2026-11-30-grpc-per-call-and-frame.md). The generic handler serves the same methods."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self._server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(
        self, service: str, handlers: dict[str, grpc.RpcMethodHandler]
    ) -> None:
        pass


def _add_health(server: grpc.aio.Server, cache: PodCache) -> None:
    """grpc.health.v1: SERVING once the pod sources have synced, for the server ("") and each
    Pods service; Watch on it tells a client the moment readiness changes."""
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, _GenericOnly(server))
    names = ["", *SERVICES]
    tasks: set[asyncio.Task[None]] = set()

    async def publish(ready: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING if ready else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in names:
            await servicer.set(name, status)

    def on_readiness(ready: bool) -> None:
        task = asyncio.get_running_loop().create_task(publish(ready))
        tasks.add(task)  # keep a reference until done: the loop holds tasks only weakly
        task.add_done_callback(tasks.discard)

    cache.on_readiness(on_readiness)
    on_readiness(cache.ready)
