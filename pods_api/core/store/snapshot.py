"""A snapshot of the cache: the pods served at one revision, and what surfaces assemble from it.

Surfaces memoise what they assemble from a snapshot (a whole ListPodsResponse, a JSON PodList,
a watch's start) so that every request until the next change gets the same bytes object, up to
MEMO_BYTES of them or twice the pods' bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pods_api.core.store.lru import LRU
from pods_api.core.store.version import PodVersion

T = TypeVar("T")

# Assembled responses kept per snapshot (one per distinct mask and surface): a handful in
# practice, bounded against a client that sends a new mask each time.
MEMO_PER_SNAPSHOT = 32
# And at most this many bytes of them. Each is a copy of every pod it shows, so kept without a
# bound they are one more copy of the node's pods per surface and view (42 MiB at 5,000 pods
# for one gRPC and one JSON List, as much as the pods themselves). Every response of a node of
# 1,000 pods of ~3 KiB fits (2.9 MiB per gRPC List, 5.6 MiB per JSON one), and a gRPC List of
# 5,000; each List until the next change is then a lookup. A larger one is assembled again per
# call: one join of the pods' kept bytes (2.6 ms for 14 MiB), instead of a copy kept idle.
MEMO_BYTES = 16 * 1024 * 1024
# Or, for a snapshot of more pods than that, this many times the bytes of its pods' encodings
# (protobuf and JSON): room for the unmasked List of each surface (gRPC's is the pods' protobuf,
# the HTTP PodList and the Kubernetes view's about their JSON each), so those are made once per
# revision, not once per call (at 5,000 pods of 4.7 KiB: 24, 46 and 46 MB). The price is up to
# twice the pods' own bytes, kept while the revision is current, however many callers there are.
POD_BYTES_FACTOR = 2


@dataclass(eq=False, slots=True)
class Snapshot:
    """The pods at one revision, in UID order; immutable, with its memo of assembled values."""

    revision: int
    pods: tuple[PodVersion, ...]
    _memo: LRU[Any, Any] = field(init=False)
    # What the memo could not keep, while something still uses it: watches starting together
    # share one start, however large, and nothing of it is kept once every one has sent it.
    _in_use: weakref.WeakValueDictionary[Any, Any] = field(default_factory=weakref.WeakValueDictionary)
    # Values being assembled in slices (core/store/slices.py): one task each, for every caller.
    _making: dict[Any, asyncio.Task[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        held = sum(pod.encoded for pod in self.pods)
        self._memo = LRU(MEMO_PER_SNAPSHOT, _weight, max(MEMO_BYTES, POD_BYTES_FACTOR * held))

    def memo(self, key: Any, make: Callable[[], T]) -> T:
        """What `make` assembles from this snapshot, made once while kept (up to MEMO_BYTES of
        them), or while in use elsewhere if it can be referenced weakly (a watch start)."""
        value: T | None = self._in_use.get(key)
        if value is not None:
            return value
        value = self._memo.get(key, make)
        if key not in self._memo:
            with contextlib.suppress(TypeError):  # bytes cannot be referenced weakly
                self._in_use[key] = value
        return value

    async def assembled(self, key: Any, make: Callable[[], Awaitable[T]]) -> T:
        """As `memo`, for a value assembled in slices that yield to the loop: a caller that
        comes while it is being made waits for that one. It is made in a task of its own, so a
        caller that goes away (its client left) does not cancel it for the others."""
        value: T | None = self._in_use.get(key)
        if value is None and key in self._memo:
            value = self._memo.get(key, _missing)
        if value is not None:
            return value
        task = self._making.get(key)
        if task is None:
            task = self._making[key] = asyncio.get_running_loop().create_task(self._make(key, make))
        made: T = await asyncio.shield(task)
        return made

    async def _make(self, key: Any, make: Callable[[], Awaitable[T]]) -> T:
        try:
            value = await make()
        finally:
            del self._making[key]
        return self.memo(key, lambda: value)


def _missing() -> Any:
    raise AssertionError("looked up a key the memo holds")


def _weight(value: Any) -> int:
    """The bytes an assembled value holds: a body, or a watch start's frames (a pointer each
    for anything else, such as a list of the snapshot's own pods)."""
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, tuple | list):
        return sum(len(item) if isinstance(item, bytes) else 8 for item in value)
    return 8
