"""A test kube-apiserver: the real wire protocol of `GET /api/v1/pods`, list and watch, on
127.0.0.1 over TLS (a CA and certificate made here) with a bearer token.

What it speaks, as the real server does:
- `GET /api/v1/pods?fieldSelector=spec.nodeName=N` (also `metadata.name`, `metadata.namespace`,
  `status.phase`; `=`, `==`, `!=`, comma-separated): a `PodList` with `metadata.resourceVersion`
  and items without kind/apiVersion; an unsupported field label is a 400 `Status`.
- `?watch=1|true`: a chunked stream of `{"type","object"}` lines, one per event. From
  `resourceVersion=N`, the events after N; without one (or "0"), ADDED for every current pod
  first. A pod that starts or stops matching the selector is ADDED / DELETED, as the watch cache
  sends it. `allowWatchBookmarks=true` gets BOOKMARK events when the test sends them.
  `timeoutSeconds` ends the stream cleanly.
- `sendInitialEvents=true` (a watch-list), with `watch_list` set (a v1.34+ server): ADDED for
  every current pod, then a BOOKMARK annotated `k8s.io/initial-events-end: "true"` at the
  current resourceVersion, then the watch goes on; it needs `resourceVersionMatch=NotOlderThan`
  and `allowWatchBookmarks=true`, else 422. Without `watch_list` (the default: an older server,
  or the `WatchList` gate off) it is a 422 `Invalid`, as such a server answers.
- A resourceVersion older than the history kept (`compact()`): `410 Gone` with a `Status`, as an
  ERROR event on a 200 (what the watch cache does) or, with `gone_as_http`, as the response.
- A missing or wrong bearer token: 401 with a `Status`.
- `drop_watches()` cuts every open watch mid-stream (no closing chunk); `stop()` and `start()`
  take the server down and bring it back on the same port; `restart(keep_history=False)` is a
  real API server's restart: its watch cache starts empty, so older resourceVersions get 410.

It runs uvicorn in a thread of its own, so a test may block (waiting for a log line of a
`pods-api serve` process) while this server answers.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import logging
import queue
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import uvicorn
import yaml
from servers import make_tls
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

# Safety net for a test waiting on a request that never comes.
REQUEST_WAIT = 20.0
_FIELDS: dict[str, Callable[[dict[str, Any]], str]] = {
    "spec.nodeName": lambda p: (p.get("spec") or {}).get("nodeName") or "",
    "metadata.name": lambda p: p["metadata"].get("name", ""),
    "metadata.namespace": lambda p: p["metadata"].get("namespace", ""),
    "status.phase": lambda p: (p.get("status") or {}).get("phase") or "",
}
_DROP = object()  # a watch queue item: cut the connection


class _Dropped(Exception):
    """Raised inside a watch stream: uvicorn then closes the connection without the last chunk."""


logging.getLogger("uvicorn.error").addFilter(
    lambda record: not (record.exc_info and isinstance(record.exc_info[1], _Dropped))
)


@dataclass(frozen=True)
class Seen:
    """A request the server answered."""

    query: dict[str, str]
    authorization: str | None
    status: int


@dataclass(frozen=True)
class _Change:
    rv: int
    old: dict[str, Any] | None  # None: created
    new: dict[str, Any] | None  # None: deleted


@dataclass(eq=False)
class _Watch:
    matches: Callable[[dict[str, Any]], bool]
    bookmarks: bool
    queue: asyncio.Queue[Any]


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    """A `metav1.Status` body, as the API server sends with every error."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class KubeAPIServer:
    def __init__(self, directory: Path, *, token: str = "t0ken-for-tests") -> None:
        self.directory = directory
        self.token = token
        self.gone_as_http = False  # 410 as the watch's HTTP status instead of an ERROR event
        self.ignore_field_selector = False  # as a broken proxy or a fake server might
        self.watch_list = False  # whether it offers sendInitialEvents (the WatchList gate)
        self.port = 0
        self.seen: queue.Queue[Seen] = queue.Queue()
        self._lock = threading.Lock()
        self._pods: dict[str, dict[str, Any]] = {}  # uid -> the stored object
        self._rv = 100  # resourceVersions are opaque to clients; start somewhere not 0 or 1
        self._history: list[_Change] = []
        self._oldest = self._rv  # a watch from before this is 410
        self._watches: list[_Watch] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        tls = make_tls(directory)
        self.ca_file, self._cert_file, self._key_file = tls.ca, tls.cert, tls.key

    # -- running -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Listen (again) on the same port as before, or a free one the first time."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        app = Starlette(routes=[Route("/api/v1/pods", self._pods_route)])
        config = uvicorn.Config(
            app,
            ssl_certfile=str(self._cert_file),
            ssl_keyfile=str(self._key_file),
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        started = threading.Event()
        server = self._server = _ThreadServer(config, started)
        self._thread = threading.Thread(target=self._run, args=(server, sock), daemon=True)
        self._thread.start()
        if not started.wait(REQUEST_WAIT):
            raise RuntimeError("the test API server did not start")

    def _run(self, server: uvicorn.Server, sock: socket.socket) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            await server.serve(sockets=[sock])

        asyncio.run(main())

    def stop(self) -> None:
        """Go down: open watches are cut and connections refused until `start`."""
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self.drop_watches()
        self._thread.join(REQUEST_WAIT)
        self._server = self._thread = None

    def restart(self, *, keep_history: bool = True) -> None:
        """Stop and start; without `keep_history`, as a real restart: the watch cache starts at
        the current resourceVersion, so a watch from any earlier one gets 410."""
        self.stop()
        if not keep_history:
            self.compact()
        self.start()

    # -- what the test changes -------------------------------------------------------------------

    def put(self, pod: dict[str, Any]) -> dict[str, Any]:
        """Create or update a pod (by uid, given one if it has none); the stored object."""
        pod = copy.deepcopy(pod)
        pod.pop("kind", None)
        pod.pop("apiVersion", None)
        meta = pod.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        meta.setdefault("uid", str(uuid.uuid4()))
        with self._lock:
            self._rv += 1
            meta["resourceVersion"] = str(self._rv)
            old = self._pods.get(meta["uid"])
            self._pods[meta["uid"]] = pod
            self._record(_Change(self._rv, old, pod))
        return pod

    def delete(self, uid: str) -> None:
        with self._lock:
            old = self._pods.pop(uid)
            self._rv += 1
            self._record(_Change(self._rv, old, None))

    def compact(self) -> None:
        """Forget the history: a watch from an earlier resourceVersion gets 410 Gone."""
        with self._lock:
            self._history.clear()
            self._oldest = self._rv

    def bookmark(self) -> None:
        """A BOOKMARK at the current resourceVersion to every watch that allows them."""
        with self._lock:
            line = _line("BOOKMARK", {"metadata": {"resourceVersion": str(self._rv)}})
            for watch in self._watches:
                if watch.bookmarks:
                    self._send(watch, line)

    def send_raw(self, line: bytes) -> None:
        """Bytes to every open watch as they are: a corrupt event from a broken proxy."""
        with self._lock:
            for watch in self._watches:
                self._send(watch, line)

    def drop_watches(self) -> None:
        """Cut every open watch mid-stream, as a failing load balancer would."""
        with self._lock:
            for watch in self._watches:
                self._send(watch, _DROP)
            self._watches.clear()

    @property
    def resource_version(self) -> str:
        with self._lock:
            return str(self._rv)

    def watchers(self) -> int:
        with self._lock:
            return len(self._watches)

    async def next_request(self, *, watch: bool | None = None, **want: str) -> Seen:
        """The next request answered that is a watch (or a list, or either when None) and whose
        query has the `want` items; others before it are skipped, and so is a refused watch-list
        (unless `want` names sendInitialEvents)."""
        async with asyncio.timeout(REQUEST_WAIT):
            while True:
                seen = await asyncio.to_thread(self.seen.get, True, REQUEST_WAIT)
                if seen.status == 422 and "sendInitialEvents" not in want:
                    continue  # a watch-list refused: the list and watch after it are what counts
                if watch is not None and _true(seen.query.get("watch", "")) != watch:
                    continue
                if all(seen.query.get(k) == v for k, v in want.items()):
                    return seen

    def kubeconfig(self, path: Path, *, token: str | None = None, token_file: Path | None = None) -> Path:
        """A kubeconfig for this server: its CA (as data) and a bearer token (or token file)."""
        user: dict[str, Any] = {"token": token or self.token}
        if token_file is not None:
            user = {"tokenFile": str(token_file)}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "test",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": base64.b64encode(self.ca_file.read_bytes()).decode(),
                    },
                }
            ],
            "users": [{"name": "node", "user": user}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "node"}}],
            "current-context": "test",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    # -- serving -------------------------------------------------------------------------------

    def _record(self, change: _Change) -> None:
        """Keep a change and send it to each watch it concerns (the lock is held)."""
        self._history.append(change)
        for watch in self._watches:
            line = _event_line(change, watch.matches)
            if line is not None:
                self._send(watch, line)

    def _send(self, watch: _Watch, item: Any) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(watch.queue.put_nowait, item)

    async def _pods_route(self, request: Request) -> Response:
        query = dict(request.query_params)
        authorization = request.headers.get("authorization")
        response = self._answer(query, authorization)
        self.seen.put(Seen(query, authorization, response.status_code))
        return response

    def _answer(self, query: dict[str, str], authorization: str | None) -> Response:
        if authorization != f"Bearer {self.token}":
            return _json(401, status(401, "Unauthorized", "Unauthorized"))
        try:
            matches = _selector("" if self.ignore_field_selector else query.get("fieldSelector", ""))
        except ValueError as exc:
            return _json(400, status(400, "BadRequest", str(exc)))
        if _true(query.get("watch", "")):
            return self._watch(query, matches)
        with self._lock:
            items = [p for _, p in sorted(self._pods.items()) if matches(p)]
            body = {
                "kind": "PodList",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self._rv)},
                "items": items,
            }
            return _json(200, body)

    def _watch(self, query: dict[str, str], matches: Callable[[dict[str, Any]], bool]) -> Response:
        rv_text = query.get("resourceVersion", "")
        timeout = float(query.get("timeoutSeconds") or 1800)
        watch = _Watch(matches, _true(query.get("allowWatchBookmarks", "")), asyncio.Queue())
        initial = _true(query.get("sendInitialEvents", ""))
        if initial:
            refused = self._refuse_watch_list(query, watch.bookmarks)
            if refused is not None:
                return _json(422, status(422, "Invalid", refused))
        with self._lock:
            if initial:
                first = [_line("ADDED", p) for _, p in sorted(self._pods.items()) if matches(p)]
                end = {"resourceVersion": str(self._rv), "annotations": {"k8s.io/initial-events-end": "true"}}
                first.append(_line("BOOKMARK", {"metadata": end}))
            elif rv_text in ("", "0"):
                first = [_line("ADDED", p) for _, p in sorted(self._pods.items()) if matches(p)]
            elif int(rv_text) < self._oldest:
                gone = status(410, "Expired", f"too old resource version: {rv_text} ({self._oldest})")
                if self.gone_as_http:
                    return _json(410, gone)
                first = [_line("ERROR", gone), _DROP_AFTER]
            else:
                since = int(rv_text)
                lines = (_event_line(c, matches) for c in self._history if c.rv > since)
                first = [line for line in lines if line is not None]
            if _DROP_AFTER not in first:
                self._watches.append(watch)
        return StreamingResponse(self._stream(watch, first, timeout), media_type="application/json")

    def _refuse_watch_list(self, query: dict[str, str], bookmarks: bool) -> str | None:
        """Why a watch-list is refused (the API server's validation), or None."""
        if not self.watch_list:
            return (
                "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless"
                " the WatchList feature gate is enabled"
            )
        if query.get("resourceVersionMatch") != "NotOlderThan":
            return (
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting"
                " resourceVersionMatch to NotOlderThan"
            )
        if not bookmarks:
            return "allowWatchBookmarks: Forbidden: sendInitialEvents requires allowWatchBookmarks"
        return None

    async def _stream(self, watch: _Watch, first: list[Any], seconds: float) -> AsyncIterator[bytes]:
        try:
            for line in first:
                if line is _DROP_AFTER:
                    return  # the ERROR event ends the stream, cleanly
                yield line
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    while True:
                        item = await watch.queue.get()
                        if item is _DROP:
                            raise _Dropped
                        yield item
        finally:
            with self._lock:
                if watch in self._watches:
                    self._watches.remove(watch)


_DROP_AFTER = object()  # in a watch's first lines: end the stream here


class _ThreadServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, started: threading.Event) -> None:
        super().__init__(config)
        self._started = started

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # not the main thread: the test process's signals are not ours

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self._started.set()


def _json(code: int, body: dict[str, Any]) -> Response:
    return Response(orjson.dumps(body), status_code=code, media_type="application/json")


def _line(kind: str, obj: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": kind, "object": {"kind": "Pod", "apiVersion": "v1", **obj}}) + b"\n"


def _event_line(change: _Change, matches: Callable[[dict[str, Any]], bool]) -> bytes | None:
    """The event a watch with this selector sees for a change, as the watch cache computes it."""
    was = change.old is not None and matches(change.old)
    now = change.new is not None and matches(change.new)
    if change.new is None:
        if not was:
            return None
        assert change.old is not None
        gone = copy.deepcopy(change.old)
        gone["metadata"]["resourceVersion"] = str(change.rv)
        return _line("DELETED", gone)
    if now:
        return _line("MODIFIED" if was else "ADDED", change.new)
    return _line("DELETED", change.new) if was else None


def _selector(text: str) -> Callable[[dict[str, Any]], bool]:
    """A field selector as the API server parses one for pods."""
    terms: list[tuple[str, str, bool]] = []
    for term in filter(None, text.split(",")):
        op = next((op for op in ("!=", "==", "=") if op in term), None)
        if op is None:
            raise ValueError(f"invalid field selector: {term!r}")
        name, _, value = term.partition(op)
        equal = op != "!="
        if name not in _FIELDS:
            raise ValueError(f'field label not supported: "{name}"')
        terms.append((name, value, equal))
    return lambda pod: all((_FIELDS[name](pod) == value) == equal for name, value, equal in terms)


def _true(text: str) -> bool:
    return text.lower() not in ("", "0", "false")  # apimachinery's Convert_Slice_string_To_bool
