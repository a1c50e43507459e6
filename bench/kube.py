"""Benchmark: what the Kubernetes view adds to a list — each pod's resourceVersion spliced into
its cached JSON — against the /v1 list of the same pods (cached bytes joined), and against
re-encoding each pod with the revision set (what the splice avoids).

    python bench/kube.py

At 110 and 5,000 pods, copies of examples/fixtures/ (real kubelet-shaped pods, 1.5-3 KiB of JSON
each, with their API server's resourceVersion, which the view replaces). Each figure is a
whole list assembled cold (no per-snapshot memo: both surfaces keep one, so a second request
until the next change costs a dict lookup), best of 5, in µs per pod. The floor is the /v1
list; the ratio to report is ours/floor.
"""

from __future__ import annotations

import asyncio
import copy
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import yaml

from pods_api.core.query.view import View
from pods_api.core.store.cache import PodCache
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import WatchHub
from pods_api.gateway.assemble import _make_list
from pods_api.gateway.http.formats import Format
from pods_api.gateway.kube import objects as kubeobjects

FIXTURES = sorted((Path(__file__).resolve().parent.parent / "examples" / "fixtures").glob("*.yaml"))
TEMPLATES: list[dict[str, Any]] = [yaml.safe_load(path.read_text()) for path in FIXTURES]


def make_pod(i: int) -> PodVersion:
    pod = copy.deepcopy(TEMPLATES[i % len(TEMPLATES)])
    pod["metadata"]["name"] = f"{pod['metadata']['name']}-{i}"
    pod["metadata"]["uid"] = f"uid-{i:05d}"
    return PodVersion.from_json(pod)


def best_us(fn: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def measure(n: int) -> None:
    cache = PodCache(WatchHub(capacity=10, max_watchers=1))
    cache.source("bench").replace([make_pod(i) for i in range(n)])
    snapshot = cache.snapshot()
    pods = sorted(snapshot.pods, key=lambda p: (p.namespace, p.name))
    number = max(1, 20000 // n)
    # The /v1 List is assembled in slices that yield to the loop: timed on one loop, as served.
    loop = asyncio.new_event_loop()
    floor = (
        best_us(lambda: loop.run_until_complete(_make_list(snapshot, View.EVERYTHING, Format.JSON)), number)
        / n
    )
    loop.close()
    ours = best_us(lambda: kubeobjects.list_bytes(snapshot.revision, pods, None, 0), number) / n

    def reencoded() -> bytes:
        items = b",".join(orjson.dumps(kubeobjects.pod_object(p, p.revision)) for p in pods)
        return b'{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[' + items + b"]}"

    encode = best_us(reencoded, number) / n
    print(f"{n:>5} {floor:>9.2f} {ours:>9.2f} {ours / floor:>6.1f} {encode:>12.2f} {encode / floor:>6.1f}")


def main() -> None:
    print(f"{'pods':>5} {'floor µs':>9} {'splice µs':>9} {'ratio':>6} {'re-encode µs':>12} {'ratio':>6}")
    print(f"{'':>5} {'per pod':>9} {'per pod':>9}")
    for n in (110, 5000):
        measure(n)


if __name__ == "__main__":
    main()
