"""W4, the watch fan-out: a real `pods-api serve --fixtures` and the floor (bench/fanout_floor.py:
watchfiles with our debounce, one shared frame per change, bare grpc.aio and bare Starlette
watchers), each in its own process, each fed by a writer rewriting its own copy of the fixture
files, each watched by the same watcher processes (one per surface and side).

Each write carries its wall-clock time (`generation-<time_ns>` in one env value), so a watcher
knows which write each frame is, and when it was made. Per phase (a rate for some seconds):

- every watcher's set of write stamps received: lost = writes a watcher still open at the end
  never got (after the last write, the collector waits until every open watcher has every
  write, however late, while writes keep arriving), duplicated = a stamp received twice by one
  watcher; unpublished = writes no watcher got at all;
- cut off = a watch that ended under the watcher (gRPC: its status code; SSE: its ERROR event or
  the connection's end), whatever the reason;
- delay from write to client, p50 and p99 over every (watcher, write);
- CPU seconds of the server process (ours: pods-api; floor: the floor) and of the watcher
  processes, from /proc, per delivered frame. The watcher processes compete for the same cores:
  their CPU bounds what the machine can show.

Ours and the floor are both up for the whole run and take turns (interleaved phases); between
rounds every watcher cut off is opened again, so each round starts with all of them.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import multiprocessing
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import grpc
import httpx

from bench import pods
from bench import starve as starve_module
from bench.serve import HERE, wait_line
from bench.server import CHANNEL_OPTIONS, cpu_seconds, serving, tree_cpu_seconds, until_serving
from pods_api.core.api.pb import pods_v1alpha1_pb2 as api

# time.time_ns() has 19 digits until 2286; nothing else in a pod does.
_STAMP = re.compile(rb"generation-(\d{19})")
_SYNC_FRAME = api.WatchPodsEvent(type="INITIAL_SYNC_COMPLETE").SerializeToString()
_WATCH = "/v1alpha1.Pods/WatchPods"
# Safety nets only: each is waited on as an event and ends far sooner on a working run.
SYNC_PATIENCE = 300.0  # every watcher has its start (ours sends each 1,000 pods first)
# After the last write, the collector waits until every open watcher has every write, however
# late, as long as writes keep arriving: it gives up once none has for DRAIN_STALL seconds (the
# rest are lost), or after DRAIN_CAP seconds in all (so a run ends in bounded time).
DRAIN_STALL = 5.0
DRAIN_CAP = 90.0
# Ours' histogram of the time from the cache publishing an event to a watcher's stream taking
# it (core/policy/metrics.py): the part of the delay that is the fan-out's, not the source's.
_TAKEN = re.compile(rb'^pods_api_watch_event_delay_seconds_bucket\{le="([^"]+)"\} (\S+)$', re.MULTILINE)
# Lag of this timer in a watcher process says whether the client itself kept up.
_PROBE_S = 0.01


# -- the watcher processes -----------------------------------------------------------------------


@dataclass
class _Watchers:
    """What `count` watchers of one process have received, for the phase under way."""

    count: int
    arrivals: list[dict[int, int]] = field(default_factory=list)  # per watcher: stamp -> time_ns
    synced: set[int] = field(default_factory=set)
    ended: dict[int, str] = field(default_factory=dict)  # watcher -> why its watch ended
    duplicates: int = 0
    expected: frozenset[int] = frozenset()
    owed: dict[int, int] = field(default_factory=dict)  # open watcher -> expected writes missing
    progress: int = 0  # writes received, for telling a slow drain from a stalled one
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    lags: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.arrivals = [{} for _ in range(self.count)]

    def arrive(self, i: int, stamp: int, now: int) -> None:
        seen = self.arrivals[i]
        if stamp in seen:
            self.duplicates += 1
            return
        seen[stamp] = now
        # Any write counts as progress, not only one still owed: a watcher that coalesces
        # nothing gets the versions before each file's last one first, and its drain then
        # looked stalled while it was still receiving (W7's SSE watchers, at 0.18 of a core).
        self.progress += 1
        if stamp in self.expected and i in self.owed:
            self.owed[i] -= 1
            if not self.owed[i]:
                del self.owed[i]
                self.changed.set()

    def sync(self, i: int) -> None:
        self.synced.add(i)
        self.changed.set()

    def end(self, i: int, why: str) -> None:
        self.ended[i] = why
        self.synced.discard(i)
        self.owed.pop(i, None)
        self.changed.set()

    async def until(self, done: Any, patience: float) -> None:
        deadline = time.monotonic() + patience
        while not done():
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), max(0.0, deadline - time.monotonic()))
            if time.monotonic() >= deadline:
                return

    async def drain(self) -> None:
        """Until no open watcher is owed a write, or none has arrived for DRAIN_STALL seconds."""
        deadline = time.monotonic() + DRAIN_CAP
        last, quiet_since = self.progress, time.monotonic()
        while self.owed and time.monotonic() < deadline:
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 1.0)  # a watcher done, or one more second
            if self.progress != last:
                last, quiet_since = self.progress, time.monotonic()
            elif time.monotonic() - quiet_since >= DRAIN_STALL:
                return

    async def collect(
        self, stamps: list[int], final: list[int] | None = None, stopped_ns: int = 0
    ) -> dict[str, Any]:
        """Once every open watcher has every write in `stamps` (or they stopped coming): the
        phase's figures. Then forget the phase. With `final` (each file's last write), a watcher
        is owed only those: one that coalesces reaches the current state without every version;
        `converge_s` is when each open watcher had them all, after `stopped_ns` (the last write)."""
        owed_of = frozenset(final) if final is not None else frozenset(stamps)
        self.expected = owed_of
        self.owed = {}
        for i in self.synced:
            missing = len(owed_of) - sum(1 for s in self.arrivals[i] if s in owed_of)
            if missing:
                self.owed[i] = missing
        await self.drain()
        self.expected = frozenset(stamps)
        converge = [
            max(0, max(self.arrivals[i][s] for s in owed_of) - stopped_ns) / 1e9
            for i in self.synced
            if final is not None and owed_of and all(s in self.arrivals[i] for s in owed_of)
        ]
        delays = array.array("d")
        lost = 0
        for i in range(self.count):
            got = self.arrivals[i]
            delays.extend((got[s] - s) / 1e6 for s in self.expected if s in got)
            if i in self.synced:
                lost += sum(1 for s in self.expected if s not in got)
        reached = set().union(*(set(a) for a in self.arrivals)) & self.expected
        # Whether a write was published at all only shows while some watcher here is open.
        unpublished = len(self.expected) - len(reached) if self.synced else None
        result = {
            "converge_s": converge,
            "delays_ms": delays.tobytes(),
            "open": len(self.synced),
            "cut_off": dict(self.ended),
            "lost": lost,
            "unpublished": unpublished,
            "duplicates": self.duplicates,
            "client_lag_max_ms": max(self.lags, default=0.0) * 1000,
        }
        self.arrivals = [{} for _ in range(self.count)]
        self.expected, self.duplicates, self.lags, self.ended = frozenset(), 0, [], {}
        return result


async def _grpc_watch(w: _Watchers, i: int, target: str) -> None:
    async with grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) as channel:
        try:
            synced = False
            async for frame in channel.unary_stream(_WATCH)(b""):
                if not synced:
                    if frame == _SYNC_FRAME:
                        synced = True
                        w.sync(i)
                    continue
                found = _STAMP.search(frame)
                if found:
                    w.arrive(i, int(found[1]), time.time_ns())
            w.end(i, "OK")
        except grpc.aio.AioRpcError as exc:
            w.end(i, exc.code().name)


async def _sse_watch(w: _Watchers, i: int, client: httpx.AsyncClient) -> None:
    """Events are split at their blank line, from the raw bytes (the same parse for ours' one
    `data:` line and the floor's YAML over several)."""
    async with client.stream("GET", "/v1/pods", params={"watch": "true"}) as response:
        if response.status_code != 200:
            w.end(i, f"HTTP {response.status_code}")
            return
        buffer = bytearray()
        synced = False
        async for chunk in response.aiter_raw():
            now = time.time_ns()
            buffer += chunk
            start = 0
            while (end := buffer.find(b"\n\n", start)) >= 0:
                event = bytes(buffer[start:end])
                start = end + 2
                if b"event: ERROR" in event:
                    code = re.search(rb'"status":\s*"(\w+)"', event)  # gateway/http/errors.py's body
                    w.end(i, f"ERROR {code[1].decode() if code else '?'}")
                    return
                if not synced:
                    if b"event: INITIAL_SYNC_COMPLETE" in event:
                        synced = True
                        w.sync(i)
                    continue
                found = _STAMP.search(event)
                if found:
                    w.arrive(i, int(found[1]), now)
            del buffer[:start]
        w.end(i, "closed")


async def _probe(w: _Watchers) -> None:
    while True:
        before = time.perf_counter()
        await asyncio.sleep(_PROBE_S)
        w.lags.append(time.perf_counter() - before - _PROBE_S)


async def _watch_main(kind: str, target: str, count: int, conn: Connection) -> None:
    w = _Watchers(count)
    loop = asyncio.get_running_loop()
    tasks: dict[int, asyncio.Task[None]] = {}
    limits = httpx.Limits(max_connections=count + 1, max_keepalive_connections=0)
    transport = httpx.AsyncHTTPTransport(uds=target if kind == "sse" else None, limits=limits)
    probe = asyncio.create_task(_probe(w))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=None) as client:
        while True:
            command, *args = await loop.run_in_executor(None, conn.recv)
            if command == "open":  # every watcher not open: open it, and wait for its start
                for i in range(count):
                    if i not in tasks or tasks[i].done():
                        w.ended.pop(i, None)
                        w.arrivals[i] = {}
                        coro = _grpc_watch(w, i, target) if kind == "grpc" else _sse_watch(w, i, client)
                        tasks[i] = asyncio.create_task(coro)
                await w.until(lambda: len(w.synced) + len(w.ended) >= count, SYNC_PATIENCE)
                conn.send({"open": len(w.synced), "failed": dict(w.ended)})
                w.ended.clear()
                w.lags.clear()
            elif command == "collect":
                # Sent from a thread: a result larger than the pipe blocks until the parent reads
                # it, and the parent reads the other watcher process first. Sent from the loop,
                # it stopped this process reading its streams meanwhile, for up to a minute
                # under W7, and ours' send timeout then rightly cut off all 50 SSE watchers.
                await loop.run_in_executor(None, conn.send, await w.collect(*args))
            else:
                break
        probe.cancel()
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(probe, *tasks.values(), return_exceptions=True)


def _watch_process(kind: str, target: str, count: int, conn: Connection) -> None:
    asyncio.run(_watch_main(kind, target, count, conn))


# -- the writer ----------------------------------------------------------------------------------


def _templates(directory: Path) -> list[tuple[Path, bytes, bytes]]:
    """Each file's bytes around its one `generation-0`: a write is then a join, so the writer
    (a thread of this process) costs next to nothing, whatever the rate."""
    out = []
    for path in sorted(directory.glob("pod-*")):
        data = path.read_bytes()
        assert data.count(b"generation-0") == 1, path
        head, tail = data.split(b"generation-0")
        out.append((path, head, tail))
    return out


def _write(
    templates: list[tuple[Path, bytes, bytes]], rate: float, seconds: float
) -> tuple[list[int], float]:
    """Rewrite files round-robin at `rate` per second (write aside, rename over: as editors and
    config tools do); the stamps written and the seconds it took."""
    stamps: list[int] = []
    started = time.monotonic()
    for k in range(int(rate * seconds)):
        delay = started + k / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        path, head, tail = templates[k % len(templates)]
        stamp = time.time_ns()
        aside = path.with_name("." + path.name + ".tmp")
        aside.write_bytes(b"%sgeneration-%d%s" % (head, stamp, tail))
        aside.rename(path)
        stamps.append(stamp)
    return stamps, time.monotonic() - started


# -- a side: a server, its files, its watcher processes ------------------------------------------


@dataclass
class _Side:
    name: str
    server_pid: int
    directory: Path
    templates: list[tuple[Path, bytes, bytes]]
    watchers: dict[str, tuple[multiprocessing.process.BaseProcess, Connection]]
    metrics: str | None = None  # ours' /metrics URL

    def taken(self) -> dict[str, float]:
        """Ours' publish-to-taken histogram: events counted at or under each bound (seconds)."""
        if self.metrics is None:
            return {}
        text = httpx.get(self.metrics).content
        return {le.decode(): float(n) for le, n in _TAKEN.findall(text)}

    def ask(self, *command: Any) -> dict[str, Any]:
        for _, conn in self.watchers.values():
            conn.send(command)
        return {kind: conn.recv() for kind, (_, conn) in self.watchers.items()}

    def client_cpu(self) -> float:
        return sum(cpu_seconds(proc.pid) for proc, _ in self.watchers.values() if proc.pid is not None)

    def open(self) -> dict[str, Any]:
        return self.ask("open")

    def coalesced(self) -> float:
        """Ours' count of events coalesced for watchers that were behind (core/store/watch.py)."""
        if self.metrics is None:
            return float("nan")
        found = re.search(
            rb"^pods_api_watch_events_coalesced_total (\S+)$", httpx.get(self.metrics).content, re.M
        )
        return float(found[1]) if found else float("nan")

    def phase(self, rate: float, seconds: float, converge: bool = False) -> dict[str, Any]:
        """Writes at `rate` for `seconds`, then every open watcher's figures once they have them.
        With `converge`, a watcher is waited for only until it has each file's last write (the
        current state), and how long after the last write that took is measured."""
        opened = self.open()
        taken = self.taken()
        coalesced = self.coalesced()
        server, client, started = tree_cpu_seconds(self.server_pid), self.client_cpu(), time.monotonic()
        box: list[tuple[list[int], float]] = []
        writer = threading.Thread(target=lambda: box.append(_write(self.templates, rate, seconds)))
        writer.start()
        writer.join()
        stamps, took = box[0]
        stopped_ns = time.time_ns()
        final = stamps[-len(self.templates) :] if converge else None
        got = self.ask("collect", stamps, final, stopped_ns)
        server = tree_cpu_seconds(self.server_pid) - server
        client = self.client_cpu() - client
        wall = time.monotonic() - started
        out = _figures(self.name, rate, seconds, took, wall, len(stamps), opened, got, server, client)
        out["coalesced"] = self.coalesced() - coalesced
        if converge:
            times = sorted(t for r in got.values() for t in r["converge_s"])
            out["converged"] = len(times)
            out["converge_p50_s"] = _percentile(times, 0.5)
            out["converge_max_s"] = times[-1] if times else float("nan")
        if taken:
            after = self.taken()
            counts = {le: after[le] - taken.get(le, 0.0) for le in after}
            every = counts.pop("+Inf") or float("nan")
            # Of the events our streams took in the phase, the share taken later than each bound
            # after the cache published them (the rest of the delay is the source's, or the send's).
            out["taken_later_than"] = {le: 1 - n / every for le, n in counts.items() if le in _BOUNDS}
        return out


_BOUNDS = ("0.01", "0.1", "0.5", "1.0")


def _percentile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(len(values) * q))] if values else float("nan")


def _figures(
    name: str,
    rate: float,
    seconds: float,
    took: float,
    wall: float,
    writes: int,
    opened: dict[str, Any],
    got: dict[str, Any],
    server_cpu: float,
    client_cpu: float,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "side": name,
        "rate": rate,
        "seconds": seconds,
        "writes": writes,
        "write_rate": writes / took if took else float("nan"),
        "watchers": sum(o["open"] for o in opened.values()),
    }
    every: list[float] = []
    for kind, r in got.items():
        delays = sorted(array.array("d", r["delays_ms"]))
        every.extend(delays)
        out[f"{kind}_p50_ms"] = _percentile(delays, 0.5)
        out[f"{kind}_p99_ms"] = _percentile(delays, 0.99)
        out[f"{kind}_cut_off"] = len(r["cut_off"])
        out[f"{kind}_lost"] = r["lost"]
        out[f"{kind}_converged"] = len(r["converge_s"])
    every.sort()
    frames = len(every)
    cut: dict[str, int] = {}
    for r in got.values():
        for why in r["cut_off"].values():
            cut[why] = cut.get(why, 0) + 1
    out.update(
        {
            "cut_off": sum(cut.values()),
            "cut_off_why": cut,
            "lost": sum(r["lost"] for r in got.values()),
            # A write no watcher of any process received: the source never published it.
            "unpublished": min(
                (r["unpublished"] for r in got.values() if r["unpublished"] is not None), default=None
            ),
            "duplicates": sum(r["duplicates"] for r in got.values()),
            "frames": frames,
            "frames_per_s": frames / wall,
            "p50_ms": _percentile(every, 0.5),
            "p99_ms": _percentile(every, 0.99),
            "server_cpu_s": server_cpu,
            "server_cpu_share": server_cpu / wall,
            "server_cpu_us_per_frame": server_cpu / frames * 1e6 if frames else float("nan"),
            "client_cpu_share": client_cpu / wall,
            "client_cpu_us_per_frame": client_cpu / frames * 1e6 if frames else float("nan"),
            "client_lag_max_ms": max(r["client_lag_max_ms"] for r in got.values()),
        }
    )
    return out


@contextlib.contextmanager
def _sides(
    count: int, grpc_watchers: int, sse_watchers: int, fmt: str, starve: int = 0
) -> Iterator[dict[str, _Side]]:
    """Ours and the floor, up together, each with its own copy of `count` fixture files (`fmt`:
    yaml or json) and its own watcher processes, all watches open and past their start. With
    `starve`, both servers run pinned to one CPU beside that many busy loops (bench/starve.py)."""
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        pinned = stack.enter_context(starve_module.busy_cpu(starve))
        root = Path(tmp)
        pods.write(root / "ours", count, kind="fixture", fmt=fmt)
        shutil.copytree(root / "ours", root / "floor")
        with socket.socket() as probe:  # a free loopback port for ours' /metrics
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        metrics = ("--metrics-listen", f"127.0.0.1:{port}")
        ours = stack.enter_context(
            serving(
                root / "run",
                "--fixtures",
                str(root / "ours"),
                "--max-watchers",
                "2000",
                *metrics,
                prefix=pinned,
            )
        )
        (root / "floor-run").mkdir()
        floor = subprocess.Popen(
            [
                *pinned,
                sys.executable,
                str(HERE / "fanout_floor.py"),
                str(root / "floor"),
                str(root / "floor-run"),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        stack.callback(floor.wait)
        stack.callback(floor.terminate)
        wait_line(floor.stdout, "ready")
        asyncio.run(until_serving(ours.target))
        targets = {
            "ours": (ours.proc.pid, ours.target, ours.http),
            "floor": (
                floor.pid,
                f"unix:{root / 'floor-run' / 'floor.sock'}",
                str(root / "floor-run" / "floor-http.sock"),
            ),
        }
        sides = {}
        for name, (pid, grpc_at, http_at) in targets.items():
            watchers: dict[str, tuple[multiprocessing.process.BaseProcess, Connection]] = {}
            for kind, at, n in (("grpc", grpc_at, grpc_watchers), ("sse", http_at, sse_watchers)):
                mine, theirs = ctx.Pipe()
                proc = ctx.Process(target=_watch_process, args=(kind, at, n, theirs), daemon=True)
                proc.start()
                stack.callback(_stop, proc, mine)
                watchers[kind] = (proc, mine)
            url = f"http://127.0.0.1:{port}/metrics" if name == "ours" else None
            sides[name] = _Side(name, pid, root / name, _templates(root / name), watchers, url)
        for side in sides.values():
            failed = side.open()
            if any(f["failed"] for f in failed.values()):
                raise RuntimeError(f"{side.name}: watches failed to start: {failed}")
        yield sides


def _stop(proc: multiprocessing.process.BaseProcess, conn: Connection) -> None:
    with contextlib.suppress(OSError):
        conn.send(("stop",))
    proc.join(10)
    if proc.is_alive():
        proc.kill()
        proc.join()


# -- the workloads -------------------------------------------------------------------------------


_MEDIANS = (
    "cut_off",
    "lost",
    "unpublished",
    "duplicates",
    "frames_per_s",
    "p50_ms",
    "p99_ms",
    "grpc_p99_ms",
    "sse_p99_ms",
    "server_cpu_share",
    "server_cpu_us_per_frame",
    "client_cpu_share",
    "client_cpu_us_per_frame",
)


def run(
    count: int,
    grpc_watchers: int,
    sse_watchers: int,
    rate: float,
    seconds: float,
    repeats: int,
    fmt: str = "yaml",
) -> dict[str, Any]:
    """W4 as BENCHMARKS.md states it: `repeats` rounds, ours then the floor, each at `rate` for
    `seconds`; the median of each figure per side, and every phase's figures."""
    phases: dict[str, list[dict[str, Any]]] = {"ours": [], "floor": []}
    with _sides(count, grpc_watchers, sse_watchers, fmt) as sides:
        for _ in range(repeats):
            for name, side in sides.items():
                phases[name].append(side.phase(rate, seconds))
    out: dict[str, Any] = {
        "pods": count,
        "grpc_watchers": grpc_watchers,
        "sse_watchers": sse_watchers,
        "rate": rate,
        "seconds": seconds,
        "repeats": repeats,
        "format": fmt,
    }
    for name, results in phases.items():
        out[name] = {key: _median([r[key] for r in results]) for key in _MEDIANS}
        out[name]["phases"] = results
    return out


_STARVED = (
    "cut_off",
    "frames",
    "frames_per_s",
    "lost",
    "coalesced",
    "converged",
    "converge_p50_s",
    "converge_max_s",
    "server_cpu_share",
    "server_cpu_us_per_frame",
    "watchers",
)


def starved(
    count: int,
    grpc_watchers: int,
    sse_watchers: int,
    rate: float,
    seconds: float,
    repeats: int,
    busy: int,
) -> dict[str, Any]:
    """W7: W4 with both servers pinned to one CPU beside `busy` busy loops. Per side: watches cut
    off, frames delivered (and writes never delivered: `lost`, coalesced away for ours), events
    coalesced, server CPU per frame, and how long after the last write each open watcher had
    every file's last write (the current state)."""
    phases: dict[str, list[dict[str, Any]]] = {"ours": [], "floor": []}
    with _sides(count, grpc_watchers, sse_watchers, "yaml", starve=busy) as sides:
        for _ in range(repeats):
            for name, side in sides.items():
                phases[name].append(side.phase(rate, seconds, converge=True))
    out: dict[str, Any] = {
        "pods": count,
        "grpc_watchers": grpc_watchers,
        "sse_watchers": sse_watchers,
        "rate": rate,
        "seconds": seconds,
        "repeats": repeats,
        "busy_loops": busy,
    }
    for name, results in phases.items():
        out[name] = {key: _median([r.get(key) for r in results]) for key in _STARVED}
        out[name]["phases"] = results
    return out


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def sweep(
    count: int,
    grpc_watchers: int,
    sse_watchers: int,
    rates: list[float],
    seconds: float,
    fmt: str = "yaml",
) -> dict[str, Any]:
    """Rising rates, ours and the floor taking turns at each, all watchers reopened before each
    phase: the first rate at which one of ours is cut off, and the first at which the floor's
    p99 passes 1 s. Each side stops at its own."""
    found: dict[str, float | None] = {"ours": None, "floor": None}
    phases: list[dict[str, Any]] = []
    with _sides(count, grpc_watchers, sse_watchers, fmt) as sides:
        for rate in rates:
            for name, side in sides.items():
                if found[name] is not None:
                    continue
                result = side.phase(rate, seconds)
                phases.append(result)
                print(_line(result), flush=True)
                if result["cut_off"] if name == "ours" else result["p99_ms"] > 1000:
                    found[name] = rate
            if all(v is not None for v in found.values()):
                break
    return {
        "pods": count,
        "grpc_watchers": grpc_watchers,
        "sse_watchers": sse_watchers,
        "seconds": seconds,
        "format": fmt,
        "rates": rates,
        "ours_first_cut_off_rate": found["ours"],
        "floor_p99_over_1s_rate": found["floor"],
        "phases": phases,
    }


def _line(r: dict[str, Any]) -> str:
    return (
        f"{r['side']:5} {r['rate']:6g}/s cut {r['cut_off']:3} lost {r['lost']:6} "
        f"p50 {r['p50_ms']:7.0f} p99 {r['p99_ms']:7.0f} ms  frames/s {r['frames_per_s']:7.0f}  "
        f"server {r['server_cpu_share']:.2f} CPU {r['server_cpu_us_per_frame']:5.0f} µs/frame  "
        f"clients {r['client_cpu_share']:.2f} CPU"
    )
