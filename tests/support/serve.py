"""Start `pods-api serve` the way users do (a real process, real sockets) and talk to it."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

# A safety net, not a synchronisation: every wait below ends on an event long before this.
TIMEOUT = 20.0
# Starting is the one wait that a loaded machine stretches most (a Python process importing
# grpc, FastAPI and the sources on a CPU shared with other test runs): more room there.
START_TIMEOUT = 60.0
SERVING_LINE = "serving the Pods API on"
# The console script `pip install` made, next to this interpreter.
PODS_API = shutil.which("pods-api") or str(Path(sys.executable).parent / "pods-api")


@dataclass
class Served:
    proc: subprocess.Popen[str]
    run_dir: Path
    lines: list[str] = field(default_factory=list)
    _ended: bool = False  # stderr closed: the process is gone
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _reader: threading.Thread | None = None

    @property
    def socket(self) -> Path:
        return self.run_dir / "pods-api.sock"

    @property
    def http_socket(self) -> Path:
        return self.run_dir / "pods-api-http.sock"

    @property
    def target(self) -> str:
        return f"unix:{self.socket}"

    def wait_for_line(self, text: str, timeout: float = TIMEOUT, since: int = 0) -> str:
        """The first stderr line from line `since` on (a `len(lines)` taken before the step that
        should print it) containing text, waited for up to timeout."""

        def found() -> str | None:
            return next((line for line in self.lines[since:] if text in line), None)

        with self._changed:
            if not self._changed.wait_for(lambda: found() is not None or self._ended, timeout):
                raise AssertionError(
                    f"no line with {text!r} from pods-api in {timeout} s:\n" + "".join(self.lines)
                )
            line = found()
            if line is None:
                raise AssertionError(f"pods-api exited waiting for {text!r}:\n" + "".join(self.lines))
            return line

    def wait_ready(self) -> None:
        """Block until the standard health service says SERVING (an event: Watch streams it)."""
        with grpc.insecure_channel(self.target) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for update in stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT):
                if update.status == health_pb2.HealthCheckResponse.SERVING:
                    return

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=TIMEOUT)

    def close(self) -> None:
        """Kill if still running, and release the pipe once the reader has seen its end."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        _RUNNING.pop(self.proc.pid, None)
        if self._reader is not None:
            self._reader.join(TIMEOUT)
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()


# Every server started and not yet closed, by pid: what close_all() stops.
_RUNNING: dict[int, Served] = {}


def start(
    run_dir: Path,
    *args: str,
    wait: str | None = SERVING_LINE,
    prefix: tuple[str, ...] = (),
    umask: int = -1,
    timeout: float = START_TIMEOUT,
    program: tuple[str, ...] = (PODS_API,),
    node_name: str | None = "node-1",
) -> Served:
    """`prefix` runs the command under another (prlimit, setpriv); `umask` sets the process's;
    `program` is what takes `serve ...` (a Python snippet that wraps the command line, say);
    `node_name` None leaves `--node-name` out (the host's name), as the docs' commands do.
    A start that fails (the line never comes, the process exits first) kills the process before
    it raises; the caller closes a started one (`serving` does)."""
    named = ("--node-name", node_name) if node_name is not None else ()
    cmd = [*prefix, *program, "serve", "--run-dir", str(run_dir), *named, *args]
    proc = subprocess.Popen(
        cmd,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        umask=umask,
    )
    served = _RUNNING[proc.pid] = Served(proc, run_dir)
    try:
        served._reader = threading.Thread(target=served._pump, daemon=True)
        served._reader.start()
        if wait is not None:
            served.wait_for_line(wait, timeout)
    except BaseException:
        served.close()
        raise
    return served


@contextlib.contextmanager
def serving(
    run_dir: Path,
    *args: str,
    ready: bool = True,
    prefix: tuple[str, ...] = (),
    umask: int = -1,
    node_name: str | None = "node-1",
) -> Iterator[Served]:
    served = start(run_dir, *args, prefix=prefix, umask=umask, node_name=node_name)
    try:
        if ready:
            served.wait_ready()
        yield served
    finally:
        served.close()


def close_all() -> list[Served]:
    """Kill every server still running (a test that lost its handle, an interrupted run);
    returns those it had to kill."""
    left = list(_RUNNING.values())
    for served in left:
        served.close()
    return left


# An interrupted session (Ctrl-C, an internal error) still ends the interpreter normally.
atexit.register(close_all)


@pytest.fixture(scope="session", autouse=True)
def no_server_outlives_the_session() -> Iterator[None]:
    """Servers are closed by whoever started them (module fixtures keep theirs for a module);
    whatever is left when the session ends is killed here."""
    yield
    close_all()
