"""CPU per delivered watch frame through the one watch stream (core/store/stream.py), in process, as a
ratio to a floor measured in the same run: the least an asyncio fan-out does (per watcher a
deque, an Event and an async generator handing over one shared, pre-made bytes object). The
ratio says what the stream adds per frame and per watcher: the view's decision and the frame
cache lookup, the queue of core/store/watch.py, the delay metric.

    python bench/stream.py [--pods 110] [--watchers 200] [--events 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator

from pods_api.core.grpc.service import ServiceName, watch_encoding
from pods_api.core.query.fieldmask import parse_mask
from pods_api.core.query.view import View
from pods_api.core.store.cache import PodCache
from pods_api.core.store.stream import WatchStreams
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import WatchHub


def pod(i: int, phase: str) -> PodVersion:
    metadata = {
        "name": f"app-{i}",
        "namespace": "bench",
        "uid": f"uid-{i:05d}",
        "annotations": {"pad": "x" * 4000},
    }
    return PodVersion.from_json({"metadata": metadata, "status": {"phase": phase}})


async def ours(pods: int, watchers: int, events: int, view: View) -> float:
    """µs of CPU per delivered frame: every event is a phase change, so every view shows it."""
    # A buffer deeper than the run: this measures the per-frame cost, not cut-offs.
    cache = PodCache(WatchHub(capacity=events + 1, max_watchers=watchers))
    streams = WatchStreams(cache, lambda seconds: None)
    versions = [[pod(i, phase) for i in range(pods)] for phase in ("Running", "Failed")]
    sink = cache.source("bench")
    sink.replace(versions[0])
    encoding = watch_encoding(ServiceName.V1ALPHA1)
    frames = [streams.open(view).frames(encoding) for _ in range(watchers)]
    for stream in frames:
        for _ in range(pods + 1):  # the start
            await anext(stream)
    start = time.process_time()
    for n in range(events):
        sink.upsert(versions[(n // pods + 1) % 2][n % pods])
        for stream in frames:
            await anext(stream)
    return (time.process_time() - start) / (events * watchers) * 1e6


async def floor(watchers: int, events: int) -> float:
    queues = [(deque[bytes](), asyncio.Event()) for _ in range(watchers)]

    async def reader(queue: deque[bytes], wakeup: asyncio.Event) -> AsyncIterator[bytes]:
        while True:
            while not queue:
                wakeup.clear()
                await wakeup.wait()
            yield queue.popleft()

    frames = [reader(q, e) for q, e in queues]
    frame = b"x" * 4200
    start = time.process_time()
    for _ in range(events):
        for queue, wakeup in queues:
            queue.append(frame)
            wakeup.set()
        for stream in frames:
            await anext(stream)
    return (time.process_time() - start) / (events * watchers) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--watchers", type=int, default=200)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3, help="best of this many")
    args = parser.parse_args()
    views = {"whole": View.EVERYTHING, "masked": View(parse_mask("status.phase"))}
    print(f"{args.pods} pods, {args.watchers} watchers, {args.events} events; CPU µs per delivered frame")
    print(f"{'view':7} {'ours':>6} {'floor':>6} {'ratio':>6}")
    for name, view in views.items():
        a = min(asyncio.run(ours(args.pods, args.watchers, args.events, view)) for _ in range(args.runs))
        b = min(asyncio.run(floor(args.watchers, args.events)) for _ in range(args.runs))
        print(f"{name:7} {a:6.2f} {b:6.2f} {a / b:6.2f}")


if __name__ == "__main__":
    main()
