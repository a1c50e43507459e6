"""Shared by the gateway tests (no tests here): a core with a test source, the gateway under
uvicorn on a real UNIX socket in the test's own event loop, an httpx client on that socket, and an
SSE reader."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import uvicorn
from builders import make_pod

from pods_api.core.assembly import Core, build_core
from pods_api.core.config import Config
from pods_api.core.store.cache import SourceSink
from pods_api.core.store.version import PodVersion
from pods_api.gateway.app import create_app
from pods_api.serve.sockets import bind_unix, claim

# A safety net, not a synchronisation: every wait ends on an event long before this.
TIMEOUT = 20.0
CONFIG = Config(node_name="test", qps=0)


def version(pod: dict[str, Any]) -> PodVersion:
    return PodVersion.from_json(pod)


PODS = [make_pod("web", "uid-b"), make_pod("db", "uid-a"), make_pod("cache", "uid-c", "Pending")]


@dataclass
class Gateway:
    core: Core
    sink: SourceSink
    path: Path
    client: httpx.AsyncClient
    server: uvicorn.Server

    def publish(self, pod: dict[str, Any]) -> None:
        self.sink.upsert(version(pod))

    def counter(self, name: str, **labels: str) -> float:
        value = self.core.metrics.registry.get_sample_value(name, labels)
        return value or 0.0


def unix_client(path: Path) -> httpx.AsyncClient:
    # curl --unix-socket sends Host: localhost; so does this.
    return httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(uds=str(path)), base_url="http://localhost", timeout=TIMEOUT
    )


@contextlib.asynccontextmanager
async def serving(app: Any, sockets: list[socket.socket]) -> AsyncIterator[uvicorn.Server]:
    """uvicorn on listening sockets we bound: a client may connect at once (the kernel queues
    it in the backlog until uvicorn accepts), so nothing waits for startup."""
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="off", timeout_graceful_shutdown=1))
    task = asyncio.get_running_loop().create_task(server.serve(sockets=sockets))
    try:
        yield server
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, TIMEOUT)


@contextlib.asynccontextmanager
async def gateway_for(
    tmp_path: Path, config: Config = CONFIG, pods: list[dict[str, Any]] | None = PODS, synced: bool = True
) -> AsyncIterator[Gateway]:
    core = build_core(config)
    sink = core.cache.source("test")
    if pods is not None:
        sink.replace([version(p) for p in pods])
    if synced:
        sink.mark_synced()
    path = tmp_path / "http.sock"
    claimed = claim(path)
    listener = bind_unix(claimed, 0o600, None)
    try:
        async with serving(create_app(core), [listener]) as server, unix_client(path) as client:
            try:
                yield Gateway(core, sink, path, client, server)
            finally:
                core.cache.hub.stop()  # ends open watches, as the server does at shutdown
    finally:
        claimed.release()


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    async with gateway_for(tmp_path) as gw:
        yield gw


GatewayFactory = Callable[..., contextlib.AbstractAsyncContextManager[Gateway]]


@pytest.fixture
def make_gateway(tmp_path: Path) -> GatewayFactory:
    """`async with make_gateway(qps=1, burst=2, pods=[...], synced=False) as gw:`"""

    def make(
        pods: list[dict[str, Any]] | None = PODS, synced: bool = True, **config: Any
    ) -> contextlib.AbstractAsyncContextManager[Gateway]:
        return gateway_for(tmp_path, replace(CONFIG, **config), pods, synced)

    return make


# -- Server-Sent Events ------------------------------------------------------------------------


@dataclass
class Event:
    event: str
    data: Any
    id: str | None = None
    raw: bytes = b""

    @property
    def uid(self) -> str:
        return str(self.data["metadata"]["uid"])


@dataclass
class EventReader:
    """Parses an SSE byte stream into events; comments (heartbeats) are kept apart."""

    lines: AsyncIterator[str]
    comments: list[str] = field(default_factory=list)
    retry: int | None = None  # the `retry:` field, once sent

    async def next(self) -> Event:
        async def read() -> Event:
            fields: dict[str, str] = {}
            async for line in self.lines:
                if line == "":
                    if "retry" in fields and "data" not in fields:  # no event: the reconnection delay
                        self.retry = int(fields.pop("retry"))
                    if fields:
                        return Event(
                            fields.get("event", "message"), orjson.loads(fields["data"]), fields.get("id")
                        )
                    continue
                if line.startswith(":"):
                    self.comments.append(line[1:].strip())
                    continue
                name, _, value = line.partition(": ")
                assert name not in fields, f"field {name} twice in one event"
                fields[name] = value
            raise EOFError("stream ended")

        return await asyncio.wait_for(read(), TIMEOUT)

    async def take(self, count: int) -> list[Event]:
        return [await self.next() for _ in range(count)]

    async def until(self, kind: str) -> list[Event]:
        """Events up to and including the first of `kind`."""
        events = [await self.next()]
        while events[-1].event != kind:
            events.append(await self.next())
        return events


@contextlib.asynccontextmanager
async def watching(
    client: httpx.AsyncClient, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> AsyncIterator[tuple[httpx.Response, EventReader]]:
    async with client.stream(
        "GET", "/v1/pods", params={"watch": "true", **(params or {})}, headers=headers
    ) as r:
        yield r, EventReader(r.aiter_lines())


async def until(condition: Callable[[], bool], step: Callable[[], Awaitable[None]]) -> None:
    """Run `step` until `condition` holds (bounded by TIMEOUT): progress, not a timer."""

    async def loop() -> None:
        while not condition():
            await step()

    await asyncio.wait_for(loop(), TIMEOUT)
