"""Everything `pods-api serve` can be told, in one place."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pods_api.core.policy.connections import (
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_SEND_TIMEOUT,
)
from pods_api.core.policy.inflight import LIST_BYTES_IN_FLIGHT
from pods_api.core.policy.ratelimit import DEFAULT_BURST, DEFAULT_QPS
from pods_api.core.store.feeds import Source, SourceContext
from pods_api.core.store.watch import Overflow

# Where the kubelet (v1.36+) serves its Pods API; root-only by the permissions of its directory.
DEFAULT_SOCKET = Path("/var/lib/kubelet/pods-api/pods-api.sock")
# Ours when bridging the kubelet (--kubelet-socket): the kubelet owns DEFAULT_SOCKET then, and a
# bridge must never be mistaken for it. /run is tmpfs: nothing stale survives a reboot.
BRIDGE_SOCKET = Path("/run/pods-api/pods-api.sock")
HTTP_SOCKET_NAME = "pods-api-http.sock"
# The kubelet's watch channel depth: a watcher this many events behind gets the rest coalesced
# per pod (core/store/watch.py), so it reaches the current state instead of every version; or,
# with --watch-overflow drop, is dropped as the kubelet drops it at the same depth.
DEFAULT_WATCH_BUFFER = 100
# Each watch holds a queue and a task; beyond this a node agent is leaking watches.
DEFAULT_MAX_WATCHERS = 1000


@dataclass
class Config:
    node_name: str
    socket: Path = DEFAULT_SOCKET
    http_socket: Path | None = None  # default: next to `socket`
    http_listen: str | None = None  # HOST:PORT, loopback only
    socket_mode: int = 0o600
    socket_group: str | None = None
    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST
    watch_buffer: int = DEFAULT_WATCH_BUFFER
    watch_overflow: Overflow = Overflow.COALESCE
    max_watchers: int = DEFAULT_MAX_WATCHERS
    metrics_listen: str | None = None
    ready_delay: float = 0.0
    heartbeat: float = 15.0
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    send_timeout: float = DEFAULT_SEND_TIMEOUT
    # Bytes of List responses on their way to clients, per surface (core/policy/inflight.py).
    list_budget: int = LIST_BYTES_IN_FLIGHT
    # Per surface; None: from the descriptor limit (core/policy/connections.py).
    max_connections: int | None = None
    # Builds the pod sources (the command line checked that it can); see pods_api/sources/registry.py.
    sources: Callable[[SourceContext], list[Source]] = lambda context: []

    @property
    def http_socket_path(self) -> Path:
        return self.http_socket or self.socket.parent / HTTP_SOCKET_NAME
