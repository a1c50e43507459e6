"""The uvicorn server the process runs the gateway app with: the gateway's connection class
(connection.py) and the settings a node-local socket wants."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp

from pods_api.core.config import Config
from pods_api.gateway.server.connection import GatewayConnection


class GatewayServer(uvicorn.Server):
    """uvicorn's server without its signal handlers: `capture_signals` (which its serve()
    enters) is replaced, since the process's signals are the process's: one shutdown path for
    every surface (serve/process.py)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def gateway_server(app: ASGIApp, config: Config) -> GatewayServer:
    """The server for `app`, under the limits of `config` (core/policy/connections.py)."""
    assert config.max_connections is not None  # serve() resolved it
    connection = GatewayConnection.configured(
        config.header_timeout, config.max_connections, config.send_timeout
    )
    return GatewayServer(
        uvicorn.Config(
            app,
            http=connection,
            lifespan="off",
            ws="none",  # nothing is served over WebSocket; upgrades are refused (connection.py)
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=1,
            timeout_keep_alive=int(max(1, config.idle_timeout)),
            proxy_headers=False,  # node-local: there is no proxy whose X-Forwarded-* to trust
        )
    )
