"""The C heap under the process: glibc's malloc, made to give freed memory back to the system.

Every bytes object over 512 bytes, and every buffer grpc and the HTTP server copy a response
into, comes from malloc. glibc keeps what is freed: its mmap threshold rises to the size of the
largest block freed (up to 32 MiB), so after one List of a few thousand pods later response
buffers come from the heap, and free memory inside it, or at its top below a trim threshold
that rises with it, stays in RSS. Small blocks freed in bulk (1,000 watchers leaving: grpc's
per-call state, our tasks) leave free pages between live ones, which only a trim returns.
Measured at 5,000 pods (docs/perf-notes/2026-11-30-w5-memory.md): one gRPC and one HTTP List
left 82 MiB of free heap in RSS; 1,000 watchers leaving, 31 MiB.

So the heap is trimmed once the sources have synced (what decoding them left), then every
TRIM_EVERY seconds, in a thread. Fixing the thresholds instead (every large block its own
mapping, unmapped when freed) returns it at once but costs page faults on every large List:
2.3x the CPU per List at 1,000 pods, measured; reusing the heap between trims costs none.
Elsewhere than glibc (musl, macOS) this does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util

# malloc arenas: glibc gives each thread that allocates an arena of its own, up to 8 per core,
# and reserves 64 MiB of address space for each: 600 MiB of the 820 MiB a server with its 11
# threads had mapped (measured), so under an address-space limit (`prlimit --as`, a container's
# ulimit -v) a thread's malloc failed and grpc's C code died of it (SIGSEGV, no word). Two: the
# loop's thread and grpc's, which hold the GIL or wait on it in turn anyway.
MAX_ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number (glibc's malloc.h)

# Seconds between trims: memory freed in a burst goes back to the system within this. A trim
# takes 2-25 ms of a thread (measured at 5,000 pods, most after 1,000 watchers left; ctypes lets
# go of the GIL meanwhile), so every 10 s is well under 0.1% of a core.
TRIM_EVERY = 10.0


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None  # glibc only


_LIBC = _libc()


def limit_arenas() -> None:
    """At most MAX_ARENAS malloc arenas; call before any thread starts (glibc only)."""
    if _LIBC is not None and hasattr(_LIBC, "mallopt"):
        _LIBC.mallopt(_M_ARENA_MAX, MAX_ARENAS)


def trim() -> None:
    """Give every free page inside the heap back to the system (glibc's malloc_trim)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


async def keep_trimmed(every: float = TRIM_EVERY) -> None:
    """Trim every `every` seconds, in a thread, until cancelled."""
    if _LIBC is None:
        return
    while True:
        await asyncio.sleep(every)
        await asyncio.to_thread(trim)
