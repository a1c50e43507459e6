"""Whether a source with an upstream is still current, and saying so when it is not.

A source that fails keeps serving its last good pods (never "no pods"), but once it has applied
nothing from its upstream for longer than its resync (the longest a working upstream goes
without giving it something: a poll interval, a relist period, a watch's timeout, plus a
margin), those pods may be old. Then, and until it next applies something:

- `pods_api_source_connected{source}` is 0 (told through `on_connected`), even while a
  connection succeeds but applies nothing;
- one warning is logged, and "current again" once it recovers;
- the sink carries a warning for clients (`sink.warn`): gRPC trailing metadata, which
  `pods-api check` prints, and `/readyz`'s detail. Readiness does not change: the kubelet too
  keeps serving its last state when its upstream is away.

    staleness = Staleness(name, stale_after=STALE_AFTER, on_connected=gauge)
    with staleness.running(sink):
        ...
        staleness.current()           # applied a complete state, an event, a bookmark, a 304
        staleness.failed(problem)     # an attempt failed: the gauge is 0 until current again

A timer, not only the failures, decides: an upstream that answers yet gives nothing to apply (a
watch connected but never synced, a hung stream) becomes stale too. `current(live=True)` says
the source is current and stays so without being told again (a synced watch whose silence means
"nothing changed"), until `failed` ends it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

log = logging.getLogger(__name__)

# Told whether the source has a working connection to its upstream (the gauge).
ConnectedGauge = Callable[[bool], None]
# A source that polls or relists is stale once this many periods in a row gave nothing to
# apply: one is a blip (a server restarting, a dropped connection), a second says the
# upstream is down or broken.
MISSED_PERIODS = 2


def after_missed(period: float, deadline: float) -> float:
    """The resync of a source that asks every `period` seconds, each ask taking at most
    `deadline`: MISSED_PERIODS periods, the last one given its whole deadline."""
    return MISSED_PERIODS * period + deadline


# The most of a failure's text a warning shows: every List, Get and Lookup carries the warnings
# in its trailing metadata, which a default gRPC client takes at most 8 KiB of in all, so a
# few sources' warnings must fit with room.
MAX_PROBLEM_CHARS = 500


# The key of the stale warning among a sink's warnings (another may say something else).
WARNING_KEY = "stale"


class WarnedSink(Protocol):
    """The part of a sink (source or overlay) that carries warnings to clients."""

    def warn(self, warning: str | None, *, key: str = "") -> None: ...


class Staleness:
    """One source's staleness: when it was last current, and whether it is stale now."""

    def __init__(
        self, source: str, *, stale_after: float, on_connected: ConnectedGauge | None = None
    ) -> None:
        self.source = source
        self.stale_after = stale_after
        self.upstream = "its upstream"  # named in the warning; a source sets it once it knows
        self._on_connected = on_connected or (lambda connected: None)
        self._sink: WarnedSink | None = None
        # When the source last knew it had everything its upstream had; None before the first
        # time (not ready yet: readiness says so, this does not).
        self._current_at: float | None = None
        self._current_wall = 0.0  # the same moment, on the wall clock, to show
        self._live = False  # current until told otherwise (a synced watch)
        self._problem: str | None = None  # the last failure since it was current
        self.stale = False
        self._timer: asyncio.TimerHandle | None = None
        self._told: bool | None = None  # what the gauge was last told: told again only on a change

    @contextmanager
    def running(self, sink: WarnedSink) -> Iterator[None]:
        """While a run of the source writes to `sink`; kept across runs (a restarted source is
        as stale as it was)."""
        self._sink = sink
        self._arm()
        try:
            yield
        finally:
            self._disarm()

    def current(self, *, live: bool = False) -> None:
        """The source has everything its upstream had until now."""
        self._current_at, self._current_wall = time.monotonic(), time.time()
        self._live = live
        self._problem = None
        if self.stale:
            self.stale = False
            self._warn(None)
            log.info("pod source %s: current again", self.source)
        self._gauge(True)
        self._arm()

    def connected(self) -> None:
        """A connection that works, before anything from it is applied: the gauge says so
        unless the source is stale, which only applying something ends."""
        if not self.stale:
            self._gauge(True)

    def failed(self, problem: str) -> None:
        """An attempt failed (`problem`: one line, no secret): the gauge is 0, and past the
        resync the source is stale."""
        self._problem = _one_line(problem)
        self._gauge(False)
        if self._live:
            self._live = False
            self._current_at, self._current_wall = time.monotonic(), time.time()  # until now
        self._check()

    def _check(self) -> None:
        if self._current_at is None or self._live:
            return
        idle = time.monotonic() - self._current_at
        if idle < self.stale_after:
            self._arm()
            return
        # When it was last current, on the wall clock: a time stays true while the warning is
        # shown, a duration ("for 40 s") would not.
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._current_wall))
        problem = self._problem or "it answers, but gave nothing to apply"
        if not self.stale:
            self.stale = True
            self._gauge(False)
            log.warning(
                "pod source %s: stale: nothing applied from %s since %s: %s",
                self.source,
                self.upstream,
                since,
                problem,
            )
        self._warn(
            f"stale: nothing applied from {self.upstream} since {since} (its resync is "
            f"{self.stale_after:g} s): {problem}"
        )

    def _arm(self) -> None:
        """A timer for when the source would become stale, if none is pending."""
        if self._timer is not None or self._sink is None or self._current_at is None or self._live:
            return
        if self.stale:
            return  # stale already: `failed` keeps the warning's text current
        due = self._current_at + self.stale_after - time.monotonic()
        self._timer = asyncio.get_running_loop().call_later(max(0.0, due), self._expired)

    def _expired(self) -> None:
        self._timer = None
        self._check()

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _gauge(self, connected: bool) -> None:
        # Per change, not per call: `current` comes with every event a watch applies.
        if connected is not self._told:
            self._told = connected
            self._on_connected(connected)

    def _warn(self, warning: str | None) -> None:
        if self._sink is not None:
            self._sink.warn(warning, key=WARNING_KEY)


def _one_line(text: str) -> str:
    """`text` on one line (a YAML error spans several), cut to MAX_PROBLEM_CHARS."""
    line = " ".join(text.split())
    if len(line) <= MAX_PROBLEM_CHARS:
        return line
    return f"{line[:MAX_PROBLEM_CHARS]}… ({len(line)} characters)"
