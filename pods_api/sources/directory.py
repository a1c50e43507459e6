"""A directory of manifest files (or a single file) as a pod source: the machinery that the fixtures
and the static-pod manifests share.

Work per change is proportional to what changed: a change notice (watchfiles) names the files
that changed, and only those are looked at; every `resync` seconds (and when the directory itself
changes) every file is stat'ed again. A file is read again only when its (st_dev, st_ino, st_size,
st_mtime_ns) changed, and decoded again only when its bytes did (a digest is kept, not the
bytes), in a worker thread. The complete set of pods then goes to `sink.replace`: the cache
turns it into events and skips unchanged pods at the cost of a lookup each.

A file keeps its last good pods while it cannot be read or decoded (`keeps_bad_files`, the
fixtures), so an editor's half-written save, a permission mistake or a typo never looks like a
deletion; the static pod manifests do not keep them, as the kubelet does not. A file that is gone
(or a directory that is gone) does take its pods with it, as with the kubelet.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from watchfiles import awatch

from pods_api.core.store.cache import SourceSink
from pods_api.core.store.pod import PodVersion
from pods_api.sources import ErrorCounter, workers
from pods_api.sources.loader import (
    ManifestError,
    Reporter,
    describe_os_error,
    read_manifest,
    unique_pods,
)
from pods_api.sources.workers import Outcome

log = logging.getLogger(__name__)

# Changes closer together than this are handed over as one batch, so an editor's
# write-rename-chmod is read once; small enough that an edit is served well within a second.
DEBOUNCE_MS = 400
# Quiet time after the last change before a batch is handed over: lets a write finish first.
STEP_MS = 50
# How often the watch checks that what it watches is still the directory at `path` (it may have
# been replaced by a new one, which the old watch would never report on).
ROOT_CHECK_MS = 5000
# Listings per scan when files vanish between listing and reading: a rename or two in flight;
# more than this means constant churn, and the next scan is moments away anyway.
LIST_ATTEMPTS = 3
# A file modified this recently may be written again within the same mtime tick (coarse kernel
# timestamps step every few ms) without its stat changing: such a stat is not trusted, and the
# file is read again (decoded again only if its bytes changed) on the next scan, as git does
# with "racily clean" entries.
RACY_NS = 1_000_000_000

# (path, st_dev, st_ino) of each directory watched
_Roots = tuple[tuple[str, int, int], ...]
# What says a file is unchanged: (st_dev, st_ino, st_size, st_mtime_ns) of what it resolves to,
# and for a symlink its own (st_ino, st_mtime_ns), so a retargeted link is seen.
_StatKey = tuple[int, ...]


@dataclass(slots=True)
class _File:
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


class DirectorySource:
    """Subclasses set `name` and `unique_names`, and give `_ignored` and `_decode`."""

    name: str
    # Refuse a second pod with the same namespace/name (the kubelet does, for static pods).
    unique_names: ClassVar[bool] = False
    # Of two pods with one name (or uid), the one from the file last in name order is served.
    last_name_wins: ClassVar[bool] = False
    # A file that cannot be read or decoded keeps its last good pods (else it has none).
    keeps_bad_files: ClassVar[bool] = True

    def __init__(self, path: Path, *, resync: float, on_error: ErrorCounter | None) -> None:
        self.path = path
        self._absolute = os.path.abspath(path)  # how change notices name it
        self._resync = resync
        self._reporter = Reporter(self.name, on_error)
        self._files: dict[str, _File] = {}
        self._watch_problem: str | None = None
        # Files named by change notices since the last scan; None: look at every file.
        self._dirty: set[str] | None = None
        self._skipped: list[str] = []  # names in the last listing that are not UTF-8
        # Decodes the changes after the first load.
        self._churn = workers.Churn(self.name, self._worker_factory())

    # -- what subclasses decide ----------------------------------------------------------------

    def _ignored(self, filename: str) -> bool:
        return filename.startswith(".")

    def _decode(self, origin: str, data: bytes, warnings: list[str]) -> list[PodVersion]:
        """The pods in one file's bytes; raises ManifestError."""
        raise NotImplementedError

    def _served(self, pods: list[PodVersion]) -> None:
        """Called after each scan with the pods now served."""

    # -- running -------------------------------------------------------------------------------

    def origin_of(self, uid: str) -> str | None:
        """The file the pod of this uid was read from (for log lines: a scan of the files)."""
        return next((origin for origin, f in self._files.items() if any(p.uid == uid for p in f.pods)), None)

    async def run(self, sink: SourceSink) -> None:
        sink.origin_of = self.origin_of
        changed = asyncio.Event()
        watch = asyncio.create_task(self._watch(changed), name=f"watch {self.name}")
        try:
            while True:
                changed.clear()  # before the scan: a change during it makes another scan
                dirty, self._dirty = self._dirty, set()
                await self._scan_into(sink, dirty)
                # asyncio.timeout, not wait_for: in 3.11, wait_for loses a cancellation that
                # arrives as the event is set, and the source would then never stop.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._resync):
                        await changed.wait()
                if not changed.is_set():
                    self._dirty = None  # the resync: every file
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
            self._churn.close()

    async def _scan_into(self, sink: SourceSink, dirty: set[str] | None) -> None:
        # Listing, reading and decoding run in a thread: a slow disk must not stall the event
        # loop, and the GIL's switch interval hands the loop the interpreter every 5 ms even in
        # the middle of one file's decode (measured: decoding on the loop in slices yielding
        # between files lagged the loop 2-5x more in W1, `python -m bench source`). Scans never overlap, so
        # the state is not shared. The sink is called here, on the loop's thread, as it must be.
        errors: list[str] = []
        for _ in range(LIST_ATTEMPTS):
            try:
                vanished = await asyncio.to_thread(self._update, dirty)
            except ManifestError as exc:
                self._reporter.report([str(exc)])
                return
            if not vanished:
                break
            # A file went between the listing and the read: renamed, most likely, and the new
            # name is not in this listing. Without a fresh listing, a rename would look like
            # DELETED now and ADDED on the next scan.
            dirty = None
        # A name that is not UTF-8 cannot be a name in a log line, a JSON log or an error: the
        # file is skipped, said once while it is there, and the others are served and watched.
        warnings = [
            f"{self.path}: skipping the file {_shown_name(n)}: its name is not UTF-8" for n in self._skipped
        ]
        for state in self._files.values():
            problem = state.read_error or state.decode_error
            if problem:
                errors.append(problem)
            warnings += state.warnings
        pods, duplicates = unique_pods(
            ((origin, self._files[origin].pods) for origin in sorted(self._files)),
            by_name=self.unique_names,
            last_wins=self.last_name_wins,
        )
        missing = self._missing()
        if missing is not None:
            warnings.append(missing)
        self._served(pods)
        self._reporter.report(errors + duplicates, warnings)
        sink.replace(pods)
        sink.warn(missing)  # for `pods-api check`, while it holds
        sink.mark_synced()

    # -- examining and decoding (in a worker thread) ---------------------------------------------

    def _update(self, dirty: set[str] | None) -> bool:
        """Bring the files' states up to date; whether a listed file vanished meanwhile."""
        first = not self._files
        reads, vanished = self._examine(dirty)
        changed: list[tuple[_File, _Read, bytes]] = []
        for read in reads:
            state = self._files.get(read.origin)
            if state is None:
                continue
            digest = hashlib.blake2b(read.data, digest_size=16).digest()
            if digest == state.digest:
                state.stat = read.stat  # touched, or the same bytes written again
            else:
                changed.append((state, read, digest))
        items = [(read.origin, read.data) for _, read, _ in changed]
        if first:  # the start-up's bulk load: in worker processes too (workers.py)
            outcomes: Iterable[Outcome] = workers.decode(items, self, self._worker_factory(), self._adopt)
        else:
            outcomes = self._churn.decode(items, self, self._adopt, self.worker_sync)
        # The digest is recorded only once a file's decoding ends (an unexpected exception
        # leaves the state as it was): a restarted source then decodes these bytes again instead
        # of taking them for bytes already decoded.
        for (state, read, digest), (pods, warnings, error) in zip(changed, outcomes, strict=True):
            state.stat, state.digest = read.stat, digest
            if error is not None:
                state.decode_error = error  # earlier pods stay, if the source keeps them
                if not self.keeps_bad_files:
                    state.pods, state.warnings = [], []
            else:
                state.pods, state.warnings, state.decode_error = pods, warnings, None
        return vanished

    def decode_file(self, origin: str, data: bytes) -> Outcome:
        """One file's pods and warnings, or why it gives none."""
        warnings: list[str] = []
        try:
            return self._decode(origin, data, warnings), warnings, None
        except ManifestError as exc:
            return [], [], str(exc)

    def _worker_factory(self) -> Callable[[], workers.Decoder] | None:
        """How a worker process makes a source that decodes as this one does; None: no workers."""
        return None

    def worker_state(self) -> object:
        return None

    def worker_sync(self) -> object:
        """What a churn worker must know before a chunk to decode as this source does (None:
        nothing); its decoder gets it in `apply_sync`."""
        return None

    def apply_sync(self, state: object) -> None:
        """In a worker: take what the source's `worker_sync()` gave."""

    def _adopt(self, state: object) -> None:
        """Take over what a worker's `worker_state()` returned."""

    def _examine(self, dirty: set[str] | None) -> tuple[list[_Read], bool]:
        """Read the files that may have changed: every listed file (dirty None) or those named.
        Returns what to decode, and whether a listed file vanished before it could be read."""
        within = None
        if dirty is None or not self._directory():
            listing, within = self._listing()
            for gone in self._files.keys() - listing.keys():
                del self._files[gone]
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

    def _missing(self) -> str | None:
        """What to say of a path that does not exist. It serves no pods, as the kubelet's
        does, but a path that never appears is most often another distribution's manifest
        path: ready with zero pods is then said, in the log and by `pods-api check`."""
        if os.path.lexists(self.path):
            return None
        return f"{self.path} does not exist: no pods from it until it does (is this the node's path?)"

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
        self._skipped = [n for n in names if not _utf8(n)]
        files = {str(self.path / n): self.path / n for n in names if _utf8(n) and not self._ignored(n)}
        return files, os.path.realpath(self.path)

    def _read(self, origin: str, path: Path, within: str | None, now: int, *, listed: bool) -> _Read | bool:
        """Look at one file: True when there is nothing to decode (unchanged, or unreadable:
        the state says why), False when a listed file is gone since the listing, else its
        bytes to decode."""
        key = _stat_key(path, now)
        state = self._files.get(origin)
        if key is not None and state is not None and key == state.stat and state.read_error is None:
            return True
        state = self._files.setdefault(origin, _File())
        try:
            data = read_manifest(path, within=within)
        except ManifestError as exc:
            state.read_error, state.stat = str(exc), None
            if not self.keeps_bad_files:
                state.pods, state.warnings = [], []
            return True
        state.read_error = None
        if data is None:
            del self._files[origin]
            return not listed  # a file named by a notice and gone is simply deleted
        if key is not None and _stat_key(path, now) != key:
            key = None  # written while being read: look again next time
        return _Read(origin, key, data)

    # -- watching ------------------------------------------------------------------------------

    async def _watch(self, changed: asyncio.Event) -> None:
        """Set `changed` on every change notice, rewatching when the directory comes, goes or is
        replaced. Without notices (no inotify, watch limit reached) the resync still relists."""
        while True:
            roots = _watch_roots(self.path)
            self._dirty = None  # whatever happened before this watch began, a scan now sees it
            changed.set()
            try:
                await self._follow(roots, changed)
            except Exception as exc:
                if _undecodable_name(exc):
                    # watchfiles gives up on a name that is not UTF-8 (the scan skips that file,
                    # with a warning): it was a change notice all the same; watch again at once.
                    changed.set()
                    continue
                problem = f"cannot watch {self.path} (relisting every {self._resync:g}s instead): {exc}"
                if problem != self._watch_problem:
                    log.warning("pod source %s: %s", self.name, problem)
                    self._watch_problem = problem
                await asyncio.sleep(self._resync)

    async def _follow(self, roots: _Roots, changed: asyncio.Event) -> None:
        """Watch `roots` until they are no longer the right ones."""
        if not roots:
            await asyncio.sleep(self._resync)
            return
        batches = awatch(
            *(path for path, _, _ in roots),
            watch_filter=None,  # every change counts: a ConfigMap-style `..data` swap is a dotfile
            recursive=False,
            debounce=DEBOUNCE_MS,
            step=STEP_MS,
            rust_timeout=ROOT_CHECK_MS,
            yield_on_timeout=True,
        )
        directory = self._absolute
        async with contextlib.aclosing(batches):
            async for batch in batches:
                if batch:
                    self._note(batch, directory)
                    changed.set()
                if _watch_roots(self.path) != roots:
                    return

    def _note(self, batch: Iterable[tuple[object, str]], directory: str) -> None:
        """Remember which files a batch of notices names. Anything but a file directly in the
        directory (the directory itself, an ancestor, a ConfigMap-style `..data` swap that
        retargets every file at once) means every file is looked at again."""
        if self._dirty is None:
            return
        for _, changed in batch:
            parent, name = os.path.split(os.path.abspath(changed))
            if parent != directory or name.startswith(".."):
                self._dirty = None
                return
            self._dirty.add(str(self.path / name))


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


def _shown_name(name: str) -> str:
    """A name that is not UTF-8, as printable ASCII: its bytes, escaped."""
    return repr(os.fsencode(name))[2:-1]


def _undecodable_name(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(_undecodable_name(inner) for inner in exc.exceptions)
    return "Unable to decode path" in str(exc)


def _watch_roots(path: Path) -> _Roots:
    """The directory itself when it is one, and its nearest existing ancestor, which sees it (or
    the single file) appear, go, or be replaced; each with its identity, so that a directory
    replaced by another gets a new watch."""
    roots: list[tuple[str, int, int]] = []
    for candidate in (path, *Path(os.path.abspath(path)).parents):
        try:
            info = os.stat(candidate)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode):
            roots.append((str(candidate), info.st_dev, info.st_ino))
            if candidate is not path:
                break
    return tuple(roots)
