"""The bridge against the least a Python bridge can do: delay, server CPU per frame and memory.

A watcher of B (`pods-api serve --kubelet-socket A`) against a watcher of A (`pods-api serve
--fixtures`) on the same change, with `--watchers` more watchers of B in another process. The
floor, measured in the same run the same way, is bench/relay_floor.py: one watch on A whose
frames go unchanged to every watcher (no decode, no cache).

Each change rewrites one pod's fixture file; the next change waits until both probes have the
event, so the delays are the bridge's own, not queueing behind earlier changes. Floor and
pods-api take turns (ROUNDS), so a shared machine's other load falls on both alike. CPU is each
server process's own (all threads, /proc/PID/task/*/schedstat) over its turns only, from both
probes synced to the last change seen, divided by the frames it sent then (changes x (watchers + 1)); A's CPU,
the same for both, is not counted.

    python bench/bridge.py [--pods 110] [--pod-kb 5] [--changes 400] [--watchers 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import grpc

if not __package__:  # run as a script: the repository's root holds the bench package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.serve import PODS_API, fixture
from bench.server import rss_mib
from pods_api.core.api.pb import pods_v1alpha1_pb2 as api

HERE = Path(__file__).resolve().parent
WATCH = "/v1alpha1.Pods/WatchPods"
# Floor and ours take turns this many times, each turn a share of the changes.
ROUNDS = 4
# WatchPodsEvent{type: INITIAL_SYNC_COMPLETE}, from the generated module whose numbers the Go
# conformance tests hold to the released k8s.io/kubelet (a literal here once kept a draft's 3).
SYNC_FRAME = api.WatchPodsEvent(type="INITIAL_SYNC_COMPLETE").SerializeToString()
# Seconds a probe waits for one frame: a safety net far above any delay measured (~10 ms).
PATIENCE = 30.0


def wait_line(stream: IO[str] | None, text: str) -> None:
    """Read `stream` up to a line containing `text`, then keep draining it in a thread, so a
    process that logs more never blocks on a full pipe."""
    assert stream is not None
    for line in stream:
        if text in line:
            threading.Thread(target=stream.read, daemon=True).start()
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
            await asyncio.wait_for(self.changed.wait(), PATIENCE)


@dataclass
class Turns:
    """What one server did over its turns."""

    delays: list[float] = field(default_factory=list)  # seconds from A's watcher to this one's
    cpu_s: float = 0.0
    frames: int = 0


async def measure(
    a: Path, b: Path, pid: int, fixtures: Path, pods: list[dict[str, Any]], changes: int, turns: Turns
) -> None:
    """`changes` changes through A, watched on A and on `b` (served by process `pid`)."""
    probe_a, probe_b = Probe(a), Probe(b)
    tasks = [asyncio.get_running_loop().create_task(p.run()) for p in (probe_a, probe_b)]
    await asyncio.wait_for(asyncio.gather(probe_a.synced.wait(), probe_b.synced.wait()), PATIENCE)
    cpu = cpu_seconds(pid)
    for i in range(changes):
        pod = pods[i % len(pods)]
        pod["metadata"]["annotations"]["bench/seq"] = str(time.monotonic_ns())
        path = fixtures / f"{pod['metadata']['name']}.json"
        before = len(probe_a.seen)
        tmp = path.with_name("." + path.name)
        tmp.write_text(json.dumps(pod))
        tmp.replace(path)
        await asyncio.gather(probe_a.wait_for(before + 1), probe_b.wait_for(before + 1))
        frame = next(reversed(probe_a.seen))
        turns.delays.append(probe_b.seen[frame] - probe_a.seen[frame])
    turns.cpu_s += cpu_seconds(pid) - cpu
    for task in tasks:
        task.cancel()


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of `pid` in ns from the scheduler (/proc/PID/task/*/schedstat),
    not clock ticks: a quick run's few frames cost less than one 10 ms tick."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
    return total / 1e9


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def figures(turns: Turns, pid: int) -> dict[str, float]:
    ms = sorted(d * 1000 for d in turns.delays)
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return {
        "p50_ms": q[49],
        "p99_ms": q[98],
        "max_ms": ms[-1],
        "cpu_us_per_frame": turns.cpu_s / turns.frames * 1e6,
        "rss_mib": rss_mib(pid),
        "peak_rss_mib": peak_rss_mib(pid),
    }


def run(pods: int = 110, pod_kb: int = 5, changes: int = 400, watchers: int = 100) -> dict[str, Any]:
    """The bridge and the relay floor, taking turns; figures per server."""
    procs: list[subprocess.Popen[str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fixtures = root / "fixtures"
        fixtures.mkdir()
        items = fixture(pods, pod_kb)["items"]
        assert isinstance(items, list)
        for pod in items:
            (fixtures / f"{pod['metadata']['name']}.json").write_text(json.dumps(pod))
        serve = [PODS_API, "serve", "--qps", "0", "--node-name", "bench", "--max-watchers", "5000"]
        a_run, b_run = root / "a", root / "b"
        try:
            procs.append(a := spawn(*serve, "--run-dir", str(a_run), "--fixtures", str(fixtures)))
            wait_line(a.stderr, "serving the Pods API")
            a_sock = a_run / "pods-api.sock"
            procs.append(b := spawn(*serve, "--run-dir", str(b_run), "--kubelet-socket", str(a_sock)))
            wait_line(b.stderr, "upstream synced")
            relay = [sys.executable, str(HERE / "relay_floor.py"), str(a_sock), str(root / "f.sock")]
            procs.append(floor := spawn(*relay))
            wait_line(floor.stdout, "ready")
            servers = {"floor": (floor, root / "f.sock"), "pods-api": (b, b_run / "pods-api.sock")}
            turns = {name: Turns() for name in servers}
            per_round = max(1, changes // (2 * ROUNDS))
            # Alternate in rounds, so that the rest of a shared machine's load falls on both alike.
            for _ in range(ROUNDS):
                for name, (proc, socket) in servers.items():
                    loader = spawn(
                        sys.executable, __file__, "--load", str(socket), "--watchers", f"{watchers}"
                    )
                    procs.append(loader)
                    wait_line(loader.stdout, "ready")
                    asyncio.run(measure(a_sock, socket, proc.pid, fixtures, items, per_round, turns[name]))
                    turns[name].frames += per_round * (watchers + 1)
                    loader.terminate()
                    loader.wait()
            result: dict[str, Any] = {"pods": pods, "pod_kb": pod_kb, "watchers": watchers}
            result["changes"] = per_round * ROUNDS
            result |= {name: figures(turns[name], proc.pid) for name, (proc, _) in servers.items()}
            # A serves the same pods from fixtures to two probes: the server's own footprint,
            # beside which the bridge's is what bridging adds.
            result["upstream_rss_mib"] = rss_mib(a.pid)
            result["load_average"] = os.getloadavg()[0]
            return result
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.terminate()
                proc.wait()


def report(result: dict[str, Any]) -> list[str]:
    lines = [
        f"{result['pods']} pods of ~{result['pod_kb']} KiB; {result['changes']} changes each;"
        f" +{result['watchers']} watchers; load average {result['load_average']:.1f}",
        f"{'bridge':8} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}"
        f" {'CPU µs/frame':>12} {'RSS MiB':>8} {'peak':>6}",
    ]
    for name in ("floor", "pods-api"):
        r = result[name]
        lines.append(
            f"{name:8} {r['p50_ms']:7.2f} {r['p99_ms']:7.2f} {r['max_ms']:7.2f}"
            f" {r['cpu_us_per_frame']:12.1f} {r['rss_mib']:8.1f} {r['peak_rss_mib']:6.1f}"
        )
    lines.append(f"{'upstream':8} {'':39} {result['upstream_rss_mib']:8.1f}  (A: --fixtures, same pods)")
    ours, base = result["pods-api"], result["floor"]
    lines.append(
        "pods-api / floor: p50 {:.2f}x, p99 {:.2f}x, CPU per frame {:.2f}x, RSS {:.2f}x".format(
            *(ours[k] / base[k] for k in ("p50_ms", "p99_ms", "cpu_us_per_frame", "rss_mib"))
        )
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--pod-kb", type=int, default=5)
    parser.add_argument("--changes", type=int, default=400)
    parser.add_argument("--watchers", type=int, default=100)
    parser.add_argument("--load", metavar="SOCKET", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        asyncio.run(load(args.load, args.watchers))
        return
    print("\n".join(report(run(args.pods, args.pod_kb, args.changes, args.watchers))))


if __name__ == "__main__":
    main()
