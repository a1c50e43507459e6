"""client-go's own pod informer (tests/go/clientgo: a SharedInformerFactory from a kubeconfig read
by clientcmd, as every controller builds one) against a real `pods-api serve --http-listen`.

What it proves with upstream's code, not ours: the reflector's watch-list (sendInitialEvents, the
annotated BOOKMARK that ends it) fills the store; the handlers see a change and a delete; after a
pods-api restart its resourceVersions are expired (410), the reflector relists, and the store
is again what List says. The protobuf content types the kubelet and kube-controller-manager set
(`ContentType: application/vnd.kubernetes.protobuf`, with or without AcceptContentTypes) are
answered with JSON, which client-go decodes by the response's Content-Type: it always accepts
JSON too (`application/vnd.kubernetes.protobuf, */*` when AcceptContentTypes is unset), so it never
meets the view's 406.

With exactly the file `pods-api kubeconfig` prints, loaded both ways controllers load one
(clientcmd.BuildConfigFromFlags with its path; the default loading rules from $KUBECONFIG, as
kubectl does), client-go lists and its informer follows a pod added, changed and deleted.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from kubenode import free_port, generated_kubeconfig, kubeconfig
from podfiles import add_copy
from repo import ROOT
from serve import TIMEOUT, Served, serving

pytestmark = pytest.mark.needs_go

EXAMPLES = ROOT / "examples" / "fixtures"
WEB = "web-7c9d8f6b5d-x2x9k"
WEB_FILE = f"{WEB}.yaml"
ORDERS = "orders-worker-6d5f7c9b8-q7zrt"
REPORT_FILE = "report-28755360-kx4jd.yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"

# rest.Config as the informer is configured: client-go's default; the kubelet's and
# kube-controller-manager's (--kube-api-content-type protobuf, AcceptContentTypes protobuf then
# JSON); ContentType protobuf alone, as a controller that sets only that.
CONFIGS = {
    "default": (),
    "controller": ("-content-type", PROTOBUF, "-accept", f"{PROTOBUF},application/json"),
    "protobuf-only": ("-content-type", PROTOBUF),
}

Record = dict[str, Any]


@dataclass
class Informer:
    """The Go informer's stdout, one JSON record a line; `store` asks for its store."""

    proc: subprocess.Popen[str]
    requests: list[Record] = field(default_factory=list)
    logged: list[str] = field(default_factory=list)  # klog's stderr, read so it never blocks
    _queue: queue.Queue[Record | None] = field(default_factory=queue.Queue)

    def start(self) -> None:
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._log, daemon=True).start()

    def _log(self) -> None:
        assert self.proc.stderr is not None
        self.logged.extend(self.proc.stderr)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            record = json.loads(line)
            if record["event"] == "request":
                self.requests.append(record)
            self._queue.put(record)
        self._queue.put(None)

    def wait(self, event: str, where: Callable[[Record], bool] = lambda r: True) -> Record:
        """The next record of this event that matches, skipping others."""
        while True:
            try:
                record = self._queue.get(timeout=TIMEOUT)
            except queue.Empty:
                raise AssertionError(
                    f"no {event} from the informer: {self.requests[-5:]} {self.logged[-5:]}"
                ) from None
            if record is None:
                raise AssertionError(f"the informer ended waiting for {event}: {''.join(self.logged)}")
            assert record["event"] != "error", record
            if record["event"] == event and where(record):
                return record

    def ask(self, command: str) -> Record:
        """The answer to a line on the informer's stdin (`store`, `list`)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{command}\n")
        self.proc.stdin.flush()
        return self.wait(command)

    def store(self) -> list[Record]:
        pods: list[Record] = self.ask("store")["pods"]
        return pods


@dataclass
class Node:
    tmp: Path
    fixtures: Path
    port: int
    served: Served | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def args(self) -> tuple[str, ...]:
        return (
            "--fixtures",
            str(self.fixtures),
            "--http-listen",
            f"127.0.0.1:{self.port}",
            "--heartbeat",
            "0.2",
        )

    def listed(self) -> list[Record]:
        """Our List, as the informer reports its store."""
        items = httpx.get(f"{self.url}/api/v1/pods").json()["items"]
        pods = [
            {
                "namespace": p["metadata"]["namespace"],
                "name": p["metadata"]["name"],
                "uid": p["metadata"]["uid"],
                "resourceVersion": p["metadata"]["resourceVersion"],
                "phase": p["status"].get("phase", ""),
            }
            for p in items
        ]
        return sorted(pods, key=lambda p: f"{p['namespace']}/{p['name']}")

    def get(self, namespace: str, name: str) -> Record:
        response = httpx.get(f"{self.url}/api/v1/namespaces/{namespace}/pods/{name}")
        assert response.status_code == 200, response.text
        pod: Record = response.json()
        return pod

    def set_phase(self, filename: str, old: str, new: str) -> None:
        path = self.fixtures / filename
        text = path.read_text()
        assert f"phase: {old}" in text
        tmp = path.with_name(f".{filename}.new")
        tmp.write_text(text.replace(f"phase: {old}", f"phase: {new}"))
        tmp.rename(path)  # atomically, as the docs say


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    fixtures = tmp_path / "fixtures"
    shutil.copytree(EXAMPLES, fixtures)
    node = Node(tmp_path, fixtures, free_port())
    with serving(tmp_path / "run", *node.args()) as served:
        node.served = served
        yield node


@pytest.fixture
def informer_for(go_build: Callable[[str, str], Path], node: Node) -> Iterator[Callable[..., Informer]]:
    binary = go_build("clientgo", ".")
    config = kubeconfig(node.tmp / "kubeconfig", node.port)
    started: list[Informer] = []

    def start(*flags: str, watch_list: bool = True, env: dict[str, str] | None = None) -> Informer:
        """The informer with these flags (the docs' kubeconfig unless they name one)."""
        # client-go's feature gate, read from the environment as every client-go program does.
        gate = {} if watch_list else {"KUBE_FEATURE_WatchListClient": "false"}
        named = () if "-kubeconfig" in flags or env else ("-kubeconfig", str(config))
        proc = subprocess.Popen(
            [str(binary), *named, *flags],
            env={**os.environ, **gate, **(env or {})},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        informer = Informer(proc)
        informer.start()
        started.append(informer)
        return informer

    yield start
    for informer in started:
        informer.proc.kill()
        informer.proc.wait()
        for pipe in (informer.proc.stdin, informer.proc.stdout, informer.proc.stderr):
            if pipe is not None:
                pipe.close()


def synced(informer: Informer, *, watch_list: bool = True) -> None:
    informer.wait("synced")
    first = informer.requests[0]
    assert first["path"] == "/api/v1/pods"
    if watch_list:
        # The reflector's watch-list (client-go's WatchListClient, on by default), answered 200:
        # no List was needed to fill the store.
        assert "sendInitialEvents=true" in first["query"] and "watch=true" in first["query"], first
    else:
        assert "watch=true" not in first["query"], first
    assert all(r["status"] == 200 for r in informer.requests), informer.requests


@pytest.mark.parametrize("config", CONFIGS)
def test_informer_sees_a_change_and_a_delete(
    node: Node, informer_for: Callable[..., Informer], config: str
) -> None:
    informer = informer_for(*CONFIGS[config])
    synced(informer)
    assert informer.store() == node.listed()
    for exchange in informer.requests:
        # client-go always lets the server fall back to JSON, and decodes what the response says.
        assert "application/json" in exchange["accept"] or "*/*" in exchange["accept"], exchange
        assert exchange["contentType"] == "application/json", exchange

    node.set_phase(WEB_FILE, "Running", "Failed")
    update = informer.wait("update", lambda r: r["pod"]["name"] == WEB)["pod"]
    assert update["phase"] == "Failed"
    assert update["resourceVersion"] == node.get("shop", WEB)["metadata"]["resourceVersion"]

    (node.fixtures / f"{ORDERS}.yaml").unlink()
    deleted = informer.wait("delete")["pod"]
    assert (deleted["namespace"], deleted["name"]) == ("shop", ORDERS)
    assert informer.store() == node.listed()


@pytest.mark.parametrize("watch_list", [True, False], ids=["watch-list", "list-then-watch"])
@pytest.mark.parametrize("restart", ["crash", "graceful"])
def test_informer_relists_after_a_restart(
    node: Node, informer_for: Callable[..., Informer], watch_list: bool, restart: str
) -> None:
    informer = informer_for(*CONFIGS["controller"], watch_list=watch_list)
    synced(informer, watch_list=watch_list)
    # An event on the watch first: client-go takes a watch that ends within a second with none
    # for a broken one and lists again at once, which is not the resume this is about.
    node.set_phase(WEB_FILE, "Running", "Failed")
    informer.wait("update", lambda r: r["pod"]["name"] == WEB)
    assert node.served is not None
    if restart == "crash":
        node.served.proc.kill()
        node.served.proc.wait()
    else:
        assert node.served.stop() == 0
    # While pods-api is down: one pod goes, one changes. The informer learns both only by
    # listing the new process.
    (node.fixtures / REPORT_FILE).unlink()
    node.set_phase(WEB_FILE, "Failed", "Succeeded")
    before = len(informer.requests)
    with serving(node.tmp / "run2", *node.args()) as served:
        node.served = served
        deleted = informer.wait("delete")["pod"]
        assert (deleted["namespace"], deleted["name"]) == ("batch", "report-28755360-kx4jd")
        assert informer.store() == node.listed()
        assert {p["name"]: p["phase"] for p in informer.store()}[WEB] == "Succeeded"
        if restart == "crash":
            # The reflector resumed its watch from the last resourceVersion it saw, older than
            # every revision of the new process: that watch is one ERROR 410 Expired, after
            # which client-go lists again (a list or a watch-list, NotOlderThan that version).
            answered = [r for r in informer.requests[before:] if r.get("status") == 200]
            resumed, relisted = answered[0], answered[1]
            assert "watch=true" in resumed["query"] and "sendInitialEvents" not in resumed["query"]
            old = parse_qs(resumed["query"])["resourceVersion"][0]
            assert expired_watch(node, old)
            assert "watch=true" not in relisted["query"] or "sendInitialEvents=true" in relisted["query"]


def expired_watch(node: Node, revision: str) -> bool:
    """What the view answers a watch from this resourceVersion: one ERROR 410 Expired."""
    with httpx.stream(
        "GET", f"{node.url}/api/v1/pods", params={"watch": "1", "resourceVersion": revision}
    ) as r:
        event = json.loads(next(r.iter_lines()))
    return bool(event["type"] == "ERROR" and event["object"]["code"] == 410)


# How the informer is handed the generated kubeconfig: flags, then the environment.
LOADING = {
    "BuildConfigFromFlags": lambda path: (("-kubeconfig", str(path)), {}),
    "default-loading-rules": lambda path: ((), {"KUBECONFIG": str(path)}),
}


@pytest.mark.parametrize("loading", LOADING)
def test_the_generated_kubeconfig_lists_and_informs_through_a_change(
    node: Node, informer_for: Callable[..., Informer], loading: str
) -> None:
    """The file names the plain-HTTP loopback listener, with insecure-skip-tls-verify for
    client-node's sake. clientcmd reads a cluster's TLS settings and the user's credentials only
    for a TLS server, so for this http:// one the rest.Config is the bare host: the flag is
    dropped, not honoured, and nothing would send credentials in the clear."""
    flags, env = LOADING[loading](generated_kubeconfig(node.tmp / "generated-kubeconfig", node.port))
    informer = informer_for(*flags, env=env)
    config = informer.wait("config")
    assert (config["host"], config["insecure"], config["hasCA"], config["bearer"]) == (
        node.url,
        False,
        False,
        False,
    )
    synced(informer)
    assert informer.ask("list")["pods"] == node.listed() == informer.store()

    added = "web-7c9d8f6b5d-m4p8s"
    add_copy(node.fixtures, WEB_FILE, added, "0b9d4c2e-6a1f-4e8b-9c3d-5f7a2e1b8c40")
    assert informer.wait("add", lambda r: r["pod"]["name"] == added)["pod"]["phase"] == "Running"
    node.set_phase(f"{added}.yaml", "Running", "Failed")
    update = informer.wait("update", lambda r: r["pod"]["name"] == added)["pod"]
    assert update["resourceVersion"] == node.get("shop", added)["metadata"]["resourceVersion"]
    assert update["phase"] == "Failed"
    (node.fixtures / f"{added}.yaml").unlink()
    deleted = informer.wait("delete")["pod"]
    assert (deleted["namespace"], deleted["name"]) == ("shop", added)
    assert informer.ask("list")["pods"] == node.listed() == informer.store()
    assert all(r["status"] == 200 for r in informer.requests), informer.requests
