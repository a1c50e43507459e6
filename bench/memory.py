"""W5, memory: RSS of a real `pods-api serve` idle, with 1,000 idle watchers, through cycles of
100 watchers connecting and leaving, and after churn once every watcher is gone; and the server
CPU of a List per pod. Floors from the same run: a bare process holding the same List bodies,
a bare grpc.aio server holding the same number of idle streams, and a bare grpc.aio server
returning the same List bytes (bench/floor_server.py).

Watchers run in other processes. A watcher that takes the full start reads every pod: 1,000 of
them at 5,000 pods would be 5 M messages, so only `FULL_STARTS // pods` of them do (all 1,000
at 110 pods); the rest watch through PodLookup with a label selector no pod matches, which
holds the same per-stream state (a grpc call, its task, a watcher) with a start of one frame.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc

from bench import pods
from bench.serve import wait_line
from bench.server import CHANNEL_OPTIONS, cpu_seconds, rss_mib, serving, until_serving
from bench.workloads import SYNC_FRAME, _lists
from pods_api.core.api.pb import podsapi_v1_pb2 as lookup_pb
from pods_api.core.store.cache import RING_BYTES
from pods_api.serve.heap import TRIM_EVERY

HERE = Path(__file__).resolve().parent
# Start frames the full-start watchers of one measurement read in all (see the docstring).
FULL_STARTS = 200_000
# Client processes the idle watchers are spread over (each with its own connection).
CLIENTS = 4
# Seconds to wait before reading a settled RSS: the server trims its heap every TRIM_EVERY.
SETTLE = TRIM_EVERY + 2.0
# The idle target's fixed part: 60 MB, in MiB; the target is 3x the pods' bytes + this.
TARGET_FIXED_MIB = 60e6 / 2**20
_LOOKUP_WATCH = f"/{lookup_pb.DESCRIPTOR.services_by_name['PodLookup'].full_name}/WatchPods"
_NO_POD = lookup_pb.WatchPodsRequest(label_selector="bench-idle-watcher=none").SerializeToString()

_HOLD_FLOOR = """
import sys, grpc, pathlib
bodies = [p.read_bytes() for p in pathlib.Path(sys.argv[1]).glob("*.bin")]
print(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1], flush=True)
"""

_STREAM_FLOOR = """
import asyncio, sys, grpc
async def main():
    forever = asyncio.Event()
    async def watch(request, context):
        yield b""
        await forever.wait()
    handler = grpc.unary_stream_rpc_method_handler(watch)
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("floor", {"Watch": handler})])
    server.add_insecure_port("unix:" + sys.argv[1])
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()
asyncio.run(main())
"""


async def _open(target: str, full: int, empty: int, method: str = "/v1alpha1.Pods/WatchPods") -> list[Any]:
    """Open `full` full-start and `empty` one-frame watches on `target`; return once all have
    read their start. The caller cancels them."""
    channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
    full_watch = channel.unary_stream(method)
    empty_watch = channel.unary_stream(_LOOKUP_WATCH)
    calls = [full_watch(b"") for _ in range(full)] + [empty_watch(_NO_POD) for _ in range(empty)]

    async def started(call: Any) -> None:
        async for frame in call:
            if frame == SYNC_FRAME or method != "/v1alpha1.Pods/WatchPods":
                return

    await asyncio.gather(*(started(c) for c in calls))
    return [channel, *calls]


async def _close(opened: list[Any]) -> None:
    channel, *calls = opened
    for call in calls:
        call.cancel()
    await channel.close()


async def _cycle(target: str, full: int, empty: int) -> None:
    """Watchers that connect, read their start, and leave."""
    await _close(await _open(target, full, empty))


def _client(target: str, full: int, empty: int, method: str, opened: Any, release: Any) -> None:
    """A client process: open the watches, say so, hold them until released, close them."""

    async def run() -> None:
        held = await _open(target, full, empty, method)
        opened.put(len(held) - 1)
        await asyncio.to_thread(release.wait)
        await _close(held)

    asyncio.run(run())


def _idle_watchers(
    target: str, full: int, empty: int, pid: int, method: str = "/v1alpha1.Pods/WatchPods"
) -> float:
    """RSS of `pid` (MiB) while `full` + `empty` watches from CLIENTS processes are open."""
    ctx = multiprocessing.get_context("spawn")
    opened, release = ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(
            target=_client,
            args=(target, _share(full, i), _share(empty, i), method, opened, release),
        )
        for i in range(CLIENTS)
    ]
    for proc in procs:
        proc.start()
    for _ in procs:
        opened.get(timeout=900)
    time.sleep(1.0)
    rss = rss_mib(pid)
    release.set()
    for proc in procs:
        proc.join()
    return rss


def _share(total: int, i: int) -> int:
    return total // CLIENTS + (1 if i < total % CLIENTS else 0)


def _stream_floor(tmp: Path, count: int) -> float:
    """MiB that `count` idle streams add to a bare grpc.aio server."""
    sock = tmp / "stream-floor.sock"
    proc = subprocess.Popen(
        [sys.executable, "-c", _STREAM_FLOOR, str(sock)], stdout=subprocess.PIPE, text=True
    )
    try:
        wait_line(proc.stdout, "ready")
        before = rss_mib(proc.pid)
        return _idle_watchers(f"unix:{sock}", count, 0, proc.pid, method="/floor/Watch") - before
    finally:
        proc.terminate()
        proc.wait()


async def _list_cpu(target: str, pid: int, calls: int) -> float:
    """Server CPU seconds per ListPods (every call after the first)."""
    async with grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) as channel:
        call = channel.unary_unary("/v1alpha1.Pods/ListPods")
        await call(b"")
        before = cpu_seconds(pid)
        for _ in range(calls):
            await call(b"")
        return (cpu_seconds(pid) - before) / calls


def _list_floor_cpu(tmp: Path, listed: bytes, calls: int) -> float:
    """The same per call from a bare grpc.aio server returning `listed` (bench/floor_server.py)."""
    for name in ("grpc-list", "grpc-get", "http-list", "http-get"):
        (tmp / f"{name}.bin").write_bytes(listed if name == "grpc-list" else b"")
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "floor_server.py"), str(tmp)], stdout=subprocess.PIPE, text=True
    )
    try:
        wait_line(proc.stdout, "ready")
        return asyncio.run(_list_cpu(f"unix:{tmp / 'floor.sock'}", proc.pid, calls))
    finally:
        proc.terminate()
        proc.wait()


def _churn(directory: Path, count: int, writes: int, rate: float) -> None:
    """Rewrite fixture files round-robin at `rate` per second, `writes` in all."""
    start = time.monotonic()
    for k in range(writes):
        delay = start + k / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        i = k % count
        pods.rewrite(directory / f"pod-{i:05d}.json", i, k + 1, kind="fixture", fmt="json")


def _reading_watchers(target: str, count: int, done: threading.Event) -> None:
    """`count` watchers that read every event until `done`, then leave."""

    async def run() -> None:
        async with grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) as channel:
            watch = channel.unary_stream("/v1alpha1.Pods/WatchPods")
            calls = [watch(b"") for _ in range(count)]

            async def read(call: Any) -> None:
                async for _ in call:
                    pass

            tasks = [asyncio.create_task(read(c)) for c in calls]
            await asyncio.to_thread(done.wait)
            for call in calls:
                call.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(run())


def run(
    counts: list[int],
    watchers: int,
    cycles: int,
    churn_writes: int,
    churn_rate: float,
    settle: float = SETTLE,
) -> list[dict[str, Any]]:
    """Per pod count: RSS 1 s after a gRPC and an HTTP List, then settled (idle); with
    `watchers` idle watchers; settled after they left; after each of `cycles` cycles of 100
    watchers connecting, reading their start and leaving; settled after `churn_writes` file
    rewrites at `churn_rate` per second read by 20 watchers that then leave. And the server CPU
    per List, against a bare grpc.aio server returning the same bytes. Settled: `settle` seconds
    later, past the server's next heap trim."""
    rows = []
    for count in counts:
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            directory = tmp / "fixtures"
            pods.write(directory, count, kind="fixture", fmt="json")
            args = ("--fixtures", str(directory), "--max-watchers", str(watchers + 100))
            with serving(tmp / "run", *args) as s:
                pid = s.proc.pid
                asyncio.run(until_serving(s.target))
                listed, body = asyncio.run(_lists(s.target, s.http))
                time.sleep(1.0)
                after_lists = rss_mib(pid)
                time.sleep(settle)
                idle = rss_mib(pid)
                list_cpu = asyncio.run(_list_cpu(s.target, pid, 200))
                full = min(watchers, FULL_STARTS // count)
                with_watchers = _idle_watchers(s.target, full, watchers - full, pid)
                time.sleep(settle)
                after_watchers = rss_mib(pid)
                per_cycle = []
                cycle_full = min(100, FULL_STARTS // 10 // count)
                for _ in range(cycles):
                    asyncio.run(_cycle(s.target, cycle_full, 100 - cycle_full))
                    time.sleep(0.3)
                    per_cycle.append(rss_mib(pid))
                done = threading.Event()
                reader = threading.Thread(target=_reading_watchers, args=(s.target, 20, done))
                reader.start()
                time.sleep(1.0)
                _churn(directory, count, churn_writes, churn_rate)
                time.sleep(2.0)  # the source's debounce and the last deliveries
                during_churn = rss_mib(pid)
                done.set()
                reader.join()
                time.sleep(settle)
                after_churn = rss_mib(pid)
            (tmp / "a.bin").write_bytes(listed)
            (tmp / "b.bin").write_bytes(body)
            holder = subprocess.run(
                [sys.executable, "-c", _HOLD_FLOOR, str(tmp)], capture_output=True, text=True, check=True
            )
            (tmp / "a.bin").unlink()
            (tmp / "b.bin").unlink()
            list_floor = _list_floor_cpu(tmp, listed, 200)
            stream_floor = _stream_floor(tmp, watchers)
        serialized = (len(listed) + len(body)) / 2**20
        half = cycles // 2
        rows.append(
            {
                "pods": count,
                "serialized_mib": serialized,
                "target_mib": 3 * serialized + TARGET_FIXED_MIB,
                "rss_after_lists_mib": after_lists,
                "idle_rss_mib": idle,
                "floor_rss_mib": int(holder.stdout) / 1024,
                "watchers": watchers,
                "full_start_watchers": full,
                "rss_with_watchers_mib": with_watchers,
                "per_watcher_kib": (with_watchers - idle) * 1024 / watchers,
                "floor_per_stream_kib": stream_floor * 1024 / watchers,
                "rss_after_watchers_mib": after_watchers,
                "cycle_rss_mib": per_cycle,
                # The heap is trimmed between cycles: compare peaks, not the last readings.
                "cycle_growth_mib": max(per_cycle[half:]) - max(per_cycle[:half]) if cycles >= 2 else 0.0,
                "churn_writes": churn_writes,
                "rss_during_churn_mib": during_churn,
                "rss_after_churn_mib": after_churn,
                "after_churn_target_mib": 1.2 * idle + RING_BYTES / 2**20,
                "list_cpu_us_per_pod": list_cpu / count * 1e6,
                "list_floor_cpu_us_per_pod": list_floor / count * 1e6,
            }
        )
    return rows
