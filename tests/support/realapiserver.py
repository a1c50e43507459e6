"""A real control plane on this machine: etcd and kube-apiserver v1.37.2 (built from the Go module
proxy by tests/support/realkubelet.py's `binary`, from tests/go/node), on loopback only, with
static token authentication (an admin token in `system:masters`) and RBAC, as
../shared/k8s/real-kubelet.md (last section) found they run here.

- etcd: one member, client and peer URLs on free 127.0.0.1 ports, data under the lab's root;
  stopping and starting it keeps its data, as a restarted etcd does.
- kube-apiserver: 127.0.0.1 on a free port (the same one across restarts), a self-signed
  serving certificate in its cert dir, service-account keys made here (an RSA key), no
  controller manager (so each namespace needs its `default` ServiceAccount made, which
  `namespace()` does). Its own etcd compaction is off (`--etcd-compaction-interval=0`): a test
  compacts when it means to (`compact()`, through etcd's JSON gateway).
- Only the processes started here are ended, by their PID, on every exit path (the block's end,
  atexit, SIGTERM/SIGHUP).

Without go, or a build that cannot happen, the tests that use it skip saying why; with go, a
failed build is a test failure (as the kubelet's).
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import orjson
import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from daemon import Unavailable, log_tail, once, spawn, terminate, undone_on_exit
from netns import NetNs
from realkubelet import binary
from tcpcut import Link

APISERVER = "kube-apiserver"
ETCD = "./cmd/etcd"
# kube-apiserver is ready in about 20 s on an idle machine (the facts); 2 cores shared with other
# test runs stretch that several times over.
READY_TIMEOUT = 180.0
# etcd answers /health within a second or two.
ETCD_TIMEOUT = 60.0
# Stopping: the API server drains its watches and requests on SIGTERM for a few seconds.
STOP_TIMEOUT = 60.0
# How often a starting daemon is asked whether it is ready (neither notifies without systemd).
POLL = 0.2
# A request of the lab's own (creating objects); a bulk create of thousands of pods is many.
REQUEST_TIMEOUT = 60.0
# Creates in flight at once: enough to keep the API server busy, few enough not to be throttled
# (the admin is in the exempt priority level, but etcd's writes on 2 cores are the bound).
CREATE_CONCURRENCY = 16
SERVICE_CIDR = "10.96.0.0/16"
ADMIN_USER = "lab-admin"


@dataclass(frozen=True)
class Request:
    """A request the API server's audit log recorded: `get`, `list` or `watch`, its query."""

    verb: str
    query: dict[str, str]
    code: int


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ControlPlane:
    """etcd and kube-apiserver in `root`; `admin` is an httpx client with the admin token."""

    root: Path
    apiserver_binary: Path
    etcd_binary: Path
    admin_token: str = field(default_factory=lambda: secrets.token_hex(16))
    port: int = field(default_factory=free_port)
    etcd_port: int = field(default_factory=free_port)
    etcd_peer_port: int = field(default_factory=free_port)
    apiserver_flags: tuple[str, ...] = ()
    # The authorizers, in order: RBAC alone, or the cluster lab's Node,RBAC (a kubelet's own
    # identity reads only what its node's pods need, as on a real cluster).
    authorization: str = "RBAC"
    # More static tokens than the admin's: token -> (user, groups), added by `user()`.
    users: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    # With a network namespace (the cluster lab's node), both run in it, as on a control-plane
    # node: the API server on every address there at port 443 (the `kubernetes` Service's port,
    # which in-cluster clients dial at its ClusterIP, with no kube-proxy in between),
    # advertising `advertise`; relays on this machine's loopback, at `port` and `etcd_port`,
    # reach both, so everything here talks to them as before.
    netns: NetNs | None = None
    advertise: str = "127.0.0.1"
    links: dict[int, Link] = field(default_factory=dict)
    etcd_proc: subprocess.Popen[bytes] | None = None
    apiserver_proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def log(self) -> Path:
        return self.root / "kube-apiserver.log"

    @property
    def audit_log(self) -> Path:
        return self.root / "audit.log"

    def admin(self) -> httpx.Client:
        """A client of the API server as the admin (its serving certificate is self-signed)."""
        headers = {"Authorization": f"Bearer {self.admin_token}"}
        return httpx.Client(base_url=self.url, headers=headers, verify=False, timeout=REQUEST_TIMEOUT)

    # -- processes

    def start_etcd(self) -> None:
        args = [
            str(self.etcd_binary),
            f"-data-dir={self.root / 'etcd'}",
            f"-listen-client-url={self.etcd_url}",
            f"-listen-peer-url=http://127.0.0.1:{self.etcd_peer_port}",
        ]
        self.etcd_proc = spawn(self._enter(args), self.root / "etcd.log")
        self._relay(self.etcd_port, self.etcd_port)
        self._wait(self.etcd_proc, "etcd", self.root / "etcd.log", ETCD_TIMEOUT, self._etcd_healthy)

    def stop_etcd(self) -> None:
        terminate(self.etcd_proc, STOP_TIMEOUT)
        self.etcd_proc = None

    def start_apiserver(self, *flags: str) -> None:
        """Start it (again, on the same port) with the lab's flags and `flags` (which replace
        the previous start's); return once /readyz says ok."""
        self.apiserver_flags = flags
        self._write_credentials()
        pki = self.root / "pki"
        args = [
            str(self.apiserver_binary),
            f"--etcd-servers={self.etcd_url}",
            *self._addresses(),
            f"--cert-dir={pki}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.key'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--token-auth-file={pki / 'tokens.csv'}",
            f"--authorization-mode={self.authorization}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--etcd-compaction-interval=0",  # the tests compact, when they mean to
            f"--audit-policy-file={self._audit_policy()}",
            f"--audit-log-path={self.audit_log}",
            *flags,
        ]
        self.apiserver_proc = spawn(self._enter(args), self.log)
        if self.netns is not None:
            self._relay(self.port, 443)
        self._wait(self.apiserver_proc, "kube-apiserver", self.log, READY_TIMEOUT, self._apiserver_ready)

    def stop_apiserver(self) -> None:
        """SIGTERM, as a rollout stops it: it ends its watches and stops listening."""
        terminate(self.apiserver_proc, STOP_TIMEOUT)
        self.apiserver_proc = None

    def restart_apiserver(self, *flags: str) -> None:
        self.stop_apiserver()
        self.start_apiserver(*flags)

    def stop(self) -> None:
        self.stop_apiserver()
        self.stop_etcd()
        for link in self.links.values():
            link.close()
        self.links.clear()

    def _addresses(self) -> list[str]:
        if self.netns is None:
            # Else it refuses a loopback advertise address.
            loopback = ["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1"]
            return [*loopback, "--endpoint-reconciler-type=none", f"--secure-port={self.port}"]
        return ["--bind-address=0.0.0.0", f"--advertise-address={self.advertise}", "--secure-port=443"]

    def _enter(self, args: list[str]) -> list[str]:
        return self.netns.enter(args) if self.netns else args

    def _relay(self, port: int, inside: int) -> None:
        """This machine's 127.0.0.1:port to the namespace's 127.0.0.1:inside, once."""
        if self.netns is not None and port not in self.links:
            self.links[port] = Link(inside, port, server_netns=self.netns)

    def log_tail(self, lines: int = 8) -> str:
        return log_tail(self.log, lines)

    def _write_credentials(self) -> None:
        pki = self.root / "pki"
        pki.mkdir(exist_ok=True)
        key = pki / "sa.key"
        if not key.exists():
            private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            key.write_bytes(
                private.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.TraditionalOpenSSL,
                    serialization.NoEncryption(),
                )
            )
        # token,user,uid,"group,...": the kube-apiserver's static token file.
        lines = [f'{self.admin_token},{ADMIN_USER},{ADMIN_USER},"system:masters"']
        lines += [
            f'{token},{user},{user},"{",".join(groups)}"' for token, (user, groups) in self.users.items()
        ]
        (pki / "tokens.csv").write_text("\n".join(lines) + "\n")

    def user(self, name: str, *groups: str) -> str:
        """A static token for user `name` in `groups` (read at the API server's next start)."""
        for token, (user, _) in self.users.items():
            if user == name:
                return token
        token = secrets.token_hex(16)
        self.users[token] = (name, groups)
        return token

    @property
    def serving_ca(self) -> Path:
        """The API server's self-signed serving certificate and the CA that signed it, as it
        wrote them in its cert dir: what in-cluster clients are given to trust (ca.crt)."""
        return self.root / "pki" / "apiserver.crt"

    def _audit_policy(self) -> Path:
        """Every request on pods by anyone but the admin, at Metadata level (its URI, verb, user
        and status): what a test reads to learn which requests pods-api made."""
        policy = {
            "apiVersion": "audit.k8s.io/v1",
            "kind": "Policy",
            "omitStages": ["RequestReceived"],
            "rules": [
                {"level": "None", "users": [ADMIN_USER]},
                {"level": "Metadata", "resources": [{"group": "", "resources": ["pods"]}]},
                {"level": "None"},
            ],
        }
        path = self.root / "audit-policy.yaml"
        path.write_text(yaml.safe_dump(policy))
        return path

    def requests(self, user: str, since: int = 0) -> list[Request]:
        """The requests on pods `user` made, in order, from byte `since` of the audit log."""
        if not self.audit_log.exists():
            return []
        with self.audit_log.open("rb") as log:
            log.seek(since)
            lines = log.read().splitlines()
        out = []
        for line in lines:
            event = orjson.loads(line)
            code = int((event.get("responseStatus") or {}).get("code") or 0)
            # A watch that was answered has two events, its start and its end: its start counts.
            streamed = event["verb"] == "watch" and event["stage"] == "ResponseComplete" and code == 200
            if event["user"]["username"] != user or streamed:
                continue
            query = dict(parse_qsl(urlsplit(event["requestURI"]).query, keep_blank_values=True))
            out.append(Request(event["verb"], query, code))
        return out

    def audit_size(self) -> int:
        return self.audit_log.stat().st_size if self.audit_log.exists() else 0

    def _wait(
        self, proc: subprocess.Popen[bytes], what: str, log: Path, timeout: float, ready: Callable[[], bool]
    ) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if proc.poll() is not None:
                raise AssertionError(f"{what} exited with {proc.returncode}: {log_tail(log)}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} was not ready within {timeout} s: {log_tail(log)}")
            time.sleep(POLL)

    def _etcd_healthy(self) -> bool:
        try:
            return httpx.get(f"{self.etcd_url}/health", timeout=5).json().get("health") == "true"
        except (httpx.HTTPError, ValueError):
            return False

    def _apiserver_ready(self) -> bool:
        try:
            with self.admin() as admin:
                return admin.get("/readyz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    # -- etcd

    def etcd_revision(self) -> int:
        """etcd's current revision (the API server's resourceVersions are etcd revisions)."""
        answer = httpx.post(f"{self.etcd_url}/v3/kv/range", json={"key": _b64("/registry/")}, timeout=10)
        answer.raise_for_status()
        return int(answer.json()["header"]["revision"])

    def compact(self) -> int:
        """Compact etcd's history up to now, as the API server's compactor does every 5 minutes:
        a watch from any earlier resourceVersion that reaches etcd is 410 Gone. The revision."""
        revision = self.etcd_revision()
        answer = httpx.post(
            f"{self.etcd_url}/v3/kv/compaction", json={"revision": revision, "physical": True}, timeout=30
        )
        answer.raise_for_status()
        return revision

    # -- objects

    def request(
        self, method: str, path: str, body: Any = None, *, ok: Iterable[int] = (200, 201), patch: bool = False
    ) -> Any:
        """An admin request; the answer's JSON. Any other status fails, naming it and the body.
        `patch`: the body is a JSON merge patch."""
        headers = {"Content-Type": "application/merge-patch+json"} if patch else {}
        with self.admin() as admin:
            answer = admin.request(
                method,
                path,
                content=orjson.dumps(body) if body is not None else None,
                headers=headers or {"Content-Type": "application/json"},
            )
        if answer.status_code not in tuple(ok):
            raise AssertionError(f"{method} {path}: HTTP {answer.status_code}: {answer.text[:500]}")
        return answer.json() if answer.content else None

    def namespace(self, name: str) -> None:
        """A namespace and its `default` ServiceAccount (no controller manager makes it here, and
        the ServiceAccount admission refuses pods without one)."""
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        self.request("POST", "/api/v1/namespaces", namespace, ok=(201, 409))
        account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
        self.request("POST", f"/api/v1/namespaces/{name}/serviceaccounts", account, ok=(201, 409))

    def apply(self, documents: Iterable[dict[str, Any]]) -> None:
        """Create each object, or replace it if it exists (kubectl apply's effect, for the kinds
        deploy/'s RBAC has: ServiceAccount, ClusterRole, ClusterRoleBinding)."""
        for doc in documents:
            path = _collection(doc)
            name = doc["metadata"]["name"]
            with self.admin() as admin:
                created = admin.post(path, json=doc)
                if created.status_code == 409:
                    current = admin.get(f"{path}/{name}").json()
                    doc = {**doc, "metadata": {**doc["metadata"], **_rv(current)}}
                    created = admin.put(f"{path}/{name}", json=doc)
            if created.status_code not in (200, 201):
                raise AssertionError(
                    f"apply {doc['kind']} {name}: HTTP {created.status_code}: {created.text}"
                )

    def token(self, namespace: str, account: str, seconds: int = 3600) -> str:
        """A ServiceAccount token from the TokenRequest API, as the kubelet mounts one in a Pod."""
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest"}
        request["spec"] = {"expirationSeconds": seconds}  # type: ignore[assignment]
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token"
        return str(self.request("POST", path, request)["status"]["token"])

    def create_pods(self, namespace: str, pods: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Create many pods, CREATE_CONCURRENCY at a time; the created objects, in order. Its
        own event loop in a thread of its own, so an async test may call it too."""
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, self._create_all(namespace, list(pods))).result()

    async def _create_all(self, namespace: str, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        headers = {"Authorization": f"Bearer {self.admin_token}"}
        limits = httpx.Limits(max_connections=CREATE_CONCURRENCY)
        gate = asyncio.Semaphore(CREATE_CONCURRENCY)
        path = f"/api/v1/namespaces/{namespace}/pods"
        async with httpx.AsyncClient(
            base_url=self.url, headers=headers, verify=False, timeout=REQUEST_TIMEOUT, limits=limits
        ) as client:

            async def create(pod: dict[str, Any]) -> dict[str, Any]:
                async with gate:
                    answer = await client.post(path, json=pod)
                if answer.status_code != 201:
                    raise AssertionError(f"create pod {pod['metadata']['name']}: {answer.text[:300]}")
                created: dict[str, Any] = answer.json()
                return created

            return list(await asyncio.gather(*map(create, pods)))

    def kubeconfig(self, path: Path, token: str, server: str | None = None) -> Path:
        """A kubeconfig with a bearer token for `server` (default: the API server itself; a
        tcpcut.Link's URL to put a cuttable link in between). The serving certificate is the
        API server's self-signed one, so TLS verification is skipped (loopback only)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "lab", "cluster": {"server": server or self.url, "insecure-skip-tls-verify": True}}
            ],
            "users": [{"name": "pods-api", "user": {"token": token}}],
            "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "pods-api"}}],
            "current-context": "lab",
        }
        path.write_text(yaml.safe_dump(config))
        return path


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _rv(obj: dict[str, Any]) -> dict[str, str]:
    return {"resourceVersion": obj["metadata"]["resourceVersion"]}


def _collection(doc: dict[str, Any]) -> str:
    """The collection path of one of deploy/'s RBAC kinds."""
    kind, api_version = doc["kind"], doc["apiVersion"]
    namespace = doc["metadata"].get("namespace")
    plural = {"ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles"}
    plural["ClusterRoleBinding"] = "clusterrolebindings"
    if kind not in plural:
        raise ValueError(f"apply: {kind} is not one of {sorted(plural)}")
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{prefix}/namespaces/{namespace}/{plural[kind]}" if namespace else f"{prefix}/{plural[kind]}"


@contextlib.contextmanager
def running(root: Path) -> Iterator[ControlPlane]:
    """etcd and kube-apiserver in root, both stopped on the way out: the block's end, the
    interpreter's exit, or a SIGTERM/SIGHUP. Unavailable (from the build) without go."""
    plane = ControlPlane(root, apiserver_binary=binary(APISERVER), etcd_binary=binary(ETCD))

    @once
    def undo() -> None:
        with contextlib.suppress(Exception):
            plane.stop()

    with undone_on_exit(undo):
        plane.start_etcd()
        plane.start_apiserver()
        yield plane


@pytest.fixture(scope="module")
def real_apiserver() -> Iterator[ControlPlane]:
    """One etcd and kube-apiserver per test module, in a root under /tmp."""
    root = Path(tempfile.mkdtemp(prefix="pka-", dir="/tmp"))
    try:
        with running(root) as plane:
            yield plane
    except Unavailable as exc:
        pytest.skip(f"the real kube-apiserver cannot run here: {exc}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    # .ci/run builds both before pytest, so the cold build's minutes are not a test's.
    print(binary(APISERVER))
    print(binary(ETCD))
