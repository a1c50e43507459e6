"""The call table is where a call's rate limit, readiness gate and metrics come from, on both
surfaces: a call added to the table (served by a handler registered on each surface, as a new
method would be) is limited, gated and counted on gRPC and over HTTP, with no other edit."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from gatewayharness import serving, unix_client
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from pods_api.core.api.statuserrors import Code
from pods_api.core.assembly import Core, build_core
from pods_api.core.config import Config
from pods_api.core.grpc.server import create_server
from pods_api.core.policy.calls import CALLS, Calls, Method, refusal
from pods_api.gateway.app import create_app
from pods_api.gateway.http.admission import Call as HttpCall
from pods_api.gateway.http.admission import named
from pods_api.gateway.http.params import Args
from pods_api.gateway.http.router import CallRoute
from pods_api.serve.sockets import bind_unix, claim

COUNT = Method("CountPods", limited=True, gated=True, metric="count")
# The new call spends tokens like List and Get; enough for the calls made before it runs out:
# twice (gated, then served) once per gRPC service and once over HTTP.
BURST = 2 * (len(CALLS.services) + 1)


def _count_handler(core: Core) -> list[grpc.GenericRpcHandler]:
    """CountPods on every Pods service of the table, as a new method's handler would be added."""

    async def count_pods(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return str(len(core.cache)).encode()

    method = {"CountPods": grpc.unary_unary_rpc_method_handler(count_pods)}
    return [grpc.method_handlers_generic_handler(service, method) for service in core.calls.services]


def _count_route(core: Core) -> CallRoute:
    """CountPods over HTTP, as a new call's route would be declared."""

    async def count(request: Request, call: HttpCall, args: Args) -> Response:
        return JSONResponse({"pods": len(core.cache)})

    return CallRoute("/v1/count", "CountPods", ("CountPods",), named("CountPods"), count)


@pytest.fixture
async def core() -> AsyncIterator[Core]:
    core = build_core(Config(node_name="test", qps=0.001, burst=BURST), CALLS.adding(COUNT))
    yield core
    core.cache.hub.stop()


async def test_a_new_call_is_limited_gated_and_counted_on_both_surfaces(core: Core, tmp_path: Path) -> None:
    server = create_server(core)
    server.add_generic_rpc_handlers(_count_handler(core))
    server.add_insecure_port(f"unix:{tmp_path / 'grpc.sock'}")
    await server.start()
    app = create_app(core)
    app.serve_call(_count_route(core))

    sink = core.cache.source("test")
    listener = bind_unix(claim(tmp_path / "http.sock"), 0o600, None)
    try:
        async with (
            grpc.aio.insecure_channel(f"unix:{tmp_path / 'grpc.sock'}") as channel,
            serving(app, [listener]),
            unix_client(tmp_path / "http.sock") as http,
        ):
            calls = [channel.unary_unary(f"/{service}/CountPods") for service in core.calls.services]

            async def grpc_code(call: grpc.aio.UnaryUnaryMultiCallable) -> grpc.StatusCode:
                try:
                    await call(b"")
                except grpc.aio.AioRpcError as err:
                    return err.code()
                return grpc.StatusCode.OK

            # Gated: not ready until the source has synced.
            for call in calls:
                assert await grpc_code(call) == grpc.StatusCode.FAILED_PRECONDITION
            r = await http.get("/v1/count")
            assert (r.status_code, r.json()["error"]["status"]) == (503, "FAILED_PRECONDITION")
            sink.mark_synced()
            for call in calls:
                assert await grpc_code(call) == grpc.StatusCode.OK
            assert (await http.get("/v1/count")).json() == {"pods": 0}
            # Limited: the six calls above took the burst; the bucket is the one List and Get use.
            for call in calls:
                assert await grpc_code(call) == grpc.StatusCode.RESOURCE_EXHAUSTED
            r = await http.get("/v1/count")
            assert (r.status_code, r.json()["error"]["message"]) == (429, "rate limit exceeded; retry later")
            assert int(r.headers["retry-after"]) >= 1
    finally:
        await server.stop(None)

    # Counted: its own counter, made from the table, and the total, on every surface.
    def counted(name: str, version: str, code: str) -> float:
        value = core.metrics.registry.get_sample_value(
            name, {"server_api_version": version, "status_code": code}
        )
        return value or 0.0

    for version in ("v1alpha1", "documented", "http"):
        for code in ("FailedPrecondition", "OK", "ResourceExhausted"):
            assert counted("kubelet_pod_requests_count_total", version, code) == 1, (version, code)
            assert counted("kubelet_pod_requests_total", version, code) == 1, (version, code)


async def test_a_method_the_table_lacks_is_refused_not_run_unguarded(core: Core, tmp_path: Path) -> None:
    bare = build_core(Config(node_name="test", qps=0), CALLS)  # no CountPods in its table
    bare.cache.source("test").mark_synced()
    server = create_server(bare)
    server.add_generic_rpc_handlers(_count_handler(bare))
    server.add_insecure_port(f"unix:{tmp_path / 'grpc.sock'}")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"unix:{tmp_path / 'grpc.sock'}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await channel.unary_unary("/v1alpha1.Pods/CountPods")(b"")
            assert err.value.code() == grpc.StatusCode.INTERNAL
            assert "not in the call table" in (err.value.details() or "")
    finally:
        await server.stop(None)
        bare.cache.hub.stop()
    with pytest.raises(KeyError, match="CountPods"):
        create_app(bare).serve_call(_count_route(bare))


async def test_each_surface_refuses_to_start_with_a_method_the_table_lacks() -> None:
    partial = Calls({n: c for n, c in CALLS.by_name.items() if n != "WatchPods"}, CALLS.services)
    core = build_core(Config(node_name="test"), partial)
    with pytest.raises(KeyError, match="WatchPods"):
        create_app(core)
    with pytest.raises(KeyError, match="WatchPods"):
        create_server(core)


def test_the_refusal_checks_the_limit_then_readiness() -> None:
    core = build_core(Config(node_name="test", qps=0.001, burst=1))
    list_pods, watch_pods = CALLS["ListPods"], CALLS["WatchPods"]
    not_synced = refusal(list_pods, core.limiter, core.cache)
    assert not_synced is not None and not_synced.code is Code.FAILED_PRECONDITION
    assert not_synced.retry_after == 1.0
    limited = refusal(list_pods, core.limiter, core.cache)  # the first one took the only token
    assert limited is not None and limited.code is Code.RESOURCE_EXHAUSTED
    watch = refusal(watch_pods, core.limiter, core.cache)  # not limited, still gated
    assert watch is not None and watch.code is Code.FAILED_PRECONDITION
    core.cache.source("test").mark_synced()
    assert refusal(watch_pods, core.limiter, core.cache) is None
    assert dataclasses.replace(list_pods, limited=False) != list_pods
    assert refusal(dataclasses.replace(list_pods, limited=False), core.limiter, core.cache) is None
