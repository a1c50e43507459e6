"""Reading a manifest file: regular files, vanished ones, special files, permissions, symlinks."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from pods_api.sources import ManifestError
from pods_api.sources.reading import MAX_MANIFEST_BYTES, read_manifest

# ---------------------------------------------------------------------------------------------
# files


def test_read_a_regular_file_and_a_vanished_one(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("x")
    assert read_manifest(tmp_path / "a.yaml", within=str(tmp_path)) == b"x"
    assert read_manifest(tmp_path / "gone.yaml", within=str(tmp_path)) is None


def test_special_files_are_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    (tmp_path / "big").write_bytes(b" " * (MAX_MANIFEST_BYTES + 1))
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "dangling").symlink_to("nothing")
    reasons = {}
    for name in ("fifo", "dir", "big", "loop", "dangling"):
        with pytest.raises(ManifestError) as caught:
            read_manifest(tmp_path / name, within=str(tmp_path))
        reasons[name] = caught.value.problem
    assert reasons == {
        "fifo": "not a regular file (a FIFO, socket or device?)",
        "dir": "is a directory; manifest directories are not read recursively",
        "big": f"{MAX_MANIFEST_BYTES + 1} bytes is over the {MAX_MANIFEST_BYTES} byte limit",
        "loop": "too many levels of symbolic links (a symlink loop?)",
        "dangling": "dangling symlink",
    }


def test_permission_denied_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Root reads any file whatever its mode, so the refusal is simulated where the kernel gives it.
    (tmp_path / "a.yaml").write_text("x")

    def refuse(path: Any, flags: int, *args: Any) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(ManifestError) as caught:
        read_manifest(tmp_path / "a.yaml", within=str(tmp_path))
    assert str(caught.value) == f"{tmp_path}/a.yaml: permission denied"


def test_symlinks_inside_are_followed_and_outside_refused(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    (manifests / "..2024_05_01").mkdir(parents=True)  # a ConfigMap volume's layout
    (manifests / "..2024_05_01" / "pod.yaml").write_text("inside")
    (manifests / "..data").symlink_to("..2024_05_01")
    (manifests / "pod.yaml").symlink_to("..data/pod.yaml")
    (tmp_path / "secret").write_text("outside")
    (manifests / "escape.yaml").symlink_to("../secret")
    within = os.path.realpath(manifests)

    assert read_manifest(manifests / "pod.yaml", within=within) == b"inside"
    with pytest.raises(ManifestError, match="symlink points out of the directory"):
        read_manifest(manifests / "escape.yaml", within=within)


def test_a_symlink_swapped_in_while_opening_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "secret").write_text("outside")
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "pod.yaml").write_text("inside")
    real_open = os.open

    def open_after_a_swap(path: Any, flags: int, *args: Any) -> int:
        monkeypatch.setattr(os, "open", real_open)
        (manifests / ".swap").symlink_to(tmp_path / "secret")
        os.replace(manifests / ".swap", manifests / "pod.yaml")  # between the check and the open
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", open_after_a_swap)
    with pytest.raises(ManifestError, match="symlink points out of the directory"):
        read_manifest(manifests / "pod.yaml", within=os.path.realpath(manifests))
