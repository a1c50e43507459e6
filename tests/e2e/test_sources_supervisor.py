"""Supervision: a source that raises is restarted with backoff, keeps its pods and readiness, and
never ends the server; sinks refuse calls from other threads."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from pathlib import Path

import httpx
import pytest
from builders import pod
from podwatch import ADDED, SYNCED, Watch
from serve import Served, serving, start
from sourceharness import TIMEOUT, dump, write

from pods_api.core.store.cache import PodCache, SourceSink
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import WatchHub
from pods_api.sources.supervisor import describe, restart_delay, supervise


class Flaky:
    """Serves one pod, then raises; the next run raises at once; the run after that stays up."""

    name = "flaky"

    def __init__(self) -> None:
        self.runs = 0
        self.steady = asyncio.Event()

    async def run(self, sink: SourceSink) -> None:
        self.runs += 1
        if self.runs == 1:
            sink.replace([PodVersion.from_json(pod("web", uid="uid-web"))])
            sink.mark_synced()
            raise RuntimeError("boom\nwith a second line")
        if self.runs == 2:
            raise RecursionError("maximum recursion depth exceeded")
        self.steady.set()
        await asyncio.Event().wait()


async def test_a_failing_source_is_restarted_and_keeps_its_pods(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="pods_api.sources.supervisor")
    cache = PodCache(WatchHub(capacity=10, max_watchers=1))
    source, restarts = Flaky(), []
    readiness: list[bool] = []
    cache.on_readiness(readiness.append)
    sink = cache.source(source.name)
    task = asyncio.create_task(supervise(source, sink, on_restart=restarts.append, first=0.01, cap=0.02))
    try:
        await asyncio.wait_for(source.steady.wait(), TIMEOUT)
        assert not task.done()
        assert restarts == ["flaky", "flaky"]
        assert [p.uid for p in cache.snapshot().pods] == ["uid-web"]  # kept across both restarts
        assert cache.ready and readiness == [True]  # ready once, and it stayed
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage().split(";")[0] for r in errors] == [
        "pod source flaky failed (RuntimeError: boom with a second line)",
        "pod source flaky failed (RecursionError: maximum recursion depth exceeded)",
    ]
    assert all(r.exc_info is None and "\n" not in r.getMessage() for r in errors)  # one line each
    tracebacks = [r for r in caplog.records if r.levelno == logging.DEBUG and r.exc_info]
    assert len(tracebacks) == 2  # at debug level


async def test_a_source_that_returns_is_restarted_too() -> None:
    third_run = asyncio.Event()

    class Returns:
        name = "returns"
        runs = 0

        async def run(self, sink: SourceSink) -> None:
            self.runs += 1
            if self.runs > 2:
                third_run.set()
                await asyncio.Event().wait()

    cache = PodCache(WatchHub(capacity=10, max_watchers=1))
    restarts: list[str] = []
    task = asyncio.create_task(
        supervise(Returns(), cache.source("returns"), on_restart=restarts.append, first=0.01, cap=0.01)
    )
    await asyncio.wait_for(third_run.wait(), TIMEOUT)
    task.cancel()
    assert restarts == ["returns", "returns"]


def test_restart_delay_is_jittered_exponential_and_capped() -> None:
    for failures, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (5, 16.0), (6, 30.0), (10_000, 30.0)]:
        delays = [restart_delay(failures) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays), (failures, delays)
        assert len(set(delays)) > 1


async def test_a_good_run_resets_the_backoff() -> None:
    real_sleep = asyncio.sleep
    delays: list[float] = []

    class FailsAfterAWhile:
        name = "slow-fail"

        async def run(self, sink: SourceSink) -> None:
            await real_sleep(0.02)  # longer than `healthy` below: a good run
            raise RuntimeError("again")

    async def recorded(delay: float) -> None:  # the supervisor's backoff, without the wait
        delays.append(delay)

    cache = PodCache(WatchHub(capacity=10, max_watchers=1))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(asyncio, "sleep", recorded)
        task = asyncio.create_task(
            supervise(FailsAfterAWhile(), cache.source("s"), first=1.0, cap=30.0, healthy=0.01)
        )
        async with asyncio.timeout(TIMEOUT):
            while len(delays) < 4:
                await real_sleep(0.01)
        task.cancel()
    assert all(0.5 <= d <= 1.0 for d in delays), delays  # never past the first step


def test_describe_never_raises() -> None:
    class Hostile(Exception):
        def __str__(self) -> str:
            raise RecursionError("no")

    assert describe(Hostile()) == "Hostile: (message could not be shown)"
    assert describe(ValueError("x" * 10_000)).endswith("...")
    assert len(describe(ValueError("x" * 10_000))) < 400
    assert describe(KeyError()) == "KeyError"


async def test_a_sink_refuses_calls_from_another_thread() -> None:
    cache = PodCache(WatchHub(capacity=10, max_watchers=1))
    sink = cache.source("threaded")
    caught: list[BaseException] = []

    def from_a_thread() -> None:
        try:
            sink.replace([])
        except RuntimeError as exc:
            caught.append(exc)

    thread = threading.Thread(target=from_a_thread)
    thread.start()
    thread.join(TIMEOUT)
    assert caught and "called its sink from another thread" in str(caught[0])
    assert "threaded" in str(caught[0])
    sink.replace([])  # on the loop's thread: fine
    sink.mark_synced()
    assert cache.ready


# -- end to end: the server keeps serving ---------------------------------------------------------

# `pods-api serve` with the codec's error-message helper replaced by repr(), which raises
# RecursionError on a deeply nested value: a source that fails unexpectedly on a real input (no
# hook of ours to make it fail), so that supervision is tested against a real failure.
_WITH_A_FAILING_SOURCE = """
import sys
from pods_api.core.api import codec
codec._brief = lambda value, depth: repr(value)
from pods_api.serve.cli import main
sys.argv[0] = "pods-api"
main()
"""


def _deep_pod() -> str:
    return (
        '{"apiVersion":"v1","kind":"Pod","metadata":{"uid":"uid-bad","name":' + "[" * 1000 + "]" * 1000 + "}}"
    )


async def test_the_server_keeps_serving_when_a_source_fails(tmp_path: Path) -> None:
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    write(fixtures / "web.yaml", dump(pod("web", uid="uid-web")))
    served = _start_failing(tmp_path / "run", "--fixtures", str(fixtures), "--log-level", "debug")
    watch = None
    try:
        served.wait_ready()
        watch = Watch(served)
        assert [kind for kind, _ in await watch.next(2)] == [ADDED, SYNCED]

        write(fixtures / "bad.json", _deep_pod())
        line = served.wait_for_line(f"pod source fixtures:{fixtures} failed (RecursionError")
        assert "restarting it in" in line and "its pods stay served" in line
        assert not any(seen.startswith("Traceback") for seen in served.lines[: served.lines.index(line)])
        served.wait_for_line("DEBUG pods_api.sources.supervisor")  # the traceback, at debug level

        async with _client(served) as client:
            health = await client.get("/readyz")
            pods = (await client.get("/v1/pods")).json()["items"]
            metrics = (await client.get("/metrics")).text
        assert health.status_code == 200
        assert [p["metadata"]["uid"] for p in pods] == ["uid-web"]
        assert _metric(metrics, f'pods_api_source_restarts_total{{source="fixtures:{fixtures}"}}') >= 1

        (fixtures / "bad.json").unlink()
        write(fixtures / "db.yaml", dump(pod("db", uid="uid-db")))
        # The next restart (after a backoff of seconds) reads the directory again.
        [(kind, added)] = await watch.next(within=TIMEOUT * 3)
        assert (kind, added["metadata"]["uid"]) == (ADDED, "uid-db")
        assert served.proc.poll() is None
    finally:
        if watch is not None:
            await watch.close()
        assert served.stop() == 0
        served.close()


async def test_a_deeply_nested_fixture_is_a_clear_error(tmp_path: Path) -> None:
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    write(fixtures / "web.yaml", dump(pod("web", uid="uid-web")))
    write(fixtures / "bad.json", _deep_pod())
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        line = served.wait_for_line("bad.json")
        assert "metadata.name: expected string, got [[[[...]]]]" in line
        async with _client(served) as client:
            pods = (await client.get("/v1/pods")).json()["items"]
        assert [p["metadata"]["uid"] for p in pods] == ["uid-web"]
        assert not any("failed (" in seen for seen in served.lines)  # no restart: nothing raised


def _start_failing(run_dir: Path, *args: str) -> Served:
    """`pods-api serve` as `serve.start` runs it, with the repr() error-message helper."""
    return start(run_dir, *args, program=(sys.executable, "-c", _WITH_A_FAILING_SOURCE))


def _client(served: Served) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(uds=str(served.http_socket))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=TIMEOUT)


def _metric(text: str, series: str) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{series} not in the metrics")
