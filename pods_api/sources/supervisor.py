"""Supervision: a source that fails unexpectedly is restarted, and nothing else notices.

Sources handle the failures they expect (a file that does not parse, a fetch that fails) and
keep their last good state. Anything else that escapes `run` (a bug, or an input nobody thought
of) must not end the server: `supervise` logs it in one line with the source's name (the
traceback at debug level), counts it, and runs the same source again after a jittered
exponential backoff. The source's sink lives on across restarts, so its pods stay served and a
cache that was ready stays ready; the restarted source replaces them once it has read again.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from pods_api.core.store.cache import OverlaySink, SourceSink

log = logging.getLogger(__name__)

# The first restart comes after about a second (a transient fault is over by then), doubling
# up to 30 s: a source that fails on every start costs a log line and a retry twice a minute.
FIRST_RESTART = 1.0
MAX_RESTART = 30.0
# A run this long was a good one: the next failure starts the backoff from the beginning.
HEALTHY_RUN = 60.0
# An exception's message is quoted this far: one line, whatever the exception holds.
MESSAGE_CHARS = 300


Sink = TypeVar("Sink", SourceSink, OverlaySink)
Sink_contra = TypeVar("Sink_contra", contravariant=True)


class _Runs(Protocol[Sink_contra]):
    """A pod source (Source) or a status overlay (StatusOverlay): both are supervised alike."""

    name: str

    async def run(self, sink: Sink_contra) -> None: ...


async def supervise(
    source: _Runs[Sink],
    sink: Sink,
    *,
    on_restart: Callable[[str], None] | None = None,
    first: float = FIRST_RESTART,
    cap: float = MAX_RESTART,
    healthy: float = HEALTHY_RUN,
) -> None:
    """Run `source` into `sink` until cancelled, restarting it whenever it fails;
    `on_restart(source.name)` is told of each restart."""
    failures = 0
    while True:
        started = time.monotonic()
        error: Exception | None = None
        try:
            await source.run(sink)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = exc
        problem = describe(error) if error else "run() returned, and a source runs until it is cancelled"
        failures = 1 if time.monotonic() - started >= healthy else failures + 1
        delay = restart_delay(failures, first, cap)
        log.error(
            "pod source %s failed (%s); restarting it in %.1fs, its pods stay served",
            source.name,
            problem,
            delay,
        )
        if error is not None:
            log.debug("pod source %s: the failure's traceback", source.name, exc_info=error)
        del error  # the traceback holds the failed run's frames
        if on_restart is not None:
            on_restart(source.name)
        await asyncio.sleep(delay)


def restart_delay(failures: int, first: float = FIRST_RESTART, cap: float = MAX_RESTART) -> float:
    """Jittered exponential: nodes whose sources failed together do not restart in lockstep."""
    return min(cap, first * 2.0 ** min(failures - 1, 32)) * random.uniform(0.5, 1.0)


def describe(exc: BaseException) -> str:
    """`Type: message` in one bounded line; never raises, whatever the exception holds."""
    try:
        message = " ".join(str(exc).split())
    except Exception:
        message = "(message could not be shown)"
    if len(message) > MESSAGE_CHARS:
        message = message[: MESSAGE_CHARS - 3] + "..."
    name = type(exc).__name__
    return f"{name}: {message}" if message else name
