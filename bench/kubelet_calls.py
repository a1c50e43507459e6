"""CPU per ListPods and GetPod call: the real kubelet v1.37.2 serving its Pods API, pods-api's
bridge beside it serving the same pods from its cache, and a bare grpc.aio server returning the
kubelet's own response bytes (bench/floor_server.py): the kubelet is the node's anchor, the bare
server the floor any Python gRPC server pays.

The node runs PODS static pods (tests/support/realkubelet.py). Calls are paced at RATE a second,
under the kubelet's 100 qps limit, one at a time from this process. A process's CPU per call is
its CPU over a window of calls less its CPU over an idle window as long (the kubelet works
without being asked: its sync loop, PLEG, housekeeping), windows taking turns REPEATS times;
the median is reported.

    python bench/kubelet_calls.py [--pods 8] [--seconds 10] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc

if not __package__:  # run as a script: the repository's root holds the bench package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.bridge import cpu_seconds, spawn, wait_line
from bench.kubelet import on_node
from bench.serve import PODS_API

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "support"))
import realkubelet  # noqa: E402  (tests/support is on the path only from here)

LIST = "/v1alpha1.Pods/ListPods"
GET = "/v1alpha1.Pods/GetPod"
# Calls a second: below the kubelet's 100 qps / burst 10, so that no call is refused.
RATE = 50.0
# Seconds for the node's static pods to be running.
PATIENCE = 180.0


def _get_request(uid: str) -> bytes:
    """GetPodRequest{pod_uid: uid}: field 1, length-delimited."""
    raw = uid.encode()
    return b"\x0a" + bytes([len(raw)]) + raw


async def _window(
    target: str, method: str, request: bytes, seconds: float, pid: int, busy: bool
) -> tuple[float, int, int]:
    """The process's CPU seconds over `seconds`, the calls answered and the calls refused,
    calling `method` at RATE when busy."""
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_unary(method)
        await call(request)  # the connection, before the window
        before, started, calls, refused = cpu_seconds(pid), time.monotonic(), 0, 0
        while (now := time.monotonic() - started) < seconds:
            if not busy:
                await asyncio.sleep(seconds - now)
                continue
            try:
                await call(request)
                calls += 1
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
                refused += 1
            await asyncio.sleep(max(0.0, (calls + refused) / RATE - (time.monotonic() - started)))
        return cpu_seconds(pid) - before, calls, refused


def _per_call(
    target: str, method: str, request: bytes, pid: int, seconds: float, repeats: int
) -> tuple[float, int]:
    """Median over `repeats` of (busy CPU - idle CPU) / calls answered, in µs; calls refused."""
    samples, refusals = [], 0
    for _ in range(repeats):
        idle, _, _ = asyncio.run(_window(target, method, request, seconds, pid, busy=False))
        busy, calls, refused = asyncio.run(_window(target, method, request, seconds, pid, busy=True))
        samples.append((busy - idle) / max(calls, 1) * 1e6)
        refusals += refused
    return statistics.median(samples), refusals


def run(pods: int = 8, seconds: float = 10.0, repeats: int = 3) -> dict[str, Any]:
    return on_node(lambda node, root: _measure(node, root, pods, seconds, repeats))


def _start_pods(node: realkubelet.Node, pods: int) -> str:
    """PODS sleepers running; one of their UIDs."""
    for i in range(pods):
        node.put(f"calls-{i}.yaml", realkubelet.static_pod(f"calls-{i}", ["sleep", "3600"]))
    names = {realkubelet.static_name(f"calls-{i}") for i in range(pods)}

    def all_running(listed: dict[str, Any]) -> bool:
        return names <= {n for n, p in listed.items() if p.get("status", {}).get("phase") == "Running"}

    listed = node.wait_pods(all_running, f"{pods} pods running", timeout=PATIENCE)
    return str(listed[realkubelet.static_name("calls-0")]["metadata"]["uid"])


def _measure(node: realkubelet.Node, root: Path, pods: int, seconds: float, repeats: int) -> dict[str, Any]:
    assert node.proc is not None
    uid = _start_pods(node, pods)
    bridge = spawn(
        PODS_API, "serve", "--run-dir", str(root / "bridge"), "--node-name", realkubelet.NODE,
        "--qps", "0", "--kubelet-socket", str(node.socket),
    )  # fmt: skip
    floor_dir = root / "floor"
    floor_dir.mkdir()
    with grpc.insecure_channel(node.target) as channel:
        (floor_dir / "gRPC-List.bin").write_bytes(channel.unary_unary(LIST)(b""))
        (floor_dir / "gRPC-Get.bin").write_bytes(channel.unary_unary(GET)(_get_request(uid)))
    floor = subprocess.Popen(
        [sys.executable, str(HERE / "floor_server.py"), str(floor_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        wait_line(bridge.stderr, "upstream synced")
        wait_line(floor.stdout, "ready")
        targets = {
            "kubelet": (node.target, node.proc.pid),
            "pods-api": (f"unix:{root / 'bridge' / 'pods-api.sock'}", bridge.pid),
            "bare grpc.aio": (f"unix:{floor_dir / 'floor.sock'}", floor.pid),
        }
        rows = []
        for method, request in ((LIST, b""), (GET, _get_request(uid))):
            for name, (target, pid) in targets.items():
                us, refused = _per_call(target, method, request, pid, seconds, repeats)
                call = method.rsplit("/", 1)[1]
                rows.append({"call": call, "server": name, "cpu_us_per_call": us, "refused": refused})
        return {"rows": rows, "pods": pods, "seconds": seconds, "repeats": repeats}
    finally:
        for proc in (bridge, floor):
            proc.terminate()
            proc.wait()
        for i in range(pods):
            node.remove(f"calls-{i}.yaml")


def report(result: dict[str, Any]) -> list[str]:
    if "skipped" in result:
        return [f"kubelet calls: skipped: {result['skipped']}"]
    lines = [
        f"{result['pods']} pods; {RATE:g} calls/s for {result['seconds']:g} s a window, "
        f"median of {result['repeats']}",
        f"{'call':9} {'server':14} {'CPU µs/call':>12} {'vs kubelet':>10} {'vs bare':>8} {'refused':>8}",
    ]
    by = {(r["call"], r["server"]): r["cpu_us_per_call"] for r in result["rows"]}
    for r in result["rows"]:
        us = r["cpu_us_per_call"]
        kubelet, bare = by[(r["call"], "kubelet")], by[(r["call"], "bare grpc.aio")]
        ratios = f"{us / kubelet:10.2f} {us / bare:8.2f}"
        lines.append(f"{r['call']:9} {r['server']:14} {us:12.0f} {ratios} {r['refused']:8}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("\n".join(report(run(args.pods, args.seconds, args.repeats))))


if __name__ == "__main__":
    main()
