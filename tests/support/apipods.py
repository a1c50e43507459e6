"""Pods as the API server sends them."""

from __future__ import annotations

from typing import Any

from sourceharness import Harness, by_name, harness_fixture  # noqa: F401

NODE = "node-1"


def pod(
    name: str, *, node: str = NODE, uid: str | None = None, image: str = "nginx:1.27", **meta: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}", **meta},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": image}]},
        "status": {"phase": "Running"},
    }
