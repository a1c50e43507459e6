"""A server starved of CPU never cuts off a watcher that keeps reading, and every such watcher
reaches the current state.

`pods-api serve` runs pinned to one CPU beside busy loops pinned to the same CPU, so it gets a
fraction of a core (what a DaemonSet with a small CPU request gets on a busy node), while its
fixture files churn: pods changed, deleted and added back. gRPC and SSE watchers in this process
read as fast as they can. Asserted: no watch ended, and each watcher's state, built by applying
what it received, equals what List returns once the churn is over. Nothing here is timed: how
far behind the watchers fall (and how much is coalesced) depends on the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import orjson
import yaml
from builders import make_pod
from serve import TIMEOUT, Served, serving

from pods_api.core.api.codec import pod_from_bytes
from pods_api.core.api.pb import pods_v1alpha1_pb2, pods_v1alpha1_pb2_grpc

# Pods in PodList files, each rewritten whole: one write is many events, so that fanning them
# out to every watcher costs the starved server more than reading the file.
FILES = 4
PER_FILE = 25
PODS = FILES * PER_FILE
ROUNDS = 40
GRPC_WATCHERS = 8
SSE_WATCHERS = 3
# Busy loops beside the server on its CPU: it gets about a fifth of that CPU.
BUSY_LOOPS = 4
# Small, so that watchers the starved server cannot keep up with really get coalesced events.
WATCH_BUFFER = "4"
# Reaching the current state after the churn may take a starved server a while: a safety net.
CONVERGE_TIMEOUT = 20 * TIMEOUT
SENTINEL = "uid-sentinel"


def pod(i: int | str, change: int) -> dict[str, Any]:
    body = make_pod(f"churn-{i}", f"uid-{i}", typed=True)
    body["metadata"]["annotations"] = {"change": str(change), "filler": "x" * 2048}
    return body


def write(directory: Path, name: str, pods: list[dict[str, Any]]) -> None:
    tmp = directory / f".{name}.tmp"
    tmp.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "PodList", "items": pods}))
    os.replace(tmp, directory / f"{name}.yaml")


@contextlib.contextmanager
def one_busy_cpu() -> Iterator[tuple[str, ...]]:
    """A prefix that runs a command pinned to one CPU, kept busy by BUSY_LOOPS processes."""
    cpu = min(os.sched_getaffinity(0))
    pin = f"import os, sys; os.sched_setaffinity(0, {{{cpu}}}); os.execvp(sys.argv[1], sys.argv[1:])"
    loop = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    busy = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(BUSY_LOOPS)]
    try:
        yield (sys.executable, "-c", pin)
    finally:
        for process in busy:
            process.kill()
            process.wait()


class Watcher:
    """A client's view of the pods, from applying its watch; `ended` says why the watch ended."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.state: dict[str, bytes] = {}
        self.events = 0
        self.ended: str | None = None
        self._changed = asyncio.Event()

    def apply(self, kind: str, uid: str, data: bytes) -> None:
        self.events += 1
        if kind == "DELETED":
            assert uid in self.state, f"{self.name}: DELETED of {uid}, which it never had"
            del self.state[uid]
        else:
            self.state[uid] = data
        self._changed.set()

    def end(self, why: str) -> None:
        self.ended = why
        self._changed.set()

    async def until(self, done: Callable[[], bool]) -> None:
        while not done() and self.ended is None:
            self._changed.clear()
            await self._changed.wait()


async def watch_grpc(served: Served, watcher: Watcher) -> None:
    kinds = {
        pods_v1alpha1_pb2.ADDED: "ADDED",
        pods_v1alpha1_pb2.MODIFIED: "MODIFIED",
        pods_v1alpha1_pb2.DELETED: "DELETED",
    }
    async with grpc.aio.insecure_channel(served.target) as channel:
        call = pods_v1alpha1_pb2_grpc.PodsStub(channel).WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
        try:
            async for event in call:
                if event.type in kinds:
                    pod = pod_from_bytes(event.pod)
                    watcher.apply(kinds[event.type], pod["metadata"]["uid"], event.pod)
            watcher.end("the stream ended")
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                watcher.end(f"{exc.code().name}: {exc.details()}")


async def watch_sse(served: Served, watcher: Watcher) -> None:
    transport = httpx.AsyncHTTPTransport(uds=str(served.http_socket))
    async with (
        httpx.AsyncClient(transport=transport, timeout=None) as client,
        client.stream("GET", "http://localhost/v1/pods", params={"watch": "true"}) as response,
    ):
        kind = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: ") and kind in ("ADDED", "MODIFIED", "DELETED"):
                data = line[6:].encode()
                watcher.apply(kind, orjson.loads(data)["metadata"]["uid"], data)
            elif line.startswith("data: ") and kind == "ERROR":
                watcher.end(line[6:])
                return
        watcher.end("the stream ended")


async def churn(fixtures: Path, rng: random.Random) -> None:
    """Each round rewrites one file: every pod in it changed, a few deleted or added back."""
    for change in range(1, ROUNDS + 1):
        f = rng.randrange(FILES)
        pods = [pod(i, change) for i in range(f * PER_FILE, (f + 1) * PER_FILE) if rng.random() > 0.1]
        write(fixtures, f"churn-{f}", pods)
        await asyncio.sleep(0)  # let the watchers read too


def listed(served: Served) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The pods as List returns them: gRPC bytes and HTTP JSON, by UID."""
    with grpc.insecure_channel(served.target) as channel:
        response = pods_v1alpha1_pb2_grpc.PodsStub(channel).ListPods(pods_v1alpha1_pb2.ListPodsRequest())
    by_grpc = {pod_from_bytes(p)["metadata"]["uid"]: p for p in response.pods}
    transport = httpx.HTTPTransport(uds=str(served.http_socket))
    with httpx.Client(transport=transport, timeout=CONVERGE_TIMEOUT) as client:
        items = client.get("http://localhost/v1/pods").json()["items"]
    by_http = {item["metadata"]["uid"]: orjson.dumps(item) for item in items}
    return by_grpc, by_http


def as_json(state: dict[str, bytes]) -> dict[str, Any]:
    return {uid: json.loads(data) for uid, data in state.items()}


async def test_a_starved_server_cuts_off_no_reading_watcher_and_each_reaches_the_current_state(
    tmp_path: Path,
) -> None:
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    for f in range(FILES):
        write(fixtures, f"churn-{f}", [pod(i, 0) for i in range(f * PER_FILE, (f + 1) * PER_FILE)])
    args = ("--fixtures", str(fixtures), "--watch-buffer", WATCH_BUFFER, "--qps", "0")
    with one_busy_cpu() as pinned, serving(tmp_path / "run", *args, prefix=pinned) as served:
        grpc_watchers = [Watcher(f"grpc-{n}") for n in range(GRPC_WATCHERS)]
        sse_watchers = [Watcher(f"sse-{n}") for n in range(SSE_WATCHERS)]
        tasks = [asyncio.create_task(watch_grpc(served, w)) for w in grpc_watchers]
        tasks += [asyncio.create_task(watch_sse(served, w)) for w in sse_watchers]
        everyone = grpc_watchers + sse_watchers
        try:
            async with asyncio.timeout(CONVERGE_TIMEOUT):
                for w in everyone:  # every watch has its start before the churn begins
                    await w.until(lambda w=w: len(w.state) == PODS)
                await churn(fixtures, random.Random(21))
                # The newest change of all: once a watcher has it, it has been sent the rest.
                write(fixtures, "sentinel", [pod("sentinel", ROUNDS + 1)])
                for w in everyone:
                    await w.until(lambda w=w: SENTINEL in w.state)
            assert [(w.name, w.ended) for w in everyone if w.ended] == []
            by_grpc, by_http = await asyncio.to_thread(listed, served)
            assert SENTINEL in by_grpc and by_grpc.keys() == by_http.keys()
            async with asyncio.timeout(CONVERGE_TIMEOUT):
                for w in grpc_watchers:
                    await w.until(lambda w=w: w.state == by_grpc)
                for w in sse_watchers:
                    await w.until(lambda w=w: as_json(w.state) == as_json(by_http))
            for w in grpc_watchers:
                assert w.ended is None and w.state == by_grpc, w.name
            for w in sse_watchers:
                assert w.ended is None and as_json(w.state) == as_json(by_http), w.name
            assert all(w.events > PODS for w in everyone)  # each got live events, not just a start
            assert served.proc.poll() is None
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
