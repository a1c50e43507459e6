"""What every source test uses (a real PodCache, its watcher, the errors a source reports), and the
tests that are about sources together: several sources at once, and the shipped examples."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import pod
from sourceharness import EXAMPLES, TIMEOUT, Harness, T, by_name, dump, harness_fixture, write  # noqa: F401

from pods_api.core.store.watch import EventType
from pods_api.sources.fixtures import FixturesSource
from pods_api.sources.manifests import ManifestDirSource

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
