"""W1, a directory source under churn, in process: CPU per change, event-loop lag and delivery,
beside a floor measured in the same run.

A writer process rewrites manifest files (write aside, rename over: as editors and config tools
do) at a steady rate; each write carries its wall-clock time in the pod. Ours: the real
`ManifestDirSource` feeding a real `PodCache` with one watcher reading. Floor: watchfiles with
our debounce, reading only the changed file, parsing it with the same YAML parser (PyYAML's
CSafeLoader) and handing one shared bytes object per change to a queue: what any file source
must do. Reported: CPU of this process per change written (the writer is another process),
the share of writes that reached the watcher (writes to the same file within one debounce
batch coalesce, in the floor as in ours), delay from write to watcher, and the lag of a 1 ms
timer on the loop (how long the loop was kept from its other work: requests, watch frames).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import re
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import yaml
from watchfiles import awatch

from bench import pods
from pods_api.core.store.cache import PodCache
from pods_api.core.store.watch import EventType, WatchHub
from pods_api.sources.dirwatch import DEBOUNCE_MS, STEP_MS
from pods_api.sources.manifests import ManifestDirSource

_STAMP = re.compile(rb"generation-(\d+)")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def writer(
    directory: str, files: int, rate: float, seconds: float, start_at: float, kind: str = "manifest"
) -> None:
    """Rewrite files round-robin at `rate` per second; each pod carries time.time_ns()."""
    paths = sorted(Path(directory).glob("pod-*.yaml"))[:files]
    while time.time() < start_at:
        time.sleep(0.001)
    n = int(rate * seconds)
    for k in range(n):
        due = start_at + k / rate
        delay = due - time.time()
        if delay > 0:
            time.sleep(delay)
        i = k % len(paths)
        pods.rewrite(paths[i], i, time.time_ns(), kind=kind)


class Probe:
    """Lag of a 1 ms timer on the running loop."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            self.lags.append(time.perf_counter() - before - 0.001)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def _ours(directory: Path, seen: dict[int, float]) -> tuple[Any, asyncio.Event]:
    cache = PodCache(WatchHub(capacity=1_000_000, max_watchers=1))
    source = ManifestDirSource(directory, node_name="bench", resync=3600)
    sink = cache.source(source.name)
    ready = asyncio.Event()
    cache.on_readiness(lambda r: ready.set() if r else None)
    task = asyncio.create_task(source.run(sink))
    await ready.wait()
    _, watcher = cache.watch()

    async def read() -> None:
        while True:
            event = await watcher.get()
            if event.type is EventType.DELETED:
                continue  # an edited static pod's old uid goes: its stamp is an older write
            now = time.time()
            for stamp in _STAMP.findall(event.pod.json_bytes):
                seen.setdefault(int(stamp), now)

    reader = asyncio.create_task(read())
    return (task, reader), ready


async def _floor(directory: Path, seen: dict[int, float]) -> tuple[Any, asyncio.Event]:
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    ready = asyncio.Event()

    async def watch() -> None:
        async for batch in awatch(directory, debounce=DEBOUNCE_MS, step=STEP_MS, recursive=False):
            for _, path in batch:
                if Path(path).name.startswith("."):
                    continue
                try:
                    data = Path(path).read_bytes()  # noqa: ASYNC240 - the floor reads on the loop, as small reads do
                except OSError:
                    continue
                doc = yaml.load(data, Loader=yaml.CSafeLoader)
                queue.put_nowait(orjson.dumps(doc))  # one shared bytes object per change

    async def read() -> None:
        while True:
            frame = await queue.get()
            now = time.time()
            for stamp in _STAMP.findall(frame):
                seen.setdefault(int(stamp), now)

    tasks = (asyncio.create_task(watch()), asyncio.create_task(read()))
    await asyncio.sleep(0.2)  # the inotify watch is set up
    ready.set()
    return tasks, ready


async def _run(kind: str, directory: Path, files: int, rate: float, seconds: float) -> dict[str, float]:
    seen: dict[int, float] = {}
    probe = Probe()
    started = time.perf_counter()
    tasks, _ = await (_ours if kind == "ours" else _floor)(directory, seen)
    ready_seconds = time.perf_counter() - started
    probe.start()
    start_at = time.time() + 0.3
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=writer, args=(str(directory), files, rate, seconds, start_at))
    proc.start()
    await asyncio.sleep(max(0.0, start_at - time.time()))
    cpu = _cpu()
    await asyncio.to_thread(proc.join)
    await asyncio.sleep(1.0)  # the last batch: debounce, scan, delivery
    cpu = _cpu() - cpu
    await probe.stop()
    for task in tasks:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    writes = int(rate * seconds)
    stamps = [(t - s / 1e9) for s, t in seen.items() if s > 1e15]
    stamps.sort()
    lags = sorted(probe.lags)
    return {
        "ready_s": ready_seconds,
        "cpu_per_change_ms": cpu / writes * 1000,
        "cpu_share": cpu / (seconds + 1.0),
        "delivered": len(stamps) / writes,
        "p50_ms": stamps[len(stamps) // 2] * 1000 if stamps else float("nan"),
        "p99_ms": stamps[int(len(stamps) * 0.99)] * 1000 if stamps else float("nan"),
        "loop_lag_p99_ms": lags[int(len(lags) * 0.99)] * 1000 if lags else float("nan"),
        "loop_lag_max_ms": lags[-1] * 1000 if lags else float("nan"),
    }


def run(files: int, rate: float, seconds: float, repeats: int) -> dict[str, Any]:
    """Interleaved runs of ours and the floor, `repeats` each; the median of each figure."""
    runs: dict[str, list[dict[str, float]]] = {"ours": [], "floor": []}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "manifests"
        pods.write(directory, files)
        for _ in range(repeats):
            for kind in ("ours", "floor"):
                runs[kind].append(asyncio.run(_run(kind, directory, files, rate, seconds)))
    out: dict[str, Any] = {"files": files, "rate": rate, "seconds": seconds, "repeats": repeats}
    for kind, results in runs.items():
        out[kind] = {key: statistics.median(r[key] for r in results) for key in results[0]}
        out[kind]["spread_cpu_per_change_ms"] = [r["cpu_per_change_ms"] for r in results]
    return out
