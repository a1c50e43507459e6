"""Health under a burst of Lists: ten Lists of 5,000 pods, each a view of its own, are assembled
on the event loop every surface shares; done in one go each, they held `/healthz` (and gRPC
health, and every live watch) for up to 2.8 s. Assembled in slices that yield, the probe is
answered while they are still being made."""

from __future__ import annotations

import asyncio
import select
import socket
from pathlib import Path

import pytest
from builders import make_pod
from gatewayharness import TIMEOUT, GatewayFactory

PODS = 5000
LISTS = 10  # the default --burst admits this many at once


def _burst_then_probe(path: Path, route: str) -> tuple[bytes, list[int]]:
    """From a thread of its own (the server's loop is the test's): ask for the Lists, each over
    a connection of its own, then for /healthz; once its answer is in, which Lists have begun
    to answer (their sockets readable)."""
    lists = []
    for i in range(LISTS):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(path))
        sock.sendall(f"GET {route}?labelSelector=app!=none-{i} HTTP/1.1\r\nhost: localhost\r\n\r\n".encode())
        lists.append(sock)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(TIMEOUT)
        probe.connect(str(path))
        probe.sendall(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        answer = probe.recv(4096)
    begun, _, _ = select.select(lists, [], [], 0)
    done = [i for i, sock in enumerate(lists) if sock in begun]
    for sock in lists:
        sock.close()
    return answer, done


@pytest.mark.parametrize("route", ["/v1/pods", "/api/v1/pods"], ids=["rest", "kubernetes-view"])
async def test_healthz_is_answered_while_a_burst_of_lists_is_being_assembled(
    make_gateway: GatewayFactory, route: str
) -> None:
    pods = [make_pod(f"p-{i}", f"uid-{i:05d}") for i in range(PODS)]
    async with make_gateway(pods=pods) as gw:
        answer, begun = await asyncio.wait_for(asyncio.to_thread(_burst_then_probe, gw.path, route), TIMEOUT)
    assert answer.startswith(b"HTTP/1.1 200"), answer
    assert begun == [], f"Lists {begun} were answered before the probe: they held the loop"
