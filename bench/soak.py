"""A soak: where a long-running `pods-api serve` stops growing, and what holds it there.

    python -m bench.soak [--minutes 22] [--pods 40] [--trace] [--out FILE]

One server (bench/heapdump.py around the real entry point, never restarted) with two `--fixtures`
directories of pods carrying a 24 KB annotation, `--watch-buffer 8 --send-timeout 1`, as the
invariant driver (tests/e2e/test_invariant.py) runs it; the driver's kinds of load, without its
checks: file churn (edits, bulk edits of 8, deletes and adds, renames, moves between the
sources, a storm of every file each 30 s), 3 gRPC and 3 SSE watchers (one of each masked) that
stall past the send timeout, disconnect, and resume (SSE with `Last-Event-ID`), and Lists on
every surface each 2 s. RSS is sampled every 20 s; at the end, under load, the server dumps its
breakdown (bench/heapdump.py), written with the samples to FILE (JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
import httpx
import orjson
import yaml

from bench import pods
from bench.heapdump import proc_memory
from bench.server import until_serving
from pods_api.core.api.pb import pods_v1alpha1_pb2 as api

ROOT = Path(__file__).resolve().parents[1]
# As the invariant driver: bulky pods fill a stalled reader's buffers after a few events.
PADDING = 12_000
MASK = "status.phase"
# A stall this long is past the server's send timeout (1 s): the watch is cut off, and told.
LONG_STALL = 2.5
SAMPLE_EVERY = 20.0
STORM_EVERY = 30.0
# The client's flow-control window stays at 64 KiB, so a stalled reader's window fills.
NO_BDP = [("grpc.http2.bdp_probe", 0)]


class Files:
    """Pod files in two source directories, changed at random."""

    def __init__(self, dirs: tuple[Path, Path], count: int, rng: random.Random) -> None:
        self.dirs, self.rng = dirs, rng
        self.where: dict[int, int] = {}
        self.generation = 0
        self.changes = 0
        for i in range(count):
            self.write(i, i % 2)

    def write(self, i: int, where: int | None = None) -> None:
        where = self.where.get(i, 0) if where is None else where
        self.generation += 1
        pod = pods.fixture(i, self.generation)
        pod["metadata"]["annotations"] = {"example.com/padding": self.rng.randbytes(PADDING).hex()}
        pod["status"]["phase"] = self.rng.choice(["Running", "Pending", "Succeeded"])
        path = self.dirs[where] / f"pod-{i:05d}.yaml"
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(yaml.safe_dump(pod, sort_keys=False))
        os.replace(tmp, path)
        self.where[i] = where
        self.changes += 1

    def step(self) -> None:
        i = self.rng.choice(sorted(self.where))
        op = self.rng.choice(["edit", "edit", "bulk", "delete", "move"])
        if op == "edit":
            self.write(i)
        elif op == "bulk":
            for other in self.rng.sample(sorted(self.where), min(8, len(self.where))):
                self.write(other)
        elif op == "delete":  # and back a moment later, as a new generation
            (self.dirs[self.where[i]] / f"pod-{i:05d}.yaml").unlink()
            self.changes += 1
            self.write(i)
        else:
            where = self.where[i]
            os.replace(self.dirs[where] / f"pod-{i:05d}.yaml", self.dirs[1 - where] / f"pod-{i:05d}.yaml")
            self.where[i] = 1 - where
            self.changes += 1

    def storm(self) -> None:
        for i in sorted(self.where):
            self.write(i)


class Counts:
    def __init__(self) -> None:
        self.events = self.cut_off = self.stalls = self.disconnects = self.resumes = self.lists = 0


async def grpc_watcher(target: str, masked: bool, rng: random.Random, counts: Counts) -> None:
    metadata = [("x-kubernetes-fieldmask", MASK)] if masked else []
    while True:
        try:
            async with grpc.aio.insecure_channel(target, options=NO_BDP) as channel:
                call = channel.unary_stream("/v1alpha1.Pods/WatchPods")(
                    api.WatchPodsRequest().SerializeToString(), metadata=metadata
                )
                async for _ in call:
                    counts.events += 1
                    roll = rng.random()
                    if roll < 0.002:
                        counts.stalls += 1
                        await asyncio.sleep(LONG_STALL)  # the fault itself: stop reading
                    elif roll < 0.003:
                        counts.disconnects += 1
                        call.cancel()
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                counts.cut_off += 1
        await asyncio.sleep(0.1)


async def sse_watcher(http: str, masked: bool, rng: random.Random, counts: Counts) -> None:
    last_id: str | None = None
    params = {"watch": "true", **({"fields": MASK} if masked else {})}
    transport = httpx.AsyncHTTPTransport(uds=http)
    async with httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(20.0, read=None)) as client:
        while True:
            headers = {"Last-Event-ID": last_id} if last_id is not None else {}
            counts.resumes += last_id is not None
            try:
                stream = client.stream("GET", "http://localhost/v1/pods", params=params, headers=headers)
                async with stream as r:
                    async for line in r.aiter_lines():
                        if line.startswith("id: "):
                            last_id = line[4:]
                        elif line.startswith("event: ERROR"):
                            counts.cut_off += 1
                        elif line.startswith("data: "):
                            counts.events += 1
                            roll = rng.random()
                            if roll < 0.002:
                                counts.stalls += 1
                                await asyncio.sleep(LONG_STALL)
                            elif roll < 0.003:
                                counts.disconnects += 1
                                break
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)


async def lister(target: str, http: str, counts: Counts) -> None:
    transport = httpx.AsyncHTTPTransport(uds=http)
    options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
    async with (
        grpc.aio.insecure_channel(target, options=options) as channel,
        httpx.AsyncClient(transport=transport, base_url="http://localhost") as client,
    ):
        call = channel.unary_unary("/v1alpha1.Pods/ListPods")
        while True:
            await call(b"")
            await call(b"", metadata=[("x-kubernetes-fieldmask", MASK)])
            for path in ("/v1/pods", f"/v1/pods?fields={MASK}", "/api/v1/pods"):
                (await client.get(path)).raise_for_status()
            counts.lists += 1
            await asyncio.sleep(2.0)


async def churn(files: Files, rng: random.Random) -> None:
    last_storm = time.monotonic()
    while True:
        await asyncio.sleep(rng.uniform(0.05, 0.3))
        files.step()
        if time.monotonic() - last_storm > STORM_EVERY:
            files.storm()
            last_storm = time.monotonic()


async def soak(minutes: float, count: int, trace: bool, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        dirs = (tmp / "a", tmp / "b")
        for d in dirs:
            d.mkdir()
        files = Files(dirs, count, rng)
        run, dumped = tmp / "run", tmp / "dump.json"
        command = [sys.executable, "-m", "bench.heapdump", str(dumped), *(["--trace"] if trace else [])]
        command += ["serve", "--run-dir", str(run), "--node-name", "bench", "--qps", "0"]
        command += ["--fixtures", str(dirs[0]), "--fixtures", str(dirs[1])]
        command += ["--watch-buffer", "8", "--send-timeout", "1", "--heartbeat", "1"]
        proc = _spawn(command)
        try:
            target, http = f"unix:{run / 'pods-api.sock'}", str(run / "pods-api-http.sock")
            await until_serving(target)
            counts = Counts()
            tasks = [asyncio.create_task(churn(files, random.Random(seed + 1)))]
            for i in range(3):
                masked, rngs = i == 0, (random.Random(seed + 10 + i), random.Random(seed + 20 + i))
                tasks.append(asyncio.create_task(grpc_watcher(target, masked, rngs[0], counts)))
                tasks.append(asyncio.create_task(sse_watcher(http, masked, rngs[1], counts)))
            tasks.append(asyncio.create_task(lister(target, http, counts)))
            started = time.monotonic()
            samples = []
            while (elapsed := time.monotonic() - started) < minutes * 60:
                samples.append({"s": round(elapsed), "changes": files.changes, **proc_memory(proc.pid)})
                await asyncio.sleep(SAMPLE_EVERY)
            proc.send_signal(signal.SIGUSR1)
            while not dumped.exists():
                if proc.poll() is not None:
                    raise SystemExit(f"the server exited ({proc.returncode}) before its dump")
                await asyncio.sleep(0.2)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return {
                "minutes": minutes,
                "pods": count,
                "trace": trace,
                "changes": files.changes,
                "counts": vars(counts),
                "samples": samples,
                "dump": orjson.loads(dumped.read_bytes()),
            }
        finally:
            proc.terminate()
            proc.wait()


def _spawn(command: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=22.0)
    parser.add_argument("--pods", type=int, default=40)
    parser.add_argument("--trace", action="store_true", help="tracemalloc from the start (costs memory)")
    parser.add_argument("--seed", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("soak.json"))
    args = parser.parse_args()
    result = asyncio.run(soak(args.minutes, args.pods, args.trace, args.seed))
    args.out.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    for sample in result["samples"]:
        print(f"{sample['s']:6d} s {sample['changes']:7d} changes  RSS {sample['rss_mib']:6.1f} MiB")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
