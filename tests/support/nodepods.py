"""Realistic pods of one node, as node agents meet them, written as fixture files for a real
`pods-api serve --fixtures`: several containers, init and ephemeral containers, dual-stack pod
IPs, host-network pods sharing the node's IPs, a pending pod with no IP and no container yet."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

NODE_IPS = ("192.168.56.10", "2001:db8:56::10")
CONTAINER_LISTS = {
    "containerStatuses": "containers",
    "initContainerStatuses": "initContainers",
    "ephemeralContainerStatuses": "ephemeralContainers",
}


def cid(seed: str, prefix: str = "") -> str:
    """A container ID as containerd makes them: 64 hex digits (optionally starting with prefix)."""
    digest = hashlib.sha256(seed.encode()).hexdigest()
    return (prefix + digest)[:64]


def container_status(name: str, container_id: str | None, restarts: int = 0) -> dict[str, Any]:
    status: dict[str, Any] = {
        "name": name,
        "image": f"registry.example/{name}:1.0",
        "imageID": "",
        "ready": container_id is not None,
        "restartCount": restarts,
        "started": container_id is not None,
    }
    if container_id is None:
        status["state"] = {"waiting": {"reason": "ContainerCreating"}}
    else:
        status["containerID"] = f"containerd://{container_id}"
        status["state"] = {"running": {"startedAt": "2026-11-30T01:00:00Z"}}
    return status


def pod(
    name: str,
    namespace: str,
    uid: str,
    *,
    labels: dict[str, str],
    containers: dict[str, dict[str, str | None]],
    ips: tuple[str, ...] = (),
    host_network: bool = False,
    phase: str = "Running",
    service_account: str = "default",
) -> dict[str, Any]:
    """`containers`: status list name -> {container name: container ID, or None (not started)}."""
    spec: dict[str, Any] = {
        "nodeName": "node-1",
        "serviceAccountName": service_account,
        "restartPolicy": "Always",
        "hostNetwork": host_network,
    }
    status: dict[str, Any] = {
        "phase": phase,
        "hostIP": NODE_IPS[0],
        "hostIPs": [{"ip": ip} for ip in NODE_IPS],
    }
    if ips:
        status["podIP"] = ips[0]
        status["podIPs"] = [{"ip": ip} for ip in ips]
    for status_list, by_name in containers.items():
        field = CONTAINER_LISTS[status_list]
        spec[field] = [{"name": n, "image": f"registry.example/{n}:1.0"} for n in by_name]
        if field == "ephemeralContainers":
            for entry in spec[field]:
                entry["targetContainerName"] = "app"
        status[status_list] = [container_status(n, i) for n, i in by_name.items()]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "labels": labels,
            "creationTimestamp": "2026-11-30T01:00:00Z",
        },
        "spec": spec,
        "status": status,
    }


# The checkout pod's app container and the cart pod's share their first 12 hex digits (what
# `crictl ps` shows): a 12-character prefix of either is ambiguous, a longer one is not.
SHARED_PREFIX = "3f9a1c2b7d4e"
IDS = {
    "checkout/app": cid("checkout/app", SHARED_PREFIX),
    "checkout/istio-proxy": cid("checkout/istio-proxy"),
    "checkout/istio-init": cid("checkout/istio-init"),
    "checkout/debugger": cid("checkout/debugger"),
    "cart/app": cid("cart/app", SHARED_PREFIX),
    "node-exporter/node-exporter": cid("node-exporter"),
    "kube-proxy/kube-proxy": cid("kube-proxy"),
}

CHECKOUT = pod(
    "checkout-6f7d8c9b5-q2x7z",
    "shop",
    "6c1e3a52-0d4b-4f8e-9a7c-2b5d8e1f3a01",
    labels={"app": "checkout", "tier": "web", "version": "v2"},
    containers={
        "containerStatuses": {"app": IDS["checkout/app"], "istio-proxy": IDS["checkout/istio-proxy"]},
        "initContainerStatuses": {"istio-init": IDS["checkout/istio-init"]},
        "ephemeralContainerStatuses": {"debugger": IDS["checkout/debugger"]},
    },
    ips=("10.244.1.30", "fd00:10:244:1::1e"),
    service_account="checkout",
)
CART = pod(
    "cart-5b8c7d6f4-m9k2p",
    "shop",
    "7d2f4b63-1e5c-4a9f-8b0d-3c6e9f2a4b02",
    labels={"app": "cart", "tier": "web", "canary": "true"},
    containers={"containerStatuses": {"app": IDS["cart/app"]}},
    ips=("10.244.1.31", "fd00:10:244:1::1f"),
)
NODE_EXPORTER = pod(
    "node-exporter-5r8tq",
    "monitoring",
    "8e3a5c74-2f6d-4b0a-9c1e-4d7f0a3b5c03",
    labels={"app": "node-exporter"},
    containers={"containerStatuses": {"node-exporter": IDS["node-exporter/node-exporter"]}},
    ips=NODE_IPS,
    host_network=True,
)
KUBE_PROXY = pod(
    "kube-proxy-w8xkd",
    "kube-system",
    "9f4b6d85-3a7e-4c1b-8d2f-5e8a1b4c6d04",
    labels={"k8s-app": "kube-proxy"},
    containers={"containerStatuses": {"kube-proxy": IDS["kube-proxy/kube-proxy"]}},
    ips=NODE_IPS,
    host_network=True,
)
REPORT = pod(
    "report-28755360-kx4jd",
    "batch",
    "a05c7e96-4b8f-4d2c-9e3a-6f9b2c5d7e05",
    labels={"app": "report", "job-name": "report-28755360"},
    containers={"containerStatuses": {"report": None}},
    phase="Pending",
)
NODE_PODS = (CHECKOUT, CART, NODE_EXPORTER, KUBE_PROXY, REPORT)


def uid(p: dict[str, Any]) -> str:
    return str(p["metadata"]["uid"])


def write(directory: Path, p: dict[str, Any]) -> Path:
    """Write (or rewrite) one pod's fixture file atomically: the source never sees half a file."""
    path = directory / f"{p['metadata']['name']}.json"
    tmp = directory / f".{path.name}.tmp"
    tmp.write_text(json.dumps(p, indent=1))
    os.replace(tmp, path)
    return path
