"""ListPods and GetPod latency as a client sees it, against KEP-4188's SLO for the kubelet's Pods
API (p99 under 5 ms): p50, p99 and p999 of each call, 100 calls a second alternating List and
Get, from a client process of its own, over gRPC (v1alpha1) and HTTP (/v1/pods), for pods-api
serving fixtures and for the floor (bench/floor_server.py: a bare grpc.aio server and Starlette
app answering the same bytes, in their own process). Three loads, each in processes of its own:

- idle;
- watchers: 200 WatchPods streams reading everything, and 10 fixture changes a second (the floor
  has no watch: it gets the client's calls alone, so its figure is the libraries' idle cost);
- lists: 10 clients asking distinct Lists (each its own label selector) back to back.

    python bench/latency.py [--pods 110,1000] [--seconds 20] [--loads idle,watchers,lists]

A p999 leaves one call in 1,000 above it: it needs 10,000 calls of a kind to say much (200 s a
cell); shorter runs print it all the same, as about the worst call of its kind.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import orjson

if not __package__:  # run as a script: the repository's root holds the bench package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.pods import rewrite, write
from bench.serve import fetch, wait_line
from bench.server import CHANNEL_OPTIONS, serving, until_serving
from pods_api.core.api.pb import pods_v1alpha1_pb2 as api
from pods_api.core.api.pb import pods_v1alpha1_pb2_grpc as api_grpc

HERE = Path(__file__).resolve().parent
# The SLO's rate: the kubelet's own limit on List and Get is 100 qps (burst 10).
RATE = 100.0
WATCHERS = 200
CHANGES_PER_SECOND = 10.0
LISTERS = 10
UID = "00000000-0000-0000-0000-000000000007"  # bench/pods.py fixture(7)
Call = Callable[[], Awaitable[object]]


# -- the loads, each run as `python bench/latency.py --load NAME ...` in a process of its own -----


async def _watchers(target: str, count: int) -> None:
    async def one() -> None:
        async with grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) as channel:
            async for _ in api_grpc.PodsStub(channel).WatchPods(api.WatchPodsRequest()):
                pass

    print("ready", flush=True)
    await asyncio.gather(*(one() for _ in range(count)))


def _churn(directory: Path, rate: float) -> None:
    """Rewrites one fixture after another, `rate` a second."""
    files = sorted(directory.glob("pod-*.yaml"))
    print("ready", flush=True)
    generation, start = 0, time.monotonic()
    while True:
        generation += 1
        i = generation % len(files)
        rewrite(files[i], i, generation, kind="fixture")
        time.sleep(max(0.0, start + generation / rate - time.monotonic()))


async def _lists(http_socket: str, count: int) -> None:
    transport = httpx.AsyncHTTPTransport(uds=http_socket)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=60) as client:

        async def one(n: int) -> None:
            while True:  # a selector of its own each time: no two Lists share a body
                n += LISTERS
                try:
                    await client.get("/v1/pods", params={"labelSelector": f"app!=x{n}"})
                except httpx.HTTPError as exc:  # said, and the load goes on (seen: a body cut short)
                    print(f"lists load on {http_socket}: {exc!r}", file=sys.stderr, flush=True)

        print("ready", flush=True)
        await asyncio.gather(*(one(n) for n in range(count)))


# -- the client that measures ---------------------------------------------------------------------


async def paced(calls: dict[str, Call], seconds: float) -> dict[str, list[float]]:
    """Each call in turn, RATE a second in all, for `seconds`: each one's latencies in ms. A call
    that comes late starts late; it is not sent twice to catch up."""
    names = list(calls)
    took: dict[str, list[float]] = {name: [] for name in names}
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < seconds:
        name = names[n % len(names)]
        began = time.perf_counter()
        await calls[name]()
        took[name].append((time.perf_counter() - began) * 1000)
        n += 1
        await asyncio.sleep(max(0.0, start + n / RATE - time.monotonic()))
    return took


def grpc_calls(channel: grpc.aio.Channel) -> dict[str, Call]:
    list_pods = channel.unary_unary("/v1alpha1.Pods/ListPods")
    get_pod = channel.unary_unary("/v1alpha1.Pods/GetPod")
    get = api.GetPodRequest(podUID=UID).SerializeToString()
    return {"List": lambda: list_pods(b""), "Get": lambda: get_pod(get)}


def http_calls(client: httpx.AsyncClient) -> dict[str, Call]:
    return {"List": lambda: client.get("/v1/pods"), "Get": lambda: client.get(f"/v1/pods/{UID}")}


async def measure(grpc_target: str, http_socket: str, seconds: float) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    async with grpc.aio.insecure_channel(grpc_target, options=CHANNEL_OPTIONS) as channel:
        await paced(grpc_calls(channel), 1.0)  # warm: the connection, the caches
        for call, took in (await paced(grpc_calls(channel), seconds)).items():
            out[f"gRPC {call}"] = took
    transport = httpx.AsyncHTTPTransport(uds=http_socket)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=60) as client:
        await paced(http_calls(client), 1.0)
        for call, took in (await paced(http_calls(client), seconds)).items():
            out[f"HTTP {call}"] = took
    return out


def quantiles(ms: list[float]) -> tuple[float, float, float]:
    if len(ms) < 2:
        return (ms[0],) * 3 if ms else (0.0, 0.0, 0.0)
    q = statistics.quantiles(ms, n=1000, method="inclusive")
    return q[499], q[989], q[998]


# -- a run ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def load(*args: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "latency.py"), "--load", *args], stdout=subprocess.PIPE, text=True
    )
    try:
        wait_line(proc.stdout, "ready")
        yield proc
    finally:
        proc.terminate()
        proc.wait()


@contextlib.contextmanager
def loaded(name: str, fixtures: Path, grpc_target: str, http_socket: str) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        if name == "watchers":
            stack.enter_context(load("watchers", grpc_target, str(WATCHERS)))
            stack.enter_context(load("churn", str(fixtures), str(CHANGES_PER_SECOND)))
        elif name == "lists":
            stack.enter_context(load("lists", http_socket, str(LISTERS)))
        yield


def _client(grpc_target: str, http_socket: str, seconds: float) -> dict[str, Any]:
    """The measuring client, in a process of its own."""
    out = subprocess.run(
        [
            sys.executable,
            str(HERE / "latency.py"),
            "--load",
            "client",
            grpc_target,
            http_socket,
            str(seconds),
        ],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    ).stdout
    return dict(orjson.loads(out.strip().splitlines()[-1]))


def run(pods: int, loads: list[str], seconds: float) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="pk-latency-") as tmp:
        root = Path(tmp)
        fixtures = root / "fixtures"
        write(fixtures, pods, kind="fixture")
        with serving(root / "run", "--fixtures", str(fixtures), "--max-watchers", str(WATCHERS + 10)) as ours:
            asyncio.run(until_serving(ours.target))
            for name, data in asyncio.run(fetch(ours.target, ours.http)).items():
                (root / f"{name}.bin").write_bytes(data)
            floor = subprocess.Popen(
                [sys.executable, str(HERE / "floor_server.py"), str(root)], stdout=subprocess.PIPE, text=True
            )
            try:
                wait_line(floor.stdout, "ready")
                floor_at = (f"unix:{root / 'floor.sock'}", str(root / "floor-http.sock"))
                for name in loads:
                    with loaded(name, fixtures, ours.target, ours.http):
                        mine = _client(ours.target, ours.http, seconds)
                    with loaded("idle" if name == "watchers" else name, fixtures, *floor_at):
                        theirs = _client(*floor_at, seconds)
                    for call in mine:
                        rows.append(
                            {
                                "pods": pods,
                                "load": name,
                                "call": call,
                                "ours": mine[call],
                                "floor": theirs[call],
                            }
                        )
            finally:
                floor.terminate()
                floor.wait()
    return rows


def report(rows: list[dict[str, Any]]) -> list[str]:
    head = f"{'pods':>5} {'load':9} {'call':9} {'ours p50/p99/p999 ms':>22} {'floor p50/p99/p999 ms':>22}"
    lines = [f"{head} {'p99 x':>6}"]
    for row in rows:
        ours, floor = row["ours"], row["floor"]
        lines.append(
            f"{row['pods']:5} {row['load']:9} {row['call']:9} "
            f"{ours[0]:6.2f} {ours[1]:6.2f} {ours[2]:7.2f}  {floor[0]:6.2f} {floor[1]:6.2f} {floor[2]:7.2f}"
            f" {ours[1] / floor[1]:6.1f}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", nargs="+", help=argparse.SUPPRESS)  # a load's own process
    parser.add_argument("--pods", default="110,1000")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--loads", default="idle,watchers,lists")
    args = parser.parse_args()
    if args.load:
        kind, *rest = args.load
        if kind == "watchers":
            asyncio.run(_watchers(rest[0], int(rest[1])))
        elif kind == "churn":
            _churn(Path(rest[0]), float(rest[1]))
        elif kind == "lists":
            asyncio.run(_lists(rest[0], int(rest[1])))
        else:  # the client: its figures as one JSON line
            took = asyncio.run(measure(rest[0], rest[1], float(rest[2])))
            print(orjson.dumps({call: quantiles(ms) for call, ms in took.items()}).decode())
        return
    rows = []
    for pods in (int(p) for p in args.pods.split(",")):
        rows += run(pods, args.loads.split(","), args.seconds)
    print("\n".join(report(rows)))


if __name__ == "__main__":
    main()
