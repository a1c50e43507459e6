"""What can go wrong talking to a Pods API socket, one exception per thing a caller handles
differently. Each carries the socket path and the server's message.

| exception | gRPC status / cause | what to do |
| --- | --- | --- |
| `NotReady` | `FAILED_PRECONDITION` | the server's sources have not synced yet: retry |
| `RateLimited` | `RESOURCE_EXHAUSTED` | over the qps limit, too many watches, a watch fell behind: back off |
| `NotFound` | `NOT_FOUND` | no pod with that UID |
| `InvalidArgument` | `INVALID_ARGUMENT` | a bad field mask: the message names the path |
| `Unimplemented` | `UNIMPLEMENTED` | the server does not serve this contract |
| `Unreachable` | no socket file, nothing listening, `UNAVAILABLE`, a deadline | is the server running? |
| `PermissionDenied` | `EACCES` connecting (or `PERMISSION_DENIED`) | run as a user the socket admits |

A permission failure is never "no pods": gRPC reports a socket it may not open as
`UNAVAILABLE`, so the client asks the kernel why (a plain `connect()`) and raises
`PermissionDenied` when the answer is `EACCES`.
"""

from __future__ import annotations

import errno
import os
import socket
import stat

import grpc


class PodsAPIError(Exception):
    """Base of every error the client raises. `code` is the gRPC status, when there was one."""

    def __init__(self, socket_path: str, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(f"{socket_path}: {message}")
        self.socket = socket_path
        self.message = message
        self.code = code


class NotReady(PodsAPIError):
    """FAILED_PRECONDITION: the server has not finished its initial sync; retry later."""


class RateLimited(PodsAPIError):
    """RESOURCE_EXHAUSTED: over the rate limit, too many watches, or a watch fell behind."""


class NotFound(PodsAPIError):
    """NOT_FOUND: no pod with that UID."""


class InvalidArgument(PodsAPIError):
    """INVALID_ARGUMENT: the request (in practice the field mask) is wrong; the message says how."""


class Unimplemented(PodsAPIError):
    """UNIMPLEMENTED: the server does not serve this contract (or method)."""


class Unreachable(PodsAPIError):
    """No server answers on the socket: no such file, nothing listening, or the connection broke."""


class PermissionDenied(PodsAPIError):
    """The socket (or a directory above it) does not admit this user."""


_BY_CODE: dict[grpc.StatusCode, type[PodsAPIError]] = {
    grpc.StatusCode.FAILED_PRECONDITION: NotReady,
    grpc.StatusCode.RESOURCE_EXHAUSTED: RateLimited,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.DEADLINE_EXCEEDED: Unreachable,
}


def from_rpc_error(socket_path: str, error: grpc.aio.AioRpcError) -> PodsAPIError:
    """The typed error for a failed call; UNAVAILABLE is diagnosed at the socket itself."""
    code = error.code()
    details = error.details() or code.name
    if code is grpc.StatusCode.UNAVAILABLE:
        return diagnose(socket_path, details)
    kind = _BY_CODE.get(code, PodsAPIError)
    return kind(socket_path, details, code)


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return True  # gone since the connect: say what the connect said


def diagnose(socket_path: str, details: str) -> PodsAPIError:
    """Why gRPC found nobody there, asked of the kernel with one plain connect()."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(socket_path)
    except PermissionError:
        return PermissionDenied(
            socket_path, "permission denied opening the socket", grpc.StatusCode.UNAVAILABLE
        )
    except FileNotFoundError:
        return Unreachable(
            socket_path, "no such socket (is the server running?)", grpc.StatusCode.UNAVAILABLE
        )
    except ConnectionRefusedError:
        if not _is_socket(socket_path):  # a directory or a plain file refuses as well
            return Unreachable(socket_path, "not a socket", grpc.StatusCode.UNAVAILABLE)
        return Unreachable(
            socket_path, "connection refused: nothing listens there", grpc.StatusCode.UNAVAILABLE
        )
    except OSError as exc:
        reason = errno.errorcode.get(exc.errno or 0, "") or str(exc)
        return Unreachable(
            socket_path, f"cannot connect: {exc.strerror or reason}", grpc.StatusCode.UNAVAILABLE
        )
    finally:
        probe.close()
    return Unreachable(socket_path, details, grpc.StatusCode.UNAVAILABLE)
