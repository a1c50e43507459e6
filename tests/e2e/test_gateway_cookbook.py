"""The HTTP gateway as people use it: `curl --unix-socket` against a real `pods-api serve` with the
example fixtures. Each test runs the commands a README would show, and checks what they print."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from repo import ROOT
from serve import TIMEOUT, Served, serving

EXAMPLES = ROOT / "examples" / "fixtures"
CURL = shutil.which("curl")
pytestmark = pytest.mark.skipif(CURL is None, reason="curl is not installed")

WEB_UID = "8e1d5a47-2b6c-4f0e-9a3d-7c5b1e2f4a60"


@pytest.fixture
def fixtures(tmp_path: Path) -> Path:
    """A copy of examples/fixtures the tests may change."""
    return Path(shutil.copytree(EXAMPLES, tmp_path / "fixtures"))


@pytest.fixture
def server(tmp_path: Path, fixtures: Path) -> Iterator[Served]:
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        yield served


async def curl(*args: str) -> tuple[int, str]:
    """curl's exit code and what it printed."""
    assert CURL is not None
    proc = await asyncio.create_subprocess_exec(
        CURL, "-sS", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    return proc.returncode or 0, out.decode()


def unix(served: Served) -> tuple[str, str]:
    return ("--unix-socket", str(served.http_socket))


def example_uids() -> set[str]:
    uids = set()
    for path in EXAMPLES.glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            items = doc.get("items", [doc]) if doc else []
            uids.update(item["metadata"]["uid"] for item in items)
    return uids


async def test_list_get_and_masks(server: Served) -> None:
    # curl --unix-socket /run/pods-api/pods-api-http.sock http://localhost/v1/pods
    code, out = await curl(*unix(server), "http://localhost/v1/pods")
    assert code == 0
    pods = json.loads(out)
    assert (pods["kind"], pods["apiVersion"]) == ("PodList", "v1")
    uids = [p["metadata"]["uid"] for p in pods["items"]]
    assert uids == sorted(uids) and set(uids) == example_uids()

    # ... 'http://localhost/v1/pods?fields=status.phase'
    _, out = await curl(*unix(server), "http://localhost/v1/pods?fields=status.phase")
    phases = {p["metadata"]["name"]: p["status"]["phase"] for p in json.loads(out)["items"]}
    assert phases["report-28755360-kx4jd"] == "Pending"
    assert all(set(p) == {"kind", "apiVersion", "metadata", "status"} for p in json.loads(out)["items"])

    # ... http://localhost/v1/pods/$UID
    _, out = await curl(*unix(server), f"http://localhost/v1/pods/{WEB_UID}")
    pod = json.loads(out)
    assert (pod["kind"], pod["metadata"]["name"]) == ("Pod", "web-7c9d8f6b5d-x2x9k")

    # ... -H 'Accept: application/yaml' http://localhost/v1/pods/$UID
    _, out = await curl(
        *unix(server), "-H", "Accept: application/yaml", f"http://localhost/v1/pods/{WEB_UID}"
    )
    assert out.startswith("kind: Pod\napiVersion: v1\n") and yaml.safe_load(out) == pod

    # ... 'http://localhost/v1/pods?pretty=true'
    _, out = await curl(*unix(server), "http://localhost/v1/pods?pretty=true")
    assert out.startswith('{\n  "kind": "PodList"') and json.loads(out) == pods


async def test_errors_show_their_grpc_status(server: Served) -> None:
    # curl -i ... http://localhost/v1/pods/no-such-uid
    _, out = await curl("-i", *unix(server), "http://localhost/v1/pods/no-such-uid")
    head, _, body = out.partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 404")
    assert "grpc-status: 5" in head.lower()
    assert json.loads(body)["error"]["status"] == "NOT_FOUND"
    # curl -f fails the shell command on an error status, as scripts want
    code, _ = await curl("-f", *unix(server), "http://localhost/v1/pods?fields=nope")
    assert code == 22
    _, out = await curl(
        "-X", "DELETE", "-w", "\n%{http_code}", *unix(server), f"http://localhost/v1/pods/{WEB_UID}"
    )
    body, status = out.rsplit("\n", 1)
    assert status == "405" and json.loads(body)["error"]["status"] == "UNIMPLEMENTED"


async def test_probes_and_metrics(server: Served) -> None:
    assert await curl(*unix(server), "http://localhost/healthz") == (0, "ok\n")
    assert await curl(*unix(server), "http://localhost/readyz") == (0, "ok\n")
    await curl(*unix(server), "http://localhost/v1/pods")
    _, out = await curl(*unix(server), "http://localhost/metrics")
    assert 'kubelet_pod_requests_total{server_api_version="http",status_code="OK"}' in out
    assert 'http_requests_total{handler="/v1/pods",method="GET",status="200"}' in out
    assert 'pods_api_source_synced{source="' in out


async def test_not_ready_until_the_sources_sync(tmp_path: Path, fixtures: Path) -> None:
    with serving(
        tmp_path / "run", "--fixtures", str(fixtures), "--ready-delay", "3600", ready=False
    ) as served:
        _, out = await curl("-i", *unix(served), "http://localhost/readyz")
        assert out.startswith("HTTP/1.1 503") and "retry-after: 1" in out.lower()
        assert "ready-delay" in out
        _, out = await curl("-i", *unix(served), "http://localhost/v1/pods")
        assert out.startswith("HTTP/1.1 503") and "FAILED_PRECONDITION" in out


class CurlWatch:
    """`curl -N ... ?watch=true`, its output read event by event."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.retry: int | None = None

    @classmethod
    async def start(cls, *args: str) -> CurlWatch:
        assert CURL is not None
        proc = await asyncio.create_subprocess_exec(CURL, "-sSN", *args, stdout=asyncio.subprocess.PIPE)
        return cls(proc)

    async def next(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        event: dict[str, Any] = {}
        while True:
            line = (await asyncio.wait_for(self.proc.stdout.readline(), TIMEOUT)).decode()
            if not line:
                raise EOFError("curl's output ended")
            line = line.rstrip("\n")
            if not line:
                if "data" in event:  # a block without data is no event (WHATWG)
                    return event
                event = {}
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            if name == "retry":  # the reconnection delay, a field of the stream's first event
                self.retry = int(value)
                continue
            event[name] = json.loads(value) if name == "data" else value

    async def until(self, kind: str) -> list[dict[str, Any]]:
        events = [await self.next()]
        while events[-1]["event"] != kind:
            events.append(await self.next())
        return events

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
        await self.proc.wait()


async def test_watch_follows_changes_and_ends_with_unavailable_at_shutdown(
    tmp_path: Path, fixtures: Path
) -> None:
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        # curl -N --unix-socket ... 'http://localhost/v1/pods?watch=true&fields=status.phase'
        watch = await CurlWatch.start(
            *unix(served), "http://localhost/v1/pods?watch=true&fields=status.phase"
        )
        try:
            initial = await watch.until("INITIAL_SYNC_COMPLETE")
            assert watch.retry == 1000  # told with the first event
            assert {e["data"]["metadata"]["uid"] for e in initial[:-1]} == example_uids()
            assert [e["event"] for e in initial[:-1]] == ["ADDED"] * len(example_uids())
            report = fixtures / "report-28755360-kx4jd.yaml"
            report.write_text(report.read_text().replace("phase: Pending", "phase: Running", 1))
            changed = await watch.next()
            assert (changed["event"], changed["data"]["status"]["phase"]) == ("MODIFIED", "Running")
            assert int(changed["id"]) > int(initial[-1]["id"])

            # Resuming from the INITIAL_SYNC_COMPLETE id replays just that change.
            resumed = await CurlWatch.start(
                "-H", f"Last-Event-ID: {initial[-1]['id']}", *unix(served),
                "http://localhost/v1/pods?watch=true&fields=status.phase",
            )  # fmt: skip
            try:
                assert await resumed.until("INITIAL_SYNC_COMPLETE") == [
                    changed,
                    {"id": changed["id"], "event": "INITIAL_SYNC_COMPLETE", "data": {"resumed": True}},
                ]
            finally:
                await resumed.stop()

            assert served.stop() == 0
            error = await watch.next()
            assert error["event"] == "ERROR"
            assert error["data"]["error"]["status"] == "UNAVAILABLE"
            assert await asyncio.wait_for(watch.proc.wait(), TIMEOUT) == 0  # the response ended cleanly
        finally:
            await watch.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_loopback_tcp_listener_refuses_foreign_hosts(tmp_path: Path, fixtures: Path) -> None:
    port = _free_port()
    args = ("--fixtures", str(fixtures), "--http-listen", f"127.0.0.1:{port}")
    with serving(tmp_path / "run", *args):
        code, out = await curl(f"http://127.0.0.1:{port}/v1/pods")
        assert code == 0 and json.loads(out)["kind"] == "PodList"
        code, out = await curl(f"http://localhost:{port}/readyz")
        assert out == "ok\n"
        # What a DNS-rebinding page would send: its own name in Host.
        _, out = await curl("-i", "-H", "Host: attacker.example", f"http://127.0.0.1:{port}/v1/pods")
        assert out.startswith("HTTP/1.1 403") and "PERMISSION_DENIED" in out
