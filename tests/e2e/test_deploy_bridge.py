"""deploy/overlays/bridge, as `kubectl kustomize` renders it: a valid DaemonSet (read through the
kubernetes client's models) that bridges the kubelet's socket, mounted read-only, and serves ours
elsewhere."""

from __future__ import annotations

import json

from kubernetes.client import ApiClient, V1DaemonSet
from kustomize import daemonset, expanded_args

from pods_api.serve.cli import _parser, config_from_args


def test_bridge_daemonset() -> None:
    obj = daemonset("bridge")
    ds: V1DaemonSet = ApiClient().deserialize(json.dumps(obj), "V1DaemonSet", "application/json")
    assert ds.metadata.name == "pods-api-bridge"
    pod = ds.spec.template.spec
    assert pod.node_selector["kubernetes.io/os"] == "linux"
    (container,) = pod.containers
    parsed = _parser().parse_args(expanded_args(obj["spec"]["template"]["spec"]["containers"][0]))
    config = config_from_args(parsed)
    kubelet_dir = parsed.kubelet_socket.parent
    assert config.socket.parent != kubelet_dir
    mounts = {m.mount_path: m for m in container.volume_mounts}
    assert mounts[str(kubelet_dir)].read_only
    assert not mounts[str(config.socket.parent)].read_only
    assert ds.spec.selector.match_labels == {"app.kubernetes.io/name": "pods-api-bridge"}  # not standalone's
    assert ds.spec.template.metadata.labels["app.kubernetes.io/name"] == "pods-api-bridge"
    volumes = {v.name: v.host_path.path for v in pod.volumes}
    assert volumes[mounts[str(kubelet_dir)].name] == str(kubelet_dir)
    assert volumes[mounts[str(config.socket.parent)].name] == str(config.socket.parent)
