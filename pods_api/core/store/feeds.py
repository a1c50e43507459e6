"""What a pod source is to the cache: the protocol every source and status overlay speaks, and
what one is built with. The sources wing (pods_api/sources/) implements it; the core defines it,
as it defines the sinks it is written to (core/store/cache.py), so data flows one way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pods_api.core.store.cache import OverlaySink, SourceSink

# Told (source name, reason) for every input a source rejects; the server counts them.
ErrorCounter = Callable[[str, str], None]


class Source(Protocol):
    """A pod source. `run(sink)` runs until cancelled and calls the sink on the event loop's
    thread only (the sink raises RuntimeError otherwise); see pods_api/sources/__init__.py."""

    name: str  # unique among the sources; names readiness, logs and metric labels, never a secret

    async def run(self, sink: SourceSink) -> None: ...


class StatusOverlay(Protocol):
    """A status-only input: statuses for pods other sources own, written to the cache's
    overlay sink (`cache.overlay(name)`); it never makes a pod exist."""

    name: str

    async def run(self, sink: OverlaySink) -> None: ...


@dataclass(frozen=True)
class SourceContext:
    """What a source is built with besides its own flags."""

    node_name: str  # this node's name, lowercased
    on_error: ErrorCounter | None = None  # None while the flags are only being checked
    # Told (source name, connected) by a source that holds a connection to a server.
    on_connected: Callable[[str, bool], None] | None = None
    # Told (source name, number) by a source reading another Pods API (the bridge) of each
    # watch event whose type the kubelet's released API does not send: UNSPECIFIED, or a number
    # it does not define.
    on_unknown_event: Callable[[str, int], None] | None = None
