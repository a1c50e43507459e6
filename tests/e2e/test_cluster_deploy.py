"""The image built from the repository's Dockerfile (tests/support/image.py), imported into the
cluster lab's node (tests/support/cluster.py), and each of deploy/'s overlays applied to it with
`kubectl apply -k`, unchanged, as docs/deploying.md tells an operator to:

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
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import image
import pytest
from cluster import KUBELET_ROOT, Cluster
from containerd import IMAGE
from daemon import Unavailable
from realkubelet import NODE, static_pod
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
# Apply to Ready: the pod's sandbox, the image's native snapshot (a copy of ~200 MB), Python's
# start and the first sync, then a startup probe every 2 s: seconds idle, more on 2 loaded cores.
READY_TIMEOUT = 300.0
# A rolling update: the old pod's SIGTERM and removal, the new one's start and probes.
ROLL_TIMEOUT = 300.0


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


def workload() -> dict[str, Any]:
    labels = {"app": "web"}
    container = {"name": "main", "image": IMAGE, "imagePullPolicy": "Never", "command": ["sleep", "3600"]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NAMESPACE},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [container]},
            },
        },
    }


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
    real_cluster.apply(workload())
    return real_cluster


@dataclass
class Deployed:
    overlay: str
    cluster: Cluster
    applied_at: float
    ready_at: float = 0.0
    notes: dict[str, float] = field(default_factory=dict)

    @property
    def socket(self) -> str:
        return socket_of(self.overlay)

    @property
    def name(self) -> str:
        return name_of(self.overlay)


@pytest.fixture(scope="module", params=OVERLAYS)
def deployed(request: pytest.FixtureRequest, node: Cluster) -> Iterator[Deployed]:
    """`kubectl apply -k deploy/overlays/<overlay>`, on the kubelet the variant is for; deleted
    after, and its pod gone, so the next variant may take the socket."""
    overlay = request.param
    node.node.set_pods_api(overlay == "bridge")
    started = time.monotonic()
    node.kubectl("apply", "-k", str(ROOT / "deploy" / "overlays" / overlay))
    done = Deployed(overlay, node, started)
    try:
        node.kubectl(
            "-n",
            "kube-system",
            "rollout",
            "status",
            f"daemonset/{done.name}",
            f"--timeout={READY_TIMEOUT:.0f}s",
        )
        done.ready_at = time.monotonic()
        yield done
    finally:
        node.kubectl("delete", "-k", str(ROOT / "deploy" / "overlays" / overlay), "--wait=true")
        node.wait(lambda: not _daemon_pods(node, done.name), f"{done.name}'s pod gone")


def _daemon_pods(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    out = cluster.kubectl("-n", "kube-system", "get", "pods", "-o", "json").stdout
    return [
        pod
        for pod in json.loads(out)["items"]
        if any(ref.get("name") == name for ref in pod["metadata"].get("ownerReferences", []))
    ]


def test_image_pod_becomes_ready_through_its_own_probes_with_overlay(deployed: Deployed) -> None:
    (pod,) = _daemon_pods(deployed.cluster, deployed.name)
    conditions = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert conditions["Ready"] == "True"
    (status,) = pod["status"]["containerStatuses"]
    assert status["imageID"] and status["image"].endswith(f"pods-api:{TAG}")
    assert status["restartCount"] == 0, "it became Ready without being restarted by its liveness probe"
    spec = pod["spec"]["containers"][0]
    assert spec["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    print(f"{deployed.overlay}: apply to Ready {deployed.ready_at - deployed.applied_at:.1f} s")


def test_image_answers_check_and_get_pods_on_the_host_socket_with_overlay(deployed: Deployed) -> None:
    check = subprocess.run(
        [PODS_API, "check", "--socket", deployed.socket], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr
    got = subprocess.run(
        [PODS_API, "get", "pods", "--socket", deployed.socket], capture_output=True, text=True, timeout=60
    )
    assert got.returncode == 0, got.stdout + got.stderr
    assert f"static-web-{NODE}" in got.stdout


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
    cluster = deployed.cluster

    def rules(user: str) -> set[str]:
        out = cluster.kubectl("auth", "can-i", "--list", f"--as={user}", "-n", "kube-system").stdout
        return {" ".join(line.split()) for line in out.splitlines()[1:]}

    granted = rules("system:serviceaccount:kube-system:pods-api")
    everyone = rules("system:serviceaccount:kube-system:nobody")  # what every account may
    assert granted - everyone == {"pods [] [] [get list watch]"}


@pytest.mark.parametrize("deployed", ["apiserver"], indirect=True)
def test_image_rolling_update_with_the_apiserver_overlay_is_told_and_converges(deployed: Deployed) -> None:
    cluster, socket = deployed.cluster, deployed.socket
    watcher = Watcher(socket)
    watcher.start()
    watcher.synced.wait(60)
    assert watcher.synced.is_set(), watcher.errors
    before = watcher.uids()
    new = f"pods-api:{NEXT_TAG}"
    cluster.kubectl("-n", "kube-system", "set", "image", f"daemonset/{deployed.name}", f"pods-api={new}")
    cluster.kubectl(
        "-n",
        "kube-system",
        "rollout",
        "status",
        f"daemonset/{deployed.name}",
        f"--timeout={ROLL_TIMEOUT:.0f}s",
    )
    (pod,) = _daemon_pods(cluster, deployed.name)
    assert pod["spec"]["containers"][0]["image"] == new
    watcher.resynced.wait(60)
    watcher.stop()
    # Told, not cut: the status pods-api sends every watcher when it is stopped (docs/grpc-api.md).
    assert (watcher.ended, watcher.told) == (grpc.StatusCode.UNAVAILABLE, SHUTDOWN), watcher.errors
    assert watcher.resynced.is_set(), watcher.errors
    # Converged: what it holds after is what is served, the new pods-api pod in, the old out.
    after = watcher.uids()
    assert after == set(served(socket)) == set(expected(cluster, True))
    assert len(before ^ after) == 2, "exactly the pods-api pod was replaced"
    print(f"rolling update: watch gap {watcher.gap:.2f} s (stream ended to resynced)")


class Watcher(threading.Thread):
    """A kubelet-contract WatchPods client that reconnects as a node agent does: on a stream's
    end it retries the socket until a new stream has sent its INITIAL_SYNC_COMPLETE."""

    def __init__(self, socket: str) -> None:
        super().__init__(daemon=True)
        self.socket = socket
        self.held: dict[str, dict[str, Any]] = {}
        self.synced = threading.Event()
        self.resynced = threading.Event()
        self.ended: grpc.StatusCode | None = None
        self.told = ""
        self.ended_at = 0.0
        self.gap = 0.0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def uids(self) -> set[str]:
        with self._lock:
            return set(self.held)

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        while not self._stop.is_set() and not self.resynced.is_set():
            try:
                self._stream()
            except grpc.RpcError as exc:
                if self.ended is None and self.synced.is_set():
                    self.ended, self.told = exc.code(), exc.details()
                    self.ended_at = time.monotonic()
                self.errors.append(f"{exc.code().name}: {exc.details()}")
                time.sleep(0.2)  # a reconnect's pause, as a client's backoff

    def _stream(self) -> None:
        with grpc.insecure_channel(f"unix:{self.socket}") as channel:
            snapshot: dict[str, dict[str, Any]] = {}
            for event in api_grpc.PodsStub(channel).WatchPods(api.WatchPodsRequest()):
                if event.type == api.INITIAL_SYNC_COMPLETE:
                    with self._lock:
                        self.held = snapshot
                    if self.synced.is_set():
                        self.gap = time.monotonic() - self.ended_at
                        self.resynced.set()
                        return
                    self.synced.set()
                    continue
                pod = pod_from_bytes(event.pod)
                with self._lock:  # after the sync, snapshot is what it holds
                    if event.type == api.DELETED:
                        snapshot.pop(pod["metadata"]["uid"], None)
                    else:
                        snapshot[pod["metadata"]["uid"]] = pod
                if self._stop.is_set():
                    return
