"""`--kubelet-pods-url URL`: the pods the kubelet runs, polled from its `/pods` endpoint, for nodes
whose kubelet serves no Pods API socket and whose API server we do not watch.

`GET https://<node>:10250/pods` answers a PodList of every pod the kubelet runs, with the status
it has locally. Each poll's list is the source's complete state: the cache turns it into events,
so only real changes become events (a pod whose object did not change is not even decoded
again). Pods are served as the kubelet reports them: they already are what it runs, static pods
included, so no static-pod rules apply.

Authentication is a bearer token read from `--kubelet-token-file` on every request, so a rotated
service-account token is picked up (the default is the in-cluster token, which the kubelet's
authorizer checks for `get` on `nodes/proxy`). The kubelet's certificate is checked against
`--kubelet-ca-file`, or not at all with an explicit `--kubelet-insecure-tls`. A token goes over
https only. 401 and 403 are "not allowed": logged as such, and, like every failure, they keep
the last good pods (before the first good poll the source is not ready; never "no pods").
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import ssl
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from pods_api.core import argtypes
from pods_api.core.store.cache import SourceSink
from pods_api.core.store.version import PodVersion
from pods_api.sources import ErrorCounter, ManifestError, Source, SourceContext, connected_gauge
from pods_api.sources.parsing import KUBELET_FORMAT, decode_pod, pod_objects
from pods_api.sources.poller import FETCH_DEADLINE, Poller, PollError, parse_url, redacted
from pods_api.sources.reading import describe_os_error
from pods_api.sources.reporting import Reporter, unique_pods
from pods_api.sources.staleness import ConnectedGauge, Staleness, after_missed

if TYPE_CHECKING:
    import httpx  # loaded by the poller once a URL is given (pods_api/sources/poller.py)

log = logging.getLogger(__name__)

FLAG = "--kubelet-pods-url"
# What the kubelet's own status loop and `kubectl get --watch` resolve to: a change is served
# within two seconds, at the cost of one small request per interval to the local kubelet.
DEFAULT_INTERVAL = 2.0
# Where a pod's service-account token is mounted (and rotated) in every Kubernetes pod.
DEFAULT_TOKEN_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
# A node's PodList: a few hundred pods of a few kilobytes each; more is not a kubelet.
MAX_PODLIST_BYTES = 32 * 1024 * 1024
_NOT_ALLOWED = (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN)


class TokenFile:
    """`Authorization: Bearer <token>`, the token read from `path` for every request: kubelets
    rotate projected service-account tokens by swapping the file. A missing file sends no token
    when `required` is false (the in-cluster default, outside a cluster); the kubelet then says
    401, which is reported as such. A callable, which httpx takes as a request's auth: not a
    subclass of httpx.Auth, so that httpx loads only once a URL is polled."""

    def __init__(self, path: Path, *, required: bool) -> None:
        self.path = path
        self._required = required

    def __call__(self, request: httpx.Request) -> httpx.Request:
        token = self._read()
        if token:
            request.headers["Authorization"] = f"Bearer {token}"
        return request

    def _read(self) -> str | None:
        try:
            return self.path.read_text().strip()
        except FileNotFoundError:
            if not self._required:
                return None
            raise PollError(f"--kubelet-token-file {self.path}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            reason = describe_os_error(exc) if isinstance(exc, OSError) else "not text"
            raise PollError(f"--kubelet-token-file {self.path}: {reason}") from None


class KubeletPodsSource:
    def __init__(
        self,
        url: str,
        *,
        interval: float = DEFAULT_INTERVAL,
        token: TokenFile | None = None,
        verify: ssl.SSLContext | bool = True,
        on_error: ErrorCounter | None = None,
        on_connected: ConnectedGauge | None = None,
        stale_after: float | None = None,
    ) -> None:
        """Raises ValueError naming the flag for a URL that is not http(s)://host/...
        `stale_after`: its resync, by default two polls (the second given its deadline)."""
        self._poller = Poller(
            url, flag=FLAG, interval=interval, auth=token, verify=verify, max_bytes=MAX_PODLIST_BYTES
        )
        self.name = source_name(url)
        resync = after_missed(interval, FETCH_DEADLINE) if stale_after is None else stale_after
        self._staleness = Staleness(self.name, stale_after=resync, on_connected=on_connected)
        self._staleness.upstream = self._poller.shown
        self._token = token
        self._reporter = Reporter(self.name, on_error)
        # Digests, not the things themselves: the last body taken, and per uid the object its
        # pod was decoded from. Kept as objects they were 29 MiB of dicts and a 5.5 MiB body per
        # 1,000 pods, three times what the pods' own encodings hold (BENCHMARKS.md, footprint).
        self._body: bytes | None = None
        self._objects: dict[str, bytes] = {}
        self._pods: dict[str, PodVersion] = {}  # uid -> the pods served, in the kubelet's order
        self._problems: tuple[list[str], list[str]] = ([], [])  # errors, warnings of that body

    async def run(self, sink: SourceSink) -> None:
        with self._staleness.running(sink):
            await self._poller.run(lambda body: self._take(body, sink), self._failed)

    def _failed(self, exc: PollError) -> None:
        if exc.status in _NOT_ALLOWED:
            token = f"the token in {self._token.path}" if self._token else "no token (plain http)"
            message = (
                f"not allowed ({exc}): the kubelet refused {token}; it needs a service account "
                "that may get nodes/proxy"
            )
        else:
            message = str(exc)
        self._reporter.attempt_failed(f"{self.name}: {message}")
        self._staleness.failed(message)

    def _take(self, body: bytes | None, sink: SourceSink) -> bool:
        """One poll's body (None: unchanged); whether it gave a complete state."""
        if body is not None and _digest(body) != self._body:
            try:
                objects = pod_objects(body, self.name, KUBELET_FORMAT)
            except ManifestError as exc:
                self._reporter.report([str(exc)], self._problems[1])
                self._staleness.failed(str(exc))
                return False
            self._reconcile(objects)
            self._body = _digest(body)
        self._reporter.report(*self._problems)
        sink.replace(self._pods.values())
        sink.mark_synced()
        self._staleness.current()
        return True

    def _reconcile(self, objects: list[tuple[str, dict[str, Any]]]) -> None:
        """The pods of one list; a pod that does not decode keeps its last good version."""
        errors: list[str] = []
        warnings: list[str] = []
        decoded: list[PodVersion] = []
        seen: dict[str, bytes] = {}
        for where, obj in objects:
            uid = _uid_of(obj)
            digest = _digest(orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS))
            if uid and self._objects.get(uid) == digest:  # unchanged: no decoding, the same version
                decoded.append(self._pods[uid])
                seen[uid] = digest
                continue
            try:
                pod = decode_pod(obj, where, self.name, warnings)
                if not pod.uid:
                    raise ManifestError(self.name, f"{where}: metadata.uid is missing")
            except ManifestError as exc:
                errors.append(str(exc))
                if uid in self._pods:
                    decoded.append(self._pods[uid])
                    seen[uid] = self._objects[uid]
                continue
            decoded.append(pod)
            seen[pod.uid] = digest
        pods, duplicates = unique_pods([(self.name, decoded)], by_name=False)
        self._pods = {pod.uid: pod for pod in pods}
        self._objects = {uid: obj for uid, obj in seen.items() if uid in self._pods}
        self._problems = (errors + duplicates, warnings)


def _digest(data: bytes) -> bytes:
    """What tells two bodies or objects apart: 32 bytes of BLAKE2b (a collision, which would
    keep a changed pod's old version, is as likely as guessing a 256-bit key)."""
    return hashlib.blake2b(data, digest_size=32).digest()


def _uid_of(obj: dict[str, Any]) -> str | None:
    meta = obj.get("metadata")
    uid = meta.get("uid") if isinstance(meta, dict) else None
    return uid if isinstance(uid, str) and uid else None


# -- flags ---------------------------------------------------------------------------------------

SOURCE_FLAGS: tuple[str, ...] = ("--kubelet-pods-url URL",)
_TLS_FLAGS = ("kubelet_token_file", "kubelet_ca_file", "kubelet_insecure_tls")


def add_flags(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        FLAG,
        metavar="URL",
        help="poll the kubelet's /pods, e.g. https://127.0.0.1:10250/pods (needs get on nodes/proxy)",
    )
    add(
        "--kubelet-pods-interval",
        type=argtypes.positive,
        default=DEFAULT_INTERVAL,
        metavar="SECONDS",
        help=f"poll the kubelet's /pods this often (default {DEFAULT_INTERVAL:g})",
    )
    add(
        "--kubelet-token-file",
        type=Path,
        metavar="FILE",
        help=f"bearer token for the kubelet, re-read for every request (default {DEFAULT_TOKEN_FILE})",
    )
    add(
        "--kubelet-ca-file", type=Path, metavar="FILE", help="CA bundle that signed the kubelet's certificate"
    )
    add(
        "--kubelet-insecure-tls",
        action="store_true",
        help="do not check the kubelet's certificate (instead of --kubelet-ca-file)",
    )


def from_args(args: argparse.Namespace, context: SourceContext) -> list[Source]:
    url: str | None = args.kubelet_pods_url
    if url is None:
        for name in _TLS_FLAGS:
            if getattr(args, name):
                raise ValueError(f"--{name.replace('_', '-')} is for {FLAG}, which is not given")
        return []
    parsed = parse_url(url, FLAG)
    verify: ssl.SSLContext | bool = True
    token: TokenFile | None = None
    if parsed.scheme == "https":
        verify = _verify(f"{FLAG} {redacted(parsed)}", args.kubelet_ca_file, args.kubelet_insecure_tls)
        token = _token_file(args.kubelet_token_file)
    elif args.kubelet_ca_file or args.kubelet_insecure_tls or args.kubelet_token_file:
        # The kubelet's read-only port (http) has no auth, and a token must not go in the clear.
        raise ValueError(f"{FLAG} {redacted(parsed)}: TLS and token flags need an https:// URL")
    source = KubeletPodsSource(
        url,
        interval=args.kubelet_pods_interval,
        token=token,
        verify=verify,
        on_error=context.on_error,
        on_connected=connected_gauge(context, source_name(url)),
    )
    return [source]


def source_name(url: str) -> str:
    """The source's name for `url`, fit for logs and metric labels (no password, no query value)."""
    return f"kubelet-pods:{redacted(parse_url(url, FLAG))}"


def _verify(given: str, ca_file: Path | None, insecure: bool) -> ssl.SSLContext | bool:
    if ca_file and insecure:
        raise ValueError("--kubelet-ca-file and --kubelet-insecure-tls: give one, not both")
    if insecure:
        return False
    if ca_file is None:
        # Kubelet serving certificates are mostly self-signed or from the cluster's own CA, which
        # no system trust store holds: say which, rather than fail every poll.
        raise ValueError(f"{given}: https needs --kubelet-ca-file FILE (or --kubelet-insecure-tls)")
    try:
        return ssl.create_default_context(cafile=ca_file)
    except ssl.SSLError as exc:  # before OSError, which it is a kind of
        raise ValueError(f"--kubelet-ca-file {ca_file}: not a PEM CA bundle ({exc.reason or exc})") from None
    except OSError as exc:
        raise ValueError(f"--kubelet-ca-file {ca_file}: {describe_os_error(exc)}") from None


def _token_file(path: Path | None) -> TokenFile:
    if path is None:
        return TokenFile(DEFAULT_TOKEN_FILE, required=False)
    try:
        path.read_text()
    except OSError as exc:
        raise ValueError(f"--kubelet-token-file {path}: {describe_os_error(exc)}") from None
    except UnicodeDecodeError:
        raise ValueError(f"--kubelet-token-file {path}: not text") from None
    return TokenFile(path, required=True)
