"""The gateway's transport wrapper over a real asyncio socket transport."""

from __future__ import annotations

import asyncio
import socket

from pods_api.gateway.server.connection import JoinedWrites


def _read_all(sock: socket.socket) -> int:
    sock.settimeout(20)
    total = 0
    while chunk := sock.recv(1 << 20):
        total += len(chunk)
    return total


async def test_abort_after_a_close_whose_bytes_were_all_written_is_nothing() -> None:
    """Last words close the connection, then abort it if the client has not read them in
    time: when it had, asyncio's transport had let go of its loop, and abort() raised
    AttributeError: 'NoneType' object has no attribute 'call_soon' (29 in one churn run)."""
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    lost = asyncio.Event()

    class Protocol(asyncio.Protocol):
        def connection_lost(self, exc: Exception | None) -> None:
            lost.set()

    transport, _ = await loop.connect_accepted_socket(Protocol, ours)
    writes = JoinedWrites(transport, loop)  # type: ignore[arg-type]
    payload = b"x" * (8 << 20)  # more than the socket buffers take: close() leaves bytes to write
    writes.write(payload)
    writes.close()
    assert transport.get_write_buffer_size() > 0
    assert await asyncio.to_thread(_read_all, theirs) == len(payload)
    await asyncio.wait_for(lost.wait(), 20)
    writes.abort()  # raised AttributeError
    theirs.close()


async def test_abort_still_drops_what_a_closing_transport_has_not_written() -> None:
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
    writes = JoinedWrites(transport, loop)  # type: ignore[arg-type]
    writes.write(b"x" * (8 << 20))
    writes.close()
    writes.abort()
    assert transport.get_write_buffer_size() == 0
    theirs.close()
