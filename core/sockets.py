"""UNIX socket files: the socket is the security boundary of a node-local API.

Its directory is created 0750, the socket gets the configured mode (0600 by default) and group;
a path where a live server answers is never taken over (it may be the kubelet's own socket),
and a stale file left by a crash is replaced.
"""

from __future__ import annotations

import contextlib
import grp
import ipaddress
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

# The directory holds only our sockets; group may traverse it when --socket-group is used.
DIR_MODE = 0o750


class SocketInUse(Exception):
    pass


def prepare(path: Path) -> None:
    """Make `path` ready to bind: create its directory, refuse a live socket, remove a stale one."""
    if not path.parent.exists():
        path.parent.mkdir(mode=DIR_MODE, parents=True)
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise SocketInUse(f"{path} exists and is not a socket; refusing to replace it")
    if is_live(path):
        raise SocketInUse(f"a server is already answering on {path}; refusing to start")
    path.unlink()


def is_live(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Whoever creates the socket file (we, grpc or uvicorn) creates it with no group or other
    bits, so there is no moment when another user could connect before `secure` runs."""
    old = os.umask(0o177)
    try:
        yield
    finally:
        os.umask(old)


def secure(path: Path, mode: int, group: str | None) -> None:
    if group is not None:
        gid = resolve_group(group)
        try:
            os.chown(path, -1, gid)
        except PermissionError as exc:
            # The kernel allows it to a member of the group, or with CAP_CHOWN: say so, since
            # a container that drops every capability hits exactly this.
            raise PermissionError(
                exc.errno,
                f"cannot give {path} to group {group} (gid {gid}): {exc.strerror}; the process "
                "must be a member of that group (a pod's securityContext.supplementalGroups) "
                "or hold CAP_CHOWN",
            ) from None
    os.chmod(path, mode)


def resolve_group(group: str) -> int:
    if group.isdigit():
        return int(group)
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise ValueError(f"no such group: {group}") from None


def bind_unix(path: Path, mode: int, group: str | None) -> socket.socket:
    """A listening UNIX socket we bound ourselves, with our mode (uvicorn's own binding would
    chmod it 0666)."""
    prepare(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with private_umask():
        sock.bind(str(path))
    secure(path, mode, group)
    sock.listen(128)
    sock.setblocking(False)
    return sock


def remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def parse_loopback(listen: str, flag: str) -> tuple[str, int]:
    """HOST:PORT for a TCP listener that must stay on this machine: loopback addresses only."""
    host, sep, port = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not port.isdigit():
        raise ValueError(f"{flag} {listen!r}: expected HOST:PORT")
    try:
        addr = ipaddress.ip_address("127.0.0.1" if host == "localhost" else host)
    except ValueError:
        raise ValueError(f"{flag} {listen!r}: HOST must be a loopback IP address") from None
    if not addr.is_loopback:
        raise ValueError(f"{flag} {listen!r}: only loopback addresses (127.0.0.0/8, ::1) are allowed")
    return host, int(port)


def bind_tcp(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted sockets only then, and without it
    # a keep-alive response's header and body writes wait on Nagle and delayed ACK (~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock
