"""UNIX socket files: the socket is the security boundary of a node-local API.

A directory pods-api creates for its sockets is 0750 (and given `--socket-group`, so the group
can reach the sockets), its missing parents 0755, whatever the umask. The socket gets the
configured mode (0600 by default) and group.

Whose socket is it: each socket has a lock file beside it (`<socket>.lock`), held with `flock`
for as long as the server runs. A held lock is a live pods-api, however busy or stopped it is
(a connect() probe would time out on a full accept backlog and take it for stale). A socket file
without a held lock is still probed, since another program (the kubelet) may serve it: only a
refused connection makes it stale. On exit a server removes a socket file only if it is still
the one it bound (same inode): a file that a later server put there is never ours to delete.
The lock file stays: unlinking it would let two servers lock two different files.

Whose directory is it: a socket directory that another user can write to, or that another user
owns, lets them replace the socket with their own listener, and clients would talk to it. So
before anything is bound there, the directory and every directory above it are checked as
OpenSSH checks the path of a key file (`safe_path`): each belongs to root or to us, and nobody
else may write to it. Two differences, both safe: group write on the socket directory itself is
accepted when that group is `--socket-group` (pods-api was told to share it), and a sticky
directory above it (/tmp, 1777) is, since others can neither remove nor rename what is ours in
it. The socket directory must not be a symlink; symlinks above it are followed, and the
directories they lead through are checked too.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import grp
import ipaddress
import os
import socket
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# The directory holds only our sockets; group may traverse it when --socket-group is used.
DIR_MODE = 0o750
# Parents we create on the way hold nothing secret: traversable, as /var/lib is.
PARENT_MODE = 0o755
# The accept backlog: room for a burst of agents connecting at once.
BACKLOG = 128
# A foreign server (the kubelet) that takes longer than this to accept is still counted live:
# only ECONNREFUSED (nobody listening) or a missing file makes a socket stale.
PROBE_TIMEOUT = 1.0
LOCK_SUFFIX = ".lock"
# sun_path is 108 bytes on Linux, one of them the terminating NUL.
MAX_PATH_BYTES = 107


class SocketInUse(Exception):
    pass


class UnsafeDirectory(Exception):
    """A socket directory another user could take the sockets over in."""


@dataclass
class Claim:
    """The right to a socket path for this process's lifetime: the held lock, and the inode of
    the socket we bound there once we have."""

    path: Path
    lock_fd: int
    inode: tuple[int, int] | None = None

    def bound(self) -> None:
        """Record the socket file now at `path` as ours (call right after binding)."""
        st = self.path.lstat()
        self.inode = (st.st_dev, st.st_ino)

    @property
    def staging(self) -> Path:
        """Where a server that deletes its socket path on exit (grpc core does, whoever's file
        is there by then) binds: `publish` then renames the bound socket to `path`, and the
        server's own unlink finds nothing."""
        return staging_path(self.path)

    def publish(self) -> None:
        """Move the socket bound at `staging` (mode and group already set) to `path` in one
        step, and record it as ours."""
        os.replace(self.staging, self.path)
        self.bound()

    def release(self) -> None:
        """Remove our socket file (only if it is still ours) and let go of the lock."""
        with contextlib.suppress(FileNotFoundError):
            st = self.path.lstat()
            if self.inode is not None and (st.st_dev, st.st_ino) == self.inode:
                self.path.unlink()
        self.inode = None
        if self.lock_fd >= 0:
            os.close(self.lock_fd)  # closing the descriptor drops the flock
            self.lock_fd = -1


def claim(path: Path, group: str | None = None) -> Claim:
    """Make `path` ready to bind: create its directory, take its lock, refuse a live socket,
    remove a stale one. Raises SocketInUse, and UnsafeDirectory for a directory another user
    could replace the socket in."""
    check_directory(path.parent, group)  # before creating anything in another user's directory
    make_directory(path.parent, group)
    check_directory(path.parent, group)
    lock_fd = _lock(path)
    try:
        _clear(path)
    except BaseException:
        os.close(lock_fd)
        raise
    return Claim(path, lock_fd)


def _lock(path: Path) -> int:
    lock_path = path.with_name(path.name + LOCK_SUFFIX)
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    with private_umask():
        try:
            fd = os.open(lock_path, flags, 0o600)
        except PermissionError:
            raise  # not another server: this user may not write here (the caller says what to do)
        except OSError as exc:
            raise SocketInUse(f"cannot open the lock file {lock_path}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise SocketInUse(
            f"a server is already serving {path} (it holds {lock_path}); refusing to start"
        ) from None
    return fd


def _clear(path: Path) -> None:
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
    """Does anything listen on this socket file? Only a refused connection says no: a server
    too busy to accept in time is live."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(PROBE_TIMEOUT)
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError as exc:  # a timeout, EAGAIN (a full backlog): someone is there
        return exc.errno != errno.ENOENT
    finally:
        probe.close()
    return True


def check_directory(path: Path, group: str | None = None) -> None:
    """Raises UnsafeDirectory unless only root and we can change what is in `path` (see the
    module's docstring). A `path` not made yet: the directories it would be made in."""
    uid = os.geteuid()
    shared_gid = resolve_group(group) if group is not None else None
    if not os.path.lexists(path):
        parent = Path(os.path.abspath(path)).parent
        while not os.path.lexists(parent):
            parent = parent.parent
        path = parent
        own = False
    else:
        own = True
    try:
        if own and stat.S_ISLNK(os.lstat(path).st_mode):
            raise UnsafeDirectory(
                f"{path} is a symlink (to {os.path.realpath(path)}); refusing to serve from it: "
                "give the directory itself"
            )
        # Every directory the path goes through, symlinks followed: each prefix's real path and
        # the directories above it (a symlink's own directory is a prefix too).
        absolute = Path(os.path.abspath(path))
        real = Path(os.path.realpath(absolute))
        seen: dict[Path, bool] = {real: own}  # directory -> whether it is the socket directory
        for prefix in (absolute, *absolute.parents):
            resolved = Path(os.path.realpath(prefix))
            for directory in (resolved, *resolved.parents):
                seen.setdefault(directory, False)
        for directory, own in seen.items():
            _check_one(directory, own, uid, shared_gid)
    except OSError as exc:
        raise UnsafeDirectory(f"cannot check {exc.filename or path}: {exc.strerror}") from None


def _check_one(directory: Path, own: bool, uid: int, shared_gid: int | None) -> None:
    st = os.stat(directory)
    where = "the socket directory" if own else "a directory above the socket directory"
    if st.st_uid not in (0, uid):
        raise UnsafeDirectory(
            f"{directory} ({where}) belongs to uid {st.st_uid}, not to root or to this user (uid "
            f"{uid}): its owner could replace the sockets; refusing to serve from it"
        )
    writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if own and shared_gid is not None and st.st_gid == shared_gid:
        writable &= ~stat.S_IWGRP  # the --socket-group was given the directory
    if not own and st.st_mode & stat.S_ISVTX:
        writable = 0  # sticky (/tmp): others cannot remove or rename our entries in it
    if writable:
        who = "other users" if writable & stat.S_IWOTH else f"group {st.st_gid}"
        raise UnsafeDirectory(
            f"{directory} ({where}, mode {stat.S_IMODE(st.st_mode):04o}) is writable by {who}: "
            "they could replace the sockets; refusing to serve from it"
        )


def make_directory(path: Path, group: str | None = None) -> None:
    """Create `path` DIR_MODE (given to `group`, so members reach the sockets) and its missing
    parents PARENT_MODE, whatever the umask. A directory that exists is left as it is."""
    if path.exists():
        return
    make_directory_parents(path.parent)
    with private_umask(), contextlib.suppress(FileExistsError):
        path.mkdir(mode=DIR_MODE)
        if group is not None:
            _give_to_group(path, group)
        os.chmod(path, DIR_MODE)


def make_directory_parents(path: Path) -> None:
    if path.exists():
        return
    make_directory_parents(path.parent)
    with private_umask(), contextlib.suppress(FileExistsError):
        path.mkdir(mode=PARENT_MODE)
        os.chmod(path, PARENT_MODE)  # the umask took bits away; put exactly these back


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
        _give_to_group(path, group)
    os.chmod(path, mode)


def _give_to_group(path: Path, group: str) -> None:
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


def resolve_group(group: str) -> int:
    if group.isdigit():
        return int(group)
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise ValueError(f"no such group: {group}") from None


def bind_unix(claimed: Claim, mode: int, group: str | None) -> socket.socket:
    """A listening UNIX socket we bound ourselves, with our mode (uvicorn's own binding would
    chmod it 0666), on a path we claimed."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with private_umask():
            try:
                sock.bind(str(claimed.path))
            except OSError as exc:
                raise OSError(f"cannot listen on {claimed.path}: {exc.strerror}") from None
        claimed.bound()
        secure(claimed.path, mode, group)
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def bind_problem(path: Path) -> str:
    """Why binding a UNIX socket at `path` fails, as ": <the OS error>", for a server that does
    not say (grpc's add_insecure_port gives 0 and logs its reason apart); "" if it binds."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with private_umask():
            probe.bind(str(path))
    except OSError as exc:
        return f": {exc.strerror}"
    finally:
        probe.close()
    with contextlib.suppress(OSError):
        path.unlink()
    return ""


def staging_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}")


def check_path(path: Path, flag: str) -> None:
    """Raises ValueError for a path no UNIX socket can have (grpc would fail obscurely later);
    counts the staging name beside it, with room for any pid."""
    size = len(os.fsencode(path)) + len(".") + len(".4194304")
    if size > MAX_PATH_BYTES:
        raise ValueError(
            f"{flag} {_short(str(path))}: {size} bytes long; a UNIX socket path has at most {MAX_PATH_BYTES}"
        )


def parse_loopback(listen: str, flag: str) -> tuple[str, int]:
    """HOST:PORT for a TCP listener that must stay on this machine: loopback addresses only."""
    host, sep, port = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not port.isdigit():
        raise ValueError(f"{flag} {_short(listen)}: expected HOST:PORT")
    if not 0 < int(port) <= 65535:
        raise ValueError(f"{flag} {_short(listen)}: port must be 1 to 65535")
    try:
        addr = ipaddress.ip_address("127.0.0.1" if host == "localhost" else host)
    except ValueError:
        raise ValueError(f"{flag} {_short(listen)}: HOST must be a loopback IP address") from None
    if not addr.is_loopback:
        raise ValueError(f"{flag} {_short(listen)}: only loopback addresses (127.0.0.0/8, ::1) are allowed")
    return host, int(port)


def _short(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def bind_tcp(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted sockets only then, and without it
    # a keep-alive response's header and body writes wait on Nagle and delayed ACK (~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock
