"""The CPU of one HTTP request through the gateway, in process, for checkouts taking turns:
`python bench/request_cpu.py [--tree DIR ...] [--pairs N]`.

Each variant is a checkout of pods-api (default: this one); each measurement is a process of
its own that imports that checkout, builds a core of 110 fixture pods and its gateway
(`create_app`), and calls the ASGI app directly (no socket, no server) for each route: the
least thread CPU per request over BATCHES batches of REQUESTS. Thread CPU, not the wall clock:
on a shared machine the wall clock measures the neighbours. The checkouts take turns (A B, B
A, ...) so that a change of load hits each alike; what to read is each route's range per
variant over the pairs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
PODS = 110
BATCHES = 25
REQUESTS = 300
# (name, path, query): the call routes of both surfaces, and a FastAPI route for scale. A path's
# {uid}, {ns} and {name} are those of one of the pods.
ROUTES = (
    ("Get /v1/pods/{uid}", "/v1/pods/{uid}", b""),
    ("List /v1/pods", "/v1/pods", b""),
    ("masked List /v1/pods?fields=...", "/v1/pods", b"fields=status.phase,spec.nodeName"),
    ("Get /api/v1/namespaces/{ns}/pods/{name}", "/api/v1/namespaces/{ns}/pods/{name}", b""),
    ("List /api/v1/pods", "/api/v1/pods", b""),
    ("GET /healthz (FastAPI)", "/healthz", b""),
)

# Run in the measured checkout's own interpreter process, with that checkout first on sys.path:
# what it imports is that checkout's code (module paths that moved are tried both ways).
_CHILD = r"""
import asyncio, json, sys, time
sys.path.insert(0, sys.argv[1])
from bench import pods
from pods_api.core.assembly import build_core
from pods_api.core.config import Config
from pods_api.gateway.app import create_app
import pods_api
assert pods_api.__file__.startswith(sys.argv[1]), (pods_api.__file__, "is not the checkout measured")
try:
    from pods_api.core.store.version import PodVersion
except ImportError:
    from pods_api.core.store.pod import PodVersion

PODS, BATCHES, REQUESTS = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ROUTES = json.loads(sys.argv[5])
core = build_core(Config(node_name="bench", qps=0))
sink = core.cache.source("bench")
sink.replace([PodVersion.from_json(pods.fixture(i)) for i in range(PODS)])
sink.mark_synced()
app = create_app(core)
pod = next(iter(core.cache.snapshot().pods))

async def receive():
    return {"type": "http.request", "body": b"", "more_body": False}

async def batch(scope, count):
    statuses = []
    async def send(message):
        if message["type"] == "http.response.start":
            statuses.append(message["status"])
    started = time.thread_time()
    for _ in range(count):
        await app(dict(scope), receive, send)
    spent = time.thread_time() - started
    assert set(statuses) == {200}, (scope["path"], statuses[:3])
    return spent / count * 1e6

async def main():
    out = {}
    for name, template, query in ROUTES:
        path = template.replace("{uid}", pod.uid).replace("{ns}", pod.namespace).replace("{name}", pod.name)
        scope = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
            "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
            "query_string": query.encode(), "root_path": "",
            "headers": [(b"host", b"localhost"), (b"accept", b"*/*")],
            "client": None, "server": None, "app": app,
        }
        await batch(scope, REQUESTS // 3)  # warm: caches, metric children
        out[name] = min([await batch(scope, REQUESTS) for _ in range(BATCHES)])
    print(json.dumps(out))

asyncio.run(main())
"""


def measure(tree: Path) -> dict[str, float]:
    routes = json.dumps([(name, path, query.decode()) for name, path, query in ROUTES])
    command = [sys.executable, "-c", _CHILD, str(tree), str(PODS), str(BATCHES), str(REQUESTS), routes]
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{tree}: {done.stderr.strip().splitlines()[-1:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run(trees: list[Path], pairs: int) -> dict[str, Any]:
    got: dict[str, dict[str, list[float]]] = {str(t): {} for t in trees}
    for turn in range(pairs):
        order = trees if turn % 2 == 0 else list(reversed(trees))
        for tree in order:
            for name, us in measure(tree).items():
                got[str(tree)].setdefault(name, []).append(us)
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, action="append", help="a checkout (repeatable); default: here")
    parser.add_argument("--pairs", type=int, default=3, help="turns per checkout")
    args = parser.parse_args()
    trees = [t.resolve() for t in args.tree or [HERE]]
    got = run(trees, args.pairs)
    width = max(len(name) for name, _, _ in ROUTES)
    print(f"thread CPU µs per request, least of {BATCHES} batches of {REQUESTS}, {PODS} pods")
    print("min-max (median) over the turns")
    print(" " * width + "".join(f"   {Path(t).name[-24:]:>24}" for t in got))
    for name, _, _ in ROUTES:
        cells = []
        for runs in got.values():
            values = runs.get(name, [])
            cells.append(f"{min(values):.1f}-{max(values):.1f} ({statistics.median(values):.1f})")
        print(name.ljust(width) + "".join(f"   {c:>24}" for c in cells))


if __name__ == "__main__":
    main()
