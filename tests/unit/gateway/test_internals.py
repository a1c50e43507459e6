"""The private hooks the gateway builds on, asserted as hooks: each method it replaces is the
library's own (not a new one nothing calls) and the library calls it. With the dependency
pinned to the tested minor version (pyproject.toml), a release that renames or stops calling one
fails here, by name, rather than quietly losing what the override does."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import h11
import uvicorn
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from pods_api.gateway.server.connection import GatewayConnection
from pods_api.gateway.server.hooks import connection_hooks
from pods_api.gateway.server.runner import GatewayServer
from pods_api.serve.sockets import bind_unix, claim

# A safety net, not a synchronisation: every wait ends on an event long before this.
TIMEOUT = 20.0


# -- uvicorn: the gateway's HTTP/1.1 connection class ------------------------------------------

# What GatewayConnection replaces, and what it reads of uvicorn's protocol and request cycle.
REPLACED = (
    "__init__",
    "connection_made",
    "connection_lost",
    "data_received",
    "on_response_complete",
    "handle_events",
    "send_400_response",
    "_unsupported_upgrade_warning",
)
PROTOCOL_ATTRIBUTES = ("cycle", "conn", "connections", "transport", "loop")
CYCLE_ATTRIBUTES = (
    "scope",
    "response_started",
    "response_complete",
    "keep_alive",
    "disconnected",
    "message_event",
)


def test_gateway_connection_replaces_uvicorns_own_methods() -> None:
    own = {name for name, value in vars(GatewayConnection).items() if callable(value)}
    helpers = {"configured", "_last_words", "_await_head", "_stop_waiting", "_head_too_slow", "_drop"}
    assert own - helpers - {"_watch_unread", "_check_unread"} == set(REPLACED)
    for name in REPLACED:
        assert name in vars(H11Protocol), f"uvicorn's H11Protocol has no {name} any more"


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    hooks = connection_hooks(scope)  # what the connection offers every request's response
    assert hooks is not None and hooks.send_timeout > 0
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@contextlib.asynccontextmanager
async def served(
    path: Path, connection: type[H11Protocol], server_class: type[uvicorn.Server] = uvicorn.Server
) -> AsyncIterator[None]:
    claimed = claim(path)
    listener = bind_unix(claimed, 0o600, None)
    config = uvicorn.Config(
        app, http=connection, log_config=None, lifespan="off", timeout_graceful_shutdown=1
    )
    server = server_class(config)
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[listener]))
    try:
        yield
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, TIMEOUT)
        claimed.release()


async def exchange(path: Path, data: bytes) -> bytes:
    """Send `data`, read until the server closes the connection."""
    reader, writer = await asyncio.open_unix_connection(str(path))
    try:
        writer.write(data)
        return await asyncio.wait_for(reader.read(), TIMEOUT)
    finally:
        writer.close()


async def test_uvicorn_calls_every_replaced_method_on_the_attributes_it_reads(tmp_path: Path) -> None:
    calls: Counter[str] = Counter()
    seen: dict[str, Any] = {}

    class Counted(GatewayConnection.configured(10.0, 16)):  # type: ignore[misc]
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            calls["connection_made"] += 1
            super().connection_made(transport)  # type: ignore[arg-type]

        def connection_lost(self, exc: Exception | None) -> None:
            calls["connection_lost"] += 1
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            calls["data_received"] += 1
            super().data_received(data)

        def handle_events(self) -> None:
            calls["handle_events"] += 1
            super().handle_events()
            if self.cycle is not None:
                seen["cycle"] = self.cycle

        def on_response_complete(self) -> None:
            calls["on_response_complete"] += 1
            seen["protocol"] = {name: getattr(self, name) for name in PROTOCOL_ATTRIBUTES}
            super().on_response_complete()

        def send_400_response(self, msg: str) -> None:
            calls["send_400_response"] += 1
            super().send_400_response(msg)

    path = tmp_path / "http.sock"
    request = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
    last = b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    async with served(path, Counted):
        two = await exchange(path, request + last)  # keep-alive: two cycles on one connection
        bad = await exchange(path, b"GET / HTTP/1.1\r\nHost: localhost\r\nno colon here\r\n\r\n")
    assert two.count(b"HTTP/1.1 200") == 2
    assert bad.startswith(b"HTTP/1.1 400")
    assert calls["connection_made"] == calls["connection_lost"] == 2
    assert calls["data_received"] >= 2 and calls["handle_events"] >= 3
    assert calls["on_response_complete"] == 2
    assert calls["send_400_response"] == 1
    protocol = seen["protocol"]
    assert isinstance(protocol["conn"], h11.Connection)
    assert isinstance(protocol["connections"], set)
    assert isinstance(seen["cycle"], RequestResponseCycle)
    for name in CYCLE_ATTRIBUTES:
        assert hasattr(seen["cycle"], name), f"uvicorn's RequestResponseCycle has no {name} any more"
    assert isinstance(seen["cycle"].message_event, asyncio.Event)


async def test_uvicorn_captures_signals_through_the_method_the_process_replaces(tmp_path: Path) -> None:
    """The gateway's server (gateway/server/runner.py) keeps the process's signals by replacing
    uvicorn.Server's capture_signals: uvicorn's serve() must still enter it."""
    assert "capture_signals" in vars(uvicorn.Server), "uvicorn.Server has no capture_signals any more"
    entered: list[bool] = []

    class Counted(GatewayServer):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            entered.append(True)
            with super().capture_signals():
                yield

    path = tmp_path / "http.sock"
    async with served(path, GatewayConnection, Counted):
        assert (
            await exchange(path, b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        ).startswith(b"HTTP/1.1 200")
    assert entered == [True]
