"""A real containerd for the tests, in a temporary directory, and a kubelet's-eye CRI client.

The test suite starts its own containerd (its own root, state, sockets and runc root, the CRI
plugin on, snapshotter `native`), imports an image built here from Debian's busybox-static as an
OCI-layout tarball (no registry is ever contacted), and drives it over CRI the way the kubelet
does: RunPodSandbox, CreateContainer, StartContainer, with the kubelet's labels and annotations
(pkg/kubelet/kuberuntime/labels.go). Pods use the host network, so no CNI is needed.

Facts about these machines that shape the config: the sandbox lacks CAP_SYS_RESOURCE, so the CRI
plugin needs `restrict_oom_score_adj = true` (otherwise runc fails with "can't get final child's
PID from pipe"); overlayfs snapshots do not work here, `native` does; CRI turns `local/x` into
`docker.io/local/x`, so the image is imported under its full name.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import platform
import shutil
import subprocess
import tarfile
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from daemon import Unavailable, spawn, terminate, wait_answering
from netns import NetNs

from pods_api.sources.cri.pb import cri_runtime_v1_pb2 as cri
from pods_api.sources.cri.pb import cri_runtime_v1_pb2_grpc as cri_grpc

IMAGE = "docker.io/local/busybox:1"
BUSYBOX = Path("/bin/busybox")
# A safety net for waits on containerd itself (start, stop); each ends on an event long before.
TIMEOUT = 30.0
# busybox applets the test containers use, as /bin symlinks.
APPLETS = ("sh", "sleep", "true", "false", "echo", "cat")


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _tar_add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def busybox_layer() -> bytes:
    """One uncompressed layer: /bin/busybox and symlinks to it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in ("bin", "tmp"):
            info = tarfile.TarInfo(directory)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755 if directory == "bin" else 0o1777
            tar.addfile(info)
        info = tarfile.TarInfo("bin/busybox")
        data = BUSYBOX.read_bytes()
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
        for applet in APPLETS:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
    return buf.getvalue()


def oci_archive(name: str) -> bytes:
    """An OCI image layout tarball holding one image, `name`, whose default command sleeps (it is
    also the sandbox image, so it must run until killed)."""
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    layer = busybox_layer()
    config = json.dumps(
        {
            "architecture": arch,
            "os": "linux",
            "config": {"Cmd": ["/bin/sleep", "2147483647"], "Env": ["PATH=/bin"]},
            "rootfs": {"type": "layers", "diff_ids": [_digest(layer)]},
        }
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": _digest(config),
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": _digest(layer),
                    "size": len(layer),
                }
            ],
        }
    ).encode()
    index = json.dumps(
        {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": _digest(manifest),
                    "size": len(manifest),
                    "platform": {"architecture": arch, "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
                    },
                }
            ],
        }
    ).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _tar_add(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        _tar_add(tar, "index.json", index)
        for blob in (layer, config, manifest):
            _tar_add(tar, f"blobs/sha256/{_digest(blob).split(':')[1]}", blob)
    return buf.getvalue()


def _config(root: Path) -> str:
    return f"""version = 2
root = "{root}/root"
state = "{root}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.overlayfs"]

[grpc]
  address = "{root}/containerd.sock"

[ttrpc]
  address = "{root}/containerd.sock.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  sandbox_image = "{IMAGE}"
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{root}/cni/bin"
    conf_dir = "{root}/cni/conf"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "{root}/runc"
"""


@dataclass
class Containerd:
    """One containerd process in `root`; restartable, keeping its state (as on a node). With
    `netns`, it runs there: so do its host-network pods, and its CNI plugins make the pods'
    network there (the cluster lab's node)."""

    root: Path
    proc: subprocess.Popen[bytes] | None = None
    netns: NetNs | None = None

    @property
    def socket(self) -> Path:
        return self.root / "containerd.sock"

    @property
    def log(self) -> Path:
        return self.root / "containerd.log"

    def start(self) -> None:
        config = self.root / "config.toml"
        if not config.exists():
            for sub in ("cni/bin", "cni/conf", "runc"):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
            config.write_text(_config(self.root))
        args = ["containerd", "--config", str(config)]
        self.proc = spawn(self.netns.enter(args) if self.netns else args, self.log)
        wait_answering(self.proc, self.socket, self._answers, "containerd's CRI", self.log, TIMEOUT)

    def _answers(self) -> bool:
        try:
            with self.channel() as channel:
                cri_grpc.RuntimeServiceStub(channel).Version(cri.VersionRequest(), timeout=2)
            return True
        except grpc.RpcError:
            return False

    def stop(self) -> None:
        """SIGTERM, as systemd stops it; containers keep running under their shims."""
        terminate(self.proc, TIMEOUT)
        self.proc = None

    def channel(self) -> grpc.Channel:
        return grpc.insecure_channel(f"unix:{self.socket}")

    def remove_everything(self) -> None:
        """Stop and remove every pod sandbox (and so every container and shim)."""
        with self.channel() as channel:
            Kubelet(channel).remove_everything()

    def power_cycle(self) -> None:
        """A node's power cycle as containerd sees it: every sandbox gone (the processes die, the
        state directory is a tmpfs on a node), the daemon started again; images stay (disk)."""
        self.remove_everything()
        self.stop()
        shutil.rmtree(self.root / "state", ignore_errors=True)
        self.start()

    def ctr(self, *args: str, stdin: bytes | None = None) -> None:
        result = subprocess.run(
            ["ctr", "--address", str(self.socket), "-n", "k8s.io", *args],
            input=stdin,
            capture_output=True,
            timeout=TIMEOUT,
        )
        if result.returncode != 0:
            raise Unavailable(f"ctr {' '.join(args)}: {result.stderr.decode(errors='replace').strip()}")

    def import_image(self, name: str = IMAGE) -> None:
        archive = self.root / "busybox-oci.tar"
        archive.write_bytes(oci_archive(name))
        self.ctr("images", "import", "--snapshotter", "native", str(archive))


def unavailable_reason() -> str | None:
    """Why containerd cannot be run here at all, or None."""
    for tool in ("containerd", "ctr", "runc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (.ci/run installs containerd, runc and busybox-static)"
    if not BUSYBOX.exists():
        return f"{BUSYBOX} is missing (Debian package busybox-static)"
    with BUSYBOX.open("rb") as binary:
        if b"/ld-linux" in binary.read(4096):  # an ELF interpreter: dynamically linked
            return f"{BUSYBOX} is not statically linked (install busybox-static, not busybox)"
    if os.geteuid() != 0:
        return "containerd needs root"
    return None


@contextlib.contextmanager
def running(root: Path) -> Iterator[Containerd]:
    """Start containerd in `root` with the image imported; stop it and every pod it ran."""
    reason = unavailable_reason()
    if reason:
        raise Unavailable(reason)
    daemon = Containerd(root)
    daemon.start()
    try:
        daemon.import_image()
        yield daemon
    finally:
        if daemon.proc is None:
            with contextlib.suppress(Unavailable):
                daemon.start()
        with contextlib.suppress(grpc.RpcError), daemon.channel() as channel:
            Kubelet(channel).remove_everything()
        daemon.stop()
        # Shims outlive containerd by design; the pods are gone, so they exit on their own.


@pytest.fixture(scope="session")
def runtime() -> Iterator[Containerd]:
    """One containerd for the whole session (a plugin fixture: every module shares it)."""
    root = Path(tempfile.mkdtemp(prefix="pods-api-containerd-"))
    try:
        with running(root) as daemon:
            yield daemon
    except Unavailable as exc:
        pytest.skip(f"containerd cannot run here: {exc}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def kubelet(runtime: Containerd) -> Iterator[Kubelet]:
    """The kubelet's side of CRI, on a runtime with no pods left from another test."""
    if runtime.proc is None:
        runtime.start()
    with runtime.channel() as channel:
        kubelet = Kubelet(channel)
        kubelet.remove_everything()
        yield kubelet
        kubelet.remove_everything()


# -- acting as the kubelet ----------------------------------------------------------------------

POD_UID = "io.kubernetes.pod.uid"
POD_NAME = "io.kubernetes.pod.name"
POD_NAMESPACE = "io.kubernetes.pod.namespace"
CONTAINER_NAME = "io.kubernetes.container.name"


@dataclass
class PodRef:
    uid: str
    name: str
    namespace: str
    sandbox_id: str
    config: cri.PodSandboxConfig


class Kubelet:
    """The CRI calls the kubelet makes, with its labels and annotations."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.stub = cri_grpc.RuntimeServiceStub(channel)

    def run_pod(
        self,
        name: str,
        namespace: str = "default",
        *,
        uid: str | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        attempt: int = 0,
    ) -> PodRef:
        uid = uid or str(uuid.uuid4())
        host = cri.NamespaceOption(network=cri.NODE, pid=cri.CONTAINER, ipc=cri.POD)
        config = cri.PodSandboxConfig(
            metadata=cri.PodSandboxMetadata(name=name, uid=uid, namespace=namespace, attempt=attempt),
            labels={**(labels or {}), POD_NAME: name, POD_NAMESPACE: namespace, POD_UID: uid},
            annotations=annotations or {},
            log_directory=f"/tmp/pods-api-test-logs/{namespace}_{name}_{uid}",
            linux=cri.LinuxPodSandboxConfig(
                security_context=cri.LinuxSandboxSecurityContext(namespace_options=host)
            ),
        )
        response = self.stub.RunPodSandbox(cri.RunPodSandboxRequest(config=config), timeout=TIMEOUT)
        return PodRef(uid, name, namespace, response.pod_sandbox_id, config)

    def start_container(
        self,
        pod: PodRef,
        name: str,
        command: list[str],
        *,
        restart_count: int = 0,
        kind: str = "container",
        mounts: list[cri.Mount] | None = None,
        annotations: dict[str, str] | None = None,
        resources: cri.LinuxContainerResources | None = None,
    ) -> str:
        cid = self.create_container(
            pod,
            name,
            command,
            restart_count=restart_count,
            kind=kind,
            mounts=mounts,
            annotations=annotations,
            resources=resources,
        )
        self.stub.StartContainer(cri.StartContainerRequest(container_id=cid), timeout=TIMEOUT)
        return cid

    def create_container(
        self,
        pod: PodRef,
        name: str,
        command: list[str],
        *,
        restart_count: int = 0,
        kind: str = "container",
        mounts: list[cri.Mount] | None = None,
        annotations: dict[str, str] | None = None,
        resources: cri.LinuxContainerResources | None = None,
    ) -> str:
        """`annotations` are added to (and replace) the kubelet's own for a container;
        `resources` are the cgroup settings the kubelet derives from the spec's resources."""
        host = cri.NamespaceOption(network=cri.NODE, pid=cri.CONTAINER, ipc=cri.POD)
        config = cri.ContainerConfig(
            metadata=cri.ContainerMetadata(name=name, attempt=restart_count),
            image=cri.ImageSpec(image=IMAGE, user_specified_image=IMAGE),
            command=command[:1],
            args=command[1:],
            labels={POD_NAME: pod.name, POD_NAMESPACE: pod.namespace, POD_UID: pod.uid, CONTAINER_NAME: name},
            annotations={
                "io.kubernetes.container.hash": "1",
                "io.kubernetes.container.restartCount": str(restart_count),
                "io.kubernetes.container.terminationMessagePath": "/dev/termination-log",
                "io.kubernetes.container.terminationMessagePolicy": "File",
                "io.kubernetes.pod.terminationGracePeriod": "30",
                "io.kubernetes.container.type": kind,
                **(annotations or {}),
            },
            mounts=mounts or [],
            log_path=f"{name}/{restart_count}.log",
            linux=cri.LinuxContainerConfig(
                resources=resources,
                security_context=cri.LinuxContainerSecurityContext(namespace_options=host),
            ),
        )
        request = cri.CreateContainerRequest(
            pod_sandbox_id=pod.sandbox_id, config=config, sandbox_config=pod.config
        )
        return str(self.stub.CreateContainer(request, timeout=TIMEOUT).container_id)

    def remove_container(self, container_id: str) -> None:
        """Stop and remove a container, as the kubelet's container GC (or a crash of the
        runtime's state) would leave a pod without it."""
        self.stub.StopContainer(
            cri.StopContainerRequest(container_id=container_id, timeout=0), timeout=TIMEOUT
        )
        # StopContainer can answer before containerd has recorded the exit, and RemoveContainer
        # then refuses ("container is still running"): wait for the exited state, as the
        # kubelet's GC only removes exited containers.
        deadline = time.monotonic() + TIMEOUT
        while self.status(container_id).state != cri.CONTAINER_EXITED:
            if time.monotonic() > deadline:
                raise AssertionError(f"container {container_id} did not exit within {TIMEOUT} s")
            time.sleep(0.02)
        self.stub.RemoveContainer(cri.RemoveContainerRequest(container_id=container_id), timeout=TIMEOUT)

    def status(self, container_id: str) -> cri.ContainerStatus:
        request = cri.ContainerStatusRequest(container_id=container_id)
        return self.stub.ContainerStatus(request, timeout=TIMEOUT).status

    def sandbox_created_at(self, pod: PodRef) -> int:
        request = cri.PodSandboxStatusRequest(pod_sandbox_id=pod.sandbox_id)
        return int(self.stub.PodSandboxStatus(request, timeout=TIMEOUT).status.created_at)

    def stop_pod(self, pod: PodRef | str) -> None:
        sandbox_id = pod if isinstance(pod, str) else pod.sandbox_id
        self.stub.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=TIMEOUT)

    def remove_pod(self, pod: PodRef | str) -> None:
        self.stop_pod(pod)
        sandbox_id = pod if isinstance(pod, str) else pod.sandbox_id
        self.stub.RemovePodSandbox(cri.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=TIMEOUT)

    def remove_everything(self) -> None:
        for sandbox in self.stub.ListPodSandbox(cri.ListPodSandboxRequest(), timeout=TIMEOUT).items:
            self.remove_pod(sandbox.id)
