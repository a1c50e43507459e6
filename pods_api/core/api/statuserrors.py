"""Status codes and domain errors: what went wrong, as a gRPC status, for both surfaces.

Core code raises a `StatusError` (or one of its kinds); each surface translates it in one place:
gRPC aborts the call with the code (core/grpc/interceptors.py), the gateway answers the error
body with the code's HTTP status (gateway/http/errors.py). The codes are gRPC's own numbers, so this
module needs no grpc import and the gateway does not pull grpc in.
"""

from __future__ import annotations

from enum import IntEnum

# A client's own input is echoed in an error only this far: enough to recognise (a UID is 36
# characters), and a 1 MB value never makes the error itself too large to deliver (gRPC carries
# the message in a trailer, which clients cap at 8-16 KiB).
ECHO_LIMIT = 128


def quote(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text` as Python's repr, cut to `limit` characters with the total length named: for
    echoing client input in an error message."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text)} characters)"


class Code(IntEnum):
    """gRPC status codes, with gRPC's numbers."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16

    @property
    def number(self) -> int:
        return int(self)

    @property
    def go_name(self) -> str:
        """The name Go's codes.Code prints, which is how the kubelet labels its metrics:
        NOT_FOUND -> NotFound, OK -> OK, CANCELLED -> Canceled."""
        if self is Code.OK:
            return "OK"
        if self is Code.CANCELLED:
            return "Canceled"
        return "".join(part.capitalize() for part in self.name.split("_"))


class StatusError(Exception):
    """A request ends with this status. A kind of error sets `code` as a class attribute; a
    one-off passes `code=`. `retry_after` (seconds) is a hint the HTTP surface sends on."""

    code: Code = Code.UNKNOWN
    retry_after: float | None = None

    def __init__(self, message: str, *, code: Code | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if retry_after is not None:
            self.retry_after = retry_after


class InvalidArgumentError(StatusError):
    code = Code.INVALID_ARGUMENT


class SelectorError(InvalidArgumentError, ValueError):
    """An invalid label or field selector: which one, what is wrong, and at which character."""

    def __init__(self, kind: str, text: str, position: int, problem: str) -> None:
        super().__init__(f"invalid {kind} selector {quote(text)} at position {position}: {problem}")
        self.kind = kind
        self.text = text
        self.position = position
        self.problem = problem


class NotFoundError(StatusError):
    code = Code.NOT_FOUND


class ResourceExhausted(StatusError):
    code = Code.RESOURCE_EXHAUSTED


class FailedPrecondition(StatusError):
    code = Code.FAILED_PRECONDITION


class Unavailable(StatusError):
    code = Code.UNAVAILABLE


class Internal(StatusError):
    code = Code.INTERNAL
