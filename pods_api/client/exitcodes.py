"""The exit codes of the client commands (`pods-api get|watch|check`), one per thing a script
does differently, as crictl and kubectl scripts test `$?`."""

from __future__ import annotations

from enum import IntEnum

from pods_api.client.exceptions import (
    InvalidArgument,
    NotFound,
    NotReady,
    PermissionDenied,
    PodsAPIError,
    RateLimited,
    Unreachable,
)


class Exit(IntEnum):
    OK = 0
    ERROR = 1  # anything else: a pod that does not decode, a contract the server lacks, ...
    USAGE = 2  # argparse's own code for bad flags; also a --fields mask the server rejects
    NOT_READY = 3  # FAILED_PRECONDITION: the server's sources have not synced yet
    RATE_LIMITED = 4  # RESOURCE_EXHAUSTED
    NOT_FOUND = 5  # NOT_FOUND: no pod with that UID
    UNREACHABLE = 6  # no socket, nothing listening, no answer within --timeout
    PERMISSION_DENIED = 7  # the socket (or a directory above it) does not admit this user


HELP = """\
exit codes:
  0  ok
  1  error
  2  usage (bad flags, or a --fields mask the server rejects)
  3  not ready: the server has not synced its pod sources (FAILED_PRECONDITION); see --wait
  4  rate limited (RESOURCE_EXHAUSTED); see --wait
  5  not found
  6  socket unreachable: no socket file, nothing listening, or no answer within --timeout
  7  permission denied: this user may not open the socket
"""

_BY_ERROR: tuple[tuple[type[PodsAPIError], Exit], ...] = (
    (NotReady, Exit.NOT_READY),
    (RateLimited, Exit.RATE_LIMITED),
    (NotFound, Exit.NOT_FOUND),
    (Unreachable, Exit.UNREACHABLE),
    (PermissionDenied, Exit.PERMISSION_DENIED),
    (InvalidArgument, Exit.USAGE),
)


def for_error(error: PodsAPIError) -> Exit:
    """The exit code for a client error (ERROR for any not listed above)."""
    for kind, code in _BY_ERROR:
        if isinstance(error, kind):
            return code
    return Exit.ERROR
