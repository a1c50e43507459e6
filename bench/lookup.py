"""Benchmark: index lookups at 110 and 5,000 pods cost the same (no scan per request).

    python bench/lookup.py

Each pod has 3 containers (one init), a dual-stack IP, realistic 64-hex container IDs; one in
ten is host-network (sharing the node's IP). Lookups: by namespace/name, by full container ID,
by bare ID, by a 12-character prefix, by pod IP. The floor, measured in the same run, is one
plain dict lookup of a key in a dict of the same size: what an index lookup cannot beat. The
ratio to report is ours/floor, at both sizes; the point is that it does not grow with n (the
node IP's cost grows with its hits: every tenth pod is host-network, so 11 or 500 of them).
"""

from __future__ import annotations

import hashlib
import timeit
from collections.abc import Callable
from typing import Any

from pods_api.core.cache import PodCache
from pods_api.core.pod import PodVersion
from pods_api.core.watch import WatchHub

NODE_IP = "192.168.56.10"


def cid(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


def make_pod(i: int) -> PodVersion:
    host = i % 10 == 0
    ips = [NODE_IP] if host else [f"10.{i // 65536}.{i // 256 % 256}.{i % 256}", f"fd00::{i:x}"]

    def status(name: str, n: int) -> dict[str, Any]:
        return {
            "name": name,
            "containerID": f"containerd://{cid(n)}",
            "image": "i",
            "imageID": "",
            "ready": True,
            "restartCount": 0,
        }

    return PodVersion.from_json(
        {
            "metadata": {"name": f"pod-{i}", "namespace": f"ns-{i % 7}", "uid": f"uid-{i}"},
            "spec": {"hostNetwork": host, "containers": [{"name": "app", "image": "i"}]},
            "status": {
                "phase": "Running",
                "podIP": ips[0],
                "podIPs": [{"ip": ip} for ip in ips],
                "containerStatuses": [status("app", 3 * i), status("sidecar", 3 * i + 1)],
                "initContainerStatuses": [status("init", 3 * i + 2)],
            },
        }
    )


def best_us(fn: Callable[[], object], number: int = 20000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def measure(n: int) -> None:
    cache = PodCache(WatchHub(capacity=10, max_watchers=1))
    cache.source("bench").replace([make_pod(i) for i in range(n)])
    target = n // 2 + 1  # not host-network
    floor_map = {f"uid-{i}": i for i in range(n)}
    floor_key = f"uid-{target}"
    floor = best_us(lambda: floor_map.get(floor_key))
    namespace, name = f"ns-{target % 7}", f"pod-{target}"
    full, bare, prefix = f"containerd://{cid(3 * target)}", cid(3 * target + 1), cid(3 * target + 2)[:12]
    ip = f"fd00::{target:x}"
    lookups: dict[str, Callable[[], object]] = {
        "name": lambda: cache.by_name(namespace, name),
        "containerID": lambda: cache.by_container_id(full),
        "bare ID": lambda: cache.by_container_id(bare),
        "12-char prefix": lambda: cache.by_container_id(prefix),
        "pod IP": lambda: cache.by_pod_ip(ip),
        "node IP": lambda: cache.by_pod_ip(NODE_IP),
    }
    for label, fn in lookups.items():
        hits = fn()
        assert isinstance(hits, list) and hits, label
        us = best_us(fn)
        print(f"{n:>5} {label:<14} {len(hits):>4} {us:>7.2f} {floor:>9.3f} {us / floor:>6.1f}")


def main() -> None:
    print(f"{'pods':>5} {'lookup':<14} {'hits':>4} {'µs':>7} {'floor µs':>9} {'ratio':>6}")
    for n in (110, 5000):
        measure(n)


if __name__ == "__main__":
    main()
