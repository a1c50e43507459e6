"""The C heap under the process: glibc's malloc, told to give freed memory back to the system.

Every bytes object over 512 bytes, and every buffer grpc and the HTTP server copy a response
into, comes from malloc. glibc's default keeps what is freed: its mmap threshold rises to the
size of the largest block freed (up to 32 MiB), so after one List of a few thousand pods every
later big buffer lands in the heap, and the heap's free top is given back only past a trim
threshold that rises with it. Measured at 5,000 pods (BENCHMARKS.md, W5): one gRPC and one HTTP
List left RSS 96 MiB higher, 82 MiB of it free heap that a trim gave back.

So, at start-up (before grpc starts its threads), the thresholds are fixed, which also turns
glibc's dynamic adjustment off: a block from MMAP_THRESHOLD up is its own mapping, unmapped when
freed. Small blocks freed in bulk (1,000 watchers leaving: grpc's per-call state, our tasks)
leave free pages between live ones, which only a trim returns: once the sources have synced
(what decoding them left), then every TRIM_EVERY seconds, in a thread. Elsewhere than glibc
(musl, macOS) all of this does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

# mallopt parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Blocks from this size up get their own mapping: glibc's initial default (128 KiB), kept fixed.
# A pod's encodings are a few KiB, so only assembled responses, joined watch starts and grpc's
# copies of them are mapped; each costs an mmap and page faults, well under the cost of writing
# that many bytes to a socket.
MMAP_THRESHOLD = 128 * 1024
# Free memory at the heap's top beyond this is given back at once: glibc's initial default.
TRIM_THRESHOLD = 128 * 1024
# Seconds between trims: memory freed in a burst goes back to the system within this, at 2-25
# ms of a thread's time per trim (measured at 5,000 pods; ctypes lets go of the GIL meanwhile).
TRIM_EVERY = 30.0


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    if not (hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim")):
        return None  # not glibc
    return libc


_LIBC = _libc()


def configure() -> bool:
    """Fix malloc's thresholds (call before other threads start: glibc reads them per arena as
    it grows). False where the C library is not glibc."""
    if _LIBC is None:
        return False
    done = _LIBC.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    done = done and _LIBC.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    if not done:
        log.warning("could not set malloc's thresholds; freed memory may be kept by the process")
    return bool(done)


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
