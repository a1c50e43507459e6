"""The SSE stall guard (`WatchResponse`): a watch is cut off when one send has waited for the send
timeout, never because sends that each complete in time kept overlapping. A starved server's
data and heartbeat sends overlap without a gap, and timing the run of them as one send cut off
every SSE watcher of W7 that kept reading. The loop's clock is the test's, so the times are
exact, and no test waits on real time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from starlette.types import Message

from pods_api.gateway.admission import WATCH, Call
from pods_api.gateway.sse import WatchResponse

SEND_TIMEOUT = 30.0


class Clock:
    """The loop the guard is handed: its time, and the one timer the guard keeps armed."""

    def __init__(self) -> None:
        self.now = 0.0
        self.due: float | None = None

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[..., None], *args: Any) -> asyncio.TimerHandle:
        self.due = when
        return asyncio.TimerHandle(when, callback, args, asyncio.get_running_loop())


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""


class Sends:
    """Sends through the guard that complete when the test says."""

    def __init__(self, response: WatchResponse) -> None:
        self._response = response
        self._open: dict[str, tuple[asyncio.Future[None], asyncio.Task[None]]] = {}

    async def start(self, name: str) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def send(message: Message) -> None:
            await done

        task = asyncio.create_task(self._response._send_with_timeout(send, {"type": "http.response.body"}))
        await asyncio.sleep(0)  # the send has begun: the guard has its start
        self._open[name] = (done, task)

    async def finish(self, name: str) -> None:
        done, task = self._open.pop(name)
        done.set_result(None)
        await task


def _guarded(monkeypatch: pytest.MonkeyPatch) -> tuple[WatchResponse, Clock]:
    """A response whose sends and checks read the test's clock, as the running loop's."""
    response = WatchResponse(_nothing(), None, Call(WATCH), heartbeat=10.0, send_timeout=SEND_TIMEOUT)
    clock = Clock()
    monkeypatch.setattr(asyncio.get_running_loop(), "time", clock.time)
    return response, clock


def _cut_off(response: WatchResponse, clock: Clock, at: float) -> bool:
    clock.now = at
    response._check_send(clock)  # type: ignore[arg-type]  # the guard reads time and call_at only
    return response._stalled.cancel_called


async def test_sends_that_each_complete_in_time_never_cut_off_a_watch_however_they_overlap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    response, clock = _guarded(monkeypatch)
    sends = Sends(response)
    await sends.start("data 0")
    # For three send timeouts, a data send and a heartbeat are always pending together, each
    # completing 20 s after it began: no send ever waits 30 s.
    for step in range(9):
        clock.now = 10.0 * step + 10
        await sends.start(f"{'beat' if step % 2 == 0 else 'data'} {step + 1}")
        clock.now += 10
        oldest = next(iter(sends._open))
        await sends.finish(oldest)
        assert not _cut_off(response, clock, clock.now), f"cut off at {clock.now:g} s"


async def test_one_send_that_waits_the_send_timeout_cuts_off_the_watch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    response, clock = _guarded(monkeypatch)
    sends = Sends(response)
    await sends.start("data")
    assert not _cut_off(response, clock, SEND_TIMEOUT - 1)
    assert clock.due == SEND_TIMEOUT  # re-armed for when that send reaches the limit
    await sends.start("heartbeat")  # a heartbeat that completes does not reset the data send
    clock.now = SEND_TIMEOUT - 0.5
    await sends.finish("heartbeat")
    assert _cut_off(response, clock, SEND_TIMEOUT)


async def test_an_idle_watch_is_not_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    response, clock = _guarded(monkeypatch)
    assert not _cut_off(response, clock, 10 * SEND_TIMEOUT)
    assert clock.due == 11 * SEND_TIMEOUT
