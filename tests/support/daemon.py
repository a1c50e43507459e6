"""A daemon the tests start as a node's init system would (containerd, the real kubelet): logging
to a file, waited for until its socket answers, stopped with SIGTERM. Only the process started
here is ever signalled, by its PID."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


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
