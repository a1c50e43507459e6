"""A real HTTP server on 127.0.0.1 for source tests: serves bytes the test sets, honours ETag /
If-None-Match, can answer with an error status, and can go down and come back on its port."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Safety net for a test waiting on a request that never comes; requests come within a second.
REQUEST_WAIT = 10.0


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    status: int  # what the server answered


class ManifestServer:
    def __init__(self) -> None:
        self.body = b""
        self.etag: str | None = None  # None: no ETag header
        self.status = 200  # anything else: answered instead of the body
        self.requests: asyncio.Queue[Request] = asyncio.Queue()
        self.port = 0
        self._loop = asyncio.get_running_loop()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/pods"

    def serve(self, body: bytes | str, *, etag: str | None = None, status: int = 200) -> None:
        with self._lock:
            self.body = body.encode() if isinstance(body, str) else body
            self.etag, self.status = etag, status

    def start(self) -> None:
        """Listen (again) on the same port as before, or a free one the first time."""
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        # A short poll interval: `stop` waits for the serving loop to notice.
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        """Go down: connections are refused until `start` again."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    async def next_request(self) -> Request:
        return await asyncio.wait_for(self.requests.get(), REQUEST_WAIT)

    def _answer(self, headers: dict[str, str]) -> tuple[int, bytes, str | None]:
        with self._lock:
            body, etag, status = self.body, self.etag, self.status
        if status != 200:
            return status, b"failing on purpose\n", None
        if etag is not None and headers.get("If-None-Match") == etag:
            return 304, b"", etag
        return 200, body, etag

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                headers = dict(self.headers.items())
                status, payload, etag = owner._answer(headers)
                self.send_response(status)
                if etag is not None:
                    self.send_header("ETag", etag)
                if status != HTTPStatus.NOT_MODIFIED:
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if status != HTTPStatus.NOT_MODIFIED:
                    self.wfile.write(payload)
                self.wfile.flush()
                request = Request(self.path, headers, status)
                owner._loop.call_soon_threadsafe(owner.requests.put_nowait, request)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler
