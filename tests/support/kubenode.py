"""A loopback TCP port for `pods-api serve --http-listen`, and the kubeconfig of the docs that
points a Kubernetes client (kubectl, the Python client, client-go's clientcmd) at it."""

from __future__ import annotations

import json
import socket
from pathlib import Path


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
