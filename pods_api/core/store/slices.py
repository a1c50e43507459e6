"""Responses assembled in slices that yield to the event loop.

A List is assembled on the one event loop every surface shares: a whole one of 5,000 pods in a
view of its own (a selector, a mask) is a few hundred milliseconds of work, and ten of them at
once held `/healthz`, gRPC health and every live watch for up to 2.8 s. Assembled in slices,
with a turn of the loop between two, everything else waits for one slice at a time at most,
and the Lists themselves take only the loop's turns longer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Items made between two turns of the loop: at the slowest (a masked JSON encoding with a
# selector, ~20 µs a pod) a slice is ~3 ms, well under the 0.2 s a health check may wait behind
# ten Lists at once; a turn costs microseconds, so a 5,000-pod List pays ~40 of them.
SLICE = 128
# A body larger than this is joined off the loop: bytes.join lets go of the GIL while it copies
# a result of over 1 MiB (CPython's stringlib join.h, GIL_THRESHOLD), and the copy of a 28 MB
# List is 10-45 ms of a core, as long as a few hundred slices. Below it, a thread's hand-off
# (~0.1 ms) would cost more than the copy.
OFF_LOOP = 1 << 20


async def collected(items: Iterable[T], make: Callable[[T], R]) -> list[R]:
    """`[make(item) for item in items]`, a turn of the loop after every SLICE items (the
    iteration itself, a view's selection, is part of each slice's work)."""
    out: list[R] = []
    append = out.append
    for count, item in enumerate(items, 1):
        append(make(item))
        if not count % SLICE:
            await asyncio.sleep(0)
    return out


async def joined(
    items: Iterable[T],
    make: Callable[[T], bytes],
    separator: bytes = b"",
    head: bytes = b"",
    tail: bytes = b"",
) -> bytes:
    """`head + separator.join(make(item) for item in items) + tail`, its parts made in slices,
    and copied once, off the loop when large."""
    parts = await collected(items, make)
    if not parts:
        return head + tail
    # Folded into the first and last parts (small copies), so that the body is copied once.
    parts[0] = head + parts[0]
    parts[-1] = parts[-1] + tail
    if sum(map(len, parts)) <= OFF_LOOP:
        return separator.join(parts)
    return await asyncio.to_thread(separator.join, parts)
