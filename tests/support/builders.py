"""Pods for tests, built in one place (import by name: `from builders import pod`).

- `pod()`: a pod in Kubernetes JSON holding only what the test names, as a manifest writes it
  (TypeMeta, one container) unless told otherwise;
- `stored()`: a pod as the cache holds it (a PodVersion), by UID: what store tests compare;
- `make_pod()`: a realistic Deployment-like pod in namespace shop, for tests of every surface.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pods_api.core.store.version import PodVersion

# The image a pod gets when a test does not care which: the kubelet's own sandbox image.
PAUSE = "registry.k8s.io/pause:3.10"


def pod(
    name: str,
    *,
    namespace: str | None = None,
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    image: str | None = PAUSE,
    container: str = "main",
    node: str | None = None,
    phase: str | None = None,
    status: Mapping[str, Any] | None = None,
    typed: bool = True,
    **spec: Any,
) -> dict[str, Any]:
    """A pod named `name`. `image`: one container (named `container`) running it (None: no
    containers, unless `spec` has them); `node`: spec.nodeName; `phase` and `status`: its
    status (none without either); `typed`: with apiVersion and kind, as a manifest has them;
    every other keyword is a spec field."""
    meta: dict[str, Any] = {"name": name}
    for key, value in (("namespace", namespace), ("uid", uid), ("labels", labels)):
        if value is not None:
            meta[key] = dict(value) if isinstance(value, Mapping) else value
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    body: dict[str, Any] = {}
    if image is not None:
        body["containers"] = [{"name": container, "image": image}]
    if node is not None:
        body["nodeName"] = node
    body.update(spec)
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod"} if typed else {}
    obj["metadata"] = meta
    if body:
        obj["spec"] = body
    if phase is not None or status:
        obj["status"] = {**({"phase": phase} if phase is not None else {}), **(status or {})}
    return obj


def stored(
    uid: str,
    phase: str | None = "Running",
    *,
    name: str | None = None,
    namespace: str = "ns",
    image: str | None = None,
    **fields: Any,
) -> PodVersion:
    """The pod `uid` (named after it unless `name`) as the cache holds it: metadata and a phase,
    and whatever else `pod()` is told (`fields`); no containers unless an `image`."""
    body = pod(name or uid, namespace=namespace, uid=uid, image=image, phase=phase, typed=False, **fields)
    return PodVersion.from_json(body)


def make_pod(
    name: str, uid: str, phase: str = "Running", *, typed: bool = False, **labels: str
) -> dict[str, Any]:
    """`typed`: with apiVersion and kind, as a fixture file has them."""
    body = {
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
    return {"apiVersion": "v1", "kind": "Pod", **body} if typed else body
