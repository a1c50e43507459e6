"""The Kubernetes watch (`?watch=1`): newline-delimited `{"type":...,"object":...}` as the API
server streams it, as one more Encoding of the one watch stream (core/store/stream.py), with what the
API server adds around the events: periodic BOOKMARKs (`allowWatchBookmarks`), the end of a
watch-list's initial events (`sendInitialEvents=true`), and `timeoutSeconds`.

Which events a view shows (selectors included: a pod leaving the selection is DELETED, one
entering it ADDED), the snapshot or resume, and the frame cache are core/store/stream.py's. Each
event's object carries the revision of that event as `metadata.resourceVersion`; a snapshot's
ADDED carry each pod's own revision. So a client that resumes from the last resourceVersion it
saw gets exactly the events after it.

`respond` is the Watch call: its parameters checked as the API server checks them, then the
stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Callable

from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.api.statuserrors import StatusError
from pods_api.core.api.table import IncludeObject
from pods_api.core.assembly import Core
from pods_api.core.query.view import View
from pods_api.core.store.stream import Encoding, Watch
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import EventType, TookNothing, WatchEnded
from pods_api.gateway.http import formats
from pods_api.gateway.http.admission import Call
from pods_api.gateway.http.params import Args
from pods_api.gateway.http.watchbody import WatchBody, Wording
from pods_api.gateway.kube import listoptions
from pods_api.gateway.kube.apistatus import expired, from_status, too_large
from pods_api.gateway.kube.objects import COLUMNS, COLUMNS_NULL, bookmark, error_event, pod_bytes, table

# A watch without timeoutSeconds ends after a random time in [1800, 3600) s, as the API server's
# --min-request-timeout (1800) spreads its watches, so a fleet of clients does not re-list at once.
MIN_REQUEST_TIMEOUT = 1800.0


def _event(kind: EventType, pod: PodVersion, view: View, revision: int | None) -> bytes:
    # A snapshot's ADDED has no event revision: the pod's own is its resourceVersion.
    stamped = pod_bytes(pod, pod.revision if revision is None else revision)
    return b'{"type":"%s","object":%s}\n' % (kind.name.encode(), stamped)


# The start is one write. Without sendInitialEvents nothing marks its end (as the API server).
JSON = Encoding("kube-json", _event, lambda revision, resumed: b"", join_start=True)
# With sendInitialEvents=true: the initial events end with an annotated BOOKMARK.
INITIAL_EVENTS = Encoding(
    "kube-json-initial",
    _event,
    lambda revision, resumed: bookmark(revision, initial_events_end=True),
    join_start=True,
)


def table_encoding(include: IncludeObject, group_version: str) -> Encoding:
    """Each event's object is a one-row Table (kubectl get -w). The rows hold ages, so the
    encoding is named by the second it was made in: frames and snapshot starts are shared
    within that second, never served with stale ages later. Headers are added to a watch's
    first event only (`with_headers`), as the API server does."""

    def event(kind: EventType, pod: PodVersion, view: View, revision: int | None) -> bytes:
        stamp = pod.revision if revision is None else revision
        body = table([(pod, stamp)], stamp, include, no_headers=True, group_version=group_version)
        return b'{"type":"%s","object":%s}\n' % (kind.name.encode(), body)

    name = f"kube-table:{group_version}:{include}:{int(time.time())}"
    return Encoding(name, event, lambda revision, resumed: b"")


def with_headers(frame: bytes) -> bytes:
    """The first Table event of a watch, with the column definitions (the first `null` of the
    frame is the Table's: a JSON string cannot hold that text unescaped, and it comes before
    the rows)."""
    return frame.replace(COLUMNS_NULL, COLUMNS, 1)


def default_timeout() -> float:
    return MIN_REQUEST_TIMEOUT * (1 + random.random())


async def events(
    watch: Watch,
    encoding: Encoding,
    *,
    seconds: float,
    bookmarks: float | None,
    revision: Callable[[], int],
    headers_first: bool = False,
) -> AsyncIterator[bytes]:
    """The watch's frames, ending after `seconds`; raises WatchEnded when the watch ends (the
    one watch body says it: gateway/http/watchbody.py). With `bookmarks`, a BOOKMARK with the current
    revision whenever that many seconds pass without a frame."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    frames = watch.frames(encoding).__aiter__()
    pending: asyncio.Future[bytes] | None = None
    first = headers_first
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(frames))
            left = deadline - loop.time()
            if left <= 0:
                return
            await asyncio.wait({pending}, timeout=min(left, bookmarks) if bookmarks else left)
            if pending.done():
                frame, pending = pending.result(), None
                if frame:
                    if first:
                        frame, first = with_headers(frame), False
                    yield frame
            elif bookmarks and watch.watcher.caught_up and loop.time() < deadline:
                # Every event published so far has been taken (and shown, or not in the view):
                # the client may resume from the current revision.
                yield bookmark(revision())
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, WatchEnded, StopAsyncIteration):
                await pending
        with contextlib.suppress(RuntimeError, WatchEnded):
            await frames.aclose()  # type: ignore[attr-defined]
        watch.close()


def _ended(exc: StatusError) -> bytes:
    """A watch the server ends (stopping, a watcher dropped) ends with the end of its body, as
    the API server closes one: the client watches again from its last resourceVersion. A client
    cut off for taking nothing hears why first: an ERROR event with the Status (429, as client-go
    backs off before it watches again)."""
    if isinstance(exc, TookNothing):
        return error_event(from_status(exc).body())
    return b""


# What the one watch body (gateway/http/watchbody.py) says of a Kubernetes watch besides its events.
WORDING = Wording(media_type=formats.JSON, ended=_ended)


def respond(
    core: Core, request: Request, args: Args, call: Call, namespace: str | None, name: str | None = None
) -> Response:
    """The watch a request asks for, from where its resourceVersion and sendInitialEvents say;
    of one pod by `name` (the deprecated /api/v1/watch/namespaces/{ns}/pods/{name})."""
    view, media = listoptions.view(args, namespace, name), listoptions.accepted(request)
    revision = listoptions.revision(args)
    initial = listoptions.flag(args, listoptions.INITIAL_EVENTS)
    bookmarks = listoptions.flag(args, listoptions.BOOKMARKS) or False
    timeout = listoptions.count(args, listoptions.TIMEOUT)
    listoptions.validate(args)
    current = core.cache.revision
    if revision and revision > current:
        raise too_large(revision, current)
    since: int | None = None  # a snapshot's ADDED first
    if initial is False:
        since = current  # NotOlderThan: no initial events, from now (already >= revision)
    elif initial is None and revision:
        if core.cache.events_since(revision) is None:
            return _expired(revision, current)
        since = revision
    # The end of the initial events is a BOOKMARK: only to a client that takes bookmarks
    # (apiserver's cacher, as it decides whether to send that bookmark).
    encoding = INITIAL_EVENTS if initial and bookmarks else JSON
    if media in listoptions.TABLES:
        encoding = table_encoding(listoptions.include(args), listoptions.table_version(media))
    # TooManyWatchers and ServerStopping are refusals the view answers as Status errors.
    watch = core.streams.open(view, since)
    frames = events(
        watch,
        encoding,
        seconds=float(timeout) if timeout else default_timeout(),
        bookmarks=core.config.heartbeat if bookmarks else None,
        revision=lambda: core.cache.revision,
        headers_first=media in listoptions.TABLES,
    )
    return WatchBody(frames, WORDING, call, send_timeout=core.config.send_timeout, watch=watch)


def _expired(revision: int, current: int) -> Response:
    """What the API server's watch cache answers for a revision it no longer holds: 200 and
    one ERROR event, 410 Expired (client-go's reflector relists; the Python client raises
    ApiException(410))."""
    status = expired(f"too old resource version: {revision} ({current})")
    return Response(error_event(status.body()), media_type=formats.JSON)
