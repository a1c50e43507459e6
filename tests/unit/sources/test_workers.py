"""A directory's first load decoded partly in worker processes (pods_api/sources/workers.py), and
its changes decoded by a worker kept while its files churn, give exactly what decoding in the
source's thread gives: the same pods, bytes, warnings and errors."""

from __future__ import annotations

import itertools
import os
import signal
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from builders import pod
from sourceharness import dump, write

from pods_api.sources import workers
from pods_api.sources.directory import DirectorySource
from pods_api.sources.fixtures import FixturesSource
from pods_api.sources.manifests import ManifestDirSource
from pods_api.sources.staticpod import CONFIG_SEEN

pytestmark = pytest.mark.skipif(workers.worker_count() == 0, reason="one core: no worker processes")


def _files(directory: Path) -> None:
    directory.mkdir()
    for i in range(20):
        write(directory / f"pod-{i:02d}.yaml", dump(pod(f"web-{i}", uid=f"uid-{i}", phase="Running")))
    write(directory / "bad.yaml", "kind: Pod\napiVersion: v1\nmetadata: [\n")
    write(directory / "odd.yaml", dump({**pod("odd", uid="uid-odd"), "colour": "blue"}))  # a warning


def _state(source: DirectorySource) -> dict[str, Any]:
    """Per file: its pods' bytes (config.seen left out: it is when the pod was first seen), its
    warnings and its error."""

    def shown(pb: bytes, json_bytes: bytes) -> Any:
        obj = orjson.loads(json_bytes)
        obj["metadata"].get("annotations", {}).pop(CONFIG_SEEN, None)
        return obj

    return {
        origin: ([shown(p.pb, p.json_bytes) for p in f.pods], f.warnings, f.decode_error)
        for origin, f in source._files.items()
    }


@pytest.mark.parametrize("kind", ["manifests", "fixtures"])
def test_the_first_load_in_workers_equals_the_load_in_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    directory = tmp_path / "pods"
    _files(directory)
    threaded = _make(kind, directory)
    threaded._update(None)

    monkeypatch.setattr(workers, "BULK_FILES", 1)
    monkeypatch.setattr(workers, "CHUNK_FILES", 2)
    pooled = _make(kind, directory)
    adopted: list[object] = []
    adopt = pooled._adopt
    monkeypatch.setattr(pooled, "_adopt", lambda state: (adopted.append(state), adopt(state)))
    pooled._update(None)

    assert len(adopted) > 0  # some chunks were decoded by a worker
    assert _state(pooled) == _state(threaded)
    assert "bad.yaml: not valid YAML" in (pooled._files[str(directory / "bad.yaml")].decode_error or "")
    if isinstance(pooled, ManifestDirSource):
        # The workers' first-seen times were adopted: decoding a file again here, as a later
        # change would, gives the very same bytes (no spurious MODIFIED).
        for origin, state in pooled._files.items():
            if state.pods:
                again, _, _ = pooled.decode_file(origin, Path(origin).read_bytes())
                assert [p.json_bytes for p in again] == [p.json_bytes for p in state.pods]
                assert [p.framed for p in again] == [p.framed for p in state.pods]


def test_a_later_scan_decodes_in_the_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "pods"
    _files(directory)
    source = ManifestDirSource(directory, node_name="node-1")
    source._update(None)
    monkeypatch.setattr(workers, "BULK_FILES", 1)
    monkeypatch.setattr(source, "_adopt", lambda state: pytest.fail("a worker was used after the first load"))
    write(directory / "pod-00.yaml", dump(pod("web-0", uid="uid-new")))
    source._update(None)
    assert [p.uid for p in source._files[str(directory / "pod-00.yaml")].pods] == ["uid-new"]


@pytest.mark.parametrize("executable", ["/nonexistent/python", "/bin/true"], ids=["no start", "dies"])
def test_a_worker_that_fails_leaves_its_files_to_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, executable: str
) -> None:
    directory = tmp_path / "pods"
    _files(directory)
    threaded = ManifestDirSource(directory, node_name="node-1")
    threaded._update(None)
    monkeypatch.setattr(workers, "BULK_FILES", 1)
    monkeypatch.setattr(workers, "CHUNK_FILES", 2)
    monkeypatch.setattr(sys, "executable", executable)
    pooled = ManifestDirSource(directory, node_name="node-1")
    pooled._update(None)
    assert _state(pooled) == _state(threaded)
    assert "decoding in the source's thread" in caplog.text or "the source's thread decodes" in caplog.text


def test_a_worker_does_not_import_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon runs as root: a `yaml.py` in the directory it was started from is not code it runs."""
    directory = tmp_path / "pods"
    _files(directory)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "yaml.py").write_text("raise SystemExit('imported from the working directory')\n")
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(workers, "BULK_FILES", 1)
    source = ManifestDirSource(directory, node_name="node-1")
    adopted: list[object] = []
    adopt = source._adopt
    monkeypatch.setattr(source, "_adopt", lambda state: (adopted.append(state), adopt(state)))
    source._update(None)
    assert adopted  # the worker ran, with the real yaml


_ROUNDS = itertools.count()


def _churn(directory: Path, rounds: int) -> None:
    """Every file rewritten, `rounds` times, each time with new bytes: what a tool rewriting
    manifests does."""
    for _ in range(rounds):
        labels = {"round": str(next(_ROUNDS))}
        for i in range(20):
            write(directory / f"pod-{i:02d}.yaml", dump(pod(f"web-{i}", uid=f"uid-{i}", labels=labels)))


@pytest.mark.parametrize("kind", ["manifests", "fixtures"])
def test_changes_while_files_churn_are_decoded_by_one_kept_worker_as_the_thread_decodes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    directory = tmp_path / "pods"
    _files(directory)
    monkeypatch.setattr(workers, "CHURN_FILES", 20)
    threaded, churned = _pair(kind, directory)
    monkeypatch.setattr(threaded._churn, "_factory", None)  # never a worker: the reference
    adopted: list[object] = []
    adopt = churned._adopt
    monkeypatch.setattr(churned, "_adopt", lambda state: (adopted.append(state), adopt(state)))
    pids = []
    for n in range(3):
        _churn(directory, 1)
        write(directory / f"new-{n}.yaml", dump(pod(f"new-{n}", uid=f"uid-new-{n}")))  # first seen now
        for source in (threaded, churned):
            source._update(None)
        pids.append(churned._churn.worker_pid)
        assert _state(churned) == _state(threaded)
    assert pids[0] is not None and pids == [pids[0]] * 3  # started by the churn, then kept
    assert adopted
    if isinstance(churned, ManifestDirSource):
        # The pods' first-seen times went to the worker and back: decoding a file again in the
        # source's thread gives the very same bytes, and a time never changes once given.
        seen = churned._rules.seen()
        assert len(seen) == 24  # 21 from the first load, 3 first seen during the churn
        for origin, state in churned._files.items():
            if state.pods:
                again, _, _ = churned.decode_file(origin, Path(origin).read_bytes())
                assert [p.framed for p in again] == [p.framed for p in state.pods]
        _churn(directory, 1)
        churned._update(None)
        assert churned._rules.seen() == seen
    churned._churn.close()


def _make(kind: str, directory: Path) -> DirectorySource:
    if kind == "manifests":
        return ManifestDirSource(directory, node_name="node-1")
    return FixturesSource(directory)


def _pair(kind: str, directory: Path) -> tuple[DirectorySource, DirectorySource]:
    pair = _make(kind, directory), _make(kind, directory)
    for source in pair:
        source._update(None)  # the first load: 22 files, in the thread
    return pair


def test_a_churn_worker_ends_once_the_files_are_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "pods"
    _files(directory)
    monkeypatch.setattr(workers, "CHURN_FILES", 20)
    now = [0.0]
    source = FixturesSource(directory)
    source._churn = workers.Churn(source.name, source._worker_factory(), clock=lambda: now[0])
    source._update(None)
    _churn(directory, 1)
    source._update(None)
    pid = source._churn.worker_pid
    assert pid is not None
    now[0] += workers.KEEP_SECONDS / 2
    source._update(None)  # a scan with nothing changed: a pause in the churn keeps it
    assert source._churn.worker_pid == pid
    now[0] += workers.KEEP_SECONDS + 1
    source._update(None)  # quiet for longer: it ends, and is reaped
    assert source._churn.worker_pid is None
    assert not Path(f"/proc/{pid}").exists()
    _churn(directory, 1)
    source._update(None)  # 20 files within the window again: a new one
    assert source._churn.worker_pid not in (None, pid)
    source._churn.close()


def test_a_churn_worker_that_dies_leaves_the_changes_to_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "pods"
    _files(directory)
    monkeypatch.setattr(workers, "CHURN_FILES", 20)
    threaded, churned = _pair("manifests", directory)
    monkeypatch.setattr(threaded._churn, "_factory", None)
    _churn(directory, 1)
    for source in (threaded, churned):
        source._update(None)
    pid = churned._churn.worker_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    _churn(directory, 1)
    for source in (threaded, churned):
        source._update(None)
    assert _state(churned) == _state(threaded)
    assert "the source's thread decodes its changes" in caplog.text
    assert churned._churn.worker_pid is None


def test_a_churn_worker_that_cannot_start_leaves_the_changes_to_the_thread_saying_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "pods"
    _files(directory)
    monkeypatch.setattr(workers, "CHURN_FILES", 20)
    threaded, churned = _pair("manifests", directory)
    monkeypatch.setattr(threaded._churn, "_factory", None)
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    for _ in range(3):
        _churn(directory, 1)
        for source in (threaded, churned):
            source._update(None)
        assert _state(churned) == _state(threaded)
        assert churned._churn.worker_pid is None
    assert caplog.text.count("cannot start a decoding worker") == 1  # not tried at every scan
