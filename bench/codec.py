"""Micro-benchmark: decode, encode and mask the three realistic shared pods.

    python bench/codec.py [--shared ../shared/k8s]

Each timing is reported with a floor measured in the same run on the same machine, so the ratio
means something anywhere: decode against upb's own ParseFromString (the C floor), message to JSON
against protobuf's generic json_format.MessageToDict (the library floor: it knows no Go rules
and no special types), encode and protobuf masking against upb's SerializeToString, JSON
masking against orjson.dumps of the pod.
"""

from __future__ import annotations

import argparse
import base64
import json
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from google.protobuf import json_format

from pods_api.core.api.codec import pod_from_bytes, pod_from_message, pod_to_bytes
from pods_api.core.api.pb import k8s_core_v1_pb2
from pods_api.core.query.fieldmask import FieldMask, parse_mask

REALISTIC = 3  # the first three vectors are the realistic pods
MASK = "status.phase,status.podIPs,status.containerStatuses.ready,spec.containers.image"


def best_us(fn: Callable[[], object], number: int) -> float:
    """Best of 5 runs, in microseconds per call: the least disturbed by the rest of the machine."""
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "k8s")
    parser.add_argument("--number", type=int, default=2000)
    args = parser.parse_args()
    vectors = json.loads((args.shared / "pod-vectors.json").read_text())["vectors"][:REALISTIC]
    mask = parse_mask(MASK)
    assert mask is not None
    n = args.number
    print(f"{'pod':28} {'bytes':>6} {'op':14} {'µs':>8} {'floor µs':>9} {'ratio':>6}")
    for vector in vectors:
        report(vector, mask, n)


def report(vector: dict[str, Any], mask: FieldMask, n: int) -> None:
    pb = base64.b64decode(vector["pb"])
    pod_json = pod_from_bytes(pb)
    message = k8s_core_v1_pb2.Pod.FromString(pb)

    def parse_only() -> object:
        return k8s_core_v1_pb2.Pod.FromString(pb)

    def serialize_only() -> object:
        return message.SerializeToString(deterministic=True)

    rows = [
        ("decode", lambda: pod_from_bytes(pb), parse_only),
        ("decode msg", lambda: pod_from_message(message), lambda: json_format.MessageToDict(message)),
        ("encode", lambda: pod_to_bytes(pod_json), serialize_only),
        ("mask json", lambda: mask.apply_json(pod_json), lambda: orjson.dumps(pod_json)),
        ("mask pb", lambda: mask.apply_message(message), serialize_only),
    ]
    for op, fn, floor in rows:
        ours, base = best_us(fn, n), best_us(floor, n)
        print(f"{vector['name']:28} {len(pb):6} {op:14} {ours:8.1f} {base:9.2f} {ours / base:6.1f}")


if __name__ == "__main__":
    main()
