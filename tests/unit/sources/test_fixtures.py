"""FixturesSource against real files in tmp_path, observed through a real PodCache."""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
from builders import pod
from sourceharness import Harness, by_name, dump, harness_fixture, write  # noqa: F401

from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import EventType
from pods_api.sources.fixtures import FixturesSource


def running(name: str, uid: str, **kw: object) -> dict[str, object]:
    obj = pod(name, uid=uid, **kw)  # type: ignore[arg-type]
    obj["status"] = {
        "phase": "Running",
        "podIP": "10.244.1.7",
        "podIPs": [{"ip": "10.244.1.7"}],
        "startTime": "2024-05-01T10:00:00Z",
        "containerStatuses": [
            {
                "name": "main",
                "ready": True,
                "restartCount": 0,
                "image": "registry.k8s.io/pause:3.10",
                "imageID": "",
                "state": {"running": {"startedAt": "2024-05-01T10:00:02Z"}},
            }
        ],
    }
    return obj


async def start(harness: Harness, path: Path) -> dict[str, PodVersion]:
    snapshot = await harness.start(FixturesSource(path, on_error=harness.on_error))
    return by_name(snapshot.pods)


async def test_serves_pods_as_written_in_every_layout(tmp_path: Path, harness: Harness) -> None:
    web = running("web", "uid-web")
    write(tmp_path / "one.yaml", dump(web))
    write(tmp_path / "multi.yaml", dump(pod("a", uid="uid-a"), pod("b", uid="uid-b")))
    pod_list = {"apiVersion": "v1", "kind": "PodList", "items": [pod("c", uid="uid-c")]}
    write(tmp_path / "list.json", json.dumps(pod_list))
    kubectl_list = {"apiVersion": "v1", "kind": "List", "items": [pod("d", uid="uid-d")]}
    write(tmp_path / "kubectl.yaml", dump(kubectl_list))

    pods = await start(harness, tmp_path)

    assert sorted(pods) == ["a", "b", "c", "d", "web"]
    assert pods["web"].json == PodVersion.from_json(web).json  # status and all, unchanged
    assert pods["web"].json["status"]["podIPs"] == [{"ip": "10.244.1.7"}]
    assert harness.errors.empty()


async def test_add_edit_remove_become_events(tmp_path: Path, harness: Harness) -> None:
    write(tmp_path / "a.yaml", dump(pod("a", uid="uid-a")))
    await start(harness, tmp_path)

    write(tmp_path / "b.yaml", dump(pod("b", uid="uid-b")))
    added = await harness.event()
    assert (added.type, added.pod.name) == (EventType.ADDED, "b")

    (tmp_path / "b.yaml").write_text(dump(pod("b", uid="uid-b", labels={"tier": "web"})))  # in place
    modified = await harness.event()
    assert (modified.type, modified.pod.json["metadata"]["labels"]) == (EventType.MODIFIED, {"tier": "web"})
    assert modified.previous is not None and "labels" not in modified.previous.json["metadata"]

    (tmp_path / "a.yaml").unlink()
    deleted = await harness.event()
    assert (deleted.type, deleted.pod.uid) == (EventType.DELETED, "uid-a")


async def test_atomic_replace_is_one_modified(tmp_path: Path, harness: Harness) -> None:
    write(tmp_path / "a.yaml", dump(running("a", "uid-a")))
    await start(harness, tmp_path)

    crashed = running("a", "uid-a")
    crashed["status"]["phase"] = "Failed"  # type: ignore[index]
    write(tmp_path / "a.yaml", dump(crashed))

    event = await harness.event()
    assert (event.type, event.pod.json["status"]["phase"]) == (EventType.MODIFIED, "Failed")


async def test_rename_changes_nothing(tmp_path: Path, harness: Harness) -> None:
    write(tmp_path / "a.yaml", dump(pod("a", uid="uid-a")))
    await start(harness, tmp_path)

    os.rename(tmp_path / "a.yaml", tmp_path / "renamed.yaml")
    write(tmp_path / "z-marker.yaml", dump(pod("marker", uid="uid-marker")))

    event = await harness.event()  # the pod kept its uid: no DELETED/ADDED came before this
    assert (event.type, event.pod.name) == (EventType.ADDED, "marker")
    assert harness.cache.get("uid-a") is not None


async def test_truncated_write_keeps_the_last_good_pod(tmp_path: Path, harness: Harness) -> None:
    good = dump(running("a", "uid-a"))
    write(tmp_path / "a.yaml", good)
    await start(harness, tmp_path)

    cut = good[: good.index("startTime: '2024") + len("startTime: '2024")]  # inside a quoted scalar
    (tmp_path / "a.yaml").write_text(cut)  # a writer caught halfway, in place
    error = await harness.error("not valid YAML")  # perhaps after "empty file": truncated first
    assert error.startswith(f"{tmp_path}/a.yaml: ") and "line" in error
    (tmp_path / "a.yaml").write_text(good)  # the writer finishes: the same pod
    write(tmp_path / "z-marker.yaml", dump(pod("marker", uid="uid-marker")))

    event = await harness.event()  # nothing about uid-a came first: no DELETED, no ADDED
    assert (event.type, event.pod.name) == (EventType.ADDED, "marker")


async def test_emptied_file_keeps_its_pods(tmp_path: Path, harness: Harness) -> None:
    write(tmp_path / "a.yaml", dump(pod("a", uid="uid-a")))
    await start(harness, tmp_path)

    (tmp_path / "a.yaml").write_text("")  # `> a.yaml` before the new content arrives
    assert "empty file" in await harness.error("a.yaml")
    assert harness.cache.get("uid-a") is not None


async def test_bad_files_among_good_ones(tmp_path: Path, harness: Harness) -> None:
    write(tmp_path / "good.yaml", dump(pod("good", uid="uid-good")))
    write(tmp_path / "no-uid.yaml", dump(pod("no-uid")))
    write(tmp_path / "bad-type.yaml", dump(pod("typed", uid="uid-typed", hostNetwork="yes")))
    write(tmp_path / "not-yaml.yaml", "kind: Pod\n  metadata: [\n")
    write(tmp_path / "deployment.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n")

    pods = await start(harness, tmp_path)

    assert sorted(pods) == ["good"]
    errors = sorted([harness.errors.get_nowait() for _ in range(harness.errors.qsize())])
    assert len(errors) == 4
    assert f"{tmp_path}/bad-type.yaml: spec.hostNetwork: expected boolean" in errors[0]
    assert "deployment.yaml: kind 'Deployment' is not Pod or List or PodList" in errors[1]
    assert "no-uid.yaml: metadata.uid is required" in errors[2]
    assert "not-yaml.yaml: not valid YAML" in errors[3]


async def test_a_broken_edit_is_reported_once_and_recovers(tmp_path: Path, harness: Harness) -> None:
    write(tmp_path / "a.yaml", dump(pod("a", uid="uid-a")))
    await start(harness, tmp_path)

    write(tmp_path / "a.yaml", dump(pod("a")))  # the uid deleted by mistake
    assert "a.yaml: metadata.uid is required" in await harness.error("a.yaml")
    write(tmp_path / "b.yaml", dump(pod("b", uid="uid-b")))  # another scan: no second report
    assert (await harness.event()).pod.name == "b"
    assert harness.errors.empty()

    write(tmp_path / "a.yaml", dump(pod("a", uid="uid-a", labels={"fixed": "yes"})))
    event = await harness.event()
    assert (event.type, event.pod.uid) == (EventType.MODIFIED, "uid-a")


async def test_unknown_fields_are_dropped_with_a_warning(tmp_path: Path, harness: Harness, caplog) -> None:  # type: ignore[no-untyped-def]
    obj = pod("a", uid="uid-a")
    obj["spec"]["containerz"] = []
    write(tmp_path / "a.yaml", dump(obj))
    pods = await start(harness, tmp_path)
    assert "containerz" not in pods["a"].json["spec"]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("a.yaml: spec.containerz: unknown field, dropped" in w for w in warnings)


async def test_editor_files_and_dotfiles_are_ignored(tmp_path: Path, harness: Harness) -> None:
    write(tmp_path / "a.yaml", dump(pod("a", uid="uid-a")))
    await start(harness, tmp_path)

    other = dump(pod("other", uid="uid-a"))  # would clash with a.yaml if it were read
    for name in ("a.yaml~", ".a.yaml.swp", "a.yaml.swp", ".#a.yaml", "#a.yaml#", "4913", ".hidden.yaml"):
        (tmp_path / name).write_text(other)
    write(tmp_path / "z-marker.yaml", dump(pod("marker", uid="uid-marker")))

    assert (await harness.event()).pod.name == "marker"
    assert harness.errors.empty()


async def test_duplicate_uid_in_another_file_is_refused(tmp_path: Path, harness: Harness) -> None:
    write(tmp_path / "a.yaml", dump(pod("a", uid="same")))
    write(tmp_path / "b.yaml", dump(pod("b", uid="same")))
    pods = await start(harness, tmp_path)
    assert sorted(pods) == ["a"]
    assert "b.yaml: pod /b ignored: uid same is already served from" in await harness.error("b.yaml")


async def test_status_timestamps_survive_yaml(tmp_path: Path, harness: Harness) -> None:
    # Unquoted timestamps are strings to Kubernetes; PyYAML alone would make them datetimes.
    text = dump(running("a", "uid-a")).replace("'2024-05-01T10:00:00Z'", "2024-05-01T10:00:00Z")
    assert "startTime: 2024-05-01T10:00:00Z" in text
    write(tmp_path / "a.yaml", text)
    pods = await start(harness, tmp_path)
    assert orjson.loads(pods["a"].json_bytes)["status"]["startTime"] == "2024-05-01T10:00:00Z"


async def test_a_file_name_that_is_not_utf8_is_skipped_and_watching_goes_on(
    tmp_path: Path,
    harness: Harness,
    caplog,  # type: ignore[no-untyped-def]
) -> None:
    """watchfiles raises on such a name; change notices must go on (not stop for good, leaving
    a 30 s relist and a log line that does not say why)."""
    write(tmp_path / "a.yaml", dump(pod("a", uid="uid-a")))
    await start(harness, tmp_path)

    bad = tmp_path / os.fsdecode(b"bad-\xff.yaml")
    bad.write_text(dump(pod("bad", uid="uid-bad")))
    write(tmp_path / "b.yaml", dump(pod("b", uid="uid-b")))
    event = await harness.event()  # by a change notice: the relist is far beyond the wait
    assert (event.type, event.pod.name) == (EventType.ADDED, "b")
    bad.write_text(dump(pod("bad", uid="uid-bad")) + "\n")  # it changes again
    write(tmp_path / "c.yaml", dump(pod("c", uid="uid-c")))
    event = await harness.event()
    assert (event.type, event.pod.name) == (EventType.ADDED, "c")
    assert harness.cache.get("uid-bad") is None
    skipped = [r.getMessage() for r in caplog.records if "not UTF-8" in r.getMessage()]
    assert skipped == [
        f"pod source fixtures:{tmp_path}: {tmp_path}: skipping the file bad-\\xff.yaml: its name is not UTF-8"
    ]
    assert "cannot watch" not in caplog.text
