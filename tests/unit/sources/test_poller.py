"""The HTTP poller both URL sources use, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from servers import ManifestServer
from sourceharness import TIMEOUT

from pods_api.sources.poller import Poller, PollError


@pytest.fixture
async def server() -> AsyncIterator[ManifestServer]:
    s = ManifestServer()
    s.start()
    yield s
    s.stop()


class Recorder:
    """What a poller hands over: bodies taken and failures, in order."""

    def __init__(self, *, good: bool = True) -> None:
        self.seen: asyncio.Queue[bytes | PollError | None] = asyncio.Queue()
        self.good = good

    def take(self, body: bytes | None) -> bool:
        self.seen.put_nowait(body)
        return self.good

    def failed(self, exc: PollError) -> None:
        self.seen.put_nowait(exc)

    async def next(self) -> bytes | PollError | None:
        return await asyncio.wait_for(self.seen.get(), TIMEOUT)


async def polling(poller: Poller, recorder: Recorder) -> asyncio.Task[None]:
    return asyncio.create_task(poller.run(recorder.take, recorder.failed))


async def test_a_server_that_drips_its_body_fails_the_fetch_at_the_deadline(server: ManifestServer) -> None:
    server.serve(b"x" * 1000)
    server.drip = 0.05  # the whole body would take 50 s; bytes keep coming, so no read times out
    recorder = Recorder()
    task = await polling(Poller(server.url, flag="--test-url", interval=0.05, deadline=0.5), recorder)
    try:
        failure = await recorder.next()
        assert isinstance(failure, PollError)
        assert str(failure) == "no complete answer within 0.5s"
        server.drip = 0
        assert await recorder.next() == b"x" * 1000  # and the source goes on polling
    finally:
        task.cancel()


async def test_etag_is_sent_back_once_a_body_was_taken(server: ManifestServer) -> None:
    server.serve(b"v1", etag='"1"')
    recorder = Recorder()
    task = await polling(Poller(server.url, flag="--test-url", interval=0.05), recorder)
    try:
        assert await recorder.next() == b"v1"
        assert await recorder.next() is None  # 304: unchanged
        assert (await server.next_request()).headers.get("If-None-Match") is None
        assert (await server.next_request()).headers.get("If-None-Match") == '"1"'
    finally:
        task.cancel()


async def test_a_body_not_taken_is_fetched_whole_again(server: ManifestServer) -> None:
    server.serve(b"bad", etag='"1"')
    recorder = Recorder(good=False)
    task = await polling(Poller(server.url, flag="--test-url", interval=0.05), recorder)
    try:
        assert [await recorder.next() for _ in range(2)] == [b"bad", b"bad"]  # never a 304 for it
    finally:
        task.cancel()


async def test_the_body_limit(server: ManifestServer) -> None:
    server.serve(b"x" * 2000)
    recorder = Recorder()
    task = await polling(Poller(server.url, flag="--test-url", interval=0.05, max_bytes=1000), recorder)
    try:
        failure = await recorder.next()
        assert str(failure) == "body over the 1000 byte limit"
    finally:
        task.cancel()


async def test_an_error_status_is_named_and_carried(server: ManifestServer) -> None:
    server.serve("", status=403)
    recorder = Recorder()
    task = await polling(Poller(server.url, flag="--test-url", interval=0.05), recorder)
    try:
        failure = await recorder.next()
        assert isinstance(failure, PollError)
        assert (str(failure), failure.status) == ("HTTP 403 Forbidden", 403)
    finally:
        task.cancel()


def test_backoff_is_jittered_exponential_and_capped_at_the_interval() -> None:
    poller = Poller("http://127.0.0.1:1/", flag="--test-url", interval=20.0)
    for failures, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (5, 16.0), (6, 20.0), (30, 20.0), (5000, 20.0)]:
        delays = [poller.backoff(failures) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://admin:hunter2@h/p", "http://admin:xxxxx@h/p"),
        ("https://h:1/p?x=1", "https://h:1/p?x=xxxxx"),
    ],  # a query value may be a token
)
def test_the_url_as_shown_has_no_password(url: str, shown: str) -> None:
    assert Poller(url, flag="--test-url", interval=1).shown == shown


def test_a_url_without_a_scheme_never_echoes_a_password() -> None:
    with pytest.raises(ValueError) as caught:
        Poller("admin:hunter2@host/pods", flag="--test-url", interval=1)
    assert "hunter2" not in str(caught.value) and str(caught.value).startswith("--test-url ")
