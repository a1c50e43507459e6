"""pods_api.client: talk to any Pods API socket — the kubelet's (v1.36+) or pods-api's.

    from pods_api.client import Client, Informer
    async with Client("/var/lib/kubelet/pods-api/pods-api.sock") as client:
        for pod in await client.list(fields="status.phase"):
            print(pod.name, pod.json()["status"].get("phase"))

- `Client(socket, contract=Contract.KUBELET)`: `list`, `get`, `watch`, each with an optional
  field mask (`fields="status.phase,status.podIPs"` or a list of paths). Pods are `Pod`
  objects holding the server's exact bytes (`raw`); `message` and `json()` decode on demand.
  The receive limit is raised from gRPC's 4 MiB default, which a list of ~1,000 pods exceeds.
- On pods-api's socket (its extension; a kubelet answers `Unimplemented`):
  `lookup(container_id=… | pod_ip=… | namespace=…, name=…)` → `Match(pod, container)`, and
  `label_selector=`/`field_selector=` on `list` and `watch`.
- `Informer(client)`: list+watch with reconnects, reconciliation without replay, `synced`,
  `state`, handlers or `async for`.
- Errors (`pods_api.client.exceptions`): `NotReady`, `RateLimited`, `NotFound`, `InvalidArgument`,
  `Unimplemented`, `Unreachable`, `PermissionDenied`, all `PodsAPIError`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pods_api.client.choices import KUBELET_SOCKET
    from pods_api.client.client import (
        MAX_RECEIVE_BYTES,
        Client,
        Contract,
        EventType,
        WatchEvent,
    )
    from pods_api.client.exceptions import (
        InvalidArgument,
        NotFound,
        NotReady,
        PermissionDenied,
        PodsAPIError,
        RateLimited,
        Unimplemented,
        Unreachable,
    )
    from pods_api.client.informer import Backoff, Informer, InformerEvent, State
    from pods_api.client.lookup_client import ContainerKind, Match, MatchedContainer
    from pods_api.client.pod import Pod

__all__ = [
    "KUBELET_SOCKET",
    "MAX_RECEIVE_BYTES",
    "Backoff",
    "Client",
    "ContainerKind",
    "Contract",
    "EventType",
    "Informer",
    "InformerEvent",
    "InvalidArgument",
    "Match",
    "MatchedContainer",
    "NotFound",
    "NotReady",
    "PermissionDenied",
    "Pod",
    "PodsAPIError",
    "RateLimited",
    "State",
    "Unimplemented",
    "Unreachable",
    "WatchEvent",
]

# Where each public name lives: loaded when first used, so that a command (`pods-api check`)
# that needs one module of the client does not load every other.
_HOME = {
    "KUBELET_SOCKET": "choices",
    **dict.fromkeys(("MAX_RECEIVE_BYTES", "Client", "Contract", "EventType", "WatchEvent"), "client"),
    "Pod": "pod",
    **dict.fromkeys(
        (
            "InvalidArgument",
            "NotFound",
            "NotReady",
            "PermissionDenied",
            "PodsAPIError",
            "RateLimited",
            "Unimplemented",
            "Unreachable",
        ),
        "exceptions",
    ),
    **dict.fromkeys(("Backoff", "Informer", "InformerEvent", "State"), "informer"),
    **dict.fromkeys(("ContainerKind", "Match", "MatchedContainer"), "lookup_client"),
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'pods_api.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"pods_api.client.{home}"), name)
    globals()[name] = value
    return value
