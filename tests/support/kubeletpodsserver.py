"""The kubelet's own Pods API server code, v1.37.2, as a process: tests/go/node/cmd/podsserver
(its broadcaster, handlers, rate limit and interceptors, fed by its real pod manager), driven
line by line. A reference for what the kubelet answers where a whole kubelet is not needed."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from serve import TIMEOUT


class PodsServer:
    def __init__(self, proc: subprocess.Popen[str], socket: Path) -> None:
        self._proc = proc
        self.socket = socket

    @property
    def target(self) -> str:
        return f"unix:{self.socket}"

    def command(self, line: str) -> str:
        """Send one command; its answer line (every command answers once it is done)."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(line + "\n")
        self._proc.stdin.flush()
        guard = threading.Timer(TIMEOUT, self._proc.kill)  # a safety net: each answers at once
        guard.start()
        try:
            answer = self._proc.stdout.readline().strip()
        finally:
            guard.cancel()
        assert answer, f"podsserver exited on {line!r}"
        return answer

    def dropped(self) -> float:
        """Its kubelet_pod_watch_events_dropped_total."""
        return float(self.command("dropped"))


@contextmanager
def kubelet_pods_server(binary: Path, socket: Path) -> Iterator[PodsServer]:
    """Started with its sources not ready; serving once its socket exists."""
    proc = subprocess.Popen(
        [str(binary), str(socket)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # klog's line per call
        text=True,
    )
    try:
        server = PodsServer(proc, socket)
        server.command("serving")  # answered once its listener is up
        yield server
    finally:
        proc.kill()
        proc.wait(TIMEOUT)
