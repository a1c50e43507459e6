"""SSE: server CPU per delivered frame, ours against a bare Starlette StreamingResponse streaming
the same bytes (W4's SSE row in BENCHMARKS.md), each server in its own process, interleaved.

Ours is the gateway app (`create_app`, under uvicorn with the gateway's connection class) on a
core whose test source changes one pod `rate` times a second; the floor is a Starlette app whose
every watcher gets the same pre-made frames from its own queue. The watchers, in this process,
read `?watch=true`. Ours also pays for the change itself (cache, indexes, the frame made once
per revision): a cost per change, shared by the watchers.

    python -m bench.sse [WATCHERS RATE SECONDS REPEATS]
    python -m bench.sse serve ours|floor SOCKET RATE FIXTURES   (the server side)
"""

from __future__ import annotations

import asyncio
import copy
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import uvicorn

from bench import pods
from bench.serve import wait_line
from bench.server import cpu_seconds

# Distinct versions of the changing pod: each change is a new revision with new bytes.
VERSIONS = 1000
# Watchers connect and take their snapshot before the measured window opens.
SETTLE = 1.5


def _pods(fixtures: Path) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for path in sorted(fixtures.iterdir()):
        doc = orjson.loads(path.read_bytes())
        items.extend(doc.get("items", [doc]) if isinstance(doc, dict) else doc)
    return items


def _variants(pod: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for i in range(VERSIONS):
        changed = copy.deepcopy(pod)
        changed["metadata"].setdefault("annotations", {})["bench/change"] = str(i)
        out.append(changed)
    return out


def _ours(items: list[dict[str, Any]]) -> tuple[Any, Any, Callable[[int], None]]:
    from pods_api.core.assembly import build_core
    from pods_api.core.config import Config
    from pods_api.core.store.version import PodVersion
    from pods_api.gateway.app import create_app
    from pods_api.gateway.server.connection import GatewayConnection

    core = build_core(Config(node_name="bench", qps=0))
    sink = core.cache.source("bench")
    sink.replace([PodVersion.from_json(p) for p in items])
    sink.mark_synced()
    versions = [PodVersion.from_json(p) for p in _variants(items[0])]

    def change(i: int) -> None:
        sink.upsert(versions[i % len(versions)])

    return create_app(core), GatewayConnection.configured(10.0, 1000), change


def _floor(items: list[dict[str, Any]]) -> tuple[Any, Any, Callable[[int], None]]:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    frames = [
        b"id: %d\nevent: MODIFIED\ndata: %s\n\n" % (i, orjson.dumps({"kind": "Pod", "apiVersion": "v1", **p}))
        for i, p in enumerate(_variants(items[0]))
    ]
    queues: set[asyncio.Queue[bytes]] = set()

    async def watch(request: Request) -> StreamingResponse:
        queue: asyncio.Queue[bytes] = asyncio.Queue()

        async def frames_of() -> AsyncIterator[bytes]:
            queues.add(queue)
            try:
                while True:
                    yield await queue.get()
            finally:
                queues.discard(queue)

        return StreamingResponse(frames_of(), media_type="text/event-stream")

    def change(i: int) -> None:
        for queue in queues:
            queue.put_nowait(frames[i % len(frames)])

    return Starlette(routes=[Route("/v1/pods", watch)]), "h11", change


async def serve(which: str, path: str, rate: float, fixtures: Path) -> None:
    app, http, change = (_ours if which == "ours" else _floor)(_pods(fixtures))
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen()  # before "ready": a watcher connecting first must not be refused
    config = uvicorn.Config(app, http=http, lifespan="off", log_config=None, access_log=False)
    loop = asyncio.get_running_loop()
    server = loop.create_task(uvicorn.Server(config).serve(sockets=[listener]))
    print("ready", flush=True)
    start, i = loop.time(), 0
    while not server.done():
        i += 1
        change(i)
        await asyncio.sleep(max(0.0, start + i / rate - loop.time()))


async def _measure(path: str, pid: int, watchers: int, seconds: float) -> tuple[float, float]:
    """(server CPU µs per frame delivered, frames per second) over `seconds`."""
    counts = [0] * watchers
    counting = False
    limits = httpx.Limits(max_connections=watchers + 1)
    transport = httpx.AsyncHTTPTransport(uds=path, limits=limits)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=None) as client:

        async def watch(i: int) -> None:
            async with client.stream("GET", "/v1/pods", params={"watch": "true"}) as response:
                async for chunk in response.aiter_bytes():
                    if counting:
                        counts[i] += chunk.count(b"\n\n")

        tasks = [asyncio.create_task(watch(i)) for i in range(watchers)]
        await asyncio.sleep(SETTLE)
        counting, cpu = True, cpu_seconds(pid)
        await asyncio.sleep(seconds)
        used, counting = cpu_seconds(pid) - cpu, False
        for task in tasks:
            task.cancel()
        for outcome in await asyncio.gather(*tasks, return_exceptions=True):
            if not isinstance(outcome, asyncio.CancelledError | None):
                raise outcome
    frames = sum(counts)
    return used / max(frames, 1) * 1e6, frames / seconds


def run(watchers: int, rate: float, seconds: float, repeats: int) -> dict[str, Any]:
    got: dict[str, list[tuple[float, float]]] = {"ours": [], "floor": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pods.write(root / "fixtures", 110, kind="fixture", fmt="json")
        for n in range(repeats):
            for which in ("ours", "floor"):
                path = str(root / f"{which}-{n}.sock")
                fixtures = str(root / "fixtures")
                command = [sys.executable, "-m", "bench.sse", "serve", which, path, str(rate), fixtures]
                proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
                try:
                    wait_line(proc.stdout, "ready")
                    got[which].append(asyncio.run(_measure(path, proc.pid, watchers, seconds)))
                finally:
                    proc.terminate()
                    proc.wait()
    result: dict[str, Any] = {"watchers": watchers, "rate": rate}
    for which, runs in got.items():
        result[f"{which}_cpu_us_per_frame"] = statistics.median(c for c, _ in runs)
        result[f"{which}_cpu_us_range"] = [min(c for c, _ in runs), max(c for c, _ in runs)]
        result[f"{which}_frames_per_s"] = statistics.median(f for _, f in runs)
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        which, path, rate, fixtures = sys.argv[2:6]
        asyncio.run(serve(which, path, float(rate), Path(fixtures)))
    else:
        w, r, s, n = sys.argv[1:5] or ["20", "100", "4", "3"]
        print(orjson.dumps(run(int(w), float(r), float(s), int(n)), option=orjson.OPT_INDENT_2).decode())
