"""What the HTTP metrics layer costs a request, in process (the ASGI app called directly, no
socket): prometheus-fastapi-instrumentator's middleware on every route, against the gateway as
built (its call routes hand the instrumentator's recorder the Info the middleware would build,
FastAPI's routes pass the middleware), against a floor: a bare Starlette route answering the
same cached bytes; and a bare FastAPI route answering them behind the middleware (the least a
call route would cost through FastAPI). Variants take turns in rounds, so a noisy neighbour hits
each alike; the spread is (max - min) / median of a variant's rounds."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_fastapi_instrumentator.middleware import PrometheusInstrumentatorMiddleware

from bench import pods

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
# (name, path): call routes (the router ahead of FastAPI) and a FastAPI route.
ROUTES = (("Get", "/v1/pods/{uid}"), ("List", "/v1/pods"), ("probe", "/healthz"))
# A FastAPI route passes the middleware in every variant: wrapping it again would count it twice.
_CALL_ROUTE_ONLY = {"series by hand", "middleware everywhere", "bare FastAPI route"}
# The instrumentator's default buckets of its label-free histogram.
HIGHR_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1,
    1.5,
    2,
    2.5,
    3,
    3.5,
    4,
    4.5,
    5,
    7.5,
    10,
    30,
    60,
)


def _scope(path: str, app: Any) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), (b"accept", b"*/*")],
        "client": None,
        "server": None,  # a UNIX socket: no Host check
        "app": app,  # as Starlette sets it, for the middleware's route matching when it is outermost
    }


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _time(app: App, scope: dict[str, Any], count: int) -> float:
    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    started = time.perf_counter()
    for _ in range(count):
        await app(dict(scope), _receive, send)
    elapsed = time.perf_counter() - started
    assert set(statuses) == {200}, statuses[:3]
    return elapsed / count * 1e6


def _apps(count: int) -> tuple[dict[str, App], Any, str]:
    from fastapi import FastAPI
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route

    from pods_api.core.assembly import build_core
    from pods_api.core.config import Config
    from pods_api.core.query.view import View
    from pods_api.core.store.version import PodVersion
    from pods_api.gateway import httpmetrics
    from pods_api.gateway.app import create_app
    from pods_api.gateway.assemble import list_body, pod_bytes
    from pods_api.gateway.http.formats import Format

    def core() -> Any:
        built = build_core(Config(node_name="bench", qps=0))
        sink = built.cache.source("bench")
        sink.replace([PodVersion.from_json(pods.fixture(i)) for i in range(count)])
        sink.mark_synced()
        return built

    shipped_core = core()
    shipped = create_app(shipped_core)
    everywhere = create_app(core())
    everywhere.responder.http = None  # the middleware outside records every request instead
    record = httpmetrics.recorder(CollectorRegistry())
    outer = PrometheusInstrumentatorMiddleware(everywhere, instrumentations=[record])
    by_hand = create_app(core())
    by_hand.responder.http = _by_hand(CollectorRegistry())
    uid = next(iter(shipped_core.cache.snapshot().pods)).uid
    snapshot = shipped_core.cache.snapshot()
    body = pod_bytes(shipped_core.cache.get(uid), View.EVERYTHING)

    async def get(request: Request) -> Response:
        return Response(body, media_type="application/json")

    async def listing(request: Request) -> Response:
        listed = await list_body(snapshot, View.EVERYTHING, Format.JSON)
        return Response(listed, media_type="application/json")

    async def probe(request: Request) -> Response:
        return PlainTextResponse("ok\n")

    floor = Starlette(
        routes=[Route("/v1/pods/{uid}", get), Route("/v1/pods", listing), Route("/healthz", probe)]
    )

    # What a call route would cost at the least through FastAPI: a route answering the same
    # bytes, no dependencies, behind the instrumentator's middleware as FastAPI's routes are.
    async def fastapi_get(uid: str) -> Response:
        return Response(body, media_type="application/json")

    async def fastapi_list() -> Response:
        listed = await list_body(snapshot, View.EVERYTHING, Format.JSON)
        return Response(listed, media_type="application/json")

    through_fastapi = FastAPI()
    through_fastapi.add_api_route("/v1/pods/{uid}", fastapi_get)
    through_fastapi.add_api_route("/v1/pods", fastapi_list)
    httpmetrics.instrument(through_fastapi, httpmetrics.recorder(CollectorRegistry()))
    apps: dict[str, App] = {
        "floor": floor,
        "gateway": shipped,
        "series by hand": by_hand,
        "middleware everywhere": outer,
        "bare FastAPI route": through_fastapi,
    }
    return apps, everywhere, uid


def _by_hand(registry: CollectorRegistry) -> Callable[[Any], None]:
    """The five series recorded without the library, each labelled child looked up once: what
    the call routes would save by not using its recorder."""
    from prometheus_client import Counter, Histogram, Summary

    requests = Counter("http_requests", "", ("method", "status", "handler"), registry=registry)
    sizes_in = Summary("http_request_size_bytes", "", ("handler",), registry=registry)
    sizes_out = Summary("http_response_size_bytes", "", ("handler",), registry=registry)
    fine = Histogram("http_request_duration_highr_seconds", "", registry=registry, buckets=HIGHR_BUCKETS)
    coarse = Histogram("http_request_duration_seconds", "", ("method", "handler"), registry=registry)
    children: dict[tuple[str, str, str], tuple[Any, ...]] = {}

    def record(info: Any) -> None:
        key = (info.method, info.modified_handler, info.modified_status)
        child = children.get(key)
        if child is None:
            child = children[key] = (
                requests.labels(*key),
                sizes_in.labels(key[1]),
                sizes_out.labels(key[1]),
                coarse.labels(key[0], key[1]),
            )
        child[0].inc()
        child[1].observe(0)
        child[2].observe(len(getattr(info.response, "body", b"")))
        fine.observe(info.modified_duration)
        child[3].observe(info.modified_duration)

    return record


async def _run(count: int, requests: int, rounds: int) -> dict[str, Any]:
    apps, everywhere, uid = _apps(count)
    samples: dict[tuple[str, str], list[float]] = {}
    for name, template in ROUTES:
        path = template.replace("{uid}", uid)
        chosen = {v: a for v, a in apps.items() if name != "probe" or v not in _CALL_ROUTE_ONLY}
        for app in chosen.values():
            await _time(app, _scope(path, everywhere), requests // 10)  # warm: caches, children
        for _ in range(rounds):
            for variant, app in chosen.items():
                us = await _time(app, _scope(path, everywhere), requests)
                samples.setdefault((name, variant), []).append(us)
    rows = []
    for name, _ in ROUTES:
        floor = statistics.median(samples[(name, "floor")])
        for variant in apps:
            runs = samples.get((name, variant))
            if runs is None:
                continue
            median = statistics.median(runs)
            rows.append(
                {
                    "route": name,
                    "variant": variant,
                    "us_per_request": median,
                    "floor_us": floor,
                    "ratio": median / floor,
                    "spread": (max(runs) - min(runs)) / median,
                }
            )
    return {"pods": count, "requests": requests, "rounds": rounds, "rows": rows}


def run(count: int, requests: int, rounds: int) -> dict[str, Any]:
    return asyncio.run(_run(count, requests, rounds))


if __name__ == "__main__":
    for row in run(110, 3000, 5)["rows"]:
        print(
            f"{row['route']:6} {row['variant']:22} {row['us_per_request']:8.1f} µs"
            f"  floor {row['floor_us']:6.1f}  x{row['ratio']:5.2f}  spread {row['spread']:.0%}"
        )
