"""The delay a bridge adds: a watcher of B (`pods-api serve --kubelet-socket A`) against a
watcher of A (`pods-api serve --fixtures`) on the same change, with 100 more watchers of B in
another process. The floor, measured in the same run the same way, is bench/relay_floor.py:
one watch on A whose frames go unchanged to every watcher (no decode, no cache).

Each change rewrites one pod's fixture file; the next change waits until both probes have the
event, so the numbers are the bridge's own delay, not queueing behind earlier changes. Floor and
pods-api take turns (ROUNDS), so a shared machine's other load falls on both alike.

    python bench/bridge.py [--pods 110] [--pod-kb 5] [--changes 200] [--watchers 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

import grpc

from pods_api.core.api.pb import pods_v1alpha1_pb2 as api

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from serve import PODS_API, fixture  # noqa: E402

WATCH = "/v1alpha1.Pods/WatchPods"
# Floor and ours take turns this many times, each turn a share of the changes.
ROUNDS = 4
# WatchPodsEvent{type: INITIAL_SYNC_COMPLETE}, from the generated module whose numbers the Go
# conformance tests hold to the released k8s.io/kubelet (a literal here once kept a draft's 3).
SYNC_FRAME = api.WatchPodsEvent(type="INITIAL_SYNC_COMPLETE").SerializeToString()


def wait_line(stream: IO[str] | None, text: str) -> None:
    assert stream is not None
    for line in stream:
        if text in line:
            return
    raise SystemExit(f"process exited before {text!r}")


async def load(socket: str, count: int) -> None:
    """`count` watchers that keep reading (the downstream fan-out), until killed."""
    async with grpc.aio.insecure_channel(f"unix:{socket}") as channel:
        synced = 0

        async def one() -> None:
            nonlocal synced
            async for frame in channel.unary_stream(WATCH)(b""):
                if frame == SYNC_FRAME:
                    synced += 1
                    if synced == count:
                        print("ready", flush=True)

        await asyncio.gather(*(one() for _ in range(count)))


class Probe:
    """One watcher: when (perf_counter) each frame arrived, keyed by the frame's bytes, which
    are the same from A, from B (it passes A's pod bytes through) and from the floor."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self.seen: dict[bytes, float] = {}
        self.changed = asyncio.Event()
        self.synced = asyncio.Event()

    async def run(self) -> None:
        async with grpc.aio.insecure_channel(f"unix:{self.socket}") as channel:
            async for frame in channel.unary_stream(WATCH)(b""):
                self.seen[frame] = time.perf_counter()
                if frame == SYNC_FRAME:
                    self.synced.set()
                self.changed.set()

    async def wait_for(self, count: int) -> None:
        while len(self.seen) < count:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 30)


async def measure(
    a: Path, b: Path, fixtures: Path, pods: list[dict[str, object]], changes: int
) -> list[float]:
    """Seconds from A's watcher to B's watcher, per change."""
    probe_a, probe_b = Probe(a), Probe(b)
    tasks = [asyncio.get_running_loop().create_task(p.run()) for p in (probe_a, probe_b)]
    await asyncio.wait_for(asyncio.gather(probe_a.synced.wait(), probe_b.synced.wait()), 30)
    delays = []
    for i in range(changes):
        pod = pods[i % len(pods)]
        pod["metadata"]["annotations"]["bench/seq"] = str(time.monotonic_ns())  # type: ignore[index]
        path = fixtures / f"{pod['metadata']['name']}.json"  # type: ignore[index]
        before = len(probe_a.seen)
        tmp = path.with_name("." + path.name)
        tmp.write_text(json.dumps(pod))
        tmp.replace(path)
        await asyncio.gather(probe_a.wait_for(before + 1), probe_b.wait_for(before + 1))
        frame = next(reversed(probe_a.seen))
        delays.append(probe_b.seen[frame] - probe_a.seen[frame])
    for task in tasks:
        task.cancel()
    return delays


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def percentiles(delays: list[float]) -> tuple[float, float, float]:
    ms = sorted(d * 1000 for d in delays)
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return q[49], q[98], ms[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--pod-kb", type=int, default=5)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--watchers", type=int, default=100)
    parser.add_argument("--load", metavar="SOCKET", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        asyncio.run(load(args.load, args.watchers))
        return
    procs: list[subprocess.Popen[str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fixtures = root / "fixtures"
        fixtures.mkdir()
        pods = fixture(args.pods, args.pod_kb)["items"]
        assert isinstance(pods, list)
        for pod in pods:
            (fixtures / f"{pod['metadata']['name']}.json").write_text(json.dumps(pod))
        serve = [PODS_API, "serve", "--qps", "0", "--node-name", "bench", "--max-watchers", "5000"]
        a_run, b_run = root / "a", root / "b"
        try:
            procs.append(a := spawn(*serve, "--run-dir", str(a_run), "--fixtures", str(fixtures)))
            wait_line(a.stderr, "serving the Pods API")
            a_sock = a_run / "pods-api.sock"
            procs.append(b := spawn(*serve, "--run-dir", str(b_run), "--kubelet-socket", str(a_sock)))
            wait_line(b.stderr, "upstream synced")
            procs.append(
                floor := spawn(
                    sys.executable, str(HERE / "relay_floor.py"), str(a_sock), str(root / "f.sock")
                )
            )
            wait_line(floor.stdout, "ready")
            print(
                f"{args.pods} pods of ~{args.pod_kb} KiB; {args.changes} changes; +{args.watchers} watchers"
            )
            print(f"{'bridge':8} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}")
            # Alternate in rounds, so that the rest of a shared machine's load falls on both alike.
            delays: dict[str, list[float]] = {"floor": [], "pods-api": []}
            per_round = max(1, args.changes // (2 * ROUNDS))
            for _ in range(ROUNDS):
                for name, socket in (("floor", root / "f.sock"), ("pods-api", b_run / "pods-api.sock")):
                    loader = spawn(
                        sys.executable, __file__, "--load", str(socket), "--watchers", str(args.watchers)
                    )
                    procs.append(loader)
                    wait_line(loader.stdout, "ready")
                    delays[name] += asyncio.run(measure(a_sock, socket, fixtures, pods, per_round))
                    loader.terminate()
                    loader.wait()
            results = {name: percentiles(values) for name, values in delays.items()}
            for name, (p50, p99, worst) in results.items():
                print(f"{name:8} {p50:7.2f} {p99:7.2f} {worst:7.2f}")
            ours, base = results["pods-api"], results["floor"]
            print(f"added over the floor: p50 {ours[0] - base[0]:+.2f} ms, p99 {ours[1] - base[1]:+.2f} ms")
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.terminate()
                proc.wait()


if __name__ == "__main__":
    main()
