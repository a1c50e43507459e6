"""Pod sources. Each is small and owns its retries and backoff; all speak one protocol:

    async def run(self, sink: SourceSink) -> None

`run` hands the source's complete state to `sink.replace(pods)` (or deltas to `sink.upsert` /
`sink.delete`), calls `sink.mark_synced()` once its first state is complete, and runs until
cancelled. A source that fails keeps its last good state: it logs, counts, retries, and never
hands over "no pods" for "could not read".

The sink is called on the event loop's thread, and only there: the cache is not locked, so a
call from another thread (a worker doing I/O, a thread-based client library's callback) would
corrupt it quietly; the sink raises RuntimeError instead. Do the work in a thread if you must
(`await asyncio.to_thread(...)`), and call the sink after the await.

An exception that escapes `run` is a bug or an input nobody thought of: the server's supervisor
(`supervisor.py`) logs it with the source's name, counts it, and runs the source again after a
backoff. The sink, and so the source's pods and readiness, outlive the restart.

Adding a source: a module `pods_api/sources/<name>.py` with the source class and two functions,

    def add_flags(parser: argparse.ArgumentParser) -> None       # its own flags
    def from_args(args: argparse.Namespace, context: SourceContext) -> list[Source]

and a `SOURCE_FLAGS` tuple naming the flags that turn it on (for the "no pod source" message).
`from_args` returns no sources when its flags are absent, and raises ValueError naming the flag
and the value for anything wrong that can be seen before serving (the command line then exits 2
with that one line). Then add the module to `SOURCE_MODULES` in `registry.py`: the command line,
the server and the README's flag list take it from there. The registry imports every source's
module whichever are configured, so a module keeps its heavy libraries out of its top level:
imported where used (httpx in `poller.py`, kubernetes_asyncio in `apiserver.py`), or the source
in a module of its own that `from_args` imports (`cri/flags.py`). Every node pays for what the
server imports (BENCHMARKS.md, "Memory"; `tests/e2e/test_fixed_memory.py`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from pods_api.core.store.feeds import ErrorCounter, Source, SourceContext, StatusOverlay

# The contract is the cache's (core/store/feeds.py); source modules take it from here.
__all__ = [
    "CanOverlay",
    "ErrorCounter",
    "ManifestError",
    "Source",
    "SourceContext",
    "SourceModule",
    "StatusOverlay",
    "configures_static_pods",
    "connected_gauge",
]


class ManifestError(Exception):
    """An input (a file, an HTTP body, a pod in it) that gives no pods: what reading and parsing
    raise, and a source keeps its last good state on. `str()` is one line: where, then what is
    wrong."""

    def __init__(self, origin: str, problem: str) -> None:
        super().__init__(f"{origin}: {problem}")
        self.origin = origin
        self.problem = problem


@runtime_checkable
class CanOverlay(Protocol):
    """A source that becomes a status overlay when other sources own the pods (the CRI
    source: alone, every pod sandbox is a pod; beside others, it gives their pods' status)."""

    def as_overlay(self) -> StatusOverlay: ...


def connected_gauge(context: SourceContext, name: str) -> Callable[[bool], None] | None:
    """The source named `name`'s `pods_api_source_connected` gauge, from its context."""
    on_connected = context.on_connected
    if on_connected is None:
        return None
    return lambda connected: on_connected(name, connected)


def configures_static_pods(source: Source) -> bool:
    """Whether a source's pods are static pods as their manifests make them (the kubelet's
    "file" and "http" config sources: --manifests, --manifest-url), said by the class attribute
    `configures_static_pods = True`. The cache's identity policy matches such a pod with what
    other sources report of the same static pod (its mirror, the kubelet's own view of it)."""
    return getattr(source, "configures_static_pods", False) is True


class SourceModule(Protocol):
    """A module that holds one kind of source (see above)."""

    SOURCE_FLAGS: tuple[str, ...]

    def add_flags(self, parser: argparse.ArgumentParser) -> None: ...

    def from_args(self, args: argparse.Namespace, context: SourceContext) -> list[Source]: ...
