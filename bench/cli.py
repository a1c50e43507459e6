"""The probe and the client command, per call, against their peers on the same server: a real
`pods-api serve --fixtures` of `count` pods, each command run `repeats` times, the median of its
CPU (user + system) and peak RSS, from the kernel's accounting of that child (wait4).

- `pods-api check --quiet` (the DaemonSet's probes) against a minimal Python gRPC health check
  (grpcio and grpc_health only) and grpcurl's `grpc.health.v1.Health/Check`, when on PATH;
- `pods-api get pods` against `kubectl get pods -A` through the Kubernetes view (the same table),
  when kubectl is on PATH; kubectl talks to the gateway on loopback TCP (`--http-listen`).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import pods
from bench.server import serving, until_serving

TIME = "/usr/bin/time"  # GNU time (Debian's `time` package)

_HEALTH = """
import sys, grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
with grpc.insecure_channel("unix:" + sys.argv[1]) as channel:
    answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
sys.exit(0 if answer.status == health_pb2.HealthCheckResponse.SERVING else 1)
"""


def _run(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS MiB of one run of `command` (it must succeed), as
    GNU time reports them: its child is forked from time itself, so the peak is the command's,
    not the fork of this process it would otherwise start as."""
    with tempfile.NamedTemporaryFile("r") as report:
        timed = [TIME, "-f", "%e %U %S %M", "-o", report.name, *command]
        result = subprocess.run(timed, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{command[0]} exited {result.returncode}: {result.stderr}")
        wall, user, system, rss_kib = report.read().split()[-4:]
    return float(wall), float(user) + float(system), float(rss_kib) / 1024


def _median_of(command: list[str], repeats: int, env: dict[str, str] | None = None) -> dict[str, float]:
    runs = [_run(command, env) for _ in range(repeats)]
    return {
        "wall_s": statistics.median(r[0] for r in runs),
        "cpu_s": statistics.median(r[1] for r in runs),
        "rss_mib": statistics.median(r[2] for r in runs),
    }


def _kubeconfig(directory: Path, port: int) -> Path:
    path = directory / "kubeconfig"
    cluster = {"server": f"http://127.0.0.1:{port}"}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "node", "cluster": cluster}],
        "contexts": [{"name": "node", "context": {"cluster": "node", "user": "node"}}],
        "users": [{"name": "node", "user": {}}],
        "current-context": "node",
    }
    path.write_text(json.dumps(config))
    return path


def run(count: int, repeats: int) -> dict[str, Any]:
    pods_api = shutil.which("pods-api") or "pods-api"
    out: dict[str, Any] = {"pods": count, "repeats": repeats}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pods.write(root / "fixtures", count, kind="fixture", fmt="json")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        args = ("--fixtures", str(root / "fixtures"), "--http-listen", f"127.0.0.1:{port}")
        with serving(root / "run", *args) as s:
            asyncio.run(until_serving(s.target, patience=600))
            sock = str(s.target).removeprefix("unix:")
            checks = {
                "pods-api check --quiet": [pods_api, "check", "--quiet", f"--socket={sock}"],
                "minimal Python health check": [sys.executable, "-c", _HEALTH, sock],
            }
            grpcurl = shutil.which("grpcurl")
            if grpcurl:
                checks["grpcurl Health/Check"] = [
                    grpcurl, "-plaintext", "-unix", sock, "grpc.health.v1.Health/Check"
                ]  # fmt: skip
            out["check"] = {name: _median_of(command, repeats) for name, command in checks.items()}
            lists = {"pods-api get pods": [pods_api, "get", "pods", f"--socket={sock}"]}
            kubectl = shutil.which("kubectl")
            env = None
            if kubectl:
                kubeconfig = _kubeconfig(root, port)
                lists["kubectl get pods -A"] = [kubectl, "--kubeconfig", str(kubeconfig), "get", "pods", "-A"]
                # A home of its own: no discovery cache from an earlier run, none left behind.
                env = {"HOME": str(root), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
            out["get"] = {name: _median_of(command, repeats, env) for name, command in lists.items()}
    return out
