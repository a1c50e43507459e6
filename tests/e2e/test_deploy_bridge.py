"""deploy/daemonset-bridge.yaml: a valid DaemonSet (read through the kubernetes client's models)
that bridges the kubelet's socket, mounted read-only, and serves ours elsewhere."""

from __future__ import annotations

import json

import yaml
from kubernetes.client import ApiClient, V1DaemonSet
from repo import ROOT

from pods_api.serve.cli import _parser, config_from_args

MANIFEST = ROOT / "deploy" / "daemonset-bridge.yaml"


def test_bridge_daemonset() -> None:
    obj = yaml.safe_load(MANIFEST.read_text())
    ds: V1DaemonSet = ApiClient().deserialize(json.dumps(obj), "V1DaemonSet", "application/json")
    pod = ds.spec.template.spec
    assert pod.node_selector["kubernetes.io/os"] == "linux"
    (container,) = pod.containers
    args = [a.replace("$(NODE_NAME)", "node-1") for a in container.args]
    parsed = _parser().parse_args(args)
    config = config_from_args(parsed)
    kubelet_dir = parsed.kubelet_socket.parent
    assert config.socket.parent != kubelet_dir
    mounts = {m.mount_path: m for m in container.volume_mounts}
    assert mounts[str(kubelet_dir)].read_only
    assert not mounts[str(config.socket.parent)].read_only
    assert ds.spec.selector.match_labels == {"app.kubernetes.io/name": "pods-api-bridge"}  # not standalone's
    volumes = {v.name: v.host_path.path for v in pod.volumes}
    assert volumes[mounts[str(kubelet_dir)].name] == str(kubelet_dir)
