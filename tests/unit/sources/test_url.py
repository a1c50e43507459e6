"""ManifestURLSource against a real HTTP server on 127.0.0.1, through a real PodCache."""

from __future__ import annotations

import json
import logging
import re
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from builders import pod
from servers import ManifestServer
from sourceharness import Harness, by_name, dump, harness_fixture, write  # noqa: F401

from pods_api.core.store.watch import EventType
from pods_api.sources.fixtures import FixturesSource
from pods_api.sources.staticpod import CONFIG_HASH, CONFIG_SOURCE
from pods_api.sources.url import ManifestURLSource, url_source_name

# Polls this often in tests: every retry and every re-poll below is at most this far apart.
INTERVAL = 0.1
TOKEN = "s3cret-token-value"


@pytest.fixture
async def server() -> AsyncIterator[ManifestServer]:
    s = ManifestServer()
    s.start()
    yield s
    s.stop()


def source(server: ManifestServer, harness: Harness, **kw: Any) -> ManifestURLSource:
    return ManifestURLSource(
        server.url, node_name="node-1", interval=INTERVAL, on_error=harness.on_error, **kw
    )


def pod_list(*pods: dict[str, Any]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "PodList", "items": list(pods)})


async def test_serves_the_static_pods_of_the_body(server: ManifestServer, harness: Harness) -> None:
    server.serve(pod_list(pod("web"), pod("db", uid="db-uid")))

    pods = by_name((await harness.start(source(server, harness))).pods)

    assert sorted(pods) == ["db-node-1", "web-node-1"]
    web = pods["web-node-1"].json
    assert re.fullmatch(r"[0-9a-f]{32}", web["metadata"]["uid"])
    assert web["metadata"]["annotations"][CONFIG_SOURCE] == "http"
    assert web["metadata"]["annotations"][CONFIG_HASH] == web["metadata"]["uid"]
    assert web["spec"]["nodeName"] == "node-1"
    assert "tolerations" not in web["spec"]  # the kubelet adds its toleration to file pods only
    assert pods["db-node-1"].uid == "db-uid"


async def test_a_yaml_body_with_one_pod(server: ManifestServer, harness: Harness) -> None:
    server.serve(dump(pod("web")))
    assert [p.name for p in (await harness.start(source(server, harness))).pods] == ["web-node-1"]


async def test_uids_depend_on_the_url_and_survive_restarts(server: ManifestServer) -> None:
    server.serve(dump(pod("web")))

    async def uid(url: str) -> str:
        harness = Harness()
        try:
            s = ManifestURLSource(url, node_name="node-1", interval=INTERVAL)
            [web] = (await harness.start(s)).pods
            return web.uid
        finally:
            await harness.stop()

    assert await uid(server.url) == await uid(server.url) != await uid(server.url + "?v=2")


async def test_headers_are_sent_and_never_shown(
    server: ManifestServer, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    server.serve("", status=500)
    s = source(server, harness, headers=[("Authorization", f"Bearer {TOKEN}"), ("X-Node", "node-1")])
    harness.launch(s)

    request = await server.next_request()
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.headers["X-Node"] == "node-1"
    assert "HTTP 500" in await harness.error("HTTP 500")
    assert TOKEN not in s.name
    assert TOKEN not in caplog.text


async def test_a_password_in_the_url_is_sent_as_basic_auth_and_never_shown(
    server: ManifestServer, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx logs each request's URL at INFO
    server.serve(dump(pod("web")))
    url = server.url.replace("http://", "http://admin:hunter2@")
    s = ManifestURLSource(url, node_name="n", interval=INTERVAL, on_error=harness.on_error)
    await harness.start(s)

    request = await server.next_request()
    assert request.headers["Authorization"] == "Basic YWRtaW46aHVudGVyMg=="  # admin:hunter2
    assert s.name == url_source_name(url) == url_source_name(url).replace("hunter2", "")
    assert s.name.startswith("url:http://admin:")
    assert "hunter2" not in caplog.text and "127.0.0.1" in caplog.text


@pytest.mark.parametrize(
    "url", ["file:///etc/kubernetes/pods.yaml", "ftp://host/pods", "http://", "pods.yaml"]
)
def test_only_http_and_https_urls(url: str) -> None:
    with pytest.raises(ValueError, match="--manifest-url"):
        ManifestURLSource(url, node_name="n")


async def test_etag_and_304(server: ManifestServer, harness: Harness) -> None:
    server.serve(dump(pod("web", uid="web")), etag='"v1"')
    await harness.start(source(server, harness))
    assert (await server.next_request()).status == 200

    for _ in range(2):  # later polls ask whether it changed, and it has not
        request = await server.next_request()
        assert (request.headers.get("If-None-Match"), request.status) == ('"v1"', 304)

    server.serve(dump(pod("web", uid="web", labels={"v": "2"})), etag='"v2"')
    event = await harness.event()  # the first event: nothing came of the 304s
    assert (event.type, event.pod.json["metadata"]["labels"]) == (EventType.MODIFIED, {"v": "2"})


async def test_going_down_and_coming_back_keeps_the_pods(server: ManifestServer, harness: Harness) -> None:
    server.serve(dump(pod("web", uid="web")))
    await harness.start(source(server, harness))
    web = harness.cache.get("web")

    server.stop()
    assert "fetch failed: ConnectError" in await harness.error("fetch failed")
    assert "fetch failed" in await harness.error("fetch failed")  # retried, and counted each time
    assert harness.cache.get("web") is web

    server.serve(dump(pod("web", uid="web", labels={"back": "yes"})))
    server.start()  # the same port
    event = await harness.event()  # never DELETED in between
    assert (event.type, event.pod.json["metadata"]["labels"]) == (EventType.MODIFIED, {"back": "yes"})


async def test_errors_and_bad_bodies_keep_the_last_good_pods(
    server: ManifestServer, harness: Harness
) -> None:
    server.serve(dump(pod("web", uid="web")))
    await harness.start(source(server, harness))
    web = harness.cache.get("web")

    server.serve("", status=503)
    assert "HTTP 503 Service Unavailable" in await harness.error("HTTP 503")
    server.serve("apiVersion: apps/v1\nkind: Deployment\n")
    assert "kind 'Deployment' is not Pod or PodList" in await harness.error("Deployment")
    server.serve(dump(pod("web", uid="web", containers=[])))
    assert "invalid pod: spec.containers" in await harness.error("invalid pod")
    assert harness.cache.get("web") is web

    server.serve(dump(pod("web", uid="web", labels={"fixed": "yes"})))
    event = await harness.event()
    assert (event.type, event.pod.uid) == (EventType.MODIFIED, "web")


async def test_not_ready_until_the_first_good_fetch(server: ManifestServer, harness: Harness) -> None:
    server.serve("", status=500)
    harness.launch(source(server, harness))
    await harness.error("HTTP 500")
    assert not harness.cache.ready

    server.serve(dump(pod("web")))
    snapshot = await harness.synced()
    assert [p.name for p in snapshot.pods] == ["web-node-1"]


async def test_an_empty_body_is_no_pods_as_with_the_kubelet(
    server: ManifestServer, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    server.serve(dump(pod("web", uid="web")))
    await harness.start(source(server, harness))

    server.serve("")
    event = await harness.event()
    assert (event.type, event.pod.uid) == (EventType.DELETED, "web")
    assert "empty body; serving no pods" in caplog.text


async def test_an_unchanged_bad_body_is_logged_once(
    server: ManifestServer, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    server.serve("kind: Pod\n")
    harness.launch(source(server, harness))
    for _ in range(3):
        await server.next_request()
    await harness.error("apiVersion is missing")
    assert harness.errors.empty()
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1


async def test_a_uid_another_source_gives_up_is_taken_at_the_next_poll(
    server: ManifestServer, harness: Harness, tmp_path: Path
) -> None:
    write(tmp_path / "web.yaml", dump(pod("web-fixture", uid="shared")))
    server.serve(dump(pod("web", uid="shared")), etag='"v1"')
    await harness.start(FixturesSource(tmp_path), source(server, harness))
    assert harness.cache.get("shared").name == "web-fixture"  # type: ignore[union-attr]

    (tmp_path / "web.yaml").unlink()

    events = await harness.events(2)  # the poll after it, though only a 304, brings the URL's
    assert [(e.type, e.pod.name) for e in events] == [
        (EventType.DELETED, "web-fixture"),
        (EventType.ADDED, "web-node-1"),
    ]


# -- secrets: what the URL carries is sent, never shown --------------------------------------------


async def test_a_token_in_the_query_string_is_sent_and_never_shown(
    server: ManifestServer, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """It was in every log line and in pods_api_source_synced{source="url:...?token=..."}."""
    caplog.set_level(logging.DEBUG)
    server.serve("", status=500)
    url = f"{server.url}?token={TOKEN}&v=2"
    s = ManifestURLSource(url, node_name="n", interval=INTERVAL, on_error=harness.on_error)
    harness.launch(s)
    request = await server.next_request()
    assert TOKEN in request.path  # sent as given
    assert "HTTP 500" in await harness.error("HTTP 500")
    assert s.name == f"url:{server.url}?token=xxxxx&v=xxxxx"
    assert TOKEN not in caplog.text


async def test_a_header_value_from_a_file_is_read_at_each_poll_and_never_shown(
    server: ManifestServer, harness: Harness, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    server.token = TOKEN
    server.serve(dump(pod("web")))
    s = source(server, harness, header_files=[("Authorization", token_file)])
    token_file.write_text(f"Bearer {TOKEN}\n")
    await harness.start(s)
    assert (await server.next_request()).headers["Authorization"] == f"Bearer {TOKEN}"
    token_file.write_text("Bearer rotated\n")  # the next poll sends the new one
    while (await server.next_request()).headers["Authorization"] != "Bearer rotated":
        pass
    token_file.unlink()
    error = await harness.error("cannot read")
    assert (
        error
        == f"url:{server.url}: header Authorization: cannot read {token_file}: No such file or directory"
    )
    assert TOKEN not in caplog.text and "rotated" not in caplog.text


@pytest.fixture
async def other_origin() -> AsyncIterator[ManifestServer]:
    s = ManifestServer(host="127.0.0.2")
    s.start()
    yield s
    s.stop()


async def test_a_redirect_to_another_origin_carries_no_configured_header(
    server: ManifestServer, other_origin: ManifestServer, harness: Harness, tmp_path: Path
) -> None:
    """An x-api-key given for the manifest URL reached 127.0.0.2, where it redirected."""
    token_file = tmp_path / "token"
    token_file.write_text(f"Bearer {TOKEN}\n")
    other_origin.serve(dump(pod("web")))
    server.redirect = other_origin.url
    url = server.url.replace("http://", "http://admin:hunter2@")
    s = ManifestURLSource(
        url,
        node_name="n",
        interval=INTERVAL,
        on_error=harness.on_error,
        headers=[("X-Api-Key", TOKEN), ("X-Node", "n")],
        header_files=[("X-Token", token_file)],
    )
    await harness.start(s)
    first, redirected = await server.next_request(), await other_origin.next_request()
    assert first.headers["X-Api-Key"] == TOKEN and first.headers["X-Token"] == f"Bearer {TOKEN}"
    assert "Authorization" in first.headers
    for name in ("X-Api-Key", "X-Node", "X-Token", "Authorization"):
        assert name not in redirected.headers, redirected.headers


async def test_a_redirect_within_the_origin_keeps_the_configured_headers(
    server: ManifestServer, harness: Harness
) -> None:
    server.serve(dump(pod("web")))
    server.redirect = server.url + "/moved"
    await harness.start(source(server, harness, headers=[("X-Api-Key", TOKEN)]))
    first, moved = await server.next_request(), await server.next_request()
    assert (first.path, first.status, moved.path) == ("/pods", 302, "/pods/moved")
    assert moved.headers["X-Api-Key"] == TOKEN


@pytest.mark.parametrize(
    ("url", "warned"),
    [
        ("http://admin:hunter2@127.0.0.1:1/pods", True),
        ("http://127.0.0.1:1/pods?token=SECRET", True),
        ("http://127.0.0.1:1/pods?access_key=SECRET", True),
        ("http://127.0.0.1:1/pods?v=2", False),
        ("http://127.0.0.1:1/pods", False),
    ],
)
async def test_a_credential_in_the_url_is_warned_about_at_start(
    url: str, warned: bool, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    s = ManifestURLSource(url, node_name="n", interval=INTERVAL, on_error=harness.on_error)
    harness.launch(s)
    await harness.error("fetch failed")
    text = caplog.text
    assert ("--manifest-url-header-file" in text) is warned, text
    if warned:
        assert "/proc/PID/cmdline" in text and "hunter2" not in text and "SECRET" not in text


def test_the_command_line_never_shows_a_credential(tmp_path: Path) -> None:
    """Errors about a URL or a header file name them, never their secret parts."""
    from serve import PODS_API

    secret_file = tmp_path / "token"
    secret_file.write_text("line one\nline two\n")

    def serve(*args: str) -> str:
        result = subprocess.run(
            [PODS_API, "serve", "--run-dir", str(tmp_path / "run"), *args],
            capture_output=True,
            text=True,
            timeout=20,
        )
        assert result.returncode == 2
        return result.stderr

    err = serve("--manifest-url", "admin:hunter2@example.com/pods?token=SECRET")
    assert "hunter2" not in err and "SECRET" not in err and "--manifest-url" in err
    err = serve("--manifest-url", "ftp://example.com/pods?token=SECRET")
    assert "SECRET" not in err and "must be an http:// or https:// URL" in err
    err = serve(
        "--manifest-url", "http://127.0.0.1:1/", "--manifest-url-header-file", f"X-Token: {tmp_path}/missing"
    )
    assert f"header X-Token: cannot read {tmp_path}/missing" in err
