"""pods-api: the kubelet's node-local Pods API, served and bridged.

The public entry points: `pod_from_bytes` / `pod_to_bytes` turn the kubelet's protobuf `v1.Pod`
into Kubernetes JSON and back; `pods_api.client` talks to any Pods API socket; `pods-api` is
the command.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pods_api.core.api.codec import CodecError, pod_from_bytes, pod_to_bytes

# The one place the version is written: pyproject.toml reads it from here.
__version__ = "0.2.0"

__all__ = ["CodecError", "__version__", "pod_from_bytes", "pod_to_bytes"]


def __getattr__(name: str) -> Any:
    # The codec (and the generated protobuf modules under it) loads when first used, not with the
    # package: `pods-api --version` and `pods-api check` never need it.
    if name in ("CodecError", "pod_from_bytes", "pod_to_bytes"):
        value = getattr(importlib.import_module("pods_api.core.api.codec"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pods_api' has no attribute {name!r}")
