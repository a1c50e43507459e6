"""Throughput of List and Get, over gRPC and over HTTP, against a real `pods-api serve`, as a
ratio to a floor measured in the same run: a bare grpc.aio server and a bare Starlette app
returning the very bytes pods-api returned, from their own process (bench/floor_server.py).
The ratio says what our handlers, interceptors, middleware and caches cost on top of the
libraries themselves.

    python bench/serve.py [--pods 110] [--pod-kb 5] [--seconds 3] [--concurrency 1,8]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO

import grpc
import httpx
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from pods_api.core.api.pb import pods_v1alpha1_pb2 as api
from pods_api.core.api.pb import pods_v1alpha1_pb2_grpc as api_grpc

HERE = Path(__file__).resolve().parent
PODS_API = str(Path(sys.executable).parent / "pods-api")


def fixture(count: int, kb: int) -> dict[str, object]:
    """Realistic-shaped pods padded with an annotation to the size asked for."""
    items = []
    for i in range(count):
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"app-{i}",
                    "namespace": "bench",
                    "uid": f"00000000-0000-0000-0000-{i:012d}",
                    "labels": {"app": "bench", "pod-template-hash": "7d9f8c6b5"},
                    "annotations": {"pad": "x" * (kb * 1024 - 900)},
                },
                "spec": {
                    "nodeName": "node-1",
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.example/app:1.0",
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                        }
                    ],
                },
                "status": {
                    "phase": "Running",
                    "podIP": f"10.0.{i // 250}.{i % 250}",
                    "containerStatuses": [
                        {
                            "name": "app",
                            "ready": True,
                            "restartCount": 0,
                            "image": "registry.example/app:1.0",
                            "imageID": "sha256:1",
                        }
                    ],
                },
            }
        )
    return {"apiVersion": "v1", "kind": "PodList", "items": items}


UID = "00000000-0000-0000-0000-000000000007"


async def grpc_rate(target: str, call: str, seconds: float, concurrency: int) -> float:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = api_grpc.PodsStub(channel)
        request = api.GetPodRequest(podUID=UID)

        async def one() -> object:
            if call == "List":
                return await stub.ListPods(api.ListPodsRequest())
            return await stub.GetPod(request)

        return await _loop(one, seconds, concurrency)


async def http_rate(socket_path: str, call: str, seconds: float, concurrency: int) -> float:
    transport = httpx.AsyncHTTPTransport(uds=socket_path)
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost", limits=limits) as client:
        path = "/v1/pods" if call == "List" else f"/v1/pods/{UID}"

        async def one() -> object:
            response = await client.get(path)
            response.raise_for_status()
            return response.content

        return await _loop(one, seconds, concurrency)


async def _loop(one: Callable[[], Awaitable[object]], seconds: float, concurrency: int) -> float:
    await one()  # warm: connection, caches
    done = 0
    deadline = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal done
        while time.monotonic() < deadline:
            await one()
            done += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / seconds


async def fetch(grpc_target: str, http_socket: str) -> dict[str, bytes]:
    """What pods-api answers, for the floor to answer too: the same sizes, the same bytes."""
    async with grpc.aio.insecure_channel(grpc_target) as channel:
        # "serving" is logged before the sources have synced; on a busy machine the first call
        # could be refused as not ready. Readiness is an event: the health service streams it.
        health = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
        async for update in health:
            if update.status == health_pb2.HealthCheckResponse.SERVING:
                break
        health.cancel()
        listed = await channel.unary_unary("/v1alpha1.Pods/ListPods")(b"")
        got = await channel.unary_unary("/v1alpha1.Pods/GetPod")(
            api.GetPodRequest(podUID=UID).SerializeToString()
        )
    transport = httpx.AsyncHTTPTransport(uds=http_socket)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        http_list = (await client.get("/v1/pods")).content
        http_get = (await client.get(f"/v1/pods/{UID}")).content
    return {"grpc-list": listed, "grpc-get": got, "http-list": http_list, "http-get": http_get}


def wait_line(stream: IO[str] | None, text: str) -> None:
    assert stream is not None
    for line in stream:
        if text in line:
            return
    raise SystemExit(f"process exited before {text!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--pod-kb", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", default="1,8")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "fixtures").mkdir()
        (root / "fixtures" / "pods.yaml").write_text(yaml.safe_dump(fixture(args.pods, args.pod_kb)))
        run = root / "run"
        serve = [PODS_API, "serve", "--fixtures", str(root / "fixtures"), "--run-dir", str(run), "--qps", "0"]
        ours = subprocess.Popen([*serve, "--node-name", "bench"], stderr=subprocess.PIPE, text=True)
        floor = None
        try:
            wait_line(ours.stderr, "serving the Pods API")
            targets = (f"unix:{run / 'pods-api.sock'}", str(run / "pods-api-http.sock"))
            answers = asyncio.run(fetch(*targets))
            for name, data in answers.items():
                (root / f"{name}.bin").write_bytes(data)
            floor = subprocess.Popen(
                [sys.executable, str(HERE / "floor_server.py"), str(root)], stdout=subprocess.PIPE, text=True
            )
            wait_line(floor.stdout, "ready")
            floors = (f"unix:{root / 'floor.sock'}", str(root / "floor-http.sock"))
            sizes = ", ".join(f"{name} {len(data) / 1024:.1f} KiB" for name, data in answers.items())
            print(f"{args.pods} pods of ~{args.pod_kb} KiB; responses: {sizes}")
            print(f"{'surface':7} {'call':5} {'conc':>4} {'ours/s':>9} {'floor/s':>9} {'ratio':>6}")
            for surface, rate, ours_at, floor_at in (
                ("gRPC", grpc_rate, *targets[:1], *floors[:1]),
                ("HTTP", http_rate, targets[1], floors[1]),
            ):
                for call in ("List", "Get"):
                    for concurrency in (int(c) for c in args.concurrency.split(",")):
                        a = asyncio.run(rate(ours_at, call, args.seconds, concurrency))
                        b = asyncio.run(rate(floor_at, call, args.seconds, concurrency))
                        print(f"{surface:7} {call:5} {concurrency:4} {a:9.0f} {b:9.0f} {a / b:6.2f}")
        finally:
            for proc in (ours, floor):
                if proc is not None:
                    proc.terminate()
                    proc.wait()


if __name__ == "__main__":
    main()
