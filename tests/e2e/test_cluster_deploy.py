"""The image built from the repository's Dockerfile (tests/support/image.py), imported into the
cluster lab's node (tests/support/cluster.py), and each of deploy/'s overlays applied to it with
`kubectl apply -k`, unchanged, by running docs/deploying.md's commands as written:

- the DaemonSet's pod becomes Ready through its own probes (read-only root, every capability
  dropped, as the manifests say);
- from the node, `pods-api check` and `pods-api get pods` on the hostPath socket answer;
- it serves exactly the pods the variant is for, by UID, against what the real API server has
  bound to the node (`kubectl get pods -A --field-selector spec.nodeName=<node>`): every one of
  them for `apiserver` and `bridge`, the static ones for `standalone` and `cri`; a mirror pod
  counts under its static pod's UID (its `kubernetes.io/config.mirror` annotation), which is how
  the kubelet serves it;
- the apiserver overlay's RBAC is enough, and no more;
- a rolling update to a new tag ends a watcher's stream with a status it is told, and the
  watcher, reconnecting, converges on the same pods.

The variants for nodes older than v1.37 run on the lab's kubelet with its PodsAPI gate off (as
such a node's kubelet serves no socket); the bridge, with it on.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import image
import pytest
from cluster import KUBELET_ROOT, Cluster, container, deployment
from daemon import Unavailable
from docblocks import run_by
from kustomize import kubectl
from podrecorder import Recorder, held
from realkubelet import NODE, static_pod
from released import SYNCED
from repo import ROOT
from serve import PODS_API

from pods_api.core.api.codec import pod_from_bytes
from pods_api.core.api.pb import pods_v1alpha1_pb2 as api
from pods_api.core.api.pb import pods_v1alpha1_pb2_grpc as api_grpc

OVERLAYS = ["standalone", "apiserver", "cri", "bridge"]
DAEMONSET = {"bridge": "pods-api-bridge"}
KUBELET_SOCKET = KUBELET_ROOT / "pods-api" / "pods-api.sock"
SOCKET = {"bridge": "/run/pods-api/pods-api.sock"}
# Which of the node's pods a variant serves: every one, or the static ones only.
SERVES_ALL = {"apiserver", "bridge"}
NAMESPACE = "workload"
MIRROR = "kubernetes.io/config.mirror"
# The image's tag (the version, as deploy/ names it) and the one a rolling update moves to: the
# same image, so the update changes only what the DaemonSet's template says.
TAG = image.version()
NEXT_TAG = f"{TAG}-next"
SHUTDOWN = "server is shutting down"
# docs/deploying.md's blocks, by the name each is run under.
APPLY = "test_image_pod_becomes_ready_through_its_own_probes_with_overlay"
ANSWERS = "test_image_answers_check_and_get_pods_on_the_host_socket_with_overlay"
RBAC = "test_image_apiserver_overlay_rbac_is_enough_and_no_more"
ROLL = "test_image_rolling_update_with_the_apiserver_overlay_is_told_and_converges"
LABEL = "test_image_a_labelled_bridge_node_keeps_the_standalone_overlay_off"
REGISTRY = "test_a_kustomization_of_your_own_points_an_overlay_at_your_registry"
# Apply to Ready: the pod's sandbox, the image's native snapshot (a copy of ~200 MB), Python's
# start and the first sync, then a startup probe every 2 s: seconds idle, more on 2 loaded cores.
READY_TIMEOUT = 300.0
# A rolling update: the old pod's SIGTERM and removal, the new one's start and probes.
ROLL_TIMEOUT = 300.0


def run_doc(cluster: Cluster | None, test: str, **env: str) -> str:
    """The docs/deploying.md block that names `test`, run as written by bash from the checkout,
    with the variables its table gives (and the lab's kubeconfig): its output."""
    block = run_by("deploying.md", test)
    path = os.pathsep.join([os.path.dirname(PODS_API), os.path.dirname(kubectl()), os.environ["PATH"]])
    env = {**os.environ, "PATH": path, "NODE": NODE, **env}
    if cluster is not None:
        env["KUBECONFIG"] = str(cluster.kubeconfig)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=env.pop("CWD", str(ROOT)),
        env=env,
        capture_output=True,
        text=True,
        timeout=READY_TIMEOUT + 60,
    )
    assert done.returncode == 0, f"{test}'s block failed ({done.returncode}):\n{done.stdout}{done.stderr}"
    return done.stdout


def socket_of(overlay: str) -> str:
    return SOCKET.get(overlay, str(KUBELET_SOCKET))


def name_of(overlay: str) -> str:
    return DAEMONSET.get(overlay, "pods-api")


def served(socket: str) -> dict[str, str]:
    """ListPods on socket: {uid: namespace/name}."""
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        pods = api_grpc.PodsStub(channel).ListPods(api.ListPodsRequest(), timeout=10).pods
    return {meta["uid"]: f"{meta['namespace']}/{meta['name']}" for meta in _metas(pods)}


def _metas(pods: Any) -> Iterator[dict[str, Any]]:
    for pod in pods:
        yield pod_from_bytes(pod)["metadata"]


def expected(cluster: Cluster, everything: bool) -> dict[str, str]:
    """The node's pods as the kubelet serves them, {uid: namespace/name}: a mirror pod under its
    static pod's UID; every pod, or (everything False) the static ones only."""
    out = {}
    for pod in cluster.node_pods():
        meta = pod["metadata"]
        mirror = meta.get("annotations", {}).get(MIRROR)
        if mirror or everything:
            out[mirror or meta["uid"]] = f"{meta['namespace']}/{meta['name']}"
    return out


def comparable(pods: dict[str, str], overlay: str) -> set[str]:
    """What of the pods a variant must agree on: their UIDs, but for the standalone, which learns
    no UID of the kubelet's from manifests alone and serves its own (docs/sources.md: "Which UID
    is served"), their namespace and name."""
    return set(pods.values()) if overlay == "standalone" else set(pods)


@pytest.fixture(scope="module")
def node(real_cluster: Cluster) -> Cluster:
    """The lab with the image in its containerd under both tags, a static pod and a Deployment."""
    try:
        archives = [image.archive(tag) for tag in (TAG, NEXT_TAG)]
    except Unavailable as exc:
        pytest.skip(f"the image cannot be built here: {exc}")
    for archive in archives:
        real_cluster.import_image(archive)
    real_cluster.node.put("static-web.yaml", static_pod("static-web", ["sleep", "3600"]))
    real_cluster.kubectl("create", "namespace", NAMESPACE)
    real_cluster.wait_service_account(NAMESPACE)
    real_cluster.apply(deployment("web", NAMESPACE, 2, [container("main", ["sleep", "3600"])]))
    return real_cluster


@dataclass
class Deployed:
    overlay: str
    cluster: Cluster
    output: str  # what the apply block printed
    seconds: float  # from apply to every pod Ready

    @property
    def socket(self) -> str:
        return socket_of(self.overlay)

    @property
    def name(self) -> str:
        return name_of(self.overlay)

    @property
    def variables(self) -> dict[str, str]:
        """The docs' table's row for the overlay."""
        return {"OVERLAY": self.overlay, "DAEMONSET": self.name, "SOCKET": self.socket}


@pytest.fixture(scope="module", params=OVERLAYS)
def deployed(request: pytest.FixtureRequest, node: Cluster) -> Iterator[Deployed]:
    """The docs' apply block for one overlay, on the kubelet the variant is for; their delete
    block after, and its pod gone, so the next variant may take the socket."""
    overlay = request.param
    node.node.set_pods_api(overlay == "bridge")
    row = {"OVERLAY": overlay, "DAEMONSET": name_of(overlay), "SOCKET": socket_of(overlay)}
    started = time.monotonic()
    try:
        output = run_doc(node, APPLY, **row)
        yield Deployed(overlay, node, output, time.monotonic() - started)
    finally:
        run_doc(node, "deployed", **row)
        node.wait(lambda: not _daemon_pods(node, row["DAEMONSET"]), f"{row['DAEMONSET']}'s pod gone")


def _daemon_pods(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    out = cluster.kubectl("-n", "kube-system", "get", "pods", "-o", "json").stdout
    return [
        pod
        for pod in json.loads(out)["items"]
        if any(ref.get("name") == name for ref in pod["metadata"].get("ownerReferences", []))
    ]


def test_image_pod_becomes_ready_through_its_own_probes_with_overlay(deployed: Deployed) -> None:
    """The apply block (the fixture) waited for the rollout; its logs are pods-api's JSON lines,
    and `pods-api check` in the pod answered (exit 0)."""
    log_lines = [line for line in deployed.output.splitlines() if line.startswith("{")]
    assert log_lines and all("level" in json.loads(line) for line in log_lines), deployed.output
    (pod,) = _daemon_pods(deployed.cluster, deployed.name)
    conditions = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert conditions["Ready"] == "True"
    (status,) = pod["status"]["containerStatuses"]
    assert status["imageID"] and status["image"].endswith(f"pods-api:{TAG}")
    assert status["restartCount"] == 0, "it became Ready without being restarted by its liveness probe"
    spec = pod["spec"]["containers"][0]
    assert spec["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    print(f"{deployed.overlay}: apply to Ready {deployed.seconds:.1f} s")


def test_image_answers_check_and_get_pods_on_the_host_socket_with_overlay(deployed: Deployed) -> None:
    """The docs' block on the node: check and get pods on the hostPath socket, and the API
    server's pods of the node beside them, both naming the static pod."""
    output = run_doc(deployed.cluster, ANSWERS, **deployed.variables)
    assert output.count(f"static-web-{NODE}") == 2, output  # pods-api's table, then kubectl's


def test_image_serves_exactly_the_node_s_pods_by_uid_with_overlay(deployed: Deployed) -> None:
    everything, overlay, cluster = deployed.overlay in SERVES_ALL, deployed.overlay, deployed.cluster

    def both() -> tuple[set[str], set[str]]:
        return comparable(expected(cluster, everything), overlay), comparable(
            served(deployed.socket), overlay
        )

    def agreed() -> tuple[set[str], set[str]] | None:
        want, got = both()
        return (want, got) if want == got else None

    try:
        want, got = cluster.wait(agreed, f"{overlay} serving the node's pods", 60)
    except AssertionError:
        want, got = both()
        raise AssertionError(f"{overlay}: missing {want - got}, extra {got - want}") from None
    assert len(want) >= (4 if everything else 1)  # the Deployment's 2, pods-api's own, the static pod


@pytest.mark.parametrize("deployed", ["apiserver"], indirect=True)
def test_image_apiserver_overlay_rbac_is_enough_and_no_more(deployed: Deployed) -> None:
    """The docs' `kubectl auth can-i --list` for the ServiceAccount, less what every account may
    (the same for one with no binding), is pods' get, list and watch alone."""

    def rules(output: str) -> set[str]:
        return {" ".join(line.split()) for line in output.splitlines()[1:]}

    granted = rules(run_doc(deployed.cluster, RBAC))
    nobody = "system:serviceaccount:kube-system:nobody"
    everyone = rules(deployed.cluster.kubectl("auth", "can-i", "--list", f"--as={nobody}").stdout)
    assert granted - everyone == {"pods [] [] [get list watch]"}


@pytest.mark.parametrize("deployed", ["apiserver"], indirect=True)
def test_image_rolling_update_with_the_apiserver_overlay_is_told_and_converges(deployed: Deployed) -> None:
    """The docs' rolling update to a new tag, while a watcher that reconnects as a node agent
    does holds the node's pods: its stream ends with the status pods-api tells every watcher when
    it stops (docs/grpc-api.md), and its next stream's snapshot holds the node's pods again, the
    new pods-api pod for the old."""
    cluster, socket = deployed.cluster, deployed.socket
    recorder = Recorder(f"unix:{socket}")
    try:
        recorder.wait(lambda event: event.type == SYNCED)
        before = set(held(recorder.events))
        new = f"pods-api:{NEXT_TAG}"
        run_doc(cluster, ROLL, IMAGE=new, **deployed.variables)
        (pod,) = _daemon_pods(cluster, deployed.name)
        assert pod["spec"]["containers"][0]["image"] == new
        end = recorder.wait(lambda event: bool(event.end))
        again = recorder.wait(lambda event: event.type == SYNCED and event.stream > end.stream, ROLL_TIMEOUT)
        assert end.end == f"UNAVAILABLE: {SHUTDOWN}"
        after = set(held(recorder.since(0)))
        assert after == set(served(socket)) == set(expected(cluster, True))
        assert len(before ^ after) == 2, "exactly the pods-api pod was replaced"
        print(f"rolling update: watch gap {again.at - end.at:.2f} s (stream ended to resynced)")
    finally:
        recorder.close()


@pytest.mark.parametrize("deployed", ["standalone"], indirect=True)
def test_image_a_labelled_bridge_node_keeps_the_standalone_overlay_off(deployed: Deployed) -> None:
    """The docs' label and patch: the standalone's DaemonSet schedules nothing on the labelled
    node, and its pod there goes; the label is taken off after."""
    cluster = deployed.cluster
    try:
        run_doc(cluster, LABEL, **deployed.variables)
        cluster.wait(lambda: not _daemon_pods(cluster, deployed.name), "the standalone's pod gone")
        status = cluster.get("/apis/apps/v1/namespaces/kube-system/daemonsets/pods-api")
        assert status is not None and status["status"]["desiredNumberScheduled"] == 0
    finally:
        cluster.kubectl("label", "node", NODE, "pods-api.io/variant-")


def test_a_kustomization_of_your_own_points_an_overlay_at_your_registry(tmp_path: Path) -> None:
    """The docs' own kustomization, beside a deploy/ (a link to the checkout's), renders the
    overlay with the registry's image."""
    (tmp_path / "deploy").symlink_to(ROOT / "deploy")
    output = run_doc(None, REGISTRY, CWD=str(tmp_path))
    assert output.split() == ["image:", "registry.example/pods-api:0.2.0"]
