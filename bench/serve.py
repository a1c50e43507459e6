"""Throughput of ListPods and GetPod against a real `pods-api serve`, as a ratio to a floor
measured in the same run: a bare grpc.aio server returning one fixed bytes object of the same
size (bench/floor_server.py). The ratio says what our handlers, interceptors and caches cost on
top of grpc itself.

    python bench/serve.py [--pods 110] [--pod-kb 5] [--seconds 3] [--concurrency 1,8]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import yaml

from core.pb import pods_v1alpha1_pb2 as api
from core.pb import pods_v1alpha1_pb2_grpc as api_grpc

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


async def rate(target: str, call: str, seconds: float, concurrency: int) -> float:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = api_grpc.PodsStub(channel)
        request = api.GetPodRequest(podUID="00000000-0000-0000-0000-000000000007")

        async def one() -> object:
            if call == "ListPods":
                return await stub.ListPods(api.ListPodsRequest())
            return await stub.GetPod(request)

        await one()  # warm: connection, caches
        done = 0
        deadline = time.monotonic() + seconds

        async def loop() -> None:
            nonlocal done
            while time.monotonic() < deadline:
                await one()
                done += 1

        await asyncio.gather(*(loop() for _ in range(concurrency)))
        return done / seconds


async def fetch(target: str) -> tuple[bytes, bytes]:
    async with grpc.aio.insecure_channel(target) as channel:
        listed = await channel.unary_unary("/v1alpha1.Pods/ListPods")(b"")
        got = await channel.unary_unary("/v1alpha1.Pods/GetPod")(
            api.GetPodRequest(podUID="00000000-0000-0000-0000-000000000007").SerializeToString()
        )
        return listed, got


def wait_line(proc: subprocess.Popen[str], text: str) -> None:
    assert proc.stderr is not None or proc.stdout is not None
    stream = proc.stderr if proc.stderr is not None else proc.stdout
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
        run_dir = root / "run"
        serve = [
            PODS_API,
            "serve",
            "--fixtures",
            str(root / "fixtures"),
            "--run-dir",
            str(run_dir),
            "--qps",
            "0",
        ]
        ours = subprocess.Popen([*serve, "--node-name", "bench"], stderr=subprocess.PIPE, text=True)
        floor = None
        try:
            wait_line(ours, "serving the Pods API")
            target = f"unix:{run_dir / 'pods-api.sock'}"
            listed, got = asyncio.run(fetch(target))
            (root / "list.bin").write_bytes(listed)
            (root / "get.bin").write_bytes(got)
            floor_cmd = [sys.executable, str(HERE / "floor_server.py"), str(root / "floor.sock")]
            floor = subprocess.Popen(
                [*floor_cmd, str(root / "list.bin"), str(root / "get.bin")], stdout=subprocess.PIPE, text=True
            )
            wait_line(floor, "ready")
            floor_target = f"unix:{root / 'floor.sock'}"
            print(f"{args.pods} pods: List response {len(listed) / 1024:.0f} KiB, Get response {len(got)} B")
            print(f"{'call':9} {'conc':>4} {'ours/s':>9} {'floor/s':>9} {'ratio':>6}")
            for call in ("ListPods", "GetPod"):
                for concurrency in (int(c) for c in args.concurrency.split(",")):
                    a = asyncio.run(rate(target, call, args.seconds, concurrency))
                    b = asyncio.run(rate(floor_target, call, args.seconds, concurrency))
                    print(f"{call:9} {concurrency:4} {a:9.0f} {b:9.0f} {a / b:6.2f}")
        finally:
            for proc in (ours, floor):
                if proc is not None:
                    proc.terminate()
                    proc.wait()


if __name__ == "__main__":
    main()
