"""A directory's first load decoded partly in worker processes (pods_api/sources/workers.py), and
its changes decoded by a worker kept while its files churn, give exactly what decoding in the
source's thread gives: the same pods, bytes (config.seen included, stamped in the source's own
process afterwards), warnings and errors."""

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
    """Per file: its pods' JSON (config.seen left out: it is when the pod was first seen), its
    warnings and its error."""

    def shown(json_bytes: bytes) -> Any:
        obj = orjson.loads(json_bytes)
        obj["metadata"].get("annotations", {}).pop(CONFIG_SEEN, None)
        return obj

    return {
        origin: ([shown(p.json_bytes) for p in f.pods], f.warnings, f.decode_error)
        for origin, f in source._scan.files.items()
    }


def _decoded_by_workers(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the chunks worker processes decode from now on."""
    chunks: list[int] = []
    decode = workers.Worker.decode

    def counted(self: workers.Worker, chunk: list[workers.Item]) -> list[workers.Outcome]:
        outcomes = decode(self, chunk)
        chunks.append(len(chunk))
        return outcomes

    monkeypatch.setattr(workers.Worker, "decode", counted)
    return chunks


def _restamped(source: DirectorySource, origin: str) -> list[bytes]:
    """The file decoded again in this process, then stamped: what a later change would serve."""
    scan = source._scan
    pods, _, _ = workers.outcome(scan.decoder, origin, Path(origin).read_bytes())
    if isinstance(source, ManifestDirSource):
        pods = source.first_seen.stamp(pods)
    return [p.framed for p in pods]


@pytest.mark.parametrize("kind", ["manifests", "fixtures"])
def test_the_first_load_in_workers_equals_the_load_in_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    directory = tmp_path / "pods"
    _files(directory)
    threaded = _make(kind, directory)
    threaded._scan.update(None)

    monkeypatch.setattr(workers, "BULK_FILES", 1)
    monkeypatch.setattr(workers, "CHUNK_FILES", 2)
    pooled = _make(kind, directory)
    chunks = _decoded_by_workers(monkeypatch)
    pooled._scan.update(None)

    assert chunks  # some chunks were decoded by a worker
    assert _state(pooled) == _state(threaded)
    bad = pooled._scan.files[str(directory / "bad.yaml")]
    assert "bad.yaml: not valid YAML" in (bad.decode_error or "")
    # The first-seen times are the source's own: decoding a file again here, as a later change
    # would, gives the very same bytes (no spurious MODIFIED).
    for origin, state in pooled._scan.files.items():
        if state.pods:
            assert _restamped(pooled, origin) == [p.framed for p in state.pods]


def test_a_later_scan_decodes_in_the_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "pods"
    _files(directory)
    source = ManifestDirSource(directory, node_name="node-1")
    source._scan.update(None)
    monkeypatch.setattr(workers, "BULK_FILES", 1)
    chunks = _decoded_by_workers(monkeypatch)
    write(directory / "pod-00.yaml", dump(pod("web-0", uid="uid-new")))
    source._scan.update(None)
    assert [p.uid for p in source._scan.files[str(directory / "pod-00.yaml")].pods] == ["uid-new"]
    assert not chunks  # no worker after the first load


@pytest.mark.parametrize("executable", ["/nonexistent/python", "/bin/true"], ids=["no start", "dies"])
def test_a_worker_that_fails_leaves_its_files_to_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, executable: str
) -> None:
    directory = tmp_path / "pods"
    _files(directory)
    threaded = ManifestDirSource(directory, node_name="node-1")
    threaded._scan.update(None)
    monkeypatch.setattr(workers, "BULK_FILES", 1)
    monkeypatch.setattr(workers, "CHUNK_FILES", 2)
    monkeypatch.setattr(sys, "executable", executable)
    pooled = ManifestDirSource(directory, node_name="node-1")
    pooled._scan.update(None)
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
    chunks = _decoded_by_workers(monkeypatch)
    source._scan.update(None)
    assert chunks  # the worker ran, with the real yaml


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
    monkeypatch.setattr(threaded._scan.churn, "_usable", False)  # never a worker: the reference
    chunks = _decoded_by_workers(monkeypatch)
    pids = []
    for n in range(3):
        _churn(directory, 1)
        write(directory / f"new-{n}.yaml", dump(pod(f"new-{n}", uid=f"uid-new-{n}")))  # first seen now
        for source in (threaded, churned):
            source._scan.update(None)
        pids.append(churned._scan.churn.worker_pid)
        assert _state(churned) == _state(threaded)
    assert pids[0] is not None and pids == [pids[0]] * 3  # started by the churn, then kept
    assert chunks
    if isinstance(churned, ManifestDirSource):
        # The worker decoded with no first-seen times at all; the source stamped its own:
        # decoding a file again in its process gives the very same bytes, and a time never
        # changes once given while the uid is served.
        seen = churned.first_seen.times()
        assert len(seen) == 24  # 21 from the first load, 3 first seen during the churn
        for origin, state in churned._scan.files.items():
            if state.pods:
                assert _restamped(churned, origin) == [p.framed for p in state.pods]
        _churn(directory, 1)
        churned._scan.update(None)
        assert churned.first_seen.times() == seen
    churned._scan.churn.close()


def _make(kind: str, directory: Path) -> DirectorySource:
    if kind == "manifests":
        return ManifestDirSource(directory, node_name="node-1")
    return FixturesSource(directory)


def _pair(kind: str, directory: Path) -> tuple[DirectorySource, DirectorySource]:
    pair = _make(kind, directory), _make(kind, directory)
    for source in pair:
        source._scan.update(None)  # the first load: 22 files, in the thread
    return pair


def test_a_churn_worker_ends_once_the_files_are_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "pods"
    _files(directory)
    monkeypatch.setattr(workers, "CHURN_FILES", 20)
    now = [0.0]
    source = FixturesSource(directory)
    scan = source._scan
    scan.churn = workers.Churn(source.name, scan.decoder, clock=lambda: now[0])
    scan.update(None)
    _churn(directory, 1)
    scan.update(None)
    pid = scan.churn.worker_pid
    assert pid is not None
    now[0] += workers.KEEP_SECONDS / 2
    scan.update(None)  # a scan with nothing changed: a pause in the churn keeps it
    assert scan.churn.worker_pid == pid
    now[0] += workers.KEEP_SECONDS + 1
    scan.update(None)  # quiet for longer: it ends, and is reaped
    assert scan.churn.worker_pid is None
    assert not Path(f"/proc/{pid}").exists()
    _churn(directory, 1)
    scan.update(None)  # 20 files within the window again: a new one
    assert scan.churn.worker_pid not in (None, pid)
    scan.churn.close()


def test_a_churn_worker_that_dies_leaves_the_changes_to_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "pods"
    _files(directory)
    monkeypatch.setattr(workers, "CHURN_FILES", 20)
    threaded, churned = _pair("manifests", directory)
    monkeypatch.setattr(threaded._scan.churn, "_usable", False)
    _churn(directory, 1)
    for source in (threaded, churned):
        source._scan.update(None)
    pid = churned._scan.churn.worker_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    _churn(directory, 1)
    for source in (threaded, churned):
        source._scan.update(None)
    assert _state(churned) == _state(threaded)
    assert "the source's thread decodes its changes" in caplog.text
    assert churned._scan.churn.worker_pid is None


def test_a_churn_worker_that_cannot_start_leaves_the_changes_to_the_thread_saying_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "pods"
    _files(directory)
    monkeypatch.setattr(workers, "CHURN_FILES", 20)
    threaded, churned = _pair("manifests", directory)
    monkeypatch.setattr(threaded._scan.churn, "_usable", False)
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    for _ in range(3):
        _churn(directory, 1)
        for source in (threaded, churned):
            source._scan.update(None)
        assert _state(churned) == _state(threaded)
        assert churned._scan.churn.worker_pid is None
    assert caplog.text.count("cannot start a decoding worker") == 1  # not tried at every scan
