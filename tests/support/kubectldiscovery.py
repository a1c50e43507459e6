"""What kubectl needs to print our tables without an API server: discovery, and a loopback
server answering it (and whatever else a test serves) with a kubeconfig pointing at it."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

DISCOVERY: dict[str, Any] = {
    "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
    "/api/v1": {
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {
                "name": "pods",
                "singularName": "pod",
                "namespaced": True,
                "kind": "Pod",
                "verbs": ["get", "list", "watch"],
                "shortNames": ["po"],
            }
        ],
    },
}

# What a test's server answers for a path that is not discovery (the path without its query, and
# the request's headers): a JSON body, or None for 404.
Answer = Callable[[str, Mapping[str, str]], Any]


@contextlib.contextmanager
def kubectl_server(directory: Path, answer: Answer) -> Iterator[Path]:
    """A loopback HTTP server answering discovery (DISCOVERY) and, for any other path, what
    `answer` gives, as an API server's JSON; yields a kubeconfig (in `directory`) that points
    kubectl at it."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            body = DISCOVERY[path] if path in DISCOVERY else answer(path, self.headers)
            if body is None:
                self.send_error(404)
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    path = directory / "config"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "node", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
        "contexts": [{"name": "node", "context": {"cluster": "node", "user": "node"}}],
        "users": [{"name": "node", "user": {}}],
        "current-context": "node",
    }
    path.write_text(json.dumps(config))
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
