"""A TCP link on 127.0.0.1 between a client and a server that a test can cut: while cut, every
open connection is reset and new ones are refused, as a node cut off from its control plane sees
it; the server behind it keeps running, so a test changes and compacts its state meanwhile.

It relays bytes only (TLS passes through untouched), in a thread of its own, so a test may block
while it relays. Its server may be inside a network namespace of the lab's (tests/support/netns.py):
how this machine reaches the cluster lab's API server, which lives in its node's namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading

from netns import NetNs, connect

# Safety net for the link's own start and stop, which take milliseconds.
WAIT = 20.0
# Bytes read per relay step: big enough that a List of thousands of pods is a few hundred reads.
CHUNK = 256 * 1024


class Link:
    """`Link(server_port)`; `.port` is where clients connect. `cut()` and `mend()` toggle it.
    It listens on 127.0.0.1:`port` (a free port by default); with `server_netns`, the server is
    127.0.0.1:server_port inside that network namespace, not on this machine's loopback."""

    def __init__(self, server_port: int, port: int = 0, server_netns: NetNs | None = None) -> None:
        self.server_port = server_port
        self.port = port
        self._connector = server_netns.connector() if server_netns else None
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.mend()

    def mend(self) -> None:
        """Accept connections again (on the same port)."""
        self._call(self._listen())

    def cut(self) -> None:
        """Reset every open connection and refuse new ones until `mend()`."""
        self._call(self._cut())

    def close(self) -> None:
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(WAIT)
        self._loop.close()
        if self._connector is not None:
            self._connector.shutdown(wait=False)

    def _call(self, coroutine: object) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(WAIT)  # type: ignore[arg-type]

    async def _listen(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port, reuse_address=True)
            self.port = self._server.sockets[0].getsockname()[1]

    async def _cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            # SO_LINGER 0: a reset, not a clean close, as a broken path looks to a client.
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            writer.transport.abort()
        self._writers.clear()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if self._connector is None:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.server_port)
            else:
                sock = await self._loop.run_in_executor(
                    self._connector, connect, "127.0.0.1", self.server_port
                )
                up_reader, up_writer = await asyncio.open_connection(sock=sock)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for end in (writer, up_writer):
                self._writers.discard(end)
                end.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError):
        writer.close()
