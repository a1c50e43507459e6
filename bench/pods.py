"""Realistic pods for the benchmarks: an init container and two containers, 30 env vars, probes,
four volumes and a full status; about 4.7 KiB as protobuf. `manifest` is a static pod as a
person writes it (no uid, no status); `fixture` is a served pod with its status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import yaml


def _container(name: str, image: str, port: int | None) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "env": [{"name": f"SETTING_{i:02d}", "value": f"value-{i}-{name}"} for i in range(10)],
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "500m", "memory": "256Mi"},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/app", "readOnly": True},
            {"name": "data", "mountPath": "/var/lib/app"},
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    if port is not None:
        container["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
        probe = {"httpGet": {"path": "/healthz", "port": port, "scheme": "HTTP"}, "periodSeconds": 10}
        container["livenessProbe"] = {**probe, "failureThreshold": 3, "timeoutSeconds": 1}
        container["readinessProbe"] = {**probe, "successThreshold": 1, "timeoutSeconds": 1}
    return container


def _status(i: int) -> dict[str, Any]:
    started = "2026-11-29T10:00:00Z"

    def state(name: str, image: str) -> dict[str, Any]:
        return {
            "name": name,
            "ready": True,
            "started": True,
            "restartCount": 0,
            "image": image,
            "imageID": f"registry.example/{name}@sha256:{'a' * 64}",
            "containerID": f"containerd://{i:08x}{name.encode().hex():0<56}"[:77],
            "state": {"running": {"startedAt": started}},
        }

    return {
        "phase": "Running",
        "conditions": [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": started}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "hostIP": "10.1.0.1",
        "hostIPs": [{"ip": "10.1.0.1"}],
        "podIP": f"10.0.{i // 250}.{i % 250 + 1}",
        "podIPs": [{"ip": f"10.0.{i // 250}.{i % 250 + 1}"}],
        "startTime": started,
        "qosClass": "Burstable",
        "initContainerStatuses": [
            {
                **state("init", "registry.example/init:1.0"),
                "ready": True,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": started,
                        "finishedAt": started,
                        "containerID": f"containerd://{i:064x}",
                    }
                },
            }
        ],
        "containerStatuses": [
            state("app", "registry.example/app:1.0"),
            state("sidecar", "registry.example/sidecar:2.3"),
        ],
    }


def manifest(i: int, generation: int = 0) -> dict[str, Any]:
    """A static pod as written in a manifest file; `generation` changes one env value."""
    spec: dict[str, Any] = {
        "initContainers": [_container("init", "registry.example/init:1.0", None)],
        "containers": [
            _container("app", "registry.example/app:1.0", 8080),
            _container("sidecar", "registry.example/sidecar:2.3", 9090),
        ],
        # Only what the kubelet admits in a static pod: no configMap, secret or projected token
        # (PreventStaticPodAPIReferences), or every manifest would be refused, not loaded.
        "volumes": [
            {"name": "config", "hostPath": {"path": f"/etc/app-{i}", "type": "Directory"}},
            {"name": "data", "emptyDir": {}},
            {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}},
            {"name": "token", "emptyDir": {"medium": "Memory"}},
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "priority": 0,
    }
    spec["containers"][0]["env"][0]["value"] = f"generation-{generation}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"app-{i}",
            "namespace": "bench",
            "labels": {"app": f"app-{i % 20}", "tier": "web", "pod-template-hash": "7d9f8c6b5"},
            "annotations": {"example.com/owner": "team-a"},
        },
        "spec": spec,
    }


def fixture(i: int, generation: int = 0) -> dict[str, Any]:
    """A served pod, status included, with a uid: what --fixtures serves as written."""
    pod = manifest(i, generation)
    pod["metadata"]["uid"] = f"00000000-0000-0000-0000-{i:012d}"
    # A served pod may use the API's volumes, as a Deployment's does.
    volumes = pod["spec"]["volumes"]
    volumes[0] = {"name": "config", "configMap": {"name": f"app-{i}-config"}}
    volumes[3] = {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
    pod["spec"]["nodeName"] = "bench"
    pod["status"] = _status(i)
    return pod


def encode(pod: dict[str, Any], fmt: str) -> bytes:
    if fmt == "json":
        return orjson.dumps(pod)
    return yaml.safe_dump(pod, sort_keys=False).encode()


def write(directory: Path, count: int, *, kind: str = "manifest", fmt: str = "yaml") -> list[Path]:
    """`count` files of one pod each; returns their paths."""
    make = manifest if kind == "manifest" else fixture
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = directory / f"pod-{i:05d}.{fmt}"
        path.write_bytes(encode(make(i), fmt))
        paths.append(path)
    return paths


def rewrite(path: Path, i: int, generation: int, *, kind: str = "manifest", fmt: str = "yaml") -> None:
    """Replace a file as an editor or a config tool does: write aside, then rename over it."""
    make = manifest if kind == "manifest" else fixture
    aside = path.with_name("." + path.name + ".tmp")
    aside.write_bytes(encode(make(i, generation), fmt))
    aside.rename(path)
