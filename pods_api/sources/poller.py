"""Polling one HTTP URL, for the sources that read a URL over and over: the manifest URL and the
kubelet's `/pods`.

    poller = Poller(url, flag="--manifest-url", interval=20.0, ...)
    await poller.run(take, failed)

Every `interval` seconds a GET; an ETag is sent back as If-None-Match once a body was taken, and
a 304 is handed to `take` as None ("unchanged"). `take(body)` says whether the body gave a
complete state: if it did, its ETag is kept and the next poll is an interval away; if not (and
after every failed fetch, which goes to `failed`) the poll is retried with jittered exponential
backoff, capped at the interval. A fetch has a total deadline, headers and body together, so a
server that drips its body cannot stall the source. Credentials never appear in the name, the
URL httpx logs, or an error: a password in the URL goes as Basic auth, header values and `auth`
are never shown. Redirects are followed, but a redirect to another origin (scheme, host or port)
carries none of the configured headers, as curl drops Authorization there (httpx drops the
Basic auth itself): they were given for the URL's server, not for wherever it points.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import ssl
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pods_api.sources.reading import MAX_MANIFEST_BYTES

if TYPE_CHECKING:
    # Imported where used: httpx and what it loads (its CLI's click, rich and pygments when they
    # are installed, h2 and idna) are ~7 MiB resident, which only a server polling a URL (the
    # sources that give one) should pay for (BENCHMARKS.md, "Memory").
    import httpx

# How long one fetch may take in all (connecting, headers, the whole body): the kubelet's HTTP
# source uses this client timeout, which in Go is a total deadline, not one between reads.
FETCH_DEADLINE = 10.0
# A header value read from a file (a token) is a line or two, never more.
MAX_HEADER_FILE_BYTES = 64 * 1024
# What a query value, a password or a header value is shown as.
MASKED = "xxxxx"
# The first retry after a failure; it doubles with each failure up to the poll interval.
FIRST_RETRY = 1.0


class PollError(Exception):
    """A fetch that gave no body. `str()` is one line and holds no credential; `status` is the
    HTTP status when the server answered with one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


# Takes a body (None: unchanged since the last one taken); returns whether it gave a complete state.
Take = Callable[[bytes | None], bool]
Failed = Callable[[PollError], None]


class Poller:
    def __init__(
        self,
        url: str,
        *,
        flag: str,
        interval: float,
        headers: Sequence[tuple[str, str]] = (),
        header_files: Sequence[tuple[str, Path]] = (),
        # httpx's, or a callable that sets a header on each request (httpx wraps it in its own).
        auth: httpx.Auth | Callable[[httpx.Request], httpx.Request] | None = None,
        verify: ssl.SSLContext | bool = True,
        max_bytes: int = MAX_MANIFEST_BYTES,
        deadline: float = FETCH_DEADLINE,
    ) -> None:
        """Raises ValueError, naming `flag`, for a URL that is not http(s)://host/..."""
        import httpx

        parsed = parse_url(url, flag)
        self.url = url  # as given
        self.shown = redacted(parsed)  # as names and logs may show it
        # Userinfo goes as Basic auth (as Go's client sends it), never in the URL requested:
        # httpx logs that URL.
        self._request_url = parsed.copy_with(userinfo=b"")
        if auth is None and parsed.userinfo:
            auth = httpx.BasicAuth(parsed.username, parsed.password)
        self._auth = auth
        self._headers = list(headers)
        # Read at every fetch, so a rotated token is sent from the next poll on (as the kubelet
        # re-reads its token files); a value given in a file is never on the command line, where
        # any local user reads it from /proc/PID/cmdline.
        self._header_files = list(header_files)
        self._verify = verify
        self.interval = interval
        self._max_bytes = max_bytes
        self._deadline = deadline
        self._etag: str | None = None  # of the last body taken

    async def run(self, take: Take, failed: Failed) -> None:
        """Poll until cancelled."""
        import httpx

        failures = 0
        async with httpx.AsyncClient(
            auth=self._auth,
            headers=self._headers,
            verify=self._verify,
            timeout=self._deadline,  # per step as well: a refused connect fails at once
            follow_redirects=True,
            event_hooks={"request": [self._drop_headers_off_origin]},
        ) as client:
            while True:
                try:
                    body, etag = await self._fetch(client)
                except PollError as exc:
                    failed(exc)
                    good = False
                else:
                    good = take(body)
                    if good and body is not None:
                        self._etag = etag
                failures = 0 if good else failures + 1
                await asyncio.sleep(self.backoff(failures) if failures else self.interval)

    async def _drop_headers_off_origin(self, request: httpx.Request) -> None:
        """Called for every request, redirects included: one to another origin loses the
        configured headers (those from files too)."""
        if _origin(request.url) == _origin(self._request_url):
            return
        for name, _ in (*self._headers, *self._header_files):
            request.headers.pop(name, None)

    def backoff(self, failures: int) -> float:
        # Jitter keeps many nodes that lost the same server from coming back in lockstep.
        return min(self.interval, FIRST_RETRY * 2.0 ** min(failures - 1, 32)) * random.uniform(0.5, 1.0)

    async def _fetch(self, client: httpx.AsyncClient) -> tuple[bytes | None, str | None]:
        """The body and its ETag; (None, etag) when the server says it is unchanged (304)."""
        import httpx

        request_headers = {"If-None-Match": self._etag} if self._etag else {}
        request_headers.update(read_header_files(self._header_files))
        try:
            async with asyncio.timeout(self._deadline):
                async with client.stream("GET", self._request_url, headers=request_headers) as response:
                    if response.status_code == httpx.codes.NOT_MODIFIED and request_headers:
                        return None, self._etag
                    if response.status_code != httpx.codes.OK:  # the kubelet takes nothing else
                        status = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
                        raise PollError(status, response.status_code)
                    return await self._read_body(response), response.headers.get("ETag")
        except TimeoutError:
            raise PollError(f"no complete answer within {self._deadline:g}s") from None
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as exc:  # InvalidURL: a redirect
            # Never the request itself: its headers may hold tokens; and any URL in the message
            # (a redirect's) has its password and query values masked.
            raise PollError(f"fetch failed: {type(exc).__name__}: {scrub(str(exc))}") from None

    async def _read_body(self, response: httpx.Response) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self._max_bytes:
                raise PollError(f"body over the {self._max_bytes} byte limit")
            chunks.append(chunk)
        return b"".join(chunks)


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host, url.port or default


# Query parameter names whose values are credentials, as cloud storage and API gateways name
# them (a signed URL's `X-Amz-Signature`, `sig`, `access_token`, `api_key`, ...).
_CREDENTIAL_PARAM = re.compile(r"token|key|secret|pass|auth|sig|credential", re.IGNORECASE)


def credentials_in(url: str) -> list[str]:
    """What in `url` looks like a credential: "a password", and the names of query parameters
    named like one (never their values)."""
    import httpx

    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return []
    found = ["a password"] if parsed.password else []
    found += [f"query parameter {name!r}" for name in parsed.params if _CREDENTIAL_PARAM.search(name)]
    return found


def parse_url(url: str, flag: str) -> httpx.URL:
    """`url` parsed; ValueError naming `flag` (and never a password) unless it is http(s)://host."""
    import httpx

    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ValueError(f"{flag}: not a valid URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        # Without a scheme, `user:password@host` parses as scheme "user": never echo what has an @.
        shown = "(not shown: it has an @ and may hold a password)" if "@" in url else redacted(parsed)
        raise ValueError(f"{flag} {shown}: must be an http:// or https:// URL")
    return parsed


def shown_url(url: str) -> str:
    """`url` as names and logs may show it."""
    import httpx

    try:
        return redacted(httpx.URL(url))
    except httpx.InvalidURL:
        return "(invalid URL)"


def redacted(url: httpx.URL) -> str:
    """The URL as logs, names and metric labels may show it: a password in it is a credential,
    and so may be any query value (`?token=...`); parameter names stay, to tell URLs apart."""
    if url.password:
        url = url.copy_with(username=url.username, password=MASKED)
    if url.query:
        url = url.copy_with(params=[(name, MASKED) for name, _ in url.params.multi_items()])
    return str(url)


class _ScrubURLs(logging.Filter):
    """httpx logs each request's full URL (at INFO, which the command line turns off); should
    anyone turn it on, the URL still shows no password and no query value."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = scrub(record.getMessage()), ()
        return True


logging.getLogger("httpx").addFilter(_ScrubURLs())

_URLS = re.compile(r"""https?://[^\s'"<>]+""")


def scrub(text: str) -> str:
    """`text` with every URL in it redacted."""
    return _URLS.sub(lambda match: shown_url(match.group(0)), text)


def read_header_files(files: Sequence[tuple[str, Path]]) -> dict[str, str]:
    """Header values from files, stripped of surrounding white space; PollError naming the
    header and the file, never the content."""
    headers = {}
    for name, path in files:
        try:
            with path.open("rb") as file:
                data = file.read(MAX_HEADER_FILE_BYTES + 1)
        except OSError as exc:
            raise PollError(f"header {name}: cannot read {path}: {exc.strerror}") from None
        if len(data) > MAX_HEADER_FILE_BYTES:
            raise PollError(f"header {name}: {path} is over {MAX_HEADER_FILE_BYTES} bytes")
        try:
            value = data.decode().strip()
        except UnicodeDecodeError:
            raise PollError(f"header {name}: {path} is not UTF-8 text") from None
        if any(ch in value for ch in "\r\n\0"):
            raise PollError(f"header {name}: {path} holds more than one line")
        headers[name] = value
    return headers
