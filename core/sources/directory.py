"""A directory of manifest files (or a single file) as a pod source: the machinery that the fixtures
and the static-pod manifests share.

The whole directory is read again on every change notice (watchfiles) and every `resync` seconds,
and the complete set of pods goes to `sink.replace`: the cache turns it into events and ignores
what did not change. A file keeps its last good pods while it cannot be read or decoded, so an
editor's half-written save, a permission mistake or a typo never looks like a deletion. A file
that is gone (or a directory that is gone) does take its pods with it, as with the kubelet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from watchfiles import awatch

from pods_api.core.cache import SourceSink
from pods_api.core.pod import PodVersion
from pods_api.core.sources import ErrorCounter
from pods_api.core.sources.loader import (
    ManifestError,
    Reporter,
    describe_os_error,
    read_manifest,
    unique_pods,
)

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

# (path, st_dev, st_ino) of each directory watched
_Roots = tuple[tuple[str, int, int], ...]


@dataclass(slots=True)
class _File:
    data: bytes | None = None  # the bytes last decoded, good or bad
    pods: list[PodVersion] = field(default_factory=list)  # from the last bytes that decoded
    warnings: list[str] = field(default_factory=list)  # of those bytes
    decode_error: str | None = None  # why `data` gave no pods; `pods` are older
    read_error: str | None = None  # why the file could not be read this time


@dataclass(slots=True)
class _Scan:
    pods: list[PodVersion] | None  # None: nothing could be listed; serve what was served
    errors: list[str]
    warnings: list[str]


class DirectorySource:
    """Subclasses set `name` and `unique_names`, and give `_ignored` and `_decode`."""

    name: str
    # Refuse a second pod with the same namespace/name (the kubelet does, for static pods).
    unique_names: ClassVar[bool] = False

    def __init__(self, path: Path, *, resync: float, on_error: ErrorCounter | None) -> None:
        self.path = path
        self._resync = resync
        self._reporter = Reporter(self.name, on_error)
        self._files: dict[str, _File] = {}
        self._watch_problem: str | None = None

    # -- what subclasses decide ----------------------------------------------------------------

    def _ignored(self, filename: str) -> bool:
        return filename.startswith(".")

    def _decode(self, origin: str, data: bytes, warnings: list[str]) -> list[PodVersion]:
        """The pods in one file's bytes; raises ManifestError."""
        raise NotImplementedError

    def _served(self, pods: list[PodVersion]) -> None:
        """Called after each scan with the pods now served."""

    # -- running -------------------------------------------------------------------------------

    async def run(self, sink: SourceSink) -> None:
        changed = asyncio.Event()
        watch = asyncio.create_task(self._watch(changed), name=f"watch {self.name}")
        try:
            while True:
                changed.clear()  # before the scan: a change during it makes another scan
                await self._scan_into(sink)
                # asyncio.timeout, not wait_for: in 3.11, wait_for loses a cancellation that
                # arrives as the event is set, and the source would then never stop.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._resync):
                        await changed.wait()
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch

    async def _scan_into(self, sink: SourceSink) -> None:
        # Reading and decoding run in a thread: a slow disk or a big fixture set must not stall
        # the event loop that serves the API. Scans never overlap, so the state is not shared.
        # The sink is called back here, on the loop's thread, as it must be.
        scan = await asyncio.to_thread(self._scan)
        self._reporter.report(scan.errors, scan.warnings)
        if scan.pods is not None:
            sink.replace(scan.pods)
            sink.mark_synced()

    # -- scanning (in a worker thread) -------------------------------------------------------

    def _scan(self) -> _Scan:
        for _ in range(LIST_ATTEMPTS):
            try:
                listing, within = self._listing()
            except ManifestError as exc:
                return _Scan(None, [str(exc)], [])
            for gone in self._files.keys() - listing.keys():
                del self._files[gone]
            vanished = [origin for origin, path in listing.items() if not self._read(origin, path, within)]
            if not vanished:
                break
            # A file went between the listing and the read: renamed, most likely, and the new
            # name is not in this listing. Without a fresh listing, a rename would look like
            # DELETED now and ADDED on the next scan.
        errors: list[str] = []
        warnings: list[str] = []
        for state in self._files.values():
            problem = state.read_error or state.decode_error
            if problem:
                errors.append(problem)
            warnings += state.warnings
        pods, duplicates = unique_pods(
            ((origin, self._files[origin].pods) for origin in sorted(self._files)),
            by_name=self.unique_names,
        )
        self._served(pods)
        return _Scan(pods, errors + duplicates, warnings)

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
        files = {str(self.path / n): self.path / n for n in names if not self._ignored(n)}
        return files, os.path.realpath(self.path)

    def _read(self, origin: str, path: Path, within: str | None) -> bool:
        """Read one listed file into its state; False when it is gone since the listing."""
        state = self._files.setdefault(origin, _File())
        try:
            data = read_manifest(path, within=within)
        except ManifestError as exc:
            state.read_error = str(exc)
            return True
        state.read_error = None
        if data is None:
            del self._files[origin]
            return False
        if data != state.data:
            self._decode_into(state, origin, data)
        return True

    def _decode_into(self, state: _File, origin: str, data: bytes) -> None:
        warnings: list[str] = []
        # `data` is recorded only once decoding ends (an unexpected exception leaves the state
        # as it was): a restarted source then decodes these bytes again instead of taking them
        # for bytes already decoded.
        try:
            pods = self._decode(origin, data, warnings)
        except ManifestError as exc:
            state.data, state.decode_error = data, str(exc)  # the pods from earlier bytes stay
            return
        state.data, state.pods, state.warnings, state.decode_error = data, pods, warnings, None

    # -- watching ------------------------------------------------------------------------------

    async def _watch(self, changed: asyncio.Event) -> None:
        """Set `changed` on every change notice, rewatching when the directory comes, goes or is
        replaced. Without notices (no inotify, watch limit reached) the resync still relists."""
        while True:
            roots = _watch_roots(self.path)
            changed.set()  # whatever happened before this watch began, a scan now sees it
            try:
                await self._follow(roots, changed)
            except Exception as exc:
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
        async with contextlib.aclosing(batches):
            async for batch in batches:
                if batch:
                    changed.set()
                if _watch_roots(self.path) != roots:
                    return


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
