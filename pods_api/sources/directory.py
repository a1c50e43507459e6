"""A directory of manifest files (or a single file) as a pod source: what the fixtures and the
static-pod manifests share. Three jobs, one module each:

    dirwatch.py   which files changed (change notices), or "every file" (the resync)
    dirscan.py    each file's state: listed, stat'ed, read and decoded only as far as it changed
    directory.py  the loop: scan, combine the files' pods, report, hand them to the sink

Work per change is proportional to what changed: a change notice names the files that changed,
and only those are looked at; every `resync` seconds (and when the directory itself changes)
every file is stat'ed again. The complete set of pods then goes to `sink.replace`: the cache
turns it into events and skips unchanged pods at the cost of a lookup each.

A kind of directory source gives its `Decoder` (a pure function from a file's bytes to pods:
workers.py runs it in other processes too), its policies below, and, for static pods, the
`FirstSeen` times stamped after decoding (firstseen.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import ClassVar

from pods_api.core.store.cache import SourceSink
from pods_api.sources import ErrorCounter, ManifestError
from pods_api.sources.dirscan import DirectoryScan, shown_name
from pods_api.sources.dirwatch import DirectoryWatch
from pods_api.sources.firstseen import FirstSeen
from pods_api.sources.reporting import Reporter, unique_pods
from pods_api.sources.workers import Decoder

# Listings per scan when files vanish between listing and reading: a rename or two in flight;
# more than this means constant churn, and the next scan is moments away anyway.
LIST_ATTEMPTS = 3


class DirectorySource:
    """Subclasses set `name` and the policies, and may override `ignored`."""

    name: str
    # Refuse a second pod with the same namespace/name (the kubelet does, for static pods).
    unique_names: ClassVar[bool] = False
    # Of two pods with one name (or uid), the one from the file last in name order is served.
    last_name_wins: ClassVar[bool] = False
    # A file that cannot be read or decoded keeps its last good pods (else it has none).
    keeps_bad_files: ClassVar[bool] = True

    def __init__(
        self,
        path: Path,
        decoder: Decoder,
        *,
        resync: float,
        on_error: ErrorCounter | None,
        first_seen: FirstSeen | None = None,
    ) -> None:
        self.path = path
        self._resync = resync
        self._reporter = Reporter(self.name, on_error)
        self._first_seen = first_seen
        self._watch = DirectoryWatch(path, name=self.name, resync=resync)
        self._scan = DirectoryScan(
            path,
            decoder,
            name=self.name,
            ignored=self.ignored,
            keeps_bad_files=self.keeps_bad_files,
            first_seen=first_seen,
        )

    def ignored(self, filename: str) -> bool:
        """Whether a file in the directory is no manifest (never read)."""
        return filename.startswith(".")

    async def run(self, sink: SourceSink) -> None:
        sink.origin_of = self._scan.origin_of
        changed = asyncio.Event()
        watch = asyncio.create_task(self._watch.run(changed), name=f"watch {self.name}")
        try:
            while True:
                changed.clear()  # before the scan: a change during it makes another scan
                await self._scan_into(sink, self._watch.take())
                # asyncio.timeout, not wait_for: in 3.11, wait_for loses a cancellation that
                # arrives as the event is set, and the source would then never stop.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._resync):
                        await changed.wait()
                if not changed.is_set():
                    self._watch.everything()  # the resync
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
            self._scan.churn.close()

    async def _scan_into(self, sink: SourceSink, dirty: set[str] | None) -> None:
        # Listing, reading and decoding run in a thread: a slow disk must not stall the event
        # loop, and the GIL's switch interval hands the loop the interpreter every 5 ms even in
        # the middle of one file's decode (measured: decoding on the loop in slices yielding
        # between files lagged the loop 2-5x more in W1, `python -m bench source`). The sink is
        # called here, on the loop's thread, as it must be.
        for _ in range(LIST_ATTEMPTS):
            try:
                vanished = await asyncio.to_thread(self._scan.update, dirty)
            except ManifestError as exc:
                self._reporter.report([str(exc)])
                return
            if not vanished:
                break
            # A file went between the listing and the read: renamed, most likely, and the new
            # name is not in this listing. Without a fresh listing, a rename would look like
            # DELETED now and ADDED on the next scan.
            dirty = None
        pods, duplicates = unique_pods(
            self._scan.groups(), by_name=self.unique_names, last_wins=self.last_name_wins
        )
        if self._first_seen is not None:
            self._first_seen.retain({pod.uid for pod in pods})
        errors, warnings = self._problems()
        missing = self._missing()
        if missing is not None:
            warnings.append(missing)
        self._reporter.report(errors + duplicates, warnings)
        sink.replace(pods)
        sink.warn(missing)  # for `pods-api check`, while it holds
        sink.mark_synced()

    def _problems(self) -> tuple[list[str], list[str]]:
        """The files' errors and warnings now."""
        # A name that is not UTF-8 cannot be a name in a log line, a JSON log or an error: the
        # file is skipped, said once while it is there, and the others are served and watched.
        skipped = self._scan.skipped
        warnings = [f"{self.path}: skipping the file {shown_name(n)}: its name is not UTF-8" for n in skipped]
        errors = []
        for state in self._scan.files.values():
            problem = state.read_error or state.decode_error
            if problem:
                errors.append(problem)
            warnings += state.warnings
        return errors, warnings

    def _missing(self) -> str | None:
        """What to say of a path that does not exist. It serves no pods, as the kubelet's
        does, but a path that never appears is most often another distribution's manifest
        path: ready with zero pods is then said, in the log and by `pods-api check`."""
        if os.path.lexists(self.path):
            return None
        return f"{self.path} does not exist: no pods from it until it does (is this the node's path?)"
