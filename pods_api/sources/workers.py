"""A directory's first load, decoded in worker processes beside the source's own thread.

At start-up a manifest directory of thousands of files is CPU-bound decoding (YAML, then the
codec), and one process decodes on one core while holding the GIL the event loop needs. For
that one bulk load, chunks of files go to `os.sched_getaffinity` - 1 worker processes (new
interpreters running this module, not forks: the server already runs grpc's threads) while the
calling thread decodes other chunks itself. The workers exist only for that load and exit after
it, so the steady state's memory is unchanged; later changes are decoded in the source's thread
as before.

A worker that cannot start or dies leaves its chunks to the calling thread: the result is the
same, only slower. A ManifestError is part of a file's
outcome, as in the thread; any other exception from a decode propagates, as in the thread.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pods_api.core.store.pod import PodVersion

log = logging.getLogger(__name__)

# Below this many files a worker's start (~0.4 CPU s: an interpreter, the codec's imports)
# costs about what it saves: 1,000 manifests decode in ~1 CPU s.
BULK_FILES = 1000
# Files per chunk: small enough that the calling thread and the workers finish close together,
# large enough that a chunk's pickling and round trip (~1 ms) is small beside its decode (~70 ms).
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
    worker's `worker_state()` is handed to `adopt` before the outcomes are returned."""
    workers = worker_count() if factory is not None else 0
    if workers == 0 or len(items) < BULK_FILES:
        return [local.decode_file(origin, data) for origin, data in items]
    assert factory is not None
    chunks = [list(items[i : i + CHUNK_FILES]) for i in range(0, len(items), CHUNK_FILES)]
    results: list[list[Outcome] | None] = [None] * len(chunks)
    states = _share(chunks, results, local, factory, workers)
    for state in states:
        adopt(state)
    out: list[Outcome] = []
    for chunk, result in zip(chunks, results, strict=True):
        # A chunk a worker did not finish (it failed to start, or died) is decoded here.
        out += result if result is not None else [local.decode_file(o, d) for o, d in chunk]
    return out


def _share(
    chunks: list[list[Item]],
    results: list[list[Outcome] | None],
    local: Decoder,
    factory: Callable[[], Decoder],
    workers: int,
) -> list[Any]:
    """Workers take chunks from the back, this thread from the front, until they meet; each
    worker is fed by a thread of its own. Returns the workers' states."""
    todo = collections.deque(enumerate(chunks))
    lock = threading.Lock()
    states: list[Any] = []

    def take(back: bool) -> tuple[int, list[Item]] | None:
        with lock:
            if not todo:
                return None
            return todo.pop() if back else todo.popleft()

    def feed(job: tuple[int, list[Item]] | None) -> None:
        try:
            # Not multiprocessing: it would import the server's main module in each worker,
            # and leave a resource-tracker process behind for the server's lifetime.
            # -P: `-m` would otherwise put the working directory first on sys.path, and a root
            # daemon started in a writable directory must not import what lies there.
            proc = subprocess.Popen(
                [sys.executable, "-P", "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
        except OSError as exc:
            log.warning("cannot start a decoding worker (%s); decoding in the source's thread", exc)
            return
        assert proc.stdin is not None and proc.stdout is not None
        try:
            pickle.dump(factory, proc.stdin)
            while job is not None:
                index, chunk = job
                pickle.dump(chunk, proc.stdin)
                proc.stdin.flush()
                outcomes, state = pickle.load(proc.stdout)
                results[index] = outcomes
                states.append(state)
                job = take(back=True)
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            log.warning("a decoding worker failed (%s); the source's thread decodes its files", exc)
        finally:
            with contextlib.suppress(OSError):
                proc.stdin.close()
            proc.stdout.close()
            proc.wait()

    # Each worker's first chunk is taken here, before this thread starts on the others: a
    # worker still starting then has work waiting however fast this thread goes.
    feeders = [
        threading.Thread(target=feed, args=(take(back=True),), name="decoding worker feed")
        for _ in range(workers)
    ]
    for feeder in feeders:
        feeder.start()
    try:
        while (job := take(back=False)) is not None:
            index, chunk = job
            results[index] = [local.decode_file(o, d) for o, d in chunk]
    finally:
        with lock:
            todo.clear()  # an exception here: the feeders stop after their current chunk
        for feeder in feeders:
            feeder.join()
    return states


def _serve() -> None:
    """A worker: a factory, then chunks, from stdin; each chunk's outcomes to stdout."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    decoder: Decoder = pickle.load(stdin)()
    while True:
        try:
            chunk = pickle.load(stdin)
        except EOFError:
            return
        outcomes = [decoder.decode_file(origin, data) for origin, data in chunk]
        pickle.dump((outcomes, decoder.worker_state()), stdout)
        stdout.flush()


if __name__ == "__main__":
    _serve()
