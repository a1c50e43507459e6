"""A real `pods-api serve` for the benchmarks, and what they read about a process: CPU seconds
and RSS from /proc (load on a shared machine moves wall-clock figures far more than these)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

PODS_API = str(Path(sys.executable).parent / "pods-api")
# Lists of thousands of pods exceed grpc's default 4 MB receive limit (README, "Large lists").
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 256 * 1024 * 1024)]
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of a server and of every process it started: those running (a decoding
    worker kept while files churn) and those it reaped (cutime, cstime). A server's figure must
    count the work it hands to its workers."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = sum(int(f) for f in fields[11:15]) / _TICK
    for child in _children(pid):
        # One that ended meanwhile is counted in the next reading's cutime.
        with contextlib.suppress(FileNotFoundError):
            total += tree_cpu_seconds(child)
    return total


def _children(pid: int) -> list[int]:
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):
            children += [int(c) for c in (task / "children").read_text().split()]
    return children


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    run: Path
    started: float  # time.monotonic() at spawn

    @property
    def target(self) -> str:
        return f"unix:{self.run / 'pods-api.sock'}"

    @property
    def http(self) -> str:
        return str(self.run / "pods-api-http.sock")


async def until_serving(target: str, patience: float = 600) -> None:
    """Until the health service says SERVING (the sources have synced)."""
    deadline = time.monotonic() + patience
    while True:
        try:
            async with grpc.aio.insecure_channel(target) as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                async for update in stub.Watch(health_pb2.HealthCheckRequest()):
                    if update.status == health_pb2.HealthCheckResponse.SERVING:
                        return
        except grpc.aio.AioRpcError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


@contextlib.contextmanager
def serving(run: Path, *args: str, prefix: tuple[str, ...] = ()) -> Iterator[Served]:
    """`prefix` runs the server under another command (bench/starve.py pins it to a busy CPU)."""
    command = [*prefix, PODS_API, "serve", "--run-dir", str(run), "--node-name", "bench", "--qps", "0", *args]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield Served(proc, run, time.monotonic())
    finally:
        proc.terminate()
        proc.wait()
