"""A daemon the tests start as a node's init system would (containerd, the real kubelet): logging
to a file, waited for until its socket answers, stopped with SIGTERM. Only the process started
here is ever signalled, by its PID. And what every lab shares: a machine-wide flock, and its undo
run on every exit path."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any


class Unavailable(Exception):
    """The daemon cannot run here; the message says why (tests skip with it)."""


def spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start args in a session of its own (a Ctrl-C to pytest is not its), output to log."""
    with log.open("ab") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def log_tail(log: Path, lines: int = 5) -> str:
    return " | ".join(log.read_text(errors="replace").splitlines()[-lines:])


def wait_answering(
    proc: subprocess.Popen[bytes],
    socket: Path,
    answers: Callable[[], bool],
    what: str,
    log: Path,
    timeout: float,
    every: float = 0.05,
) -> None:
    """Until `answers()` (asked once `socket` exists) says the daemon serves. Neither containerd
    nor the kubelet notifies readiness without systemd, so asking is the only way to learn it; a
    daemon that exits first, or never answers, is Unavailable with its log's last lines."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise Unavailable(f"{what} exited with {proc.returncode}: {log_tail(log)}")
        if socket.exists() and answers():
            return
        if time.monotonic() > deadline:
            raise Unavailable(f"{what} did not answer within {timeout} s: {log_tail(log)}")
        time.sleep(every)


def terminate(proc: subprocess.Popen[bytes] | None, timeout: float) -> None:
    """SIGTERM, as systemd stops a daemon; SIGKILL if it has not exited within timeout."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def flock(path: Path, timeout: float, doing: str) -> Iterator[None]:
    """An exclusive flock on path, waited for up to timeout (the holder may be another engineer's
    session); released when the block ends or the process dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise Unavailable(
                        f"{path} was held by another session for {timeout:.0f} s ({doing})"
                    ) from None
                # flock has no timeout of its own; the holder's release is not signalled otherwise.
                time.sleep(0.5)
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()} {doing}\n")
            handle.flush()
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def once(undo: Callable[[], None]) -> Callable[[], None]:
    """undo, run at most once whoever calls it first (the block's end, atexit, a signal)."""
    done = threading.Lock()

    def run() -> None:
        if done.acquire(blocking=False):
            undo()

    return run


@contextlib.contextmanager
def undone_on_exit(undo: Callable[[], None]) -> Iterator[None]:
    """Run `undo` (made with `once`) when the block ends, the interpreter exits, or a SIGTERM or
    SIGHUP arrives (then the signal's previous handling follows): a lab gives back what it took
    however the test run ends."""
    atexit.register(undo)
    main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    if main:
        for sig in _SIGNALS:
            signal.signal(sig, _on_signal(undo, previous[sig]))
    try:
        yield
    finally:
        undo()
        atexit.unregister(undo)
        if main:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _on_signal(undo: Callable[[], None], previous: Any) -> Callable[[int, FrameType | None], None]:
    def handler(sig: int, frame: FrameType | None) -> None:
        # A second signal while undoing (`timeout` and `pkill` both send one) would find the undo
        # begun and end the process halfway through it: the rest waits until it is done.
        for other in _SIGNALS:
            signal.signal(other, signal.SIG_IGN)
        undo()
        if callable(previous):
            previous(sig, frame)
        else:  # the default action (termination), now that everything is undone
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)

    return handler
