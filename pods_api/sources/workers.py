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

Decoding is a pure function of a file's bytes (`Decoder`): a worker gets a copy of the source's
decoder once, then chunks of (origin, bytes), and hands back only their outcomes; nothing flows
between the processes otherwise. A worker that cannot start or dies leaves its files to the
calling thread: the result is the same, only slower. A ManifestError is part of a file's
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
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from pods_api.core.store.version import PodVersion
from pods_api.sources import ManifestError

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
    """A pure function from one file's bytes to its pods, the same in any process: it holds only
    its configuration, is picklable (a worker gets a copy), and keeps no state between calls.
    Raises ManifestError for bytes that give no pods."""

    def decode(self, origin: str, data: bytes, warnings: list[str]) -> list[PodVersion]: ...


def outcome(decoder: Decoder, origin: str, data: bytes) -> Outcome:
    """One file's pods and warnings, or why it gives none."""
    warnings: list[str] = []
    try:
        return decoder.decode(origin, data, warnings), warnings, None
    except ManifestError as exc:
        return [], [], str(exc)


class WorkerFailed(Exception):
    pass


class Worker:
    """One worker process: a copy of the decoder, then chunks in and outcomes out."""

    def __init__(self, decoder: Decoder) -> None:
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
            self._send(decoder)
        except WorkerFailed:
            self.close()
            raise

    def decode(self, chunk: list[Item]) -> list[Outcome]:
        """The chunk's outcomes; raises WorkerFailed."""
        self._send(chunk)
        assert self._proc.stdout is not None
        try:
            outcomes: list[Outcome] = pickle.load(self._proc.stdout)
        except (OSError, ValueError, EOFError, pickle.UnpicklingError) as exc:  # ValueError: closed
            raise WorkerFailed(f"a decoding worker failed ({exc!r})") from None
        return outcomes

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

    def __init__(self, name: str, decoder: Decoder, clock: Callable[[], float] = time.monotonic) -> None:
        self._name = name
        self._decoder = decoder
        self._usable = True  # False once a worker failed to start or died: not tried again
        self._clock = clock
        self._worker: Worker | None = None
        self._decoded: collections.deque[tuple[float, int]] = collections.deque()  # (when, files)
        self._last = 0.0

    @property
    def worker_pid(self) -> int | None:
        return None if self._worker is None else self._worker.pid

    def decode(self, items: Sequence[Item]) -> list[Outcome]:
        """Each item's outcome, in order."""
        now = self._clock()
        self._expire(now)
        if items:
            self._last = now
            self._decoded.append((now, len(items)))
        if self._worker is None and self._churning(now):
            self._start()
        worker = self._worker  # once: a stopping source closes it from the loop's thread
        if worker is None or not items:
            return [outcome(self._decoder, origin, data) for origin, data in items]
        try:
            return worker.decode(list(items))
        except WorkerFailed as exc:
            # Not started again: a worker that dies (the OOM killer, a limit) would die again.
            log.warning("%s; the source's thread decodes its changes from now on", exc)
            self._usable = False
            self.close()
            return [outcome(self._decoder, origin, data) for origin, data in items]

    def _churning(self, now: float) -> bool:
        while self._decoded and now - self._decoded[0][0] > CHURN_WINDOW:
            self._decoded.popleft()
        if not self._usable or worker_count() == 0:
            return False
        return sum(n for _, n in self._decoded) >= CHURN_FILES

    def _start(self) -> None:
        try:
            self._worker = Worker(self._decoder)
            pid = self._worker.pid
            log.info("pod source %s: its files churn; decoding in worker process %d", self._name, pid)
        except WorkerFailed as exc:
            log.warning("%s; the source's thread decodes its changes", exc)
            self._usable = False  # not again: a worker that cannot start will not start later

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


def decode(items: Sequence[Item], decoder: Decoder) -> list[Outcome]:
    """Each item's outcome, in order. With enough items, part of them are decoded in worker
    processes, each running a copy of `decoder`: the outcomes are the same wherever they are
    made, since decoding is a pure function of the bytes."""
    workers = worker_count()
    if workers == 0 or len(items) < BULK_FILES:
        return [outcome(decoder, origin, data) for origin, data in items]
    chunks = [list(items[i : i + CHUNK_FILES]) for i in range(0, len(items), CHUNK_FILES)]
    results: list[list[Outcome] | None] = [None] * len(chunks)
    _share(chunks, results, decoder, workers)
    out: list[Outcome] = []
    for chunk, result in zip(chunks, results, strict=True):
        # A chunk a worker did not finish (it failed to start, or died) is decoded here.
        out += result if result is not None else [outcome(decoder, o, d) for o, d in chunk]
    return out


def _share(
    chunks: list[list[Item]], results: list[list[Outcome] | None], decoder: Decoder, workers: int
) -> None:
    """Workers take chunks from the back, this thread from the front, until they meet; each
    worker is fed by a thread of its own."""
    todo = collections.deque(enumerate(chunks))
    lock = threading.Lock()

    def take(back: bool) -> tuple[int, list[Item]] | None:
        with lock:
            if not todo:
                return None
            return todo.pop() if back else todo.popleft()

    def feed(job: tuple[int, list[Item]] | None) -> None:
        try:
            worker = Worker(decoder)
        except WorkerFailed as exc:
            log.warning("%s; decoding in the source's thread", exc)
            return
        try:
            while job is not None:
                index, chunk = job
                results[index] = worker.decode(chunk)
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
            results[index] = [outcome(decoder, o, d) for o, d in chunk]
    finally:
        with lock:
            todo.clear()  # an exception here: the feeders stop after their current chunk
        for feeder in feeders:
            feeder.join()


def _serve() -> None:
    """A worker: a decoder, then chunks, from stdin; each chunk's outcomes to stdout."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    decoder: Decoder = pickle.load(stdin)
    while True:
        try:
            chunk = pickle.load(stdin)
        except EOFError:
            return
        pickle.dump([outcome(decoder, origin, data) for origin, data in chunk], stdout)
        stdout.flush()


if __name__ == "__main__":
    _serve()
