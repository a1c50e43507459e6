"""A realistic pod for tests of every surface: a Deployment-like pod in namespace shop."""

from __future__ import annotations

from typing import Any


def make_pod(name: str, uid: str, phase: str = "Running", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": uid,
            "labels": {"app": name, **labels},
            "creationTimestamp": "2026-11-28T08:00:00Z",
        },
        "spec": {
            "nodeName": "node-1",
            "containers": [
                {
                    "name": "app",
                    "image": f"shop/{name}:1",
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "resources": {"requests": {"cpu": "0.5", "memory": "1024Mi"}},
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}},
                    "readinessProbe": {"tcpSocket": {"port": 8080}},
                }
            ],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        },
        "status": {
            "phase": phase,
            "podIP": "10.1.0.7",
            "podIPs": [{"ip": "10.1.0.7"}],
            "startTime": "2026-11-28T08:00:01Z",
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": phase == "Running",
                    "restartCount": 0,
                    "image": f"shop/{name}:1",
                    "imageID": "sha256:1",
                }
            ],
        },
    }
