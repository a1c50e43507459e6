"""Request messages as grpc-go reads them: bytes that are not a valid message end the call with
INTERNAL "grpc: error unmarshalling request: ..." (what the kubelet answers), not with grpcio's
UNKNOWN and a traceback per request, which anyone on the socket could turn into a log flood."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from google.protobuf.message import DecodeError

from pods_api.core.api.statuserrors import Internal
from pods_api.core.policy.throttled_log import ThrottledLog

log = logging.getLogger(__name__)


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


_UNPARSABLE_LOG = ThrottledLog(log)


def parser(message: type[_Parses]) -> Callable[[bytes], object]:
    """A request deserializer that never raises: a bad message becomes `Unparsable`."""

    def parse(data: bytes) -> object:
        try:
            return message.FromString(data)
        except DecodeError as exc:
            _UNPARSABLE_LOG.warning(f"unparsable request ({len(data)} bytes): {exc}")
            return Unparsable(str(exc))

    return parse
