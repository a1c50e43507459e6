"""Scanning a directory (or a single file) of manifests: each file's state, brought up to date
with as little work as what changed.

Every listed file (or only those a change notice named) is stat'ed; a file is read again only
when its (st_dev, st_ino, st_size, st_mtime_ns) changed, and decoded again only when its bytes
did (a digest is kept, not the bytes). Decoding is the source's `Decoder`, a pure function from
bytes to pods: the start-up's bulk load and a churning source's changes run it in worker
processes too (workers.py), with nothing to hand back but the outcomes. What depends on the
source's history, the static pods' first-seen times, is stamped here afterwards (firstseen.py).

A file keeps its last good pods while it cannot be read or decoded (`keeps_bad_files`, the
fixtures), so an editor's half-written save, a permission mistake or a typo never looks like a
deletion; the static pod manifests do not keep them, as the kubelet does not. A file that is gone
(or a directory that is gone) does take its pods with it, as with the kubelet.

Runs in a worker thread (a slow disk must not stall the event loop); scans never overlap.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pods_api.core.store.version import PodVersion
from pods_api.sources import ManifestError, workers
from pods_api.sources.firstseen import FirstSeen
from pods_api.sources.reading import describe_os_error, read_manifest
from pods_api.sources.workers import Decoder, Outcome

# A file modified this recently may be written again within the same mtime tick (coarse kernel
# timestamps step every few ms) without its stat changing: such a stat is not trusted, and the
# file is read again (decoded again only if its bytes changed) on the next scan, as git does
# with "racily clean" entries.
RACY_NS = 1_000_000_000

# What says a file is unchanged: (st_dev, st_ino, st_size, st_mtime_ns) of what it resolves to,
# and for a symlink its own (st_ino, st_mtime_ns), so a retargeted link is seen.
_StatKey = tuple[int, ...]


@dataclass(slots=True)
class FileState:
    stat: _StatKey | None = None  # of the bytes last decoded; None: read the file next time
    digest: bytes | None = None  # of the bytes last decoded, good or bad
    pods: list[PodVersion] = field(default_factory=list)  # from the last bytes that decoded
    warnings: list[str] = field(default_factory=list)  # of those bytes
    decode_error: str | None = None  # why those bytes gave no pods; `pods` are older
    read_error: str | None = None  # why the file could not be read this time


@dataclass(slots=True)
class _Read:
    origin: str
    stat: _StatKey | None  # None: do not trust it (racy, or it changed while being read)
    data: bytes


class DirectoryScan:
    """The files of `path` and what each last gave."""

    def __init__(
        self,
        path: Path,
        decoder: Decoder,
        *,
        name: str,
        ignored: Callable[[str], bool],
        keeps_bad_files: bool,
        first_seen: FirstSeen | None,
    ) -> None:
        self.path = path
        self.decoder = decoder
        self._ignored = ignored
        self._keeps_bad_files = keeps_bad_files
        self._first_seen = first_seen
        self.files: dict[str, FileState] = {}
        self.skipped: list[str] = []  # names in the last listing that are not UTF-8
        # Decodes the changes after the first load.
        self.churn = workers.Churn(name, decoder)

    def groups(self) -> Iterator[tuple[str, list[PodVersion]]]:
        """Each file's pods, in name order."""
        return ((origin, self.files[origin].pods) for origin in sorted(self.files))

    def origin_of(self, uid: str) -> str | None:
        """The file the pod of this uid was read from (for log lines: a scan of the files)."""
        return next((origin for origin, f in self.files.items() if any(p.uid == uid for p in f.pods)), None)

    def update(self, dirty: set[str] | None) -> bool:
        """Bring the files' states up to date; whether a listed file vanished meanwhile. Raises
        ManifestError when the path cannot be listed."""
        first = not self.files
        reads, vanished = self._examine(dirty)
        changed: list[tuple[FileState, _Read, bytes]] = []
        for read in reads:
            state = self.files.get(read.origin)
            if state is None:
                continue
            digest = hashlib.blake2b(read.data, digest_size=16).digest()
            if digest == state.digest:
                state.stat = read.stat  # touched, or the same bytes written again
            else:
                changed.append((state, read, digest))
        items = [(read.origin, read.data) for _, read, _ in changed]
        if first:  # the start-up's bulk load: in worker processes too (workers.py)
            outcomes: Iterable[Outcome] = workers.decode(items, self.decoder)
        else:
            outcomes = self.churn.decode(items)
        # The digest is recorded only once a file's decoding ends (an unexpected exception
        # leaves the state as it was): a restarted source then decodes these bytes again instead
        # of taking them for bytes already decoded.
        for (state, read, digest), (pods, warnings, error) in zip(changed, outcomes, strict=True):
            state.stat, state.digest = read.stat, digest
            if error is not None:
                state.decode_error = error  # earlier pods stay, if the source keeps them
                if not self._keeps_bad_files:
                    state.pods, state.warnings = [], []
            else:
                if self._first_seen is not None:
                    pods = self._first_seen.stamp(pods)
                state.pods, state.warnings, state.decode_error = pods, warnings, None
        return vanished

    def _examine(self, dirty: set[str] | None) -> tuple[list[_Read], bool]:
        """Read the files that may have changed: every listed file (dirty None) or those named.
        Returns what to decode, and whether a listed file vanished before it could be read."""
        within = None
        if dirty is None or not self._directory():
            listing, within = self._listing()
            for gone in self.files.keys() - listing.keys():
                del self.files[gone]
            candidates = listing
        else:
            within = os.path.realpath(self.path)
            candidates = {o: Path(o) for o in sorted(dirty) if not self._ignored(os.path.basename(o))}
        reads: list[_Read] = []
        vanished = False
        now = time.time_ns()
        for origin, path in candidates.items():
            read = self._read(origin, path, within, now, listed=dirty is None)
            if read is False:
                vanished = True
            elif read is not True:
                reads.append(read)
        return reads, vanished

    def _directory(self) -> bool:
        try:
            return stat.S_ISDIR(os.stat(self.path).st_mode)
        except OSError:
            return False

    def _listing(self) -> tuple[dict[str, Path], str | None]:
        """The files to read, by origin (their path as text), and the real path of the directory
        they must stay in (None when `path` is itself the one file)."""
        origin = str(self.path)
        try:
            info = os.stat(self.path)
            if stat.S_ISREG(info.st_mode):
                return {origin: self.path}, None
            if not stat.S_ISDIR(info.st_mode):
                raise ManifestError(origin, "not a directory or a regular file")
            names = sorted(os.listdir(self.path))
        except FileNotFoundError:
            # No directory is no pods, as with the kubelet (and how a missing one starts out).
            return {}, None
        except OSError as exc:
            raise ManifestError(origin, f"cannot list: {describe_os_error(exc)}") from None
        self.skipped = [n for n in names if not _utf8(n)]
        files = {str(self.path / n): self.path / n for n in names if _utf8(n) and not self._ignored(n)}
        return files, os.path.realpath(self.path)

    def _read(self, origin: str, path: Path, within: str | None, now: int, *, listed: bool) -> _Read | bool:
        """Look at one file: True when there is nothing to decode (unchanged, or unreadable:
        the state says why), False when a listed file is gone since the listing, else its
        bytes to decode."""
        key = _stat_key(path, now)
        state = self.files.get(origin)
        if key is not None and state is not None and key == state.stat and state.read_error is None:
            return True
        state = self.files.setdefault(origin, FileState())
        try:
            data = read_manifest(path, within=within)
        except ManifestError as exc:
            state.read_error, state.stat = str(exc), None
            if not self._keeps_bad_files:
                state.pods, state.warnings = [], []
            return True
        state.read_error = None
        if data is None:
            del self.files[origin]
            return not listed  # a file named by a notice and gone is simply deleted
        if key is not None and _stat_key(path, now) != key:
            key = None  # written while being read: look again next time
        return _Read(origin, key, data)


def _stat_key(path: Path, now: int) -> _StatKey | None:
    """What says the file is unchanged since it was last read; None when it cannot be told (it
    is gone, cannot be stat'ed, or was modified too recently to trust its mtime)."""
    try:
        info = os.stat(path)
        link = os.lstat(path)
    except OSError:
        return None
    if now - info.st_mtime_ns < RACY_NS or now - link.st_mtime_ns < RACY_NS:
        return None
    key: _StatKey = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    if stat.S_ISLNK(link.st_mode):
        key += (link.st_ino, link.st_mtime_ns)
    return key


def _utf8(name: str) -> bool:
    """os.listdir hands a name that is not UTF-8 back with surrogate escapes."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_name(name: str) -> str:
    """A name that is not UTF-8, as printable ASCII: its bytes, escaped."""
    return repr(os.fsencode(name))[2:-1]
