"""Decoding in worker processes beside the source's own thread: a directory's first load, and
its changes while its files churn.

At start-up a manifest directory of thousands of files is CPU-bound decoding (YAML, then the
codec), and one process decodes on one core while holding the GIL the event loop needs. For
that one bulk load, chunks of files go to `os.sched_getaffinity` - 1 worker processes (new
interpreters running this module, not forks: the server already runs grpc's threads) while the
calling thread decodes other chunks itself. Those workers exit after the load.

Later, while a source's files keep changing (a controller rewriting fixtures, a config tool
churning manifests), its decoding would again hold the GIL against the watch fan-out. `Churn`
then keeps one worker for that source: started once `CHURN_FILES` files were decoded within
`CHURN_WINDOW` seconds, ended after `KEEP_SECONDS` without a change. A quiet source has none, so
the steady state's memory is unchanged; a churning one pays one worker's RSS (BENCHMARKS.md,
"Memory per source").

A worker that cannot start or dies leaves its files to the calling thread: the result is the
same, only slower. A ManifestError is part of a file's outcome, as in the thread; any other
exception from a decode propagates, as in the thread.
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
import time
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
# Churn: this many files decoded within CHURN_WINDOW seconds start a source's worker. One file a
# second is an operator's edits, decoded in the thread as before (~1.7 ms each, a worker's start
# ~0.4 CPU s); 32 in 10 s is a tool rewriting files, where a file's round trip to the worker
# (~0.1 ms of pickling here) replaces its decoding under the GIL.
CHURN_FILES = 32
CHURN_WINDOW = 10.0
# And it ends after this long without a change: a churn that pauses keeps it, a quiet source
# soon has none (the check runs at every scan, and a scan runs at least every resync).
KEEP_SECONDS = 60.0
# A worker still decoding when its source stops is killed after this long.
CLOSE_WAIT = 2.0

# One file's outcome: its pods and warnings, or why it gave none (a ManifestError's text).
Outcome = tuple[list[PodVersion], list[str], str | None]
Item = tuple[str, bytes]  # (origin, bytes read)


class Decoder(Protocol):
    def decode_file(self, origin: str, data: bytes) -> Outcome: ...

    def worker_state(self) -> Any:
        """What decoding left behind since the last call that the source must adopt (or None);
        called in a worker after each chunk."""

    def apply_sync(self, state: Any) -> None:
        """In a worker, before a chunk: what the source's `worker_sync()` gave (not None)."""


class WorkerFailed(Exception):
    pass


class Worker:
    """One worker process: a decoder made by `factory`, then chunks in and outcomes out."""

    def __init__(self, factory: Callable[[], Decoder]) -> None:
        # Not multiprocessing: it would import the server's main module in each worker, and
        # leave a resource-tracker process behind for the server's lifetime.
        # -P: `-m` would otherwise put the working directory first on sys.path, and a root
        # daemon started in a writable directory must not import what lies there.
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-P", "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
        except OSError as exc:
            raise WorkerFailed(f"cannot start a decoding worker ({exc})") from None
        self.pid = self._proc.pid
        try:
            self._send(factory)
        except WorkerFailed:
            self.close()
            raise

    def decode(self, chunk: list[Item], sync: Any = None) -> tuple[list[Outcome], Any]:
        """The chunk's outcomes and the decoder's `worker_state()`; raises WorkerFailed."""
        self._send((chunk, sync))
        assert self._proc.stdout is not None
        try:
            outcomes, state = pickle.load(self._proc.stdout)
        except (OSError, ValueError, EOFError, pickle.UnpicklingError) as exc:  # ValueError: closed
            raise WorkerFailed(f"a decoding worker failed ({exc!r})") from None
        return outcomes, state

    def _send(self, message: object) -> None:
        assert self._proc.stdin is not None
        try:
            pickle.dump(message, self._proc.stdin)
            self._proc.stdin.flush()
        except (OSError, ValueError) as exc:
            raise WorkerFailed(f"a decoding worker failed ({exc!r})") from None

    def close(self) -> None:
        """Its stdin closed, the worker exits; reaped here (killed if it is still decoding a
        chunk after CLOSE_WAIT: the source is stopping)."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        with contextlib.suppress(OSError):
            self._proc.stdin.close()
        self._proc.stdout.close()
        try:
            self._proc.wait(CLOSE_WAIT)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


class Churn:
    """One source's decoding of its changes: in its thread, or in a worker kept while its files
    churn. Used from the source's scanning thread only (scans never overlap)."""

    def __init__(
        self,
        name: str,
        factory: Callable[[], Decoder] | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._name = name
        self._factory = factory
        self._clock = clock
        self._worker: Worker | None = None
        self._decoded: collections.deque[tuple[float, int]] = collections.deque()  # (when, files)
        self._last = 0.0

    @property
    def worker_pid(self) -> int | None:
        return None if self._worker is None else self._worker.pid

    def decode(
        self, items: Sequence[Item], local: Decoder, adopt: Callable[[Any], None], sync: Callable[[], Any]
    ) -> list[Outcome]:
        """Each item's outcome, in order; `sync()` is what the worker's decoder needs to decode
        as `local` does (`apply_sync`), and its `worker_state()` goes to `adopt`."""
        now = self._clock()
        self._expire(now)
        if items:
            self._last = now
            self._decoded.append((now, len(items)))
        if self._worker is None and self._churning(now):
            self._start()
        worker = self._worker  # once: a stopping source closes it from the loop's thread
        if worker is None or not items:
            return [local.decode_file(origin, data) for origin, data in items]
        try:
            outcomes, state = worker.decode(list(items), sync())
        except WorkerFailed as exc:
            # Not started again: a worker that dies (the OOM killer, a limit) would die again.
            log.warning("%s; the source's thread decodes its changes from now on", exc)
            self._factory = None
            self.close()
            return [local.decode_file(origin, data) for origin, data in items]
        adopt(state)
        return outcomes

    def _churning(self, now: float) -> bool:
        while self._decoded and now - self._decoded[0][0] > CHURN_WINDOW:
            self._decoded.popleft()
        if self._factory is None or worker_count() == 0:
            return False
        return sum(n for _, n in self._decoded) >= CHURN_FILES

    def _start(self) -> None:
        assert self._factory is not None
        try:
            self._worker = Worker(self._factory)
            pid = self._worker.pid
            log.info("pod source %s: its files churn; decoding in worker process %d", self._name, pid)
        except WorkerFailed as exc:
            log.warning("%s; the source's thread decodes its changes", exc)
            self._factory = None  # not again: a worker that cannot start will not start later

    def _expire(self, now: float) -> None:
        if self._worker is not None and now - self._last > KEEP_SECONDS:
            log.info("pod source %s: no change for %g s; its decoding worker exits", self._name, KEEP_SECONDS)
            self.close()

    def close(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()


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
            worker = Worker(factory)
        except WorkerFailed as exc:
            log.warning("%s; decoding in the source's thread", exc)
            return
        try:
            while job is not None:
                index, chunk = job
                results[index], state = worker.decode(chunk)
                states.append(state)
                job = take(back=True)
        except WorkerFailed as exc:
            log.warning("%s; the source's thread decodes its files", exc)
        finally:
            worker.close()

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
            chunk, sync = pickle.load(stdin)
        except EOFError:
            return
        if sync is not None:
            decoder.apply_sync(sync)
        outcomes = [decoder.decode_file(origin, data) for origin, data in chunk]
        pickle.dump((outcomes, decoder.worker_state()), stdout)
        stdout.flush()


if __name__ == "__main__":
    _serve()
