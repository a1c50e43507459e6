"""Health under a burst of Lists: `python -m bench health`. The goal: `/healthz`, gRPC
health and a live watch answer within 0.2 s while 10 Lists of 5,000 pods, each a view of its
own (what the default `--burst 10` admits at once), are assembled and sent.

One `pods-api serve --fixtures` of `pods` pods. Each round measures, idle first (the floor, in
the same run and process) and then while `lists` Lists are in flight:
- `/healthz` over HTTP and gRPC `Health/Check`, asked one after the other, each on a
  connection kept open (a probe's connect is not what the loop holds up);
- a live watch: one fixture file rewritten, and the time until a gRPC `WatchPods` watcher,
  open since before the burst, gets its MODIFIED. This includes the source's read of the file,
  which the idle floor includes too: the difference is what the burst adds.
The Lists are read as fast as a client can (curl, a process each, bodies discarded), half on
`/v1/pods`, half on `/api/v1/pods`, each with a `labelSelector` no other uses (`app!=none-N`:
every pod matches, and every List is assembled on its own).
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench import pods
from bench.server import CHANNEL_OPTIONS, serving, until_serving
from pods_api.core.api.pb import pods_v1alpha1_pb2 as api

# The goal's bound on each answer while Lists are assembled.
GOAL_S = 0.2
# A probe every this many seconds while a burst is in flight: often enough to see a loop held
# for a tenth of the goal, rarely enough that the probes themselves are no load.
PROBE_EVERY = 0.02
ROUTES = ("/v1/pods", "/api/v1/pods")


def _list(path: str, route: str, i: int) -> subprocess.Popen[bytes]:
    """One List, read to its end and discarded by curl: a process of its own, so that reading
    280 MB of bodies takes no time from the probes' process (threads of it did: its GIL)."""
    url = f"http://localhost{route}?labelSelector=app!=none-{i}"
    command = ["curl", "-sS", "--unix-socket", path, "-o", "/dev/null", "-w", "%{http_code}", url]
    return subprocess.Popen(command, stdout=subprocess.PIPE)


def _burst(path: str, lists: int) -> list[subprocess.Popen[bytes]]:
    return [_list(path, ROUTES[i % len(ROUTES)], i) for i in range(lists)]


class Probes:
    """The three answers timed: `/healthz`, gRPC health, and a watch event after a file write."""

    def __init__(self, http: httpx.AsyncClient, channel: grpc.aio.Channel, directory: Path) -> None:
        self.http = http
        self.health = health_pb2_grpc.HealthStub(channel)
        self.channel = channel
        self.directory = directory
        self.generation = 0
        self.modified: asyncio.Queue[float] = asyncio.Queue()

    async def healthz(self) -> float:
        started = time.monotonic()
        reply = await self.http.get("/healthz")
        reply.raise_for_status()
        return time.monotonic() - started

    async def grpc_health(self) -> float:
        started = time.monotonic()
        answer = await self.health.Check(health_pb2.HealthCheckRequest())
        if answer.status != health_pb2.HealthCheckResponse.SERVING:
            raise RuntimeError(f"gRPC health: {answer.status}")
        return time.monotonic() - started

    async def watch(self) -> None:
        """A watcher open throughout: each MODIFIED's arrival time goes to `modified`."""
        call = self.channel.unary_stream(
            "/v1alpha1.Pods/WatchPods", response_deserializer=api.WatchPodsEvent.FromString
        )(b"")
        async for event in call:
            if event.type == api.MODIFIED:
                self.modified.put_nowait(time.monotonic())

    async def watch_event(self) -> float:
        """One file rewritten: the time until the watcher has the change."""
        self.generation += 1
        started = time.monotonic()
        pods.rewrite(self.directory / "pod-00000.json", 0, self.generation, kind="fixture", fmt="json")
        return await asyncio.wait_for(self.modified.get(), 60) - started


async def _sample(probes: Probes, until: Callable[[], bool], at_least: int) -> dict[str, list[float]]:
    """Probes taken in turn every PROBE_EVERY until `until()` holds (and `at_least` of each)."""
    got: dict[str, list[float]] = {"healthz": [], "grpc_health": [], "watch_event": []}
    while not until() or min(len(v) for v in got.values()) < at_least:
        got["healthz"].append(await probes.healthz())
        got["grpc_health"].append(await probes.grpc_health())
        if not until() or len(got["watch_event"]) < at_least:
            got["watch_event"].append(await probes.watch_event())
        await asyncio.sleep(PROBE_EVERY)
    return got


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "n": len(values),
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "max_ms": ordered[-1] * 1000,
    }


async def _rounds(served: Any, directory: Path, lists: int, rounds: int, idle: int) -> dict[str, Any]:
    transport = httpx.AsyncHTTPTransport(uds=served.http)
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=60) as http,
        grpc.aio.insecure_channel(served.target, options=CHANNEL_OPTIONS) as channel,
    ):
        probes = Probes(http, channel, directory)
        watcher = asyncio.create_task(probes.watch())
        try:
            await probes.watch_event()  # the watcher is past its start
            floor: dict[str, list[float]] = {}
            during: dict[str, list[float]] = {}
            bursts: list[float] = []
            statuses: list[str] = []
            for _ in range(rounds):
                for name, values in (await _sample(probes, lambda: True, idle)).items():
                    floor.setdefault(name, []).extend(values)
                started = time.monotonic()
                curls = _burst(served.http, lists)
                got = await _sample(probes, lambda curls=curls: all(c.poll() is not None for c in curls), 1)
                bursts.append(time.monotonic() - started)
                statuses += [c.communicate()[0].decode() for c in curls]
                for name, values in got.items():
                    during.setdefault(name, []).extend(values)
        finally:
            watcher.cancel()
    return {
        "floor": {name: _summary(v) for name, v in floor.items()},
        "burst": {name: _summary(v) for name, v in during.items()},
        "burst_s": statistics.median(bursts),
        # 200, or 429 for a List past --list-budget (its bytes in flight per surface)
        "list_statuses": dict(Counter(statuses)),
    }


def run(
    count: int, lists: int, rounds: int, idle: int, budgets: tuple[int | None, ...]
) -> list[dict[str, Any]]:
    """One measurement per --list-budget in `budgets` (MiB; None: the default, under which
    some of a burst of distinct views is refused)."""
    return [_run(count, lists, rounds, idle, budget) for budget in budgets]


def _run(count: int, lists: int, rounds: int, idle: int, budget: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        directory = root / "fixtures"
        pods.write(directory, count, kind="fixture", fmt="json")
        args = ("--fixtures", str(directory), *(("--list-budget", str(budget)) if budget else ()))
        with serving(root / "run", *args) as served:
            asyncio.run(until_serving(served.target))
            result = asyncio.run(_rounds(served, directory, lists, rounds, idle))
    worst = max(result["burst"][name]["max_ms"] for name in result["burst"])
    return (
        {"pods": count, "lists": lists, "rounds": rounds, "list_budget_mib": budget, "goal_ms": GOAL_S * 1000}
        | result
        | {
            "worst_ms": worst,
            "met": worst <= GOAL_S * 1000,
        }
    )
