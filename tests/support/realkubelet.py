"""The real kubelet (v1.37.2, built from the Go module proxy) on this machine, the reference every
fidelity claim rests on: standalone (no API server), its Pods API on a UNIX socket, static pods
from a directory, run in a containerd of its own (tests/support/containerd.py).

What it takes from the machine, and gives back (../shared/k8s/real-kubelet.md has the facts):
- It sets `vm.overcommit_memory`, `kernel.panic` and `kernel.panic_on_oops` at start-up: they are
  saved before it starts and restored after, on every exit path (fixture teardown, atexit,
  SIGTERM/SIGHUP).
- It writes outside its root: `/var/lib/kubelet/device-plugins/` (a hard-coded path, so one such
  kubelet per machine: a machine-wide flock under /run, which other sessions wait for),
  `/var/log/containers/` symlinks, and containerd's shim sockets in `/run/containerd/s/`. What it
  made there is removed; nothing else is touched.
- Only processes it started (kubelet, containerd) are ended, by their PID.

Binaries are built once into a cache kept between runs (keyed by go.sum and the version
ldflags), so a second session relinks nothing. Without go, root, containerd or runc the tests
skip saying why; with go, a build that fails is a test failure (as tests/support/gobuild.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from containerd import IMAGE, Containerd, unavailable_reason
from daemon import Unavailable, flock, log_tail, once, spawn, terminate, undone_on_exit, wait_answering
from gobuild import GO_ROOT, find_go
from podrecorder import list_pods

from pods_api.core.api.codec import pod_from_bytes
from pods_api.sources.cri.pb import cri_runtime_v1_pb2 as cri
from pods_api.sources.cri.pb import cri_runtime_v1_pb2_grpc as cri_grpc

MODULE = GO_ROOT / "node"
# The node name the kubelet is given (--hostname-override); tests/support/serve.py starts
# pods-api with the same, so the standalone mode names static pods as the kubelet does.
NODE = "node-1"
KERNEL = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops")
LOCK = Path("/run/pods-api-tests-kubelet.lock")
# Another session's kubelet scenario takes a few minutes; a queue of them, more. Waiting is
# right (the machine allows one kubelet); failing would only punish the later session.
LOCK_TIMEOUT = 1800.0
# A cold build of the kubelet is ~8 minutes on 2 cores shared with others: room for 3x that.
BUILD_TIMEOUT = 1800.0
# The kubelet's start-up to its sources being ready is a few seconds; a loaded machine stretches
# it. Every wait for the kubelet's state is bounded by this unless it says otherwise.
TIMEOUT = 60.0
# How often ListPods is polled while waiting for a state (the kubelet's own rate limit is 100/s).
POLL = 0.2
DEVICE_PLUGINS = Path("/var/lib/kubelet/device-plugins")
CONTAINER_LOGS = Path("/var/log/containers")
SHIM_SOCKETS = Path("/run/containerd/s")


# -- building ----------------------------------------------------------------------------------


def _version() -> str:
    for line in (MODULE / "go.mod").read_text().splitlines():
        words = line.split()
        if words[:1] == ["k8s.io/kubernetes"] or words[:2] == ["require", "k8s.io/kubernetes"]:
            return words[-1]
    raise AssertionError(f"{MODULE / 'go.mod'} requires no k8s.io/kubernetes")


def _ldflags(version: str) -> str:
    """Without the version stamped in, the kubelet calls itself v0.0.0-master."""
    major, minor = version.lstrip("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    return f"-s -w -X {pkg}.gitVersion={version} -X {pkg}.gitMajor={major} -X {pkg}.gitMinor={minor}"


def cache_dir() -> Path:
    """Where built binaries live between sessions, one directory per go.sum and ldflags."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pods-api-tests" / "node"
    key = hashlib.sha256((MODULE / "go.sum").read_bytes() + _ldflags(_version()).encode()).hexdigest()
    return base / key[:16]


def binary(command: str = "kubelet") -> Path:
    """k8s.io/kubernetes/cmd/<command> (or, for `./cmd/<name>`, that package of tests/go/node),
    built once into the cache as <name> (a session waits for another that is building it); go
    missing is Unavailable (a skip), a failed build an AssertionError."""
    out = cache_dir()
    local = command.startswith("./")
    package = command if local else f"k8s.io/kubernetes/cmd/{command}"
    command = command.rstrip("/").rsplit("/", 1)[-1]
    if local:  # its own source is not in go.sum: a changed main.go is another binary
        command = f"{command}-{_source_hash(MODULE / package)}"
    path = out / command
    if path.exists():
        return path
    go_binary = find_go()
    if go_binary is None:
        raise Unavailable(f"go is not installed (.ci/run installs it): {command} cannot be built")
    out.mkdir(parents=True, exist_ok=True)
    with flock(out / ".build.lock", BUILD_TIMEOUT, f"building {command}"):
        if path.exists():  # built by the session that held the lock
            return path
        partial = out / f".{command}.partial"
        env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}
        args = [go_binary, "build", "-trimpath", "-ldflags", _ldflags(_version()), "-o", str(partial)]
        done = subprocess.run(
            [*args, package], cwd=MODULE, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT
        )
        if done.returncode != 0:
            raise AssertionError(f"go build {package} failed:\n{done.stdout}{done.stderr}")
        partial.rename(path)
    return path


def _source_hash(package: Path) -> str:
    digest = hashlib.sha256()
    for source in sorted(package.rglob("*.go")):
        digest.update(source.read_bytes())
    return digest.hexdigest()[:12]


# -- what the kubelet changes outside its root -------------------------------------------------


@dataclass
class Machine:
    """The machine-wide things the kubelet changes, saved before it starts; `restore()` (safe to
    call more than once, from a signal handler too) gives them back."""

    kernel: dict[str, str] = field(default_factory=dict)
    device_plugins_before: set[str] = field(default_factory=set)
    created_dirs: list[Path] = field(default_factory=list)
    logs_dir: Path | None = None
    shim_sockets: set[Path] = field(default_factory=set)
    restored: bool = False

    def save(self, logs_dir: Path) -> None:
        self.logs_dir = logs_dir
        for key in KERNEL:
            self.kernel[key] = (Path("/proc/sys") / key).read_text().strip()
        for directory in (
            DEVICE_PLUGINS.parent,
            DEVICE_PLUGINS,
            CONTAINER_LOGS,
            SHIM_SOCKETS.parent,
            SHIM_SOCKETS,
        ):
            if not directory.exists():
                self.created_dirs.append(directory)
        if DEVICE_PLUGINS.exists():
            self.device_plugins_before = {p.name for p in DEVICE_PLUGINS.iterdir()}

    def restore(self) -> None:
        if self.restored:
            return
        self.restored = True
        for key, value in self.kernel.items():
            with contextlib.suppress(OSError):
                (Path("/proc/sys") / key).write_text(value)
        if DEVICE_PLUGINS.exists():
            for entry in DEVICE_PLUGINS.iterdir():
                if entry.name not in self.device_plugins_before:
                    _remove(entry)
        if CONTAINER_LOGS.exists() and self.logs_dir is not None:
            for link in CONTAINER_LOGS.iterdir():
                if link.is_symlink() and os.readlink(link).startswith(str(self.logs_dir)):
                    link.unlink()
        for socket in self.shim_sockets:
            socket.unlink(missing_ok=True)
        for directory in reversed(self.created_dirs):  # deepest first
            with contextlib.suppress(OSError):
                directory.rmdir()  # only if empty: someone else may have put something there


def unmount_under(root: Path) -> None:
    """Unmount whatever is mounted under root, deepest first: the kubelet bind-mounts its root dir
    onto itself (to share mount propagation), and a killed runtime can leave pods' mounts."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        if point == str(root) or point.startswith(f"{root}/"):
            points.append(point)
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", point], capture_output=True, check=False)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def shim_socket(containerd_socket: Path, sandbox_id: str) -> Path:
    """The socket containerd 1.6's runc shim listens on for a pod: sha256 of the daemon's address,
    the namespace and the sandbox (the shim's group), under /run/containerd/s/ whatever the
    daemon's own state directory."""
    digest = hashlib.sha256(f"{containerd_socket}/k8s.io/{sandbox_id}".encode()).hexdigest()
    return SHIM_SOCKETS / digest


# -- the kubelet itself ------------------------------------------------------------------------


def _config(root: Path, runtime: Containerd) -> dict[str, Any]:
    """The KubeletConfiguration that runs standalone on this machine (the facts' list): cgroup v1
    allowed, cgroupfs and no QoS cgroups, no TCP port, its paths under root."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": False,
        "enforceNodeAllocatable": [],
        "failSwapOn": False,
        "oomScoreAdj": 0,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "protectKernelDefaults": False,
        "staticPodPath": str(root / "manifests"),
        "containerRuntimeEndpoint": f"unix://{runtime.socket}",
        "podLogsDir": str(root / "logs"),
        "volumePluginDir": str(root / "volume-plugins"),
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "readOnlyPort": 0,
        "healthzPort": 0,
    }


@dataclass
class Node:
    """A kubelet and its containerd in `root` (short: the Pods API socket's path must fit 108
    bytes). Manifests are written to `manifests`, the kubelet's staticPodPath."""

    root: Path
    runtime: Containerd
    kubelet_binary: Path
    machine: Machine = field(default_factory=Machine)
    proc: subprocess.Popen[bytes] | None = None
    # The first error the Pods API answered while the kubelet started ("Kubelet is initializing"),
    # if a poll caught it before the sources were ready.
    startup_errors: list[tuple[str, str]] = field(default_factory=list)

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    @property
    def socket(self) -> Path:
        return self.root / "kubelet" / "pods-api" / "pods-api.sock"

    @property
    def target(self) -> str:
        return f"unix:{self.socket}"

    @property
    def log(self) -> Path:
        return self.root / "kubelet.log"

    # -- processes

    def start(self) -> None:
        """Start the kubelet; return once its Pods API answers ListPods (its sources are ready)."""
        config = self.root / "kubelet-config.yaml"
        config.write_text(yaml.safe_dump(self.config()))
        self.socket.unlink(missing_ok=True)
        self.proc = spawn(self.args(config), self.log)
        self.wait_started()

    def config(self) -> dict[str, Any]:
        return _config(self.root, self.runtime)

    def args(self, config: Path) -> list[str]:
        return [
            str(self.kubelet_binary),
            f"--config={config}",
            f"--root-dir={self.root / 'kubelet'}",
            f"--cert-dir={self.root / 'pki'}",
            f"--hostname-override={NODE}",
            "--enable-server=false",
        ]

    def wait_started(self) -> None:
        assert self.proc is not None
        # Short intervals: catching "Kubelet is initializing" needs an early ask.
        wait_answering(self.proc, self.socket, self._answers, "the kubelet", self.log, TIMEOUT, 0.02)

    def _answers(self) -> bool:
        """Whether ListPods answers (its sources are ready); an early refusal is kept."""
        try:
            list_pods(self.target)
            return True
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE:
                self.startup_errors.append((exc.code().name, exc.details() or ""))
            return False

    def log_tail(self, lines: int = 8) -> str:
        return log_tail(self.log, lines)

    def stop(self) -> None:
        """SIGTERM, as systemd stops it; its pods keep running in containerd."""
        terminate(self.proc, TIMEOUT)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def restart_node(self) -> None:
        """Power off and on, as the pods see it: kubelet and containerd stopped, every sandbox
        gone with containerd's state, both started again (images and the kubelet's root stay, as
        on a disk)."""
        self.stop()
        self.note_shims()
        self.runtime.power_cycle()
        self.start()

    def note_shims(self) -> None:
        """Remember the shim socket of every sandbox now in containerd, to remove at the end."""
        with contextlib.suppress(grpc.RpcError), self.runtime.channel() as channel:
            stub = cri_grpc.RuntimeServiceStub(channel)
            for sandbox in stub.ListPodSandbox(cri.ListPodSandboxRequest(), timeout=10).items:
                self.machine.shim_sockets.add(shim_socket(self.runtime.socket, sandbox.id))

    # -- manifests

    def put(self, filename: str, doc: dict[str, Any] | str) -> None:
        """Write (or replace) a manifest atomically, as an editor's rename does."""
        text = doc if isinstance(doc, str) else yaml.safe_dump(doc)
        tmp = self.manifests / f".{filename}.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.manifests / filename)

    def remove(self, filename: str) -> None:
        (self.manifests / filename).unlink()

    def wait_log(self, text: str, start: int = 0, timeout: float = TIMEOUT) -> str:
        """The first line of the kubelet's log past byte `start` that contains text: how it says
        it refused a manifest, which it announces nowhere else."""
        deadline = time.monotonic() + timeout
        while True:
            for line in self.log_since(start):
                if text in line:
                    return line
            if time.monotonic() > deadline:
                raise AssertionError(f"the kubelet logged no {text!r} within {timeout} s: {self.log_tail()}")
            time.sleep(POLL)

    def log_size(self) -> int:
        return self.log.stat().st_size

    def log_since(self, start: int) -> list[str]:
        """The kubelet's log lines past byte `start`."""
        with self.log.open("rb") as log:
            log.seek(start)
            return log.read().decode(errors="replace").splitlines()

    # -- the kubelet's state

    def pods(self) -> dict[str, dict[str, Any]]:
        """ListPods, decoded, by metadata.name."""
        return {pod["metadata"]["name"]: pod for pod in map(pod_from_bytes, list_pods(self.target))}

    def wait_pods(
        self, want: Callable[[dict[str, dict[str, Any]]], bool], what: str, timeout: float = TIMEOUT
    ) -> dict[str, dict[str, Any]]:
        """Poll ListPods until `want` accepts its pods (by name), within timeout."""
        deadline = time.monotonic() + timeout
        while True:
            pods = self.pods()
            if want(pods):
                return pods
            if time.monotonic() > deadline:
                states = {name: _state(pod) for name, pod in pods.items()}
                raise AssertionError(
                    f"the kubelet did not reach {what} within {timeout} s: {states}; "
                    f"its log ends: {log_tail(self.log, 20)}"
                )
            time.sleep(POLL)


def _state(pod: dict[str, Any]) -> str:
    """A pod's phase and each container's state, reason and restarts, as `kubectl get` sums it."""
    status = pod["status"]
    containers = [
        f"{c['name']}: {next(iter(c.get('state') or {'?': {}}))}"
        f" {next(iter((c.get('state') or {}).values()), {}).get('reason', '')}"
        f" restarts {c.get('restartCount', 0)}"
        for c in status.get("containerStatuses", [])
    ]
    return f"{status.get('phase')} [{'; '.join(containers)}]"


def static_pod(name: str, command: list[str], **spec: Any) -> dict[str, Any]:
    """A static pod the kubelet can run here: host network (no CNI) and the local image."""
    container = {"name": name, "image": IMAGE, "imagePullPolicy": "Never", "command": command}
    container |= spec.pop("container", {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": spec.pop("labels", {"app": name})},
        "spec": {"hostNetwork": True, "containers": [container], **spec},
    }


def static_name(name: str) -> str:
    """The name the kubelet serves a static pod under."""
    return f"{name}-{NODE}"


def unavailable() -> str | None:
    """Why the kubelet cannot run here at all (before building it), or None."""
    reason = unavailable_reason()
    if reason:
        return reason
    if not Path("/proc/sys/vm/overcommit_memory").exists() or not os.access(
        "/proc/sys/kernel/panic", os.W_OK
    ):
        return "the kernel settings the kubelet changes are not writable here (/proc/sys read-only)"
    return None


# -- one kubelet, everything undone --------------------------------------------------------------


@contextlib.contextmanager
def running(root: Path) -> Iterator[Node]:
    """A kubelet with its containerd in root, holding the machine's kubelet lock; everything it
    changed is undone on the way out, whether the block ends, the interpreter exits or a
    SIGTERM/SIGHUP arrives."""
    reason = unavailable()
    if reason:
        raise Unavailable(reason)
    kubelet_binary = binary("kubelet")
    with flock(LOCK, LOCK_TIMEOUT, f"a kubelet in {root}"):
        runtime = Containerd(root / "containerd")
        node = Node(root, runtime, kubelet_binary)
        node.manifests.mkdir(parents=True, exist_ok=True)
        node.machine.save(root / "logs")
        with undone_on_exit(_undoer(node)):
            runtime.start()
            runtime.import_image()
            node.start()
            yield node


def _undoer(node: Node) -> Callable[[], None]:
    @once
    def undo() -> None:
        with contextlib.suppress(Exception):
            node.stop()
        with contextlib.suppress(Exception):
            if node.runtime.proc is None:
                node.runtime.start()
            node.note_shims()
            node.runtime.remove_everything()
        with contextlib.suppress(Exception):
            node.runtime.stop()
        unmount_under(node.root)
        node.machine.restore()

    return undo


@pytest.fixture(scope="module")
def real_kubelet() -> Iterator[Node]:
    """One real kubelet per test module (its containerd with it), in a short root under /tmp."""
    root = Path(tempfile.mkdtemp(prefix="pk-", dir="/tmp"))
    try:
        with running(root) as node:
            yield node
    except Unavailable as exc:
        pytest.skip(f"the real kubelet cannot run here: {exc}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    # .ci/run builds the kubelet before pytest, so the cold build's minutes are not a test's:
    # `python tests/support/realkubelet.py [COMMAND...]` prints each cached binary's path
    # (default: the kubelet; tests/support/realapiserver.py names kube-apiserver and ./cmd/etcd).
    import sys

    for name in sys.argv[1:] or ["kubelet"]:
        print(binary(name))
