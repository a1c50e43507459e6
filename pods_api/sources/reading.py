"""Reading a manifest file: its bytes, with an error naming the file and the problem in one line.

    read_manifest(path, within=dir) -> bytes | None     None: the file is gone

Refused, without blocking: a symlink that resolves outside the directory it was listed in,
special files (FIFOs, devices, directories), and anything over MAX_MANIFEST_BYTES.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from pods_api.sources import ManifestError

# The kubelet's maxConfigLength: a pod manifest is kilobytes, so a file this big is a mistake
# (a log or an image dropped in the directory), not a pod.
MAX_MANIFEST_BYTES = 10 * 1024 * 1024
_READ_CHUNK = 1 << 16
# Reads of a file that is swapped while being opened, before giving up: one swap is an editor's
# save; one after another means something rewrites it constantly.
_READ_ATTEMPTS = 3


def read_manifest(path: Path, *, within: str | None) -> bytes | None:
    """The bytes of one manifest file; None when it no longer exists (removed since the listing).

    `within` is the real path of the directory the file was listed in: a symlink resolving
    outside it is refused. Special files (FIFOs, devices, directories) are refused without
    blocking, and so is anything over MAX_MANIFEST_BYTES.
    """
    origin = str(path)
    for _ in range(_READ_ATTEMPTS):
        if within is not None:
            _check_inside(path, within, origin)  # before opening: never open what is outside
        try:
            # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except FileNotFoundError:
            if os.path.lexists(path):
                raise ManifestError(origin, "dangling symlink") from None
            return None
        except OSError as exc:
            raise ManifestError(origin, describe_os_error(exc)) from None
        try:
            # Again after opening, on what was opened: the symlink may have been swapped between
            # the check and the open, and a file from outside must never become "last good".
            if within is None or _check_inside(path, within, origin, opened=fd):
                return _read_regular(fd, origin)
        finally:
            os.close(fd)
    raise ManifestError(origin, "kept changing while being read")


def _check_inside(path: Path, within: str, origin: str, opened: int | None = None) -> bool:
    """Raise if `path` resolves outside `within`; with `opened`, also whether that fd is still
    the file `path` resolves to (False: it changed in between; read again)."""
    target = os.path.realpath(path)
    if os.path.commonpath([within, target]) != within:
        raise ManifestError(origin, f"symlink points out of the directory (to {target}); not read")
    if opened is None:
        return True
    try:
        now = os.stat(target)
    except OSError:
        return False
    then = os.fstat(opened)
    return (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino)


def _read_regular(fd: int, origin: str) -> bytes:
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        raise ManifestError(origin, "is a directory; manifest directories are not read recursively")
    if not stat.S_ISREG(info.st_mode):
        raise ManifestError(origin, "not a regular file (a FIFO, socket or device?)")
    if info.st_size > MAX_MANIFEST_BYTES:
        raise ManifestError(origin, f"{info.st_size} bytes is over the {MAX_MANIFEST_BYTES} byte limit")
    chunks: list[bytes] = []
    size = 0
    try:
        while chunk := os.read(fd, _READ_CHUNK):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_MANIFEST_BYTES:  # it grew after the fstat
                raise ManifestError(origin, f"over the {MAX_MANIFEST_BYTES} byte limit")
    except OSError as exc:
        raise ManifestError(origin, describe_os_error(exc)) from None
    return b"".join(chunks)


def describe_os_error(exc: OSError) -> str:
    """An OSError as a short reason, without the path (the caller names the file)."""
    if exc.errno == errno.EACCES:
        return "permission denied"
    if exc.errno == errno.ELOOP:
        return "too many levels of symbolic links (a symlink loop?)"
    return exc.strerror or str(exc)
