"""Node CPU with N watchers of the Pods API: on the real kubelet v1.37.2's socket directly, against
the same watchers on the bridge (`pods-api serve --kubelet-socket` that socket), under the
kubelet's own churn (static pods added and removed).

The kubelet and its containerd come from tests/support/realkubelet.py (built from the Go module
proxy, cached). For each N, the kubelet's watchers and the bridge's take turns, each turn the
same churn: a static pod's manifest written every CHURN_EVERY seconds and removed CHURN_EVERY
later. A probe watcher on the socket being measured counts the events the churn made; CPU is
each process's own over the turn (all threads, /proc/PID/task/*/schedstat), per event the probe
saw. The kubelet's CPU covers all it does for the churn (starting and stopping containers,
status), so what watchers cost it is the difference between its two turns.

Where the kubelet cannot run (no go, not root, no containerd), the workload is skipped and says
why; it never fails `python -m bench all`.

    python bench/kubelet.py [--watchers 50 200] [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

if not __package__:  # run as a script: the repository's root holds the bench package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.bridge import SYNC_FRAME, WATCH, cpu_seconds, spawn, wait_line
from bench.serve import PODS_API

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "support"))
import realkubelet  # noqa: E402  (tests/support is on the path only from here)
from daemon import Unavailable  # noqa: E402

# One static pod started every this many seconds, and removed as long after: the kubelet's
# status manager sends ~3 events for a start and ~3 for a stop (after a 1 s grace period).
CHURN_EVERY = 2.0
# Seconds for the watchers to connect and sync before a turn is measured.
PATIENCE = 60.0


async def _probe(socket: Path, seen: list[int], synced: asyncio.Event) -> None:
    async with grpc.aio.insecure_channel(f"unix:{socket}") as channel:
        async for frame in channel.unary_stream(WATCH)(b""):
            if frame == SYNC_FRAME:
                synced.set()
            else:
                seen[0] += 1


async def _turn(node: realkubelet.Node, socket: Path, pids: dict[str, int], seconds: float) -> dict[str, Any]:
    """Churn for `seconds` while a probe watches `socket`: CPU per event, per process."""
    seen, synced = [0], asyncio.Event()
    probe = asyncio.get_running_loop().create_task(_probe(socket, seen, synced))
    await asyncio.wait_for(synced.wait(), PATIENCE)
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    started, made = time.monotonic(), 0
    names: list[str] = []
    while time.monotonic() - started < seconds:
        name = f"churn-{made}"
        node.put(
            f"{name}.yaml", realkubelet.static_pod(name, ["sleep", "3600"], terminationGracePeriodSeconds=1)
        )
        names.append(name)
        made += 1
        if len(names) > 1:
            node.remove(f"{names.pop(0)}.yaml")
        await asyncio.sleep(CHURN_EVERY)  # the churn's own pace, not a synchronisation
    for name in names:
        node.remove(f"{name}.yaml")
    await asyncio.sleep(CHURN_EVERY + 2)  # the last removal's grace period and its events
    spent = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
    wall = time.monotonic() - started
    probe.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await probe
    events = max(seen[0], 1)
    return (
        {"events": seen[0], "pods": made}
        | {f"{name}_cpu_us_per_event": s / events * 1e6 for name, s in spent.items()}
        | {f"{name}_cpu_share": s / wall for name, s in spent.items()}
    )


def _watchers(socket: Path, count: int) -> subprocess.Popen[str]:
    loader = spawn(sys.executable, str(HERE / "bridge.py"), "--load", str(socket), "--watchers", str(count))
    wait_line(loader.stdout, "ready")
    return loader


def run(watchers: tuple[int, ...] = (50, 200), seconds: float = 20.0) -> dict[str, Any]:
    """Per N: the kubelet's watchers, then the bridge's, each under the same churn."""
    return on_node(lambda node, root: _measure(node, root, watchers, seconds))


def on_node(measure: Callable[[realkubelet.Node, Path], dict[str, Any]]) -> dict[str, Any]:
    """`measure` with a real kubelet running in a scratch root, or why it cannot run here."""
    reason = realkubelet.unavailable()
    if reason:
        return {"skipped": reason}
    root = Path(tempfile.mkdtemp(prefix="pk-", dir="/tmp"))
    try:
        with realkubelet.running(root) as node:
            return measure(node, root)
    except Unavailable as exc:  # go missing, the kubelet exiting at start (cgroups, ...)
        return {"skipped": str(exc)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _measure(node: realkubelet.Node, root: Path, watchers: tuple[int, ...], seconds: float) -> dict[str, Any]:
    assert node.proc is not None
    run_dir = root / "bridge"
    bridge = spawn(
        PODS_API,
        "serve",
        "--run-dir",
        str(run_dir),
        "--node-name",
        realkubelet.NODE,
        "--max-watchers",
        "5000",
        "--qps",
        "0",
        "--kubelet-socket",
        str(node.socket),
    )
    try:
        wait_line(bridge.stderr, "upstream synced")
        pids = {"kubelet": node.proc.pid, "bridge": bridge.pid}
        rows = []
        for count in watchers:
            for on, socket in (("kubelet", node.socket), ("bridge", run_dir / "pods-api.sock")):
                loader = _watchers(socket, count)
                try:
                    rows.append(
                        {"watchers": count, "on": on} | asyncio.run(_turn(node, socket, pids, seconds))
                    )
                finally:
                    loader.terminate()
                    loader.wait()
        return {"rows": rows, "seconds": seconds, "load_average": os.getloadavg()[0]}
    finally:
        bridge.terminate()
        bridge.wait()


def report(result: dict[str, Any]) -> list[str]:
    if "skipped" in result:
        return [f"kubelet: skipped: {result['skipped']}"]
    lines = [
        f"{result['seconds']:g} s of churn a turn; load average {result['load_average']:.1f}",
        f"{'watchers on':12} {'N':>4} {'events':>7} {'kubelet µs/event':>17} {'bridge µs/event':>16}"
        f" {'kubelet CPU':>12} {'bridge CPU':>11}",
    ]
    for r in result["rows"]:
        lines.append(
            f"{r['on']:12} {r['watchers']:4} {r['events']:7} {r['kubelet_cpu_us_per_event']:17.0f}"
            f" {r['bridge_cpu_us_per_event']:16.0f}"
            f" {r['kubelet_cpu_share']:11.1%} {r['bridge_cpu_share']:10.1%}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watchers", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    print("\n".join(report(run(tuple(args.watchers), args.seconds))))


if __name__ == "__main__":
    main()
