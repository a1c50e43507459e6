"""Request messages as grpc-go reads them: bytes that are not a valid message end the call with
INTERNAL "grpc: error unmarshalling request: ..." (what the kubelet answers), not with grpcio's
UNKNOWN and a traceback per request, which anyone on the socket could turn into a log flood."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from google.protobuf.message import DecodeError

from pods_api.core.status import Internal

log = logging.getLogger(__name__)

# At most one log line per this many seconds about unparsable requests: enough to notice a broken
# client, too few for one in a loop to fill a disk.
LOG_EVERY = 10.0


class _Parses(Protocol):
    @staticmethod
    def FromString(data: bytes) -> object: ...


@dataclass(frozen=True, slots=True)
class Unparsable:
    """Stands in for a request whose bytes did not parse; the handler's wrapper turns it into
    the status (core/grpc/interceptors.py), so the call is still counted."""

    detail: str

    def error(self) -> Internal:
        return Internal(f"grpc: error unmarshalling request: {self.detail}")


class ThrottledLog:
    """One warning per `every` seconds; the next says how many were left out in between."""

    def __init__(self, every: float = LOG_EVERY, clock: Callable[[], float] = time.monotonic) -> None:
        self._every = every
        self._clock = clock
        self._next = 0.0
        self._suppressed = 0

    def warning(self, message: str) -> None:
        now = self._clock()
        if now < self._next:
            self._suppressed += 1
            return
        if self._suppressed:
            message += f" ({self._suppressed} more since the last such line)"
        log.warning("%s", message)
        self._next, self._suppressed = now + self._every, 0


_UNPARSABLE_LOG = ThrottledLog()


def parser(message: type[_Parses]) -> Callable[[bytes], object]:
    """A request deserializer that never raises: a bad message becomes `Unparsable`."""

    def parse(data: bytes) -> object:
        try:
            return message.FromString(data)
        except DecodeError as exc:
            _UNPARSABLE_LOG.warning(f"unparsable request ({len(data)} bytes): {exc}")
            return Unparsable(str(exc))

    return parse
