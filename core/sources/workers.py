"""A directory's first load, decoded in worker processes beside the source's own thread.

At start-up a manifest directory of thousands of files is CPU-bound decoding (YAML, then the
codec), and one process decodes on one core while holding the GIL the event loop needs. For
that one bulk load, chunks of files go to `os.sched_getaffinity` - 1 spawned worker processes
(spawned, not forked: the server already runs grpc's threads) while the calling thread decodes
other chunks itself. The workers exist only for that load and exit after it, so the steady
state's memory is unchanged; later changes are decoded in the source's thread as before.

Any failure of the pool itself (no /dev/shm, a worker killed) falls back to decoding in the
calling thread: the result is the same, only slower. A ManifestError is part of a file's
outcome, as in the thread; any other exception from a decode propagates, as in the thread.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import multiprocessing
import os
import pickle
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

from pods_api.core.pod import PodVersion

log = logging.getLogger(__name__)

# Below this many files the spawn (~0.5 CPU s to start an interpreter and import the codec)
# costs about what it saves: 1,000 manifests decode in ~1 CPU s.
BULK_FILES = 1000
# Files per task: small enough that the calling thread and the workers finish close together,
# large enough that a task's pickling and queueing (~1 ms) is small beside its decode (~70 ms).
CHUNK_FILES = 64
# More workers than this gain little: the calling thread still unpickles and applies each result.
MAX_WORKERS = 4

# One file's outcome: its pods and warnings, or why it gave none (a ManifestError's text).
Outcome = tuple[list[PodVersion], list[str], str | None]
Item = tuple[str, bytes]  # (origin, bytes read)


class Decoder(Protocol):
    def decode_file(self, origin: str, data: bytes) -> Outcome: ...

    def worker_state(self) -> Any:
        """What decoding left behind since the last call that the source must adopt (or None);
        called in a worker after each chunk."""


def worker_count() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(0, min(MAX_WORKERS, cores - 1))


def decode(
    items: Sequence[Item],
    local: Decoder,
    factory: Callable[[], Decoder] | None,
    adopt: Callable[[Any], None],
) -> list[Outcome]:
    """Each item's outcome, in order. With a picklable `factory` (making, in a worker, a decoder
    equal to `local`) and enough items, part of them are decoded in worker processes, and each
    worker's `worker_state()` is handed to `adopt` before its outcomes are returned."""
    workers = worker_count() if factory is not None else 0
    if workers == 0 or len(items) < BULK_FILES:
        return [local.decode_file(origin, data) for origin, data in items]
    assert factory is not None
    chunks = [list(items[i : i + CHUNK_FILES]) for i in range(0, len(items), CHUNK_FILES)]
    results: list[list[Outcome] | None] = [None] * len(chunks)
    try:
        _share(chunks, results, local, factory, adopt, workers)
    except (BrokenProcessPool, OSError, pickle.PicklingError) as exc:
        log.warning("decoding in worker processes failed (%s); decoding in the source's thread", exc)
    out: list[Outcome] = []
    for chunk, result in zip(chunks, results, strict=True):
        out += result if result is not None else [local.decode_file(o, d) for o, d in chunk]
    return out


def _share(
    chunks: list[list[Item]],
    results: list[list[Outcome] | None],
    local: Decoder,
    factory: Callable[[], Decoder],
    adopt: Callable[[Any], None],
    workers: int,
) -> None:
    """Workers take chunks from the back, this thread from the front, until they meet."""
    todo = collections.deque(enumerate(chunks))
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=context, initializer=_start, initargs=(factory,)
    ) as pool:
        pending: dict[concurrent.futures.Future[tuple[list[Outcome], Any]], int] = {}
        while todo or pending:
            while todo and len(pending) < 2 * workers:  # each worker one ahead
                index, chunk = todo.pop()
                pending[pool.submit(_decode_chunk, chunk)] = index
            if todo:
                index, chunk = todo.popleft()
                results[index] = [local.decode_file(o, d) for o, d in chunk]
                done = {future for future in pending if future.done()}
            else:
                # Nothing left here: take back what no worker has started (still spawning).
                for future, index in list(pending.items()):
                    if future.cancel():
                        del pending[future]
                        results[index] = [local.decode_file(o, d) for o, d in chunks[index]]
                if not pending:
                    break
                done, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                outcomes, state = future.result()
                adopt(state)
                results[pending.pop(future)] = outcomes


_decoder: Decoder | None = None  # in a worker process: made once by _start


def _start(factory: Callable[[], Decoder]) -> None:
    global _decoder
    _decoder = factory()


def _decode_chunk(chunk: list[Item]) -> tuple[list[Outcome], Any]:
    assert _decoder is not None
    return [_decoder.decode_file(origin, data) for origin, data in chunk], _decoder.worker_state()
