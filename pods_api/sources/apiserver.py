"""`--apiserver`: the pods bound to this node, from the API server, as the kubelet gets them.

The kubelet's own query: list `/api/v1/pods?fieldSelector=spec.nodeName=<node>`, then watch from
the list's resourceVersion with bookmarks, resuming from the last resourceVersion seen (objects
and bookmarks alike). A `410 Gone` (an HTTP status or an ERROR event) means the history is gone:
list again, and hand the cache the complete state (`sink.replace`), which turns it into only the
real changes. Ready after the first list; afterwards an unreachable API server changes nothing
clients see: the last good pods stay served while the source reconnects with jittered backoff.

Configuration and authentication (kubeconfig contexts, exec plugins, token files, in-cluster
ServiceAccount tokens, custom CAs) are kubernetes_asyncio's; pods travel as raw JSON from the
wire to our codec, never through the library's model classes. No token is ever logged.

Mirror pods (the API server's copy of a static pod, annotated `kubernetes.io/config.mirror`) are
handed to the cache as they are: its identity policy (core/store/identity.py) serves a mirror as its
static pod, merged with that pod when a local source has it, so no pod is served twice.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from pods_api import __version__
from pods_api.core import argtypes
from pods_api.core.api.codec import CodecError
from pods_api.core.store.cache import SourceSink
from pods_api.core.store.identity import MIRROR_ANNOTATION
from pods_api.core.store.version import PodVersion
from pods_api.sources import ErrorCounter, Source, SourceContext, connected_gauge
from pods_api.sources.firstseen import CONFIG_SEEN, stamp_time
from pods_api.sources.reporting import Reporter
from pods_api.sources.staleness import ConnectedGauge, Staleness
from pods_api.sources.staticpod import CONFIG_SOURCE

if TYPE_CHECKING:
    # Imported where used: kubernetes_asyncio loads every generated API model (~44 MiB resident),
    # which only a server started with --apiserver should pay for.
    import aiohttp
    from kubernetes_asyncio import client as kube_client

log = logging.getLogger(__name__)

SOURCE_NAME = "apiserver"
# Reconnect backoff: 1 s doubling to 30 s, each wait jittered so that a fleet of nodes that lost
# the same API server does not come back in lockstep.
FIRST_RETRY = 1.0
MAX_RETRY = 30.0
# A watch that has delivered for this long since the last failure is healthy: the next failure
# backs off from FIRST_RETRY again, not from where the failures before that stretch left it.
# client-go's reflector resets its backoff manager after 2 min (defaultBackoffReset).
BACKOFF_RESET = 120.0
# The server ends each watch after timeoutSeconds, drawn from [5 min, 10 min] as client-go's
# reflector does: a proxy with an idle timeout never cuts a watch silently, and reconnects of
# many nodes spread out.
WATCH_TIMEOUT = (300, 600)
# A watch that stays silent this long past its own timeoutSeconds is a dead connection.
WATCH_READ_MARGIN = 30.0
# Its resync: the longest a working watch goes without the server saying anything (an event, a
# bookmark, or the end of the watch at its timeoutSeconds). A source failing for longer than this
# since it was last current is stale: the pods it serves may be old, and it says so.
STALE_AFTER = WATCH_TIMEOUT[1] + WATCH_READ_MARGIN
# Connecting (TCP and TLS) and a whole list: a node's pods are at most a few megabytes.
CONNECT_TIMEOUT = 10.0
LIST_TIMEOUT = 60.0  # per page
# Pods per list page: client-go's pager default, so a node with thousands of pods is listed in
# pieces the API server (and etcd) serve without one huge response.
LIST_PAGE = 500

# The annotation of the BOOKMARK that ends a watch-list's initial events.
INITIAL_EVENTS_END = "k8s.io/initial-events-end"

# The longest watch event read: the API server stores at most 1.5 MiB per object (etcd's
# --max-request-bytes), and an object's JSON is at most about twice its protobuf. A longer line
# is refused whole, naming its pod, and the watch goes on after it; the codec refuses a pod
# over its own 1.5 MiB limit in any case.
MAX_EVENT_BYTES = 3 * 1024 * 1024
# Of a line too long to decode, this much is kept to name its pod: the API server writes
# `type`, then the object's metadata (name, namespace, uid, resourceVersion) first.
EVENT_HEAD_BYTES = 64 * 1024
_HEAD_FIELDS = {
    name: re.compile(rb'"%s":"((?:[^"\\]|\\.){0,300})"' % name.encode())
    for name in ("type", "name", "namespace", "uid", "resourceVersion")
}


class APIServerError(Exception):
    """A failed request; `str()` is one line naming the server and what went wrong."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class Gone(APIServerError):
    """410: the resourceVersion asked for is no longer in the server's history."""


@dataclass(frozen=True)
class _Refused:
    """Among a watch-list's initial events: a pod's event refused whole (over MAX_EVENT_BYTES),
    by its uid (or its name, without one), which keeps its last good version."""

    key: str
    problem: str


class Credentials:
    """Where the API server is and how to authenticate, via kubernetes_asyncio.

    `--kubeconfig FILE` (with `--kube-context`), else `$KUBECONFIG` as the library reads it, else
    the in-cluster ServiceAccount. Loaded again for every connection, so a rotated token file, a
    renewed exec credential or a replaced CA is used from the next connection on; an expired
    exec credential is renewed by the loader, and after a 401 everything is read afresh.
    """

    def __init__(self, kubeconfig: Path | None, context: str | None) -> None:
        self._kubeconfig = str(kubeconfig) if kubeconfig else os.environ.get("KUBECONFIG") or None
        self._context = context
        self._loader: Any = None  # kubernetes_asyncio's KubeConfigLoader, kept for its exec cache

    def describe(self) -> str:
        if self._kubeconfig is None:
            return "in-cluster config"
        return f"kubeconfig {self._kubeconfig}" + (f" (context {self._context})" if self._context else "")

    def forget(self) -> None:
        """After a 401: read the kubeconfig and run any exec plugin again next time."""
        self._loader = None

    async def configuration(self) -> kube_client.Configuration:
        from kubernetes_asyncio import client as kube_client
        from kubernetes_asyncio import config as kube_config

        configuration: kube_client.Configuration = type.__call__(kube_client.Configuration)  # no global
        try:
            if self._kubeconfig is None:
                kube_config.load_incluster_config(client_configuration=configuration)
            else:
                if self._loader is None:
                    self._loader = await kube_config.load_kube_config(
                        config_file=self._kubeconfig,
                        context=self._context,
                        client_configuration=configuration,
                        persist_config=False,  # never write to the user's kubeconfig
                    )
                else:
                    await self._loader.load_and_set(configuration)
        except Exception as exc:  # the library raises ConfigException, OSError, KeyError, ...
            self._loader = None
            hint = " (not in a Pod? give --kubeconfig)" if self._kubeconfig is None else ""
            raise APIServerError(f"{self.describe()}: cannot load: {_one_line(exc)}{hint}") from None
        return configuration


class APIServerSource:
    """The pods the API server has bound to `node_name`."""

    def __init__(
        self,
        *,
        node_name: str,
        kubeconfig: Path | None = None,
        context: str | None = None,
        on_error: ErrorCounter | None = None,
        on_connected: ConnectedGauge | None = None,
        watch_timeout: tuple[int, int] = WATCH_TIMEOUT,
        stale_after: float = STALE_AFTER,
        backoff_reset: float = BACKOFF_RESET,
    ) -> None:
        self.name = SOURCE_NAME
        self.node_name = node_name
        self._credentials = Credentials(kubeconfig, context)
        self._watch_timeout = watch_timeout
        self._backoff_reset = backoff_reset
        # When a watch first delivered something after the last failure (time.monotonic()).
        self._delivering_since: float | None = None
        # Current at a list, an event, a bookmark, a watch ended at its timeout.
        self._staleness = Staleness(self.name, stale_after=stale_after, on_connected=on_connected)
        self._connection = Reporter(self.name, on_error)  # the connection's state: one problem
        self._content = Reporter(self.name, on_error)  # pods that do not decode, and warnings
        self._server = "API server"  # its URL once the configuration is loaded
        self._rv: str | None = None  # the last resourceVersion seen; None: list first
        self._list_rv = "0"  # the first list may come from the server's watch cache
        self._watch_list = True  # until the server shows it does not offer it
        self._initial: list[Any] | None = None  # a watch-list's initial events, until its end
        self._pods: dict[str, PodVersion] = {}  # uid -> the last good version
        self._seen: dict[str, str] = {}  # uid -> when first seen (config.seen), while served
        self._bad: dict[str, str] = {}  # uid -> why its latest version was refused
        self._warnings: dict[str, str] = {}  # unknown field path -> one pod that had it

    async def run(self, sink: SourceSink) -> None:
        with self._staleness.running(sink):
            await self._run(sink)

    async def _run(self, sink: SourceSink) -> None:
        failures = 0
        gone = False  # the last attempt ended in 410
        while True:
            try:
                async with self._api() as api:
                    progressed = None
                    if self._rv is None and self._watch_list:
                        progressed = await self._watch(api, sink, initial=True)
                    if progressed is None:  # no watch-list: list, then watch
                        if self._rv is None:
                            await self._list(api, sink)
                        progressed = await self._watch(api, sink)
                gone = False
                if self._rv is not None:  # the server ended the watch: nothing more was there
                    self._staleness.current()
                if progressed:  # a watch that ended on its timeout: resume at once
                    failures = 0
                    continue
                failures = self._failed(failures)  # a server that ends every watch at once must not spin us
            except Gone as exc:
                log.info("pod source %s: %s; listing again", self.name, exc)
                # A list at least as new as what we saw; if the list itself was too old, a
                # fresh (consistent) read. As client-go's reflector.
                self._list_rv = "" if self._rv is None else self._rv
                self._rv = None
                failures = self._failed(failures)
                if not gone:
                    gone = True
                    continue  # relist at once; a server that keeps saying 410 gets backoff
            except APIServerError as exc:
                failures = self._failed(failures)
                gone = False
                self._connection.attempt_failed(str(exc))
                self._staleness.failed(str(exc))
            delay = self._backoff(failures)
            log.debug(
                "pod source %s: failure %d in a row; trying again in %.1f s", self.name, failures, delay
            )
            await asyncio.sleep(delay)

    def _failed(self, failures: int) -> int:
        """The count of failures in a row, with one more: from zero again when a watch had
        delivered for `backoff_reset` since the last one (a drop after a healthy stretch is a
        first failure, not the next of those before it)."""
        since, self._delivering_since = self._delivering_since, None
        if since is not None and time.monotonic() - since >= self._backoff_reset:
            failures = 0
        return failures + 1

    def _backoff(self, failures: int) -> float:
        return min(MAX_RETRY, FIRST_RETRY * 2.0 ** (failures - 1)) * random.uniform(0.5, 1.0)

    @asynccontextmanager
    async def _api(self) -> AsyncIterator[kube_client.CoreV1Api]:
        import aiohttp
        from kubernetes_asyncio import client as kube_client

        configuration = await self._credentials.configuration()
        self._server = self._staleness.upstream = str(configuration.host)
        api = kube_client.ApiClient(configuration)
        api.user_agent = f"pods-api/{__version__}"
        try:
            yield kube_client.CoreV1Api(api)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise APIServerError(f"{self._server}: {_transport_problem(exc)}") from None
        finally:
            await api.close()

    # -- list -----------------------------------------------------------------------------------

    async def _list(self, api: kube_client.CoreV1Api, sink: SourceSink) -> None:
        rv, items = await self._list_pages(api)
        self._replace(items, rv, sink)

    def _replace(self, items: list[Any], rv: str, sink: SourceSink) -> None:
        """The node's whole state (a list's items, a watch-list's initial events) at rv: the
        cache turns it into only the real changes."""
        pods: dict[str, PodVersion] = {}
        bad: dict[str, str] = {}
        for obj in items:
            if isinstance(obj, _Refused):
                uid, pod, bad[obj.key] = obj.key, None, obj.problem
            elif not self._ours(obj):
                continue
            else:
                uid, pod = self._decode(obj, bad)
            if pod is not None:
                pods[uid] = pod
            elif uid in self._pods:  # keep its last good version
                pods[uid] = self._pods[uid]
        self._pods, self._bad, self._rv = pods, bad, rv
        self._seen = {uid: seen for uid, seen in self._seen.items() if uid in pods}
        self._connected()
        self._report()
        sink.replace(pods.values())
        sink.mark_synced()
        self._staleness.current()

    async def _list_pages(self, api: kube_client.CoreV1Api) -> tuple[str, list[Any]]:
        """The node's pods and the list's resourceVersion, LIST_PAGE at a time (`limit` and
        `continue`, as client-go's pager), but whole from a resourceVersion seen before: with a
        limit the server would read exactly that version from etcd (410 once compacted), without
        one it serves any version not older from its watch cache (client-go's reflector does the
        same). A continue token that expired is a 410 (Gone): the list starts again, fresh. A
        server that serves the whole list at once sends no continue token."""
        import aiohttp

        limits = aiohttp.ClientTimeout(total=LIST_TIMEOUT, sock_connect=CONNECT_TIMEOUT)
        items: list[Any] = []
        token = ""
        while True:
            query: dict[str, Any] = {"limit": LIST_PAGE} if self._list_rv in ("", "0") else {}
            if token:
                query["_continue"] = token  # the first page's resourceVersion is in the token
            else:
                query["resource_version"] = self._list_rv
            response = await self._get_pods(api, limits, **query)
            async with response:
                try:
                    body = await self._body(response, "list")
                except APIServerError as exc:
                    if exc.status == 504 and self._list_rv not in ("", "0"):
                        self._list_rv = ""  # "too large resource version": a lagging server; read fresh
                    raise
            try:
                page = orjson.loads(body)
                meta = page["metadata"]
                rv, token, more = meta["resourceVersion"], meta.get("continue") or "", page["items"] or []
                if (
                    not isinstance(rv, str)
                    or not rv
                    or not isinstance(more, list)
                    or not isinstance(token, str)
                ):
                    raise TypeError
            except (orjson.JSONDecodeError, KeyError, TypeError):
                raise APIServerError(f"{self._server}: list: not a PodList with a resourceVersion") from None
            items.extend(more)
            if not token:
                return rv, items

    async def _get_pods(
        self, api: kube_client.CoreV1Api, limits: aiohttp.ClientTimeout, **query: Any
    ) -> aiohttp.ClientResponse:
        """GET /api/v1/pods for this node: the raw response, so pods stay JSON bytes until our
        codec reads them (the library's model classes are never involved)."""
        import aiohttp

        response: Any = await api.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={self.node_name}",
            _preload_content=False,
            _request_timeout=limits,
            **query,
        )
        assert isinstance(response, aiohttp.ClientResponse)
        return response

    # -- watch ----------------------------------------------------------------------------------

    async def _watch(
        self, api: kube_client.CoreV1Api, sink: SourceSink, *, initial: bool = False
    ) -> bool | None:
        """Watch from self._rv until the server ends the stream; whether anything arrived.
        Raises Gone when the server no longer has that resourceVersion.

        `initial`: a watch-list, as the kubelet's reflector does on v1.35+ (client-go's
        WatchListClient): the node's pods come as ADDED events, then a BOOKMARK annotated
        `k8s.io/initial-events-end`, which makes them the whole state (as a list's items), and
        the same stream goes on as a watch. None when the server refuses it (then this attempt
        lists; a server that does not offer it, 400 or 422, is not asked again) or ends it
        before the bookmark (one that ignores `sendInitialEvents`: not asked again either)."""
        import aiohttp

        timeout = random.randint(*self._watch_timeout)
        query: dict[str, Any] = {"resource_version": self._rv}
        if initial:
            # "" is a consistent read (the list's "0" would be any state the cache has).
            rv = "" if self._list_rv == "0" else self._list_rv
            query = {
                "resource_version": rv,
                "send_initial_events": True,
                "resource_version_match": "NotOlderThan",
            }
        response = await self._get_pods(
            api,
            aiohttp.ClientTimeout(sock_connect=CONNECT_TIMEOUT, sock_read=timeout + WATCH_READ_MARGIN),
            allow_watch_bookmarks=True,
            watch=True,
            timeout_seconds=timeout,
            **query,
        )
        progressed = False
        self._initial = [] if initial else None
        try:
            async with response:
                if response.status != 200:
                    if initial and response.status not in (401, 410):
                        self._no_watch_list(await self._body_error(response, "watch-list"))
                        return None
                    await self._body(response, "watch")  # raises, naming the status
                self._connected()
                async for line, size in _lines(response, MAX_EVENT_BYTES):
                    if size > MAX_EVENT_BYTES:
                        self._too_large(line, size, sink)
                        progressed = True
                    elif line.strip():
                        self._event(line, sink)
                        progressed = True
                    if progressed and self._initial is None:
                        self._staleness.current()
                        if self._delivering_since is None:
                            self._delivering_since = time.monotonic()
            if self._initial is not None:
                problem = f"{self._server}: watch-list: ended before its initial-events-end bookmark"
                self._no_watch_list(APIServerError(problem, status=400))
                return None
            return progressed
        finally:
            self._initial = None

    def _no_watch_list(self, refused: APIServerError) -> None:
        """A watch-list refused (or not kept to): this attempt lists instead; a server that
        does not offer it (or does not keep to it) is not asked again."""
        if refused.status in (400, 422):
            self._watch_list = False
        log.info("pod source %s: %s; listing instead", self.name, refused)

    def _too_large(self, head: bytes, size: int, sink: SourceSink) -> None:
        """A watch event over MAX_EVENT_BYTES (`head`: its first bytes): its pod is refused,
        named, and keeps its last good version (a DELETED still deletes it); the watch goes on
        from its resourceVersion. (aiohttp's own line bound, 128 KiB, made the watch fail at
        that event on every retry: the source applied nothing after it.)"""
        found = {name: _head_field(head, name) for name in _HEAD_FIELDS}
        uid = found["uid"]
        what = f"pod {found['namespace']}/{found['name']} (uid {uid})"
        problem = f"{what}: a watch event of {size} bytes, over the {MAX_EVENT_BYTES} byte limit"
        if self._initial is not None:  # a watch-list's: refused in the state its end makes
            if found["type"] != "DELETED":
                self._initial.append(_Refused(uid or what, problem))
            return
        if found["type"] == "DELETED" and uid:
            self._bad.pop(uid, None)
            self._seen.pop(uid, None)
            if self._pods.pop(uid, None) is not None:
                sink.delete(uid)
        else:
            self._bad[uid or what] = problem
        self._report()
        if found["resourceVersion"]:
            self._rv = found["resourceVersion"]

    def _event(self, line: bytes, sink: SourceSink) -> None:
        try:
            event = orjson.loads(line)
            kind, obj = event["type"], event["object"]
            if not isinstance(obj, dict):
                raise TypeError
        except (orjson.JSONDecodeError, KeyError, TypeError):
            # Our resourceVersion did not move: watching again from it gets this event again.
            # Not the line itself: a pod's env may hold a secret's value.
            problem = f"an event that is not JSON ({len(line)} bytes)"
            raise APIServerError(f"{self._server}: watch: {problem}") from None
        if kind == "ERROR":
            code = obj.get("code")
            raise _status_error(self._server, "watch", obj, status=code if isinstance(code, int) else 0)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if self._initial is not None:
            self._initial_event(kind, obj, rv, sink)
            return
        if kind in ("ADDED", "MODIFIED") and not self._ours(obj):
            kind = "DELETED"  # bound elsewhere now: no longer this node's pod
        if kind in ("ADDED", "MODIFIED"):
            uid, pod = self._decode(obj, self._bad)
            if pod is not None:
                self._bad.pop(uid, None)
                self._pods[uid] = pod
                sink.upsert(pod)
            self._report()
        elif kind == "DELETED":
            uid = _uid(obj)
            self._bad.pop(uid, None)
            self._seen.pop(uid, None)
            if self._pods.pop(uid, None) is not None:
                sink.delete(uid)
            self._report()
        elif kind != "BOOKMARK":
            log.warning("pod source %s: watch event of unknown type %r ignored", self.name, kind)
        if isinstance(rv, str) and rv:
            self._rv = rv

    def _initial_event(self, kind: str, obj: dict[str, Any], rv: Any, sink: SourceSink) -> None:
        """An event of a watch-list before its end: kept until the end bookmark, which makes
        what was kept the whole state at its resourceVersion."""
        assert self._initial is not None
        if kind in ("ADDED", "MODIFIED"):
            self._initial.append(obj)
        elif kind == "BOOKMARK" and isinstance(rv, str) and rv and _initial_events_end(obj):
            items, self._initial = self._initial, None
            self._replace(items, rv, sink)

    # -- pods -----------------------------------------------------------------------------------

    def _decode(self, obj: Any, bad: dict[str, str]) -> tuple[str, PodVersion | None]:
        """A pod's uid and its version; None (and why, in `bad`) if it does not decode."""
        uid = _uid(obj)
        meta = obj.get("metadata") or {} if isinstance(obj, dict) else {}
        what = f"pod {meta.get('namespace', '')}/{meta.get('name', '')} (uid {meta.get('uid', '')})"
        if not uid:
            bad[what] = f"{what}: not a Pod with a uid"
            return uid, None
        warnings: list[str] = []
        try:
            pod = PodVersion.from_json(self._annotated(uid, obj), warnings)
        except CodecError as exc:
            bad[uid] = f"{what}: {exc}"
            return uid, None
        for warning in warnings:
            self._warnings.setdefault(warning, what)
        return uid, pod

    def _annotated(self, uid: str, obj: Any) -> Any:
        """The pod with what the kubelet's config (pkg/kubelet/config/config.go) adds to every pod
        of its "api" source: `kubernetes.io/config.source: api` and `config.seen`, when it was
        first seen. A mirror keeps its own: it is the API server's copy of a static pod, and its
        config.source says which of the kubelet's sources the static pod is from."""
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            return obj  # the codec names what is wrong
        annotations = meta.get("annotations")
        annotations = annotations if isinstance(annotations, dict) else {}
        if MIRROR_ANNOTATION in annotations:
            return obj
        seen = self._seen.setdefault(uid, stamp_time(time.time_ns()))
        added = {**annotations, CONFIG_SOURCE: "api", CONFIG_SEEN: seen}
        return {**obj, "metadata": {**meta, "annotations": added}}

    def _ours(self, obj: Any) -> bool:
        """Whether a pod is bound to this node. The server filters by the field selector; this
        holds even behind a proxy or a server that does not."""
        if not isinstance(obj, dict):
            return True  # _decode names what is wrong with it
        node = (obj.get("spec") or {}).get("nodeName")
        if node == self.node_name:
            return True
        meta = obj.get("metadata") or {}
        log.debug(
            "pod source %s: pod %s/%s is bound to %r",
            self.name,
            meta.get("namespace"),
            meta.get("name"),
            node,
        )
        return False

    def _report(self) -> None:
        unknown = [f"{what}: {warning} (and maybe other pods)" for warning, what in self._warnings.items()]
        self._content.report(self._bad.values(), unknown)

    def _connected(self) -> None:
        self._staleness.connected()  # a stale source is current once it applies something again
        self._connection.report([])

    # -- responses ------------------------------------------------------------------------------

    async def _body(self, response: aiohttp.ClientResponse, what: str) -> bytes:
        """The body of a 200; otherwise raises, naming the status (Gone for a 410)."""
        if response.status == 200:
            return await response.read()
        raise await self._body_error(response, what)

    async def _body_error(self, response: aiohttp.ClientResponse, what: str) -> APIServerError:
        """What a response other than 200 says, as one error naming its status."""
        body = await response.read()
        if response.status == 401:
            self._credentials.forget()
        try:
            status = orjson.loads(body)
        except orjson.JSONDecodeError:
            status = {}
        return _status_error(
            self._server,
            what,
            status if isinstance(status, dict) else {},
            status=response.status,
            reason=response.reason or "",
            credentials=self._credentials.describe(),
        )


async def _lines(response: aiohttp.ClientResponse, limit: int) -> AsyncIterator[tuple[bytes, int]]:
    """The response's lines, each with its size; a line over `limit` comes as its first
    EVENT_HEAD_BYTES only (the rest is read and dropped), so one huge event costs no more
    memory than the limit."""
    buffered: list[bytes] = []
    size = 0  # of the line being read
    async for chunk in response.content.iter_any():
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            piece = chunk[start:end]
            if size + len(piece) > limit:
                yield _head(buffered, piece), size + len(piece)
            else:
                yield b"".join((*buffered, piece)), size + len(piece)
            buffered, size, start = [], 0, end + 1
        rest = chunk[start:]
        if size + len(rest) > limit and size <= limit:
            buffered = [_head(buffered, rest)]  # over: keep the head only from here on
        elif size <= limit:
            buffered.append(rest)
        size += len(rest)
    if size:
        yield (_head(buffered, b"") if size > limit else b"".join(buffered)), size


def _head(buffered: list[bytes], piece: bytes) -> bytes:
    return b"".join((*buffered, piece))[:EVENT_HEAD_BYTES]


def _head_field(head: bytes, name: str) -> str:
    """The first `"name":"value"` in the head of an event, decoded; "" if absent."""
    match = _HEAD_FIELDS[name].search(head)
    if match is None:
        return ""
    try:
        return str(orjson.loads(b'"' + match.group(1) + b'"'))
    except orjson.JSONDecodeError:
        return ""


def _initial_events_end(obj: dict[str, Any]) -> bool:
    """Whether a BOOKMARK ends a watch-list's initial events (metav1.InitialEventsAnnotationKey)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return isinstance(annotations, dict) and annotations.get(INITIAL_EVENTS_END) == "true"


def _uid(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    uid = meta.get("uid") if isinstance(meta, dict) else None
    return uid if isinstance(uid, str) else ""


def _status_error(
    server: str, what: str, body: dict[str, Any], *, status: int, reason: str = "", credentials: str = ""
) -> APIServerError:
    """An API server Status (or its absence) as one line; Gone for 410."""
    message = " ".join(str(body.get("message") or "").split())[:300]
    reason = str(body.get("reason") or reason)
    text = f"{server}: {what}: HTTP {status or '?'} {reason}".rstrip() + (f": {message}" if message else "")
    if status == 401:
        text += f" (check the credentials of {credentials})"
    elif status == 403:
        text += " (pods-api needs get, list and watch on pods; see deploy/overlays/apiserver/rbac.yaml)"
    return (Gone if status == 410 else APIServerError)(text, status=status)


def _transport_problem(exc: BaseException) -> str:
    """What went wrong on the connection, in words (aiohttp's own are about its internals)."""
    import aiohttp

    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"TLS certificate not trusted: {_one_line(exc.certificate_error)}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect: {_one_line(exc.os_error) or type(exc.os_error).__name__}"
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return "connection lost mid-response"
    if isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError):
        return "timed out"
    return _one_line(exc) or type(exc).__name__


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


# -- the command line (pods_api/sources/registry.py) ------------------------------------------------

SOURCE_FLAGS: tuple[str, ...] = ("--apiserver",)


def add_flags(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "--apiserver",
        action="store_true",
        help="serve the pods the API server has bound to this node (list and watch, as the kubelet)",
    )
    add(
        "--kubeconfig",
        type=Path,
        metavar="FILE",
        help="for --apiserver: a kubeconfig (default: $KUBECONFIG, else the in-cluster ServiceAccount)",
    )
    add("--kube-context", metavar="NAME", help="for --apiserver: the kubeconfig context to use")
    add(
        "--apiserver-watch-timeout",
        type=argtypes.positive_int,
        default=WATCH_TIMEOUT[1],
        metavar="SECONDS",
        help=(
            "for --apiserver: the longest watch the server is asked for (each drawn from half that up;"
            f" default {WATCH_TIMEOUT[1]}); the source is stale after failing for that"
            f" + {WATCH_READ_MARGIN:g} s"
        ),
    )


def from_args(args: argparse.Namespace, context: SourceContext) -> list[Source]:
    if not args.apiserver:
        if args.kubeconfig or args.kube_context or args.apiserver_watch_timeout != WATCH_TIMEOUT[1]:
            raise ValueError("--kubeconfig, --kube-context and --apiserver-watch-timeout are for --apiserver")
        return []
    longest: int = args.apiserver_watch_timeout
    if args.kubeconfig and not args.kubeconfig.is_file():
        raise ValueError(f"--kubeconfig {args.kubeconfig}: no such file")
    return [
        APIServerSource(
            node_name=context.node_name,
            kubeconfig=args.kubeconfig,
            context=args.kube_context,
            on_error=context.on_error,
            on_connected=connected_gauge(context, SOURCE_NAME),
            watch_timeout=(max(1, longest // 2), longest),
            stale_after=longest + WATCH_READ_MARGIN,
        )
    ]
