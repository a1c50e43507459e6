"""The Go programs under tests/go/kubelet as the tests drive them: each prints one JSON object
a line (and the stand-in kubelet reads commands the same way), read here by a thread into a
queue, so a test awaits the next line as an event rather than sleeping."""

from __future__ import annotations

import base64
import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

from serve import TIMEOUT


def run(binary: Path, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    """Run to its end: the exit code, the JSON lines it printed, and its stderr."""
    done = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=TIMEOUT)
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def raw(record: dict[str, Any]) -> bytes:
    """The pod bytes a record carries (Go's encoding/json writes []byte as base64)."""
    return base64.b64decode(record["raw"] or "")


class Lines:
    """A running Go program and the JSON lines it prints."""

    def __init__(self, binary: Path, *args: str, stdin: bool = False) -> None:
        self.proc = subprocess.Popen(
            [str(binary), *args],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def next(self) -> dict[str, Any]:
        line = self._lines.get(timeout=TIMEOUT)
        if line is None:
            self.proc.wait(TIMEOUT)
            assert self.proc.stderr is not None
            raise AssertionError(
                f"{self.proc.args[0]} exited ({self.proc.returncode}): {self.proc.stderr.read()}"
            )
        return line

    def take(self, count: int) -> list[dict[str, Any]]:
        return [self.next() for _ in range(count)]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(TIMEOUT)
        self._reader.join(TIMEOUT)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> Lines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(json.loads(line))
        self._lines.put(None)


class StandIn(Lines):
    """The Go stand-in kubelet (tests/go/kubelet/cmd/standin) on `socket`: each command returns
    once every open watch has its event queued."""

    def __init__(self, binary: Path, socket: Path, *flags: str) -> None:
        super().__init__(binary, "-socket", str(socket), *flags, stdin=True)
        assert self.next() == {"ready": True}

    def command(self, **command: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self.next()

    def put(self, pod: dict[str, Any]) -> dict[str, Any]:
        return self.command(op="put", pod=pod)

    def delete(self, uid: str) -> dict[str, Any]:
        return self.command(op="delete", uid=uid)

    def send(self, number: int, uid: str = "") -> dict[str, Any]:
        return self.command(op="send", type=number, uid=uid)

    def lists(self) -> int:
        count: int = self.command(op="stats")["lists"]
        return count
