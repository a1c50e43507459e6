"""A Pods API socket's answers and its watch, recorded: the kubelet's (tests/support/realkubelet.py)
and pods-api's alike, over plain grpcio and the project's generated stubs.

`Recorder` keeps every WatchPods event (type, the pod's raw bytes, when, which connection) from
one socket, reconnecting whenever the server goes away, so a test can compare what two servers
sent, byte for byte, across a restart of either.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from pods_api.core.api.codec import pod_from_bytes
from pods_api.core.api.pb import pods_v1alpha1_pb2 as api
from pods_api.core.api.pb import pods_v1alpha1_pb2_grpc as api_grpc

# A safety net for waits on a server's events; each ends on its event long before.
TIMEOUT = 60.0
# How soon a recorder tries again after its server went away (it announces nothing).
RETRY = 0.2


def list_pods(target: str) -> list[bytes]:
    with grpc.insecure_channel(target) as channel:
        return list(api_grpc.PodsStub(channel).ListPods(api.ListPodsRequest(), timeout=10).pods)


def get_pod(target: str, uid: str) -> bytes | grpc.RpcError:
    """The pod's bytes, or the error the server gave (NOT_FOUND is an answer, not a failure)."""
    with grpc.insecure_channel(target) as channel:
        try:
            return bytes(api_grpc.PodsStub(channel).GetPod(api.GetPodRequest(podUID=uid), timeout=10).pod)
        except grpc.RpcError as exc:
            return exc


def uid_of(pod: bytes) -> str:
    return str(pod_from_bytes(pod)["metadata"]["uid"])


@dataclass(frozen=True)
class Event:
    """One WatchPods event as it came: type, the pod's raw bytes, when, and which stream (a
    recorder reconnects after the server goes away; `stream` counts those connections).
    `type` 0 with `end` set marks a stream's end: the status code and details it ended with."""

    type: int
    pod: bytes
    at: float
    stream: int
    end: str = ""

    @property
    def uid(self) -> str:
        return uid_of(self.pod) if self.pod else ""


class Recorder:
    """Keeps every WatchPods event from a socket, reconnecting whenever the stream ends (a
    restarted server), until closed. `wait(predicate)` blocks until some recorded event satisfies
    it; `since(mark)` is what came after `mark = len(recorder)`."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.events: list[Event] = []
        self._changed = threading.Condition()
        self._closed = threading.Event()
        self._call: Any = None
        self._thread = threading.Thread(target=self._run, name=f"watch {target}", daemon=True)
        self._thread.start()

    def __len__(self) -> int:
        with self._changed:
            return len(self.events)

    def _append(self, event: Event) -> None:
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def _run(self) -> None:
        stream = 0
        while not self._closed.is_set():
            received = False
            try:
                with grpc.insecure_channel(self.target) as channel:
                    self._call = api_grpc.PodsStub(channel).WatchPods(api.WatchPodsRequest())
                    for event in self._call:
                        if not received:
                            received, stream = True, stream + 1
                        self._append(Event(event.type, bytes(event.pod), time.monotonic(), stream))
                    self._append(Event(0, b"", time.monotonic(), stream, end="OK: the stream ended"))
            except grpc.RpcError as exc:
                if self._closed.is_set():
                    return
                if received:  # the stream was up, then ended: say how (UNAVAILABLE: the server went)
                    self._append(
                        Event(0, b"", time.monotonic(), stream, end=f"{exc.code().name}: {exc.details()}")
                    )
            # The server is gone or restarting: it announces nothing, so try again shortly.
            self._closed.wait(RETRY)

    def wait(self, predicate: Callable[[Event], bool], timeout: float = TIMEOUT, start: int = 0) -> Event:
        deadline = time.monotonic() + timeout
        seen = start
        with self._changed:
            while True:
                for event in self.events[seen:]:
                    if predicate(event):
                        return event
                seen = len(self.events)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no such watch event from {self.target} within {timeout} s")
                self._changed.wait(left)

    def wait_quiet(self, quiet: float, timeout: float = TIMEOUT) -> None:
        """Until no event has come for `quiet` seconds: the server's state has settled."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                last = self.events[-1].at if self.events else 0.0
                left = last + quiet - time.monotonic()
                if left <= 0:
                    return
                if time.monotonic() > deadline:
                    raise AssertionError(f"{self.target} kept sending events for {timeout} s")
                self._changed.wait(left)

    def since(self, mark: int) -> list[Event]:
        with self._changed:
            return list(self.events[mark:])

    def close(self) -> None:
        self._closed.set()
        if self._call is not None:
            self._call.cancel()
        self._thread.join(10)


def held(events: list[Event]) -> dict[str, bytes]:
    """What a watcher holds after these events (all of a recorder's): its latest stream's state."""
    state: dict[str, bytes] = {}
    stream = 0
    for event in events:
        if event.stream != stream:
            state, stream = {}, event.stream
        if event.type in (api.ADDED, api.MODIFIED):
            state[event.uid] = event.pod
        elif event.type == api.DELETED:
            state.pop(event.uid, None)
    return state
