"""The stall guard of every watch (`StallTimer`, core/policy/stall.py): a stream is cut off when
one send has waited for the send timeout, never because sends that each complete in time kept
overlapping. A starved server's SSE data and heartbeat sends overlap without a gap, and timing
the run of them as one send cut off every SSE watcher of W7 that kept reading. The loop's clock
is the test's, so the times are exact, and no test waits on real time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from pods_api.core.policy.stall import StallTimer

SEND_TIMEOUT = 30.0


class Clock:
    """The loop's time, as the test sets it, and when the timer's check is next due."""

    def __init__(self) -> None:
        self.now = 0.0
        self.due: float | None = None

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[..., None], *args: Any) -> asyncio.TimerHandle:
        self.due = when
        return asyncio.TimerHandle(when, callback, args, asyncio.get_running_loop())


def _guarded(monkeypatch: pytest.MonkeyPatch) -> tuple[StallTimer, Clock, list[float]]:
    """A timer reading the test's clock as the running loop's; the times it fired at."""
    clock = Clock()
    loop = asyncio.get_running_loop()
    monkeypatch.setattr(loop, "time", clock.time)
    fired: list[float] = []
    timer = StallTimer(SEND_TIMEOUT, lambda: fired.append(clock.now))
    monkeypatch.setattr(loop, "call_at", clock.call_at)
    return timer, clock, fired


def _check(timer: StallTimer, clock: Clock, at: float) -> bool:
    """Runs the timer's check at `at` (as its loop would, once due); whether it has fired."""
    clock.now = at
    timer._check()
    return timer.fired


async def test_sends_that_each_complete_in_time_never_fire_however_they_overlap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timer, clock, fired = _guarded(monkeypatch)
    pending = [timer.begin()]
    # For three send timeouts, a data send and a heartbeat are always pending together, each
    # completing 20 s after it began: no send ever waits 30 s.
    for step in range(9):
        clock.now = 10.0 * step + 10
        pending.append(timer.begin())
        clock.now += 10
        timer.end(pending.pop(0))
        assert not _check(timer, clock, clock.now), f"fired at {clock.now:g} s"
    assert fired == []
    timer.close()


async def test_one_send_that_waits_the_send_timeout_fires_once(monkeypatch: pytest.MonkeyPatch) -> None:
    timer, clock, fired = _guarded(monkeypatch)
    timer.begin()  # data: never completes
    assert not _check(timer, clock, SEND_TIMEOUT - 1)
    assert clock.due == SEND_TIMEOUT  # re-armed for when that send reaches the limit
    clock.now = SEND_TIMEOUT - 1
    beat = timer.begin()  # a heartbeat that completes does not reset the data send
    clock.now = SEND_TIMEOUT - 0.5
    timer.end(beat)
    assert _check(timer, clock, SEND_TIMEOUT)
    assert fired == [SEND_TIMEOUT]
    timer.close()


async def test_an_idle_stream_never_fires(monkeypatch: pytest.MonkeyPatch) -> None:
    timer, clock, fired = _guarded(monkeypatch)
    assert not _check(timer, clock, 10 * SEND_TIMEOUT)
    assert clock.due == 11 * SEND_TIMEOUT
    assert fired == []
    timer.close()


async def test_the_timer_fires_on_the_loop_without_a_check_by_hand() -> None:
    """On a real loop: a send that never completes fires the timer once its time has passed."""
    stalled = asyncio.Event()
    timer = StallTimer(0.01, stalled.set)
    timer.begin()
    await asyncio.wait_for(stalled.wait(), 5.0)
    assert timer.fired
    timer.close()
