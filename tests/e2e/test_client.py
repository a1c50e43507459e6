"""pods_api.client.Client against a real `pods-api serve`: both contracts, masks, the server's
exact bytes, and a typed error for each way a call can fail."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
import yaml
from podfiles import WEB, copy_examples, edit, set_phase, uid_of
from repo import ROOT
from serve import TIMEOUT, Served, serving

from pods_api.client import (
    Client,
    Contract,
    EventType,
    InvalidArgument,
    NotFound,
    NotReady,
    PermissionDenied,
    RateLimited,
    Unreachable,
)
from pods_api.core.api.pb import pods_v1alpha1_pb2

EXAMPLES = ROOT / "examples" / "fixtures"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("client") / "run", "--fixtures", str(EXAMPLES)) as served:
        yield served


def wire_pods(served: Served) -> list[bytes]:
    """The pods exactly as the server's ListPods sends them, read with plain grpcio."""
    with grpc.insecure_channel(served.target) as channel:
        raw = channel.unary_unary("/v1alpha1.Pods/ListPods")(b"", timeout=TIMEOUT)
    return list(pods_v1alpha1_pb2.ListPodsResponse.FromString(raw).pods)


@pytest.mark.parametrize("contract", list(Contract))
async def test_list_and_get_return_the_servers_bytes(server: Served, contract: Contract) -> None:
    async with Client(server.socket, contract=contract) as client:
        pods = await client.list()
        assert [p.raw for p in pods] == wire_pods(server)
        assert {p.name for p in pods} == {p.json()["metadata"]["name"] for p in pods}
        web = next(p for p in pods if p.name == "web-7c9d8f6b5d-x2x9k")
        assert web.json()["status"]["phase"] == "Running"
        assert await client.get(web.uid) == web


@pytest.mark.parametrize("fields", ["status.phase,status.podIPs", ["status.phase", "status.podIPs"]])
async def test_masks_select_fields(server: Served, fields: str | list[str]) -> None:
    async with Client(server.socket) as client:
        for pod in await client.list(fields=fields):
            body = pod.json()
            assert set(body) <= {"metadata", "status"} and set(body["status"]) <= {"phase", "podIPs"}
            assert body["metadata"]["uid"] == pod.uid  # identity is always kept
        one = await client.get(pod.uid, fields=fields)
        assert one == pod


@pytest.mark.parametrize("contract", list(Contract))
async def test_watch_snapshot_marker_then_changes(tmp_path: Path, contract: Contract) -> None:
    fixtures = copy_examples(tmp_path / "fixtures")
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        async with Client(served.socket, contract=contract) as client:
            stream = client.watch()
            snapshot = []
            async for event in stream:
                if event.type is EventType.INITIAL_SYNC_COMPLETE:
                    assert event.pod is None
                    break
                assert event.type is EventType.ADDED and event.pod is not None
                snapshot.append(event.pod.raw)
            assert snapshot == wire_pods(served)
            edit(fixtures / WEB, set_phase("Failed"))
            event = await asyncio.wait_for(anext(stream), TIMEOUT)
            assert event.type is EventType.MODIFIED and event.pod is not None
            assert event.pod.uid == uid_of(fixtures / WEB)
            assert event.pod.json()["status"]["phase"] == "Failed"
            await stream.aclose()


async def test_not_found_and_invalid_argument(server: Served) -> None:
    async with Client(server.socket) as client:
        with pytest.raises(NotFound, match="no-such-uid"):
            await client.get("no-such-uid")
        with pytest.raises(InvalidArgument, match="did you mean 'phase'"):
            await client.list(fields="status.phse")
        with pytest.raises(InvalidArgument):
            await anext(client.watch(fields="status.phse"))


async def test_not_ready_is_its_own_error(tmp_path: Path) -> None:
    with serving(tmp_path / "run", "--fixtures", str(EXAMPLES), "--ready-delay", "3600", ready=False) as s:
        async with Client(s.socket) as client:
            with pytest.raises(NotReady, match="Kubelet is initializing"):
                await client.list()
            with pytest.raises(NotReady):
                await anext(client.watch())


async def test_rate_limited_is_its_own_error(tmp_path: Path) -> None:
    with serving(tmp_path / "run", "--fixtures", str(EXAMPLES), "--qps", "0.001", "--burst", "1") as s:
        async with Client(s.socket) as client:
            await client.list()
            with pytest.raises(RateLimited):
                await client.list()


async def test_unreachable_says_why(tmp_path: Path) -> None:
    async with Client(tmp_path / "absent.sock") as client:
        with pytest.raises(Unreachable, match="no such socket"):
            await client.list()
        with pytest.raises(Unreachable, match="no such socket"):
            await anext(client.watch())
    stale = tmp_path / "stale.sock"  # a file left by a crashed server: nobody listens
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(stale))
    async with Client(stale) as client:
        with pytest.raises(Unreachable, match="connection refused"):
            await client.list()
    for not_a_socket in (tmp_path, tmp_path / "plain-file"):  # `--socket DIR`, as `check` says it
        not_a_socket.touch()
        async with Client(not_a_socket) as client:
            with pytest.raises(Unreachable, match=r"not a socket$"):
                await client.list()


# Run as root without the capabilities that bypass file permissions: the socket's mode then
# applies to this process as it does to any other user's agent.
_AS_UNPRIVILEGED = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
_PROBE = """
import asyncio, json, sys
from pods_api.client import Client, Informer, PodsAPIError
async def main():
    async with Client(sys.argv[1]) as client:
        try:
            pods = await client.list()
            result = {"list": len(pods)}
        except PodsAPIError as exc:
            result = {"list": type(exc).__name__, "message": str(exc)}
        informer = Informer(client)
        first = asyncio.get_running_loop().create_future()
        informer.on_state(lambda state, error: first.done() or first.set_result(state.value))
        async with informer:
            result["informer"] = await first
        result["synced"] = informer.synced
    print(json.dumps(result))

asyncio.run(main())
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_permission_denied_is_never_no_pods(tmp_path: Path) -> None:
    with serving(tmp_path / "run", "--fixtures", str(EXAMPLES), "--socket-mode", "0000") as served:
        result = subprocess.run(
            [*_AS_UNPRIVILEGED, sys.executable, "-c", _PROBE, str(served.socket)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["list"] == PermissionDenied.__name__ and "permission denied" in out["message"]
    assert out["informer"] == "denied" and out["synced"] is False


async def test_large_list_fits_where_grpcs_default_does_not(tmp_path: Path) -> None:
    """~6 MB of pods: over gRPC's 4 MiB default receive limit, which the client raises."""
    base = yaml.safe_load((EXAMPLES / WEB).read_text())
    items = []
    for i in range(300):
        pod = json.loads(json.dumps(base))
        pod["metadata"].update(name=f"big-{i}", uid=f"00000000-0000-4000-8000-{i:012d}")
        pod["metadata"]["annotations"] = {"example.com/blob": "x" * 20_000}
        items.append(pod)
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    (fixtures / "big.json").write_text(json.dumps({"apiVersion": "v1", "kind": "PodList", "items": items}))
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        async with Client(served.socket) as client:
            pods = await client.list()
        assert len(pods) == 300 and sum(len(p.raw) for p in pods) > 4 * 1024 * 1024
        with grpc.insecure_channel(served.target) as channel, pytest.raises(grpc.RpcError) as info:
            channel.unary_unary("/v1alpha1.Pods/ListPods")(b"", timeout=TIMEOUT)
        assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED


# What the busy machine did to the server's first bytes: held them this long. Well over the
# ~100 ms connect deadline gRPC derived from `grpc.min_reconnect_backoff_ms=100`, and well under
# any call's timeout.
SLOW_HANDSHAKE = 0.5


@contextlib.asynccontextmanager
async def slow_to_answer(target: str, path: Path) -> AsyncIterator[Path]:
    """A UNIX socket in front of the server's that holds the server's first bytes (its HTTP/2
    SETTINGS frame) for SLOW_HANDSHAKE seconds, then forwards both ways unchanged: a healthy
    server on a machine too busy to answer a new connection at once."""

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
        first = True
        try:
            while chunk := await reader.read(65536):
                if first and delay:
                    await asyncio.sleep(delay)  # the condition under test, not a synchronisation
                first = False
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def accept(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_unix_connection(target)
        await asyncio.gather(
            pump(client_reader, server_writer, 0), pump(server_reader, client_writer, SLOW_HANDSHAKE)
        )

    proxy = await asyncio.start_unix_server(accept, path=str(path))
    try:
        yield path
    finally:
        proxy.close()


async def test_a_handshake_slower_than_the_reconnect_backoff_still_connects(
    server: Served, tmp_path: Path
) -> None:
    """gRPC gives a connection attempt max(the reconnect backoff, grpc.min_reconnect_backoff_ms)
    to receive the server's SETTINGS frame; the client's fast reconnect backoff must not make
    that deadline the backoff's 100 ms, or a healthy server slow to answer fails the call
    ("failed to connect to all addresses ... timed out before receiving SETTINGS frame")."""
    proxy = slow_to_answer(str(server.socket), tmp_path / "slow.sock")
    async with proxy as slow, Client(slow, timeout=TIMEOUT) as client:
        assert [p.raw for p in await client.list()] == wire_pods(server)


async def test_the_cli_through_a_slow_handshake_exits_0(server: Served, tmp_path: Path) -> None:
    """The same through `pods-api get pods` (the DaemonSet's probes use the same client)."""
    async with slow_to_answer(str(server.socket), tmp_path / "slow.sock") as slow:
        proc = await asyncio.create_subprocess_exec(
            "pods-api",
            "get",
            "pods",
            "--socket",
            str(slow),
            "-o",
            "name",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT * 2)
    assert (proc.returncode, err.decode()) == (0, "")
    assert len(out.decode().splitlines()) == len(wire_pods(server))
