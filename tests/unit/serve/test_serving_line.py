"""The start-up line says where pods-api serves, and when that is the default path (root's, the
kubelet's), says so: serving there is never a surprise."""

from __future__ import annotations

from pathlib import Path

from pods_api.core.config import BRIDGE_SOCKET, DEFAULT_SOCKET, Config
from pods_api.serve.process import serving_line


def test_the_default_paths_are_named_as_such() -> None:
    for socket in (DEFAULT_SOCKET, BRIDGE_SOCKET):
        line = serving_line(Config(node_name="node-1", socket=socket))
        assert line.startswith(
            f"serving the Pods API on {socket} (gRPC) and {socket.parent}/pods-api-http.sock"
        )
        assert line.endswith(
            ": the default, where node agents look for the Pods API (--run-dir DIR serves elsewhere)"
        )


def test_a_chosen_path_is_only_named() -> None:
    config = Config(node_name="node-1", socket=Path("run/pods-api.sock"), http_listen="127.0.0.1:8080")
    assert serving_line(config) == (
        "serving the Pods API on run/pods-api.sock (gRPC) and run/pods-api-http.sock (HTTP, also http://127.0.0.1:8080)"
    )
