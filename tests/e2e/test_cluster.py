"""The cluster lab itself (tests/support/cluster.py), shown to be what the deploy and API-pod tests
rely on: a kubelet registered under its own node identity, Deployments scheduled and run on it
with pod IPs from a real CNI network that lives only in the lab's namespace, and the kubelet's
own Pods API serving those pods.
"""

from __future__ import annotations

import ipaddress
import subprocess
from typing import Any

from cluster import BRIDGE, NODE_IP, POD_CIDR, Cluster, container, deployment
from podrecorder import list_pods
from realkubelet import NODE

from pods_api.core.api.codec import pod_from_bytes

NAMESPACE = "lab"


def sleepers(name: str, replicas: int) -> dict[str, Any]:
    """A Deployment of busybox sleepers on the pod network."""
    return deployment(name, NAMESPACE, replicas, [container("main", ["sleep", "3600"])])


def running_pods(cluster: Cluster, app: str, count: int) -> list[dict[str, Any]]:
    def ready() -> list[dict[str, Any]] | None:
        pods = [
            pod
            for pod in cluster.node_pods()
            if pod["metadata"].get("labels", {}).get("app") == app
            and pod["status"].get("phase") == "Running"
            and not pod["metadata"].get("deletionTimestamp")
        ]
        return pods if len(pods) == count else None

    return list(cluster.wait(ready, f"{count} Running pods of {app}"))


def test_the_kubelet_is_registered_under_its_own_node_identity(real_cluster: Cluster) -> None:
    node = real_cluster.get(f"/api/v1/nodes/{NODE}")
    assert node is not None
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses["InternalIP"] == NODE_IP
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.37.2"
    # Node authorization: the kubelet's identity reads its own node's pods, and nothing else's.
    kubelet = f"system:node:{NODE}"
    requests = real_cluster.plane.requests(kubelet)
    assert any(r.query.get("fieldSelector") == f"spec.nodeName={NODE}" for r in requests), requests
    denied = real_cluster.kubectl(
        "auth", "can-i", "list", "secrets", "--as", kubelet, "--as-group", "system:nodes", check=False
    )
    assert denied.stdout.startswith("no"), denied.stdout


def test_a_deployment_s_pods_run_with_ips_of_the_pod_network(real_cluster: Cluster) -> None:
    real_cluster.kubectl("create", "namespace", NAMESPACE)
    real_cluster.wait_service_account(NAMESPACE)
    real_cluster.apply(sleepers("web", 3))
    pods = running_pods(real_cluster, "web", 3)
    network = ipaddress.ip_network(POD_CIDR)
    ips = {pod["status"]["podIP"] for pod in pods}
    assert len(ips) == 3 and all(ipaddress.ip_address(ip) in network for ip in ips), ips
    assert {pod["status"]["hostIP"] for pod in pods} == {NODE_IP}
    # ... and the kubelet's own Pods API serves them, under the API server's UIDs.
    served = {pod["metadata"]["uid"]: pod for pod in map(pod_from_bytes, list_pods(real_cluster.node.target))}
    for pod in pods:
        assert served[pod["metadata"]["uid"]]["status"]["podIP"] == pod["status"]["podIP"]


def test_the_pod_network_lives_only_in_the_lab_s_namespace(real_cluster: Cluster) -> None:
    here = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert BRIDGE not in here
    assert BRIDGE in real_cluster.netns.ip("-o", "link")
