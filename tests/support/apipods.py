"""Pods as the API server sends them."""

from __future__ import annotations

from typing import Any

import builders
from sourceharness import Harness, by_name, harness_fixture  # noqa: F401

NODE = "node-1"


def pod(
    name: str, *, node: str = NODE, uid: str | None = None, image: str = "nginx:1.27", **meta: Any
) -> dict[str, Any]:
    """The API server's copy: namespace default, bound to `node`, Running; `meta`: metadata."""
    body = builders.pod(
        name,
        namespace="default",
        uid=uid or f"uid-{name}",
        image=image,
        node=node,
        phase="Running",
        typed=False,
    )
    body["metadata"].update(meta)
    return body
