"""A pod cache fed by a source, in-process, and the small builders the source tests share."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from repo import ROOT

from pods_api.core.store.cache import PodCache
from pods_api.core.store.snapshot import Snapshot
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import PodEvent, Watcher, WatchHub
from pods_api.sources import Source, staleness

T = TypeVar("T")

# Safety net only: every wait ends on an event; this bounds a test that would otherwise hang.
TIMEOUT = 10.0

EXAMPLES = ROOT / "examples"


class Harness:
    """A cache, the sources running into it, its watcher and the errors the sources report."""

    def __init__(self) -> None:
        self.cache = PodCache(WatchHub(capacity=1000, max_watchers=10))
        self.errors: asyncio.Queue[str] = asyncio.Queue()
        self.tasks: list[asyncio.Task[None]] = []
        self._ready = asyncio.Event()
        self.cache.on_readiness(lambda ready: self._ready.set() if ready else None)
        self._watcher: Watcher | None = None

    def on_error(self, source: str, message: str) -> None:
        assert any(gate.name == source for gate in self.cache.gates)
        self.errors.put_nowait(message)

    async def start(self, *sources: Source) -> Snapshot:
        """Run the sources; once all have synced, the snapshot (later changes come as events)."""
        self.launch(*sources)
        return await self.synced()

    def launch(self, *sources: Source) -> None:
        for source in sources:
            sink = self.cache.source(source.name)
            self.tasks.append(asyncio.create_task(source.run(sink)))

    async def synced(self) -> Snapshot:
        """Once every source has synced: the snapshot, and a watch for what changes after it."""
        await self.wait(self._ready.wait())
        snapshot, self._watcher = self.cache.watch()
        return snapshot

    async def event(self) -> PodEvent:
        assert self._watcher is not None, "start() first"
        return await self.wait(self._watcher.get())

    async def events(self, count: int) -> list[PodEvent]:
        return [await self.event() for _ in range(count)]

    async def error(self, containing: str) -> str:
        """The next reported error that contains `containing` (others before it are skipped)."""
        while True:
            message = await self.wait(self.errors.get())
            if containing in message:
                return message

    async def wait(self, awaitable: Awaitable[T]) -> T:
        """Await, but fail at once if a source dies, and after TIMEOUT at the latest."""
        waiter = asyncio.ensure_future(awaitable)
        done, _ = await asyncio.wait([waiter, *self.tasks], timeout=TIMEOUT, return_when="FIRST_COMPLETED")
        if waiter in done:
            return waiter.result()
        waiter.cancel()
        for task in self.tasks:
            if task in done:
                raise AssertionError(f"source stopped: {task.exception()!r}")
        raise AssertionError(f"nothing happened within {TIMEOUT}s")

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        results = await asyncio.gather(*self.tasks, return_exceptions=True)
        for result in results:
            if not isinstance(result, asyncio.CancelledError):
                raise AssertionError(f"source ended with {result!r}")
        self.tasks.clear()


@pytest.fixture(name="harness")
async def harness_fixture() -> AsyncIterator[Harness]:
    h = Harness()
    yield h
    await h.stop()


def dump(*docs: dict[str, Any]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


def write(path: Path, text: str | bytes) -> None:
    """Atomically, as careful tools do: a temporary dotfile renamed over the target."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(text.encode() if isinstance(text, str) else text)
    os.replace(tmp, path)


def by_name(pods: Any) -> dict[str, PodVersion]:
    return {p.name: p for p in pods}


class Said(logging.Handler):
    """What the sources say of their staleness, line by line as it is said (a warning when one
    becomes stale, "current again" when it recovers): awaited, never polled."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: asyncio.Queue[str] = asyncio.Queue()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.put_nowait(record.getMessage())  # on the event loop's thread, as sources run

    async def line(self, harness: Harness, containing: str) -> None:
        while containing not in await harness.wait(self.lines.get()):
            pass


@pytest.fixture(name="said")
def said_fixture() -> Iterator[Said]:
    logger = logging.getLogger(staleness.__name__)
    handler, level = Said(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)
