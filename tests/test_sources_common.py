"""What every source test uses (a real PodCache, its watcher, the errors a source reports), and the
tests that are about sources together: several sources at once, and the shipped examples."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from pods_api.core.cache import PodCache, Snapshot
from pods_api.core.pod import PodVersion
from pods_api.core.sources import Source
from pods_api.core.sources.fixtures import FixturesSource
from pods_api.core.sources.manifests import ManifestDirSource
from pods_api.core.watch import EventType, PodEvent, Watcher, WatchHub

T = TypeVar("T")

# Safety net only: every wait ends on an event; this bounds a test that would otherwise hang.
TIMEOUT = 10.0
EXAMPLES = Path(__file__).parent.parent / "examples"


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


def pod(
    name: str,
    *,
    uid: str | None = None,
    image: str = "registry.k8s.io/pause:3.10",
    labels: dict[str, str] | None = None,
    phase: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if uid is not None:
        meta["uid"] = uid
    if labels:
        meta["labels"] = labels
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "main", "image": image}], **spec},
    }
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def dump(*docs: dict[str, Any]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


def write(path: Path, text: str | bytes) -> None:
    """Atomically, as careful tools do: a temporary dotfile renamed over the target."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(text.encode() if isinstance(text, str) else text)
    os.replace(tmp, path)


def by_name(pods: Any) -> dict[str, PodVersion]:
    return {p.name: p for p in pods}


# ---------------------------------------------------------------------------------------------
# several sources


async def test_a_uid_claimed_by_one_source_is_refused_from_another(tmp_path: Path, harness: Harness) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    write(first / "p.yaml", dump(pod("from-first", uid="shared-uid")))
    write(second / "p.yaml", dump(pod("from-second", uid="shared-uid"), pod("own", uid="own-uid")))

    a = FixturesSource(first, on_error=harness.on_error)
    await harness.start(a)
    harness.launch(FixturesSource(second, on_error=harness.on_error))

    added = await harness.event()  # the second source's own pod; its copy of shared-uid is refused
    assert (added.type, added.pod.uid) == (EventType.ADDED, "own-uid")
    served = harness.cache.get("shared-uid")
    assert served is not None and served.name == "from-first"


async def test_fixtures_and_manifests_side_by_side(tmp_path: Path, harness: Harness) -> None:
    snapshot = await harness.start(
        FixturesSource(EXAMPLES / "fixtures", on_error=harness.on_error),
        ManifestDirSource(EXAMPLES / "manifests", node_name="node-1", on_error=harness.on_error),
    )
    names = set(by_name(snapshot.pods))
    assert {"etcd-node-1", "nginx-node-1"} <= names
    assert len(names) == len(snapshot.pods)


# ---------------------------------------------------------------------------------------------
# the examples


async def test_example_fixtures_load_cleanly(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    snapshot = await harness.start(FixturesSource(EXAMPLES / "fixtures", on_error=harness.on_error))
    assert harness.errors.empty()
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]
    assert 4 <= len(snapshot.pods) <= 6
    phases = {p.json["status"]["phase"] for p in snapshot.pods}
    assert {"Running", "Pending"} <= phases
    reasons = {
        s.get("state", {}).get("waiting", {}).get("reason")
        for p in snapshot.pods
        for s in p.json["status"].get("containerStatuses", [])
    }
    assert "CrashLoopBackOff" in reasons
    for p in snapshot.pods:
        assert p.uid and p.json["metadata"]["creationTimestamp"]


async def test_example_manifests_load_cleanly(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    source = ManifestDirSource(EXAMPLES / "manifests", node_name="node-1", on_error=harness.on_error)
    snapshot = await harness.start(source)
    assert harness.errors.empty()
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]
    assert sorted(p.name for p in snapshot.pods) == ["etcd-node-1", "nginx-node-1"]
    for p in snapshot.pods:
        assert len(p.uid) == 32  # generated: none of the examples carries one
