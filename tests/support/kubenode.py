"""A loopback TCP port for `pods-api serve --http-listen`, and the kubeconfigs that point a
Kubernetes client (kubectl, the Python client, client-go's clientcmd) at it: the docs' minimal one,
and exactly what `pods-api kubeconfig` prints; and a recording proxy in front of it, to see which
paths a client asks for and what each is answered, or to answer /version as another server would."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

# Safety net for `pods-api kubeconfig`, which prints at once.
PRINT_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kubeconfig(path: Path, port: int) -> Path:
    """The docs' kubeconfig: no credentials, the node's loopback listener."""
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "node", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "contexts": [{"name": "node", "context": {"cluster": "node", "user": "node"}}],
                "users": [{"name": "node", "user": {}}],
                "current-context": "node",
            }
        )
    )
    return path


def generated_kubeconfig(path: Path, port: int) -> Path:
    """What `pods-api kubeconfig --http-listen` (the one on PATH) prints for this port, as a file."""
    printed = subprocess.run(
        ["pods-api", "kubeconfig", "--http-listen", f"127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=PRINT_TIMEOUT,
        check=True,
    ).stdout
    path.write_text(printed)
    return path


@dataclass(frozen=True)
class Exchange:
    path: str  # with its query, as the client sent it
    status: int  # what the client was answered


class RecordingProxy:
    """A loopback HTTP server that passes each GET on to `upstream` and records the exchange.
    With `version` it answers /version (with or without the trailing /) itself, with that body:
    a stand-in for another server's /version in front of the same pods. Whole responses only (no
    watch streams): it is for discovery and lists."""

    def __init__(self, upstream: str, version: dict[str, Any] | None = None) -> None:
        self.upstream = upstream
        self.version = version
        self.exchanges: list[Exchange] = []
        self._client = httpx.Client(base_url=upstream)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.port = int(self._server.server_address[1])

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, content_type, body = proxy.answer(self.path, self.headers.get("Accept", "*/*"))
                proxy.exchanges.append(Exchange(self.path, status))
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # recorded in exchanges instead

        return Handler

    def answer(self, path: str, accept: str) -> tuple[int, str, bytes]:
        if self.version is not None and path.split("?")[0].rstrip("/") == "/version":
            return 200, "application/json", json.dumps(self.version).encode()
        response = self._client.get(path, headers={"Accept": accept})
        return response.status_code, response.headers.get("Content-Type", ""), response.content

    def __enter__(self) -> RecordingProxy:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()
