"""Watching a directory (or a single file) for change notices: which files changed, or that every
file must be looked at again.

A change notice (watchfiles) names the files that changed; `DirectoryWatch` gathers their names
until the scan takes them (`take`). Anything but a file directly in the directory (the directory
itself, an ancestor, a ConfigMap-style `..data` swap that retargets every file at once) means
"every file". The watch follows the directory as it comes, goes or is replaced; without notices
(no inotify, the watch limit reached) it says so once and the source's resync relists instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from watchfiles import awatch

log = logging.getLogger(__name__)

# Changes closer together than this are handed over as one batch, so an editor's
# write-rename-chmod is read once; small enough that an edit is served well within a second.
DEBOUNCE_MS = 400
# Quiet time after the last change before a batch is handed over: lets a write finish first.
STEP_MS = 50
# How often the watch checks that what it watches is still the directory at `path` (it may have
# been replaced by a new one, which the old watch would never report on).
ROOT_CHECK_MS = 5000

# (path, st_dev, st_ino) of each directory watched
_Roots = tuple[tuple[str, int, int], ...]


class DirectoryWatch:
    """The change notices for `path`, as the names of the files they name (None: every file)."""

    def __init__(self, path: Path, *, name: str, resync: float) -> None:
        self.path = path
        self._absolute = os.path.abspath(path)  # how change notices name it
        self._name = name
        self._resync = resync
        self._problem: str | None = None
        # Files named by change notices since the last `take`; None: look at every file.
        self._dirty: set[str] | None = None

    def take(self) -> set[str] | None:
        """The files named since the last call (None: every file), forgetting them."""
        dirty, self._dirty = self._dirty, set()
        return dirty

    def everything(self) -> None:
        """The next `take` is every file (the resync)."""
        self._dirty = None

    async def run(self, changed: asyncio.Event) -> None:
        """Set `changed` on every change notice, rewatching when the directory comes, goes or is
        replaced."""
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
                if problem != self._problem:
                    log.warning("pod source %s: %s", self._name, problem)
                    self._problem = problem
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
                    self._note(batch)
                    changed.set()
                if _watch_roots(self.path) != roots:
                    return

    def _note(self, batch: Iterable[tuple[object, str]]) -> None:
        """Remember which files a batch of notices names."""
        if self._dirty is None:
            return
        for _, changed in batch:
            parent, name = os.path.split(os.path.abspath(changed))
            if parent != self._absolute or name.startswith(".."):
                self._dirty = None
                return
            self._dirty.add(str(self.path / name))


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
