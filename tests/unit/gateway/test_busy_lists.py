"""Health under a burst of Lists: ten Lists of 5,000 pods, each a view of its own, are assembled
on the event loop every surface shares; done in one go each, they held `/healthz` (and gRPC
health, and every live watch) for up to 2.8 s. Assembled in slices that yield, the probe is
answered while they are still being made. (tests/unit/store/test_slices.py holds the bound
itself: no more than a slice of work between two turns of the loop.)"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from builders import make_pod
from gatewayharness import TIMEOUT, GatewayFactory

PODS = 5000
LISTS = 10  # the default --burst admits this many at once

# Run in a process of its own: a thread of the test's would need the GIL the server's loop
# holds (the loop is the test's) between each of its sends, so the Lists would begin seconds of
# slices apart and the first could be done before the probe was even sent. The Lists, each
# over a connection of its own, then /healthz; once its answer is in, which Lists have begun
# to answer (their sockets readable).
_CLIENT = r"""
import json, select, socket, sys
path, route, lists = sys.argv[1], sys.argv[2], int(sys.argv[3])
socks = []
for i in range(lists):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    socks.append(s)
probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
probe.settimeout(float(sys.argv[4]))
probe.connect(path)
for i, s in enumerate(socks):
    s.sendall(f"GET {route}?labelSelector=app!=none-{i} HTTP/1.1\r\nhost: localhost\r\n\r\n".encode())
probe.sendall(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
answer = probe.recv(4096)
begun, _, _ = select.select(socks, [], [], 0)
print(json.dumps({"answer": answer.decode(errors="replace"), "begun": [socks.index(s) for s in begun]}))
"""


async def _burst_then_probe(path: Path, route: str) -> tuple[str, list[int]]:
    client = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CLIENT, str(path), route, str(LISTS), str(TIMEOUT),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await client.communicate()
    said = json.loads(out)
    return said["answer"], said["begun"]


@pytest.mark.parametrize("route", ["/v1/pods", "/api/v1/pods"], ids=["rest", "kubernetes-view"])
async def test_healthz_is_answered_while_a_burst_of_lists_is_being_assembled(
    make_gateway: GatewayFactory, route: str
) -> None:
    pods = [make_pod(f"p-{i}", f"uid-{i:05d}") for i in range(PODS)]
    async with make_gateway(pods=pods) as gw:
        answer, begun = await asyncio.wait_for(_burst_then_probe(gw.path, route), TIMEOUT)
    assert answer.startswith("HTTP/1.1 200"), answer
    assert begun == [], f"Lists {begun} were answered before the probe: they held the loop"
