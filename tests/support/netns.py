"""A network namespace the lab makes for itself: the cluster lab's node lives in one, so that its
pod network (a CNI bridge, each pod's veth, the node's and the `kubernetes` Service's addresses)
never touches the machine's own network, and nothing of it is reachable from outside.

A process is put into it with `nsenter --net=<path>` (its network namespace only: its mounts stay
the machine's, which the kubelet's volume mounts and containerd must share), and a socket is made
in it by a thread that has joined it (a network namespace is a thread's, not the process's, so
the rest of the test process stays where it was).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

# setns(2)'s flag for a network namespace (linux/sched.h).
CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")
# `ip` answers in milliseconds; a namespace's creation and removal are kernel calls.
TIMEOUT = 30.0


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=TIMEOUT)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


@dataclass
class NetNs:
    """A named network namespace (`ip netns add`), its loopback up, holding `addresses` on its
    loopback: local to it, so a process in it can listen there and its pods can reach them."""

    name: str
    # Whether `ip netns add` made /run/netns for it (then `delete` removes it, once empty).
    made_dir: bool = False

    @property
    def path(self) -> Path:
        return NETNS_DIR / self.name

    def create(self, addresses: tuple[str, ...] = ()) -> None:
        self.made_dir = self.made_dir or not NETNS_DIR.exists()
        _ip("netns", "add", self.name)
        _ip("-n", self.name, "link", "set", "lo", "up")
        for address in addresses:
            _ip("-n", self.name, "addr", "add", f"{address}/32", "dev", "lo")

    def delete(self) -> None:
        """Remove it (what is still in it goes with its last process)."""
        if self.path.exists():
            _ip("netns", "delete", self.name)
        if self.made_dir and NETNS_DIR.exists() and not any(NETNS_DIR.iterdir()):
            # `ip netns add` made it a mount point of itself (shared, for the namespaces' mounts).
            subprocess.run(["umount", str(NETNS_DIR)], capture_output=True, check=False, timeout=TIMEOUT)
            with contextlib.suppress(OSError):
                NETNS_DIR.rmdir()

    def enter(self, args: list[str]) -> list[str]:
        """args, run inside it: nsenter joins the namespace, then execs args (the same PID)."""
        return ["nsenter", f"--net={self.path}", "--", *args]

    def ip(self, *args: str) -> str:
        """`ip -n <name> ARGS`' output (for a test to read its links and routes)."""
        done = subprocess.run(["ip", "-n", self.name, *args], capture_output=True, text=True, timeout=TIMEOUT)
        if done.returncode != 0:
            raise RuntimeError(f"ip -n {self.name} {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def connector(self) -> concurrent.futures.ThreadPoolExecutor:
        """A thread that has joined the namespace for good: connect(host, port) run there makes a
        socket inside it (a relay out of this machine's loopback into the namespace's)."""
        return concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix=f"netns-{self.name}", initializer=_setns, initargs=(self.path,)
        )


def connect(host: str, port: int) -> socket.socket:
    """A TCP connection to host:port, made in whatever namespace the calling thread is in."""
    sock = socket.create_connection((host, port), timeout=TIMEOUT)
    sock.setblocking(False)
    return sock


def _setns(path: Path) -> None:
    """Join the network namespace at path: the calling thread only."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns {path}: {os.strerror(errno)}")
    finally:
        os.close(fd)
