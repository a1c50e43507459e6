"""`--manifest-url URL`: static pods polled over HTTP, as the kubelet's manifest URL source.

The body is one Pod or a PodList (YAML or JSON) and gets the kubelet's static-pod rules with
config.source "http". Polled every `interval` seconds; an ETag is sent back as If-None-Match, and
a 304 means nothing changed. A failed fetch or a body that does not decode keeps the last good
pods and is retried with jittered exponential backoff, capped at the interval. Header values are
credentials: they appear in no name and no log line, and neither does a password in the URL.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence

import httpx

from pods_api.core.cache import SourceSink
from pods_api.core.pod import PodVersion
from pods_api.core.sources import ErrorCounter
from pods_api.core.sources.loader import (
    KUBELET_FORMAT,
    MAX_MANIFEST_BYTES,
    ManifestError,
    Reporter,
    pod_objects,
    unique_pods,
)
from pods_api.core.sources.manifests import StaticPodRules

log = logging.getLogger(__name__)

# How long one fetch may take: the kubelet's HTTP source uses this client timeout.
REQUEST_TIMEOUT = 10.0
# The first retry after a failure; it doubles with each failure up to the poll interval.
FIRST_RETRY = 1.0


class ManifestURLSource:
    def __init__(
        self,
        url: str,
        *,
        node_name: str,
        headers: Sequence[tuple[str, str]] = (),
        interval: float = 20.0,
        on_error: ErrorCounter | None = None,
    ) -> None:
        parsed = _parse_url(url)
        self.url = url  # as given: part of generated uids, as with the kubelet
        self.name = url_source_name(url)
        # Userinfo goes as Basic auth (as Go's client sends it), never in the URL requested:
        # httpx logs that URL.
        self._request_url = parsed.copy_with(userinfo=b"")
        self._auth = httpx.BasicAuth(parsed.username, parsed.password) if parsed.userinfo else None
        self._headers = list(headers)
        self._interval = interval
        self._rules = StaticPodRules(node_name, config_source="http")
        self._reporter = Reporter(self.name, on_error)
        self._etag: str | None = None  # of the last good body
        self._body: bytes | None = None  # the last good body
        self._pods: list[PodVersion] = []  # from it
        self._problems: tuple[list[str], list[str]] = ([], [])  # errors, warnings of that body

    async def run(self, sink: SourceSink) -> None:
        failures = 0
        async with httpx.AsyncClient(
            auth=self._auth, headers=self._headers, timeout=REQUEST_TIMEOUT, follow_redirects=True
        ) as client:
            while True:
                if await self._poll(client, sink):
                    failures, delay = 0, self._interval
                else:
                    failures += 1
                    delay = self._backoff(failures)
                await asyncio.sleep(delay)

    def _backoff(self, failures: int) -> float:
        # Jitter keeps many nodes that lost the same server from coming back in lockstep.
        return min(self._interval, FIRST_RETRY * 2.0 ** (failures - 1)) * random.uniform(0.5, 1.0)

    async def _poll(self, client: httpx.AsyncClient, sink: SourceSink) -> bool:
        """One fetch; whether it gave a complete state."""
        try:
            body, etag = await self._fetch(client)
        except ManifestError as exc:
            self._reporter.attempt_failed(str(exc))
            return False
        if body is not None and body != self._body:
            warnings: list[str] = []
            try:
                pods, duplicates = self._decode(body, warnings)
            except ManifestError as exc:
                self._reporter.report([str(exc)], self._problems[1])
                return False
            self._body, self._pods, self._problems = body, pods, (duplicates, warnings)
            self._rules.retain({pod.uid for pod in pods})
        if body is not None:
            self._etag = etag
        self._reporter.report(*self._problems)
        # Every good poll, changed or not: the cache ignores what it has, and takes a pod it
        # refused earlier because another source held its uid, once that uid is free.
        sink.replace(self._pods)
        sink.mark_synced()
        return True

    async def _fetch(self, client: httpx.AsyncClient) -> tuple[bytes | None, str | None]:
        """The body and its ETag; (None, etag) when the server says it is unchanged (304)."""
        request_headers = {"If-None-Match": self._etag} if self._etag and self._body is not None else {}
        try:
            async with client.stream("GET", self._request_url, headers=request_headers) as response:
                if response.status_code == httpx.codes.NOT_MODIFIED and request_headers:
                    return None, self._etag
                if response.status_code != httpx.codes.OK:  # the kubelet takes nothing else
                    status = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
                    raise ManifestError(self.name, status)
                return await self._read_body(response), response.headers.get("ETag")
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as exc:  # InvalidURL: a redirect
            # Never the request itself: its headers may hold tokens.
            raise ManifestError(self.name, f"fetch failed: {type(exc).__name__}: {exc}") from None

    async def _read_body(self, response: httpx.Response) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > MAX_MANIFEST_BYTES:
                raise ManifestError(self.name, f"body over the {MAX_MANIFEST_BYTES} byte limit")
            chunks.append(chunk)
        return b"".join(chunks)

    def _decode(self, body: bytes, warnings: list[str]) -> tuple[list[PodVersion], list[str]]:
        """The pods of a body, and the duplicates dropped from it (the kubelet serves the first)."""
        if not body.strip():
            # As the kubelet: an empty 200 is the server saying "no pods" (it logs and serves none).
            warnings.append(f"{self.name}: empty body; serving no pods from it")
            return [], []
        objects = pod_objects(body, self.name, KUBELET_FORMAT)
        built = [self._rules.build(obj, where, self.name, self.url, warnings) for where, obj in objects]
        return unique_pods([(self.name, built)], by_name=True)


def url_source_name(url: str) -> str:
    """The source's name for `url`, fit for logs and metric labels: "url:" and the URL with any
    password in it masked."""
    try:
        return f"url:{_redacted(httpx.URL(url))}"
    except httpx.InvalidURL:
        return "url:(invalid URL)"


def _parse_url(url: str) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ValueError(f"manifest URL is not a valid URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"manifest URL must be http:// or https://, got {_redacted(parsed)}")
    return parsed


def _redacted(url: httpx.URL) -> str:
    """The URL as logs may show it: a password in it is a credential."""
    if url.password:
        url = url.copy_with(username=url.username, password="xxxxx")
    return str(url)
