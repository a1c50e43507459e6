"""Server CPU per delivered gRPC watch frame: pods-api's gRPC server (core/grpc/server.py, its
interceptors, the one watch stream) on a cache fed in process (no source, so only the send path
is measured), against a floor in the same run: a bare grpc.aio server streaming the same
pre-made frame bytes to the same number of watchers (per watcher a deque, an Event and an async
generator), no interceptors. The watchers read everything, from one channel in another process;
ours and the floor take turns, and the CPU is the server process's, from /proc.

With `--burst`, each change is every pod at once (a relist, a node's pods restarting: PODS events
published in one turn of the loop). `ours-batched` is pods-api again, its watchers on
PodLookup's WatchPodBatches (several events to a message) instead of WatchPods: what a watcher
behind a burst saves by taking one write per batch (and, paced, what batching costs one that
keeps up). Per-message `ours` is its floor.

    python bench/grpcfanout.py [--watchers 100] [--rate 20] [--seconds 5] [--rounds 3] [--burst]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any

import grpc

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE.parent))  # after PYTHONPATH: --tree picks the pods_api measured
from bench.server import cpu_seconds  # noqa: E402
from bench.workloads import SYNC_FRAME  # noqa: E402

WATCH = "/v1alpha1.Pods/WatchPods"
BATCHES = "/podsapi.v1.PodLookup/WatchPodBatches"
PODS = 110


def _versions() -> list[list[Any]]:
    from pods_api.core.store.version import PodVersion

    def pod(i: int, phase: str) -> PodVersion:
        metadata = {
            "name": f"app-{i}",
            "namespace": "bench",
            "uid": f"uid-{i:05d}",
            "annotations": {"pad": "x" * 4000},
        }
        return PodVersion.from_json({"metadata": metadata, "status": {"phase": phase}})

    return [[pod(i, phase) for i in range(PODS)] for phase in ("Running", "Failed")]


async def _publish(rate: float, seconds: float, change: Any, burst: bool = False) -> None:
    """On SIGUSR1: call change(n) `rate` times a second for `seconds` (with `burst`, PODS
    changes at once each time), then print "done"."""
    loop = asyncio.get_running_loop()
    go = asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR1, go.set)
    print("ready", flush=True)
    await go.wait()
    count = int(rate * seconds)
    start = loop.time()
    each = PODS if burst else 1
    for n in range(count):
        await asyncio.sleep(max(0.0, start + n / rate - loop.time()))
        for k in range(n * each, (n + 1) * each):
            change(k)
    print("done", flush=True)
    await asyncio.Event().wait()


async def serve_ours(socket: str, rate: float, seconds: float, burst: bool = False) -> None:
    from pods_api.core.assembly import build_core
    from pods_api.core.config import Config
    from pods_api.core.grpc.server import create_server

    core = build_core(Config(node_name="bench", qps=0, max_watchers=5000, watch_buffer=100_000))
    versions = _versions()
    sink = core.cache.source("bench")
    sink.replace(versions[0])
    sink.mark_synced()
    server = create_server(core)
    server.add_insecure_port(f"unix:{socket}")
    await server.start()
    await _publish(rate, seconds, lambda n: sink.upsert(versions[(n // PODS + 1) % 2][n % PODS]), burst)


async def serve_floor(
    socket: str, rate: float, seconds: float, write: bool = False, burst: bool = False
) -> None:
    from pods_api.core.grpc.service import ServiceName, watch_frame
    from pods_api.core.store.watch import EventType

    versions = _versions()
    start = [watch_frame(ServiceName.V1ALPHA1, EventType.ADDED, p.pb) for p in versions[0]] + [SYNC_FRAME]
    frames = [[watch_frame(ServiceName.V1ALPHA1, EventType.MODIFIED, p.pb) for p in v] for v in versions]
    watchers: dict[int, tuple[deque[bytes], asyncio.Event]] = {}

    async def watch(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        queue, wakeup = me = (deque[bytes](), asyncio.Event())
        watchers[id(me)] = me
        try:
            for frame in start:
                yield frame
            while True:
                while not queue:
                    wakeup.clear()
                    await wakeup.wait()
                yield queue.popleft()
        finally:
            del watchers[id(me)]

    async def watch_written(request: bytes, context: grpc.aio.ServicerContext) -> None:
        async for frame in watch(request, context):
            await context.write(frame)

    def change(n: int) -> None:
        frame = frames[(n // PODS + 1) % 2][n % PODS]
        for queue, wakeup in watchers.values():
            queue.append(frame)
            wakeup.set()

    server = grpc.aio.server()
    handler = grpc.unary_stream_rpc_method_handler(watch_written if write else watch)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("v1alpha1.Pods", {"WatchPods": handler})]
    )
    server.add_insecure_port(f"unix:{socket}")
    await server.start()
    await _publish(rate, seconds, change, burst)


def _batch_events(message: bytes) -> list[bytes]:
    """The WatchPodsEvents of a WatchPodsBatch, as bytes (compared with SYNC_FRAME)."""
    from pods_api.core.api.pb import podsapi_v1_pb2

    return [event.SerializeToString() for event in podsapi_v1_pb2.WatchPodsBatch.FromString(message).events]


async def watchers(socket: str, count: int, expect: int, batched: bool = False) -> None:
    """`count` watchers that read everything; print "ready" once all have their start, and
    "all" once they hold `expect` live events between them (with `batched`, on WatchPodBatches:
    the events of each message)."""
    got = synced = 0
    reached = asyncio.Event()
    async with grpc.aio.insecure_channel(f"unix:{socket}") as channel:

        async def one() -> None:
            nonlocal got, synced
            live = False
            async for message in channel.unary_stream(BATCHES if batched else WATCH)(b""):
                for frame in _batch_events(message) if batched else (message,):
                    if live:
                        got += 1
                        if got >= expect:
                            reached.set()
                    elif frame == SYNC_FRAME:
                        live = True
                        synced += 1
                        if synced == count:
                            print("ready", flush=True)

        tasks = [asyncio.ensure_future(one()) for _ in range(count)]
        await reached.wait()
        print("all", flush=True)
        await asyncio.Event().wait()
        del tasks


def _line(stream: IO[str] | None, text: str) -> str:
    assert stream is not None
    for line in stream:
        if line.startswith(text):
            return line
    raise SystemExit(f"process exited before {text!r}")


def _spawn(*args: str, tree: str | None = None) -> subprocess.Popen[str]:
    env = None if tree is None else {**os.environ, "PYTHONPATH": tree}
    return subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True, env=env)


def run(
    watcher_count: int,
    rate: float,
    seconds: float,
    rounds: int,
    servers: tuple[str, ...] = ("floor", "ours"),
    burst: bool = False,
) -> dict[str, list[float]]:
    """µs of server CPU per delivered event, per round, for each server."""
    results: dict[str, list[float]] = {who: [] for who in servers}
    events = int(rate * seconds) * (PODS if burst else 1)
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for who in results:
                socket = str(Path(tmp) / f"{len(results)}-{list(results).index(who)}.sock")
                # "ours@TREE": pods-api's code from another checkout (a before/after comparison).
                kind, _, tree = who.partition("@")
                batched = kind == "ours-batched"
                kind = "ours" if batched else kind
                args = ("--serve", kind, socket, "--rate", str(rate), "--seconds", str(seconds))
                server = _spawn(*args, *(("--burst",) if burst else ()), tree=tree or None)
                client = None
                try:
                    _line(server.stdout, "ready")
                    client = _spawn(
                        "--watch",
                        socket,
                        "--watchers",
                        str(watcher_count),
                        "--expect",
                        str(events * watcher_count),
                        *(("--batched",) if batched else ()),
                    )
                    _line(client.stdout, "ready")
                    time.sleep(0.5)  # the start frames are through
                    before = cpu_seconds(server.pid)
                    server.send_signal(signal.SIGUSR1)
                    _line(server.stdout, "done")
                    _line(client.stdout, "all")
                    used = cpu_seconds(server.pid) - before
                    results[who].append(used / (events * watcher_count) * 1e6)
                finally:
                    for proc in (client, server):
                        if proc is not None:
                            proc.kill()
                            proc.wait()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watchers", type=int, default=100)
    parser.add_argument("--rate", type=float, default=20.0, help="changes per second")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--write-floor",
        action="store_true",
        help="also a floor whose handler calls context.write instead of yielding",
    )
    parser.add_argument("--tree", action="append", default=[], help="also ours from this checkout")
    parser.add_argument(
        "--burst",
        action="store_true",
        help=f"each change is all {PODS} pods at once (a relist)",
    )
    parser.add_argument("--batched", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve", choices=["ours", "floor", "floor-write"], help=argparse.SUPPRESS)
    parser.add_argument("--watch", metavar="SOCKET", help=argparse.SUPPRESS)
    parser.add_argument("--expect", type=int, help=argparse.SUPPRESS)
    parser.add_argument("socket", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        if args.serve == "ours":
            asyncio.run(serve_ours(args.socket, args.rate, args.seconds, args.burst))
        else:
            write = args.serve == "floor-write"
            asyncio.run(serve_floor(args.socket, args.rate, args.seconds, write=write, burst=args.burst))
        return
    if args.watch:
        asyncio.run(watchers(args.watch, args.watchers, args.expect, args.batched))
        return
    frames = int(args.rate * args.seconds) * args.watchers * (PODS if args.burst else 1)
    print(
        f"{args.watchers} gRPC watchers, {args.rate:g} changes/s for {args.seconds:g} s"
        f" ({frames} frames a run)"
    )
    servers = (
        "floor",
        "ours",
        *(("floor-write",) if args.write_floor else ()),
        "ours-batched",
        *(f"ours@{t}" for t in args.tree),
    )
    got = run(args.watchers, args.rate, args.seconds, args.rounds, servers, args.burst)
    ours, floor = statistics.median(got["ours"]), statistics.median(got["floor"])
    print("server CPU µs per delivered frame (median; runs)")
    for who, values in got.items():
        print(f"{who:11} {statistics.median(values):7.1f}   {' '.join(f'{v:.1f}' for v in values)}")
    print(f"{'ratio':11} {ours / floor:7.2f}")


if __name__ == "__main__":
    main()
