"""The API server source against the test kube-apiserver (TLS, token, real wire protocol).

    python bench/apiserver_source.py [--pods 110] [--kb 5] [--changes 200]

- first list: from starting the source to the cache being ready (fetch, decode every pod into a
  PodVersion, hand the cache the state), against a floor of the same GET with a bare aiohttp
  session and `orjson.loads` of the body (no decode into pods);
- watch delay: from a pod changed on the server to its MODIFIED in our cache, against a floor
  of a bare aiohttp watch on the same server reading the same event line with `orjson.loads`;
- the memory the source costs: resident set size before and after importing it.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import resource
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

from apiserver import KubeAPIServer  # noqa: E402  (the test API server)
from serve import fixture  # noqa: E402  (the serving benchmark's realistic pods)

NODE = "node-1"


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def first_list(server: KubeAPIServer, kubeconfig: Path) -> float:
    from pods_api.core.store.cache import PodCache
    from pods_api.core.store.watch import WatchHub
    from pods_api.sources.apiserver import APIServerSource

    cache = PodCache(WatchHub(capacity=1000, max_watchers=10))
    ready = asyncio.Event()
    cache.on_readiness(lambda up: ready.set() if up else None)
    source = APIServerSource(node_name=NODE, kubeconfig=kubeconfig)
    start = time.perf_counter()
    task = asyncio.create_task(source.run(cache.source(source.name)))
    await ready.wait()
    took = time.perf_counter() - start
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return took


async def floor_list(server: KubeAPIServer, context: ssl.SSLContext) -> float:
    import aiohttp
    import orjson

    start = time.perf_counter()
    async with aiohttp.ClientSession() as session:
        url = f"{server.url}/api/v1/pods?fieldSelector=spec.nodeName%3D{NODE}"
        headers = {"Authorization": f"Bearer {server.token}"}
        async with session.get(url, ssl=context, headers=headers) as response:
            orjson.loads(await response.read())
    return time.perf_counter() - start


async def watch_delays(
    server: KubeAPIServer, kubeconfig: Path, pods: list[dict[str, Any]], changes: int
) -> tuple[list[float], list[float]]:
    """Per change: (ours, floor) seconds from server.put to the event being taken."""
    import aiohttp
    import orjson

    from pods_api.core.store.cache import PodCache
    from pods_api.core.store.watch import WatchHub
    from pods_api.sources.apiserver import APIServerSource

    cache = PodCache(WatchHub(capacity=10_000, max_watchers=10))
    ready = asyncio.Event()
    cache.on_readiness(lambda up: ready.set() if up else None)
    source = APIServerSource(node_name=NODE, kubeconfig=kubeconfig)
    task = asyncio.create_task(source.run(cache.source(source.name)))
    await ready.wait()
    _, watcher = cache.watch()
    context = ssl.create_default_context(cafile=str(server.ca_file))
    ours: list[float] = []
    floor: list[float] = []
    async with aiohttp.ClientSession() as session:
        url = (
            f"{server.url}/api/v1/pods?fieldSelector=spec.nodeName%3D{NODE}&watch=true"
            f"&resourceVersion={server.resource_version}"
        )
        headers = {"Authorization": f"Bearer {server.token}"}
        async with session.get(url, ssl=context, headers=headers) as bare:
            for i in range(changes):
                pod = copy.deepcopy(pods[i % len(pods)])
                pod["status"]["containerStatuses"][0]["restartCount"] = i + 1
                start = time.perf_counter()
                await asyncio.to_thread(server.put, pod)
                orjson.loads(await bare.content.readline())
                floor.append(time.perf_counter() - start)
                await watcher.get()
                ours.append(time.perf_counter() - start)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return ours, floor


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] * 1000 if len(values) > 1 else values[0] * 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--kb", type=int, default=5)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()

    import pods_api.serve.process  # what every `pods-api serve` imports

    before = rss_mib()
    import pods_api.sources.apiserver  # noqa: F401

    after = rss_mib()
    with tempfile.TemporaryDirectory() as tmp:
        server = KubeAPIServer(Path(tmp))
        server.start()
        try:
            pods = fixture(args.pods, args.kb)["items"]
            assert isinstance(pods, list)
            for pod in pods:
                server.put(pod)
            kubeconfig = server.kubeconfig(Path(tmp) / "kubeconfig")
            context = ssl.create_default_context(cafile=str(server.ca_file))
            ours = min([await first_list(server, kubeconfig) for _ in range(args.rounds)])
            floor = min([await floor_list(server, context) for _ in range(args.rounds)])
            print(f"{args.pods} pods of ~{args.kb} KiB; best of {args.rounds}")
            print(f"{'measure':24} {'ours ms':>9} {'floor ms':>9} {'ratio':>6}")
            print(f"{'first list to ready':24} {ours * 1000:9.1f} {floor * 1000:9.1f} {ours / floor:6.1f}")
            delays, floors = await watch_delays(server, kubeconfig, pods, args.changes)
            for q in (50, 99):
                ratio = p(delays, q) / p(floors, q)
                print(f"{f'watch delay p{q}':24} {p(delays, q):9.2f} {p(floors, q):9.2f} {ratio:6.1f}")
        finally:
            server.stop()
    print(f"resident memory for the source's imports (kubernetes_asyncio): +{after - before:.0f} MiB")


if __name__ == "__main__":
    asyncio.run(main())
