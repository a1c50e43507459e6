"""What any local user who can open the sockets can do to the server, and what the server does
about it: idle and slow connections, connection floods, descriptor exhaustion, a stopped server
taken for a stale one, group access, umask, oversized echoes, unknown parameters, malformed
requests. Each test is a way to break the server that an outside fault driver found; each runs a real
`pods-api serve` over its real sockets."""

from __future__ import annotations

import asyncio
import contextlib
import grp
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import h2.config
import h2.connection
import h2.events
import httpx
import pytest
import yaml
from builders import make_pod
from fakecri import FakeRuntime
from fakecri import start as start_runtime
from released import ADDED, SYNCED
from serve import PODS_API, TIMEOUT, Served, serving, start
from servers import ManifestServer
from sourceharness import Harness, Said, harness_fixture, said_fixture  # noqa: F401

from pods_api.core.api.codec import pod_from_bytes
from pods_api.core.api.pb import (
    pods_v1alpha1_pb2,
    pods_v1alpha1_pb2_grpc,
    podsapi_v1_pb2,
    podsapi_v1_pb2_grpc,
)
from pods_api.sources.kubelet_socket import KubeletSocketSource

UIDS = ("uid-a", "uid-b", "uid-c")
CURL_COULDNT_CONNECT = 7


@pytest.fixture
def fixtures(tmp_path: Path) -> Path:
    directory = tmp_path / "fixtures"
    directory.mkdir()
    for i, uid in enumerate(UIDS):
        pod = {"apiVersion": "v1", "kind": "Pod", **make_pod(f"pod-{i}", uid)}
        (directory / f"{uid}.yaml").write_text(yaml.safe_dump(pod))
    return directory


def connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(TIMEOUT)
    sock.connect(str(path))
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (blocks until then: the
    timeout is a safety net)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def list_pods(served: Served) -> int:
    """The pod count, once the server takes connections: a server just woken (SIGCONT) is still
    closing the connections that filled its backlog, and a first connect may be reset meanwhile;
    waiting for the channel to be ready is the event, TIMEOUT only the safety net."""
    with grpc.insecure_channel(served.target) as channel:
        stub = pods_v1alpha1_pb2_grpc.PodsStub(channel)
        request = pods_v1alpha1_pb2.ListPodsRequest()
        return len(stub.ListPods(request, wait_for_ready=True, timeout=TIMEOUT).pods)


def http_get(served: Served, path: str, **kwargs: object) -> httpx.Response:
    transport = httpx.HTTPTransport(uds=str(served.http_socket))
    with httpx.Client(transport=transport, timeout=TIMEOUT) as client:
        return client.get("http://localhost" + path, **kwargs)  # type: ignore[arg-type]


def assert_no_traceback(served: Served) -> None:
    text = "".join(served.lines)
    for bad in ("Traceback", "Exception in ASGI application", "Event loop is closed"):
        assert bad not in text, text


# -- idle connections, slow headers, floods, descriptors -------------------------------------------


def test_silent_and_dribbling_connections_are_closed_on_both_sockets(tmp_path: Path, fixtures: Path) -> None:
    """Slowloris: connections that send nothing, or a header a byte at a time, are closed after
    the header timeout (before: all still open after a minute)."""
    with serving(
        tmp_path / "run", "--fixtures", str(fixtures), "--header-timeout", "0.5", "--idle-timeout", "1"
    ) as served:
        silent = [connect(path) for path in (served.socket, served.http_socket) for _ in range(20)]
        partial = [connect(served.http_socket) for _ in range(10)]
        for sock in partial:
            sock.sendall(b"GET /v1/pods HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        for sock in silent + partial:
            read_until_closed(sock)  # returns only once the server closed it
            sock.close()
        # A keep-alive connection whose second request dribbles is closed too, not only a new one.
        keep_alive = connect(served.http_socket)
        keep_alive.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert keep_alive.recv(65536).startswith(b"HTTP/1.1 200")
        keep_alive.sendall(b"GET /healthz HTTP/1.1\r\n")
        read_until_closed(keep_alive)
        keep_alive.close()
        assert list_pods(served) == 3
        assert http_get(served, "/v1/pods").status_code == 200
    assert_no_traceback(served)


def test_connections_over_the_cap_are_answered_and_closed_and_the_server_keeps_serving(
    tmp_path: Path, fixtures: Path
) -> None:
    """A connection cap per surface, below the descriptor limit: one more gets a 503 (HTTP) or is
    closed (gRPC) at once, with one log line, and the server serves as soon as the flood goes."""
    # A long header timeout: the held connections send nothing, and must stay open however slow
    # a loaded machine runs this test.
    args = ("--fixtures", str(fixtures), "--max-connections", "20", "--header-timeout", "300")
    with serving(tmp_path / "run", *args) as served:
        held = [connect(served.http_socket) for _ in range(20)]
        refused = [connect(served.http_socket) for _ in range(5)]
        for sock in refused:
            answer = read_until_closed(sock)
            assert answer.startswith(b"HTTP/1.1 503 Service Unavailable\r\n"), answer
            assert b'"status":"UNAVAILABLE"' in answer and b"retry-after: 1" in answer
        grpc_held = [connect(served.socket) for _ in range(20)]
        for sock in grpc_held:  # each gets the server's HTTP/2 SETTINGS: it was accepted
            assert sock.recv(9)
        extra = connect(served.socket)
        assert read_until_closed(extra) == b""  # closed at once: over the cap
        for sock in [*held, *refused, *grpc_held, extra]:
            sock.close()
        assert list_pods(served) == 3
        assert http_get(served, "/healthz").status_code == 200
    assert_no_traceback(served)
    refusals = [line for line in served.lines if "refused an HTTP connection" in line]
    assert len(refusals) == 1  # five refusals, one line: the log is throttled


def test_running_out_of_descriptors_is_one_log_line_not_a_flood(tmp_path: Path, fixtures: Path) -> None:
    """With the cap set above the descriptor limit, accept() fails with EMFILE, for which asyncio
    alone logs a traceback per attempt (80 MB in 10 s): one line per period instead, and the
    server recovers when the connections go."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        pytest.skip("prlimit (util-linux) is not installed")
    with serving(
        tmp_path / "run",
        "--fixtures",
        str(fixtures),
        "--max-connections",
        "400",
        "--header-timeout",
        "60",
        prefix=(prlimit, "--nofile=128:128"),
    ) as served:
        flood = []
        with contextlib.suppress(OSError):  # the backlog fills once the server stops accepting
            for _ in range(300):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.setblocking(False)
                flood.append(sock)
                sock.connect(str(served.http_socket))
        served.wait_for_line("cannot accept a connection")
        for sock in flood:
            sock.close()
        assert list_pods(served) == 3
        assert http_get(served, "/healthz").status_code == 200
    assert_no_traceback(served)
    lines = [line for line in served.lines if "cannot accept a connection" in line]
    assert 1 <= len(lines) <= 2, lines  # one per 10 s at most
    assert "Too many open files" in lines[0]


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit")
def test_an_open_file_limit_too_low_for_any_connection_cap_is_refused_with_the_reason(
    tmp_path: Path, fixtures: Path
) -> None:
    """`ulimit -n 64` made the HTTP connection cap 1."""
    command = ["prlimit", "--nofile=64:64", PODS_API, "serve", "--run-dir", str(tmp_path / "run")]
    result = subprocess.run(
        [*command, "--fixtures", str(fixtures)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 1
    assert "the open-file limit is 64; pods-api needs at least 160" in result.stderr, result.stderr
    assert "--max-connections" in result.stderr and "Traceback" not in result.stderr


# 600 MiB of address space: what the server needs with its malloc arenas bounded, with room.
ADDRESS_SPACE_KIB = 600 * 1024


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash for ulimit -v")
def test_a_server_under_an_address_space_limit_serves(tmp_path: Path, fixtures: Path) -> None:
    """glibc reserved 64 MiB of address space per thread's malloc arena (600 of the 820 MiB
    mapped): under a limit, threads could not start ("can't start new thread", the fixtures
    source failing over and over) or a C library's allocation failed (SIGSEGV, no word)."""
    limited = ("bash", "-c", f'ulimit -v {ADDRESS_SPACE_KIB} && exec "$@"', "pods-api")
    with serving(tmp_path / "run", "--fixtures", str(fixtures), prefix=limited) as served:
        assert list_pods(served) == len(UIDS)
        assert http_get(served, "/v1/pods").json()["items"]
        served.stop()
    assert_no_traceback(served)
    assert "can't start new thread" not in "".join(served.lines)


def test_the_soft_descriptor_limit_is_raised_to_the_hard_one(tmp_path: Path, fixtures: Path) -> None:
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        pytest.skip("prlimit (util-linux) is not installed")
    with serving(
        tmp_path / "run", "--fixtures", str(fixtures), prefix=(prlimit, "--nofile=256:4096")
    ) as served:
        limits = Path(f"/proc/{served.proc.pid}/limits").read_text()
    line = next(line for line in limits.splitlines() if line.startswith("Max open files"))
    assert line.split()[3:5] == ["4096", "4096"], line


# -- whose socket is it ----------------------------------------------------------------------------


def fill_backlog(path: Path) -> list[socket.socket]:
    """Connect until the kernel refuses for a full accept backlog (EAGAIN; grpc listens with
    the system's somaxconn, 4096 by default)."""
    held = []
    for _ in range(10_000):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(str(path))
        except BlockingIOError:
            sock.close()
            return held
        held.append(sock)
    raise AssertionError("the backlog never filled")


def test_a_stopped_server_with_a_full_backlog_is_not_taken_for_a_stale_one(
    tmp_path: Path, fixtures: Path
) -> None:
    """Server A stopped (SIGSTOP), its backlog full: connect() cannot succeed in time. B used to
    take the paths over, and A, on exit, deleted B's sockets. Now A's held lock says it is live."""
    run_dir = tmp_path / "run"
    with serving(run_dir, "--fixtures", str(fixtures)) as first:
        inodes = {path: path.stat().st_ino for path in (first.socket, first.http_socket)}
        first.proc.send_signal(signal.SIGSTOP)
        held = fill_backlog(first.socket) + fill_backlog(first.http_socket)
        try:
            second = subprocess.run(
                [PODS_API, "serve", "--run-dir", str(run_dir), "--fixtures", str(fixtures)],
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
        finally:
            for sock in held:
                sock.close()
            first.proc.send_signal(signal.SIGCONT)
        assert second.returncode == 1, second.stderr
        assert f"a server is already serving {first.socket}" in second.stderr
        assert {path: path.stat().st_ino for path in inodes} == inodes
        assert list_pods(first) == 3


def test_a_server_removes_only_the_socket_files_it_created(tmp_path: Path, fixtures: Path) -> None:
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        # Someone else's socket now sits at our paths (as a later server's would).
        others = []
        for path in (served.socket, served.http_socket):
            path.unlink()
            other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            other.bind(str(path))
            other.listen()
            others.append(other)
        assert served.stop() == 0
        try:
            assert served.socket.exists() and served.http_socket.exists()
            assert stat.S_ISSOCK(served.socket.stat().st_mode)
        finally:
            for other in others:
                other.close()


# -- directories -----------------------------------------------------------------------------------


@contextlib.contextmanager
def world_traversable_dir() -> Iterator[Path]:
    """pytest's tmp_path sits in a 0700 directory; a non-root user must reach our sockets."""
    base = Path(tempfile.mkdtemp(prefix="pods-api-"))
    try:
        base.chmod(0o755)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _spare_group() -> grp.struct_group | None:
    for name in ("users", "daemon", "staff"):
        with contextlib.suppress(KeyError):
            return grp.getgrnam(name)
    return None


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None or shutil.which("curl") is None,
    reason="needs root, setpriv and curl to act as a non-root member of a group",
)
def test_socket_group_members_reach_the_sockets_in_a_directory_pods_api_creates(fixtures: Path) -> None:
    """The directory pods-api creates gets the group too (it stayed 0750 root:root: EACCES)."""
    group = _spare_group()
    if group is None:
        pytest.skip("no spare group on this machine")
    with world_traversable_dir() as base:
        run_dir = base / "created" / "run"
        args = ("--fixtures", str(fixtures), "--socket-group", group.gr_name, "--socket-mode", "0660")
        with serving(run_dir, *args) as served:
            assert run_dir.stat().st_gid == group.gr_gid
            assert stat.S_IMODE(run_dir.stat().st_mode) == 0o750

            def as_nobody(*groups: str) -> list[str]:
                ids = ["--reuid", "65534", "--regid", "65534"]
                return ["setpriv", *ids, *(["--groups", *groups] if groups else ["--clear-groups"])]

            http = ["curl", "-s", "--unix-socket", str(served.http_socket), "http://localhost/healthz"]
            member = subprocess.run([*as_nobody(str(group.gr_gid)), *http], capture_output=True, text=True)
            assert member.returncode == 0 and member.stdout == "ok\n", member
            grpc_probe = ["curl", "-s", "-o", "/dev/null", "--http2-prior-knowledge", "--unix-socket"]
            grpc_probe += [str(served.socket), "http://localhost/"]
            # curl cannot speak gRPC; having connected at all (not exit 7) is the point.
            assert (
                subprocess.run([*as_nobody(str(group.gr_gid)), *grpc_probe]).returncode
                != CURL_COULDNT_CONNECT
            )
            for probe in (http, grpc_probe):  # the check is real: without the group, EACCES
                assert subprocess.run([*as_nobody(), *probe]).returncode == CURL_COULDNT_CONNECT


def test_umask_000_still_makes_private_directories_and_sockets(tmp_path: Path, fixtures: Path) -> None:
    run_dir = tmp_path / "a" / "b" / "run"
    served = start(run_dir, "--fixtures", str(fixtures), umask=0)
    try:
        served.wait_ready()
        assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o755
        assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o755
        assert stat.S_IMODE(run_dir.stat().st_mode) == 0o750
        for path in (served.socket, served.http_socket):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
        for lock in run_dir.glob("*.lock"):
            assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    finally:
        served.close()


# -- a run directory another user could take the sockets over in ----------------------------------

NOBODY = 65534


def _world_writable(base: Path) -> Path:
    (base / "run").mkdir(mode=0o750)
    (base / "run").chmod(0o777)
    return base / "run"


def _group_writable(base: Path) -> Path:
    (base / "run").mkdir(mode=0o750)
    (base / "run").chmod(0o770)
    return base / "run"


def _owned_by_nobody(base: Path) -> Path:
    (base / "run").mkdir(mode=0o750)
    os.chown(base / "run", NOBODY, NOBODY)
    return base / "run"


def _symlink_to_a_good_one(base: Path) -> Path:
    (base / "real").mkdir(mode=0o750)
    (base / "run").symlink_to(base / "real")
    return base / "run"


def _under_a_parent_nobody_owns(base: Path) -> Path:
    (base / "theirs").mkdir(mode=0o755)
    os.chown(base / "theirs", NOBODY, NOBODY)
    return base / "theirs" / "run"  # pods-api would create it there


def _through_a_symlink_to_a_parent_nobody_owns(base: Path) -> Path:
    (base / "theirs").mkdir(mode=0o755)
    os.chown(base / "theirs", NOBODY, NOBODY)
    (base / "link").symlink_to(base / "theirs")
    return base / "link" / "run"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another uid")
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_world_writable, "(the socket directory, mode 0777) is writable by other users"),
        (_group_writable, "(the socket directory, mode 0770) is writable by group 0"),
        (_owned_by_nobody, "(the socket directory) belongs to uid 65534"),
        (_symlink_to_a_good_one, "is a symlink (to "),
        (_under_a_parent_nobody_owns, "theirs (a directory above the socket directory) belongs to uid 65534"),
        (_through_a_symlink_to_a_parent_nobody_owns, "theirs (a directory above the socket directory)"),
    ],
    ids=["world-writable", "group-writable", "owned-by-another", "symlink", "parent", "symlinked-parent"],
)
def test_a_run_dir_another_user_could_take_over_is_refused(
    tmp_path: Path, fixtures: Path, make: Callable[[Path], Path], message: str
) -> None:
    """uid 65534 replaced pods-api.sock with its own listener in such a directory, used without
    a word, and clients talked to it."""
    run_dir = make(tmp_path)
    result = subprocess.run(
        [PODS_API, "serve", "--run-dir", str(run_dir), "--fixtures", str(fixtures)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "refusing to serve from it" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not list(Path(os.path.realpath(run_dir)).glob("*.sock")), "nothing bound there"
    if make in (_under_a_parent_nobody_owns, _through_a_symlink_to_a_parent_nobody_owns):
        assert not (tmp_path / "theirs" / "run").exists(), "nothing made in their directory"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to a group")
def test_a_run_dir_its_socket_group_may_write_to_is_served(tmp_path: Path, fixtures: Path) -> None:
    group = _spare_group()
    if group is None:
        pytest.skip("no spare group on this machine")
    run_dir = _group_writable(tmp_path)
    os.chown(run_dir, 0, group.gr_gid)
    with serving(run_dir, "--fixtures", str(fixtures), "--socket-group", group.gr_name) as served:
        assert list_pods(served) == len(UIDS)


# -- one line, never a traceback -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--http-listen", "127.0.0.1:99999"], 2, "--http-listen '127.0.0.1:99999': port must be 1 to 65535"),
        (["--metrics-listen", "127.0.0.1:0"], 2, "port must be 1 to 65535"),
        (["--socket", "/tmp/" + "d" * 110 + "/p.sock"], 2, "a UNIX socket path has at most 107"),
    ],
)
def test_bad_addresses_are_one_line(
    tmp_path: Path, fixtures: Path, args: list[str], code: int, message: str
) -> None:
    result = subprocess.run(
        [PODS_API, "serve", "--run-dir", str(tmp_path / "run"), "--fixtures", str(fixtures), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == code and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@contextlib.contextmanager
def _filesystem_without_inodes(base: Path) -> Iterator[Path]:
    """A tmpfs whose every inode is taken but the run directory's and its lock files'."""
    mount = base / "full"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,nr_inodes=16", "tmpfs", str(mount)])
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        run_dir = mount / "run"
        run_dir.mkdir(mode=0o750)
        for name in ("pods-api.sock.lock", "pods-api-http.sock.lock"):  # left by an earlier run
            (run_dir / name).touch(mode=0o600)
        with contextlib.suppress(OSError):
            for i in range(100):
                (mount / f"filler-{i}").touch()
        yield run_dir
    finally:
        subprocess.run(["umount", str(mount)])


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="needs root to mount a tmpfs")
def test_a_run_dir_without_inodes_left_says_so(tmp_path: Path, fixtures: Path) -> None:
    """It said "cannot listen on …" and no reason."""
    with _filesystem_without_inodes(tmp_path) as run_dir:
        result = subprocess.run(
            [PODS_API, "serve", "--run-dir", str(run_dir), "--fixtures", str(fixtures)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    assert result.returncode == 1
    assert f"cannot listen on {run_dir}/pods-api.sock: No space left on device" in result.stderr, (
        result.stderr
    )
    assert "Traceback" not in result.stderr


def test_a_start_up_failure_after_grpc_started_is_one_line(tmp_path: Path, fixtures: Path) -> None:
    """The HTTP listener fails after the gRPC server started: one line, exit 1, and no
    `Server.__del__ ... Event loop is closed` traceback from a gRPC server left to the GC."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                PODS_API,
                "serve",
                "--run-dir",
                str(tmp_path / "run"),
                "--fixtures",
                str(fixtures),
                "--http-listen",
                f"127.0.0.1:{port}",
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"pods-api: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]
    assert not list((tmp_path / "run").glob("*.sock"))  # both sockets removed


def test_a_malformed_chunked_body_is_not_an_exception_in_the_app(tmp_path: Path, fixtures: Path) -> None:
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        for path in ("/v1/pods", "/v1/pods?watch=true", "/healthz"):
            sock = connect(served.http_socket)
            sock.sendall(
                f"GET {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".encode()
            )
            read_until_closed(sock)
            sock.close()
        assert http_get(served, "/v1/pods").status_code == 200
        served.stop()
    assert_no_traceback(served)


def _leave_after_first_data(path: Path) -> None:
    """A raw HTTP/2 client: ListPods, then the socket closed at the answer's first DATA frame.
    It never widens the 64 KiB window, so the server is mid-send when the client goes."""
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    headers = [(":method", "POST"), (":scheme", "http"), (":path", "/v1alpha1.Pods/ListPods")]
    headers += [(":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers")]
    connection.send_headers(1, headers)
    connection.send_data(1, b"\x00\x00\x00\x00\x00", end_stream=True)  # an empty ListPodsRequest
    with contextlib.closing(connect(path)) as sock:
        sock.sendall(connection.data_to_send())
        while data := sock.recv(65536):
            events = connection.receive_data(data)
            assert not any(isinstance(e, h2.events.StreamEnded) for e in events), events
            if any(isinstance(e, h2.events.DataReceived) for e in events):
                return
            sock.sendall(connection.data_to_send())
    raise AssertionError("the server closed the connection before answering")


def test_clients_that_leave_mid_list_are_one_throttled_line(tmp_path: Path) -> None:
    """grpc logged a two-record ExecuteBatchError traceback for nearly every client that left
    while its ListPods answer was being sent (18 tracebacks for 20 such clients)."""
    directory = tmp_path / "fixtures"
    directory.mkdir()
    for i in range(300):  # 300 pods of ~4 KB: an answer many times the client's window
        pod = {"apiVersion": "v1", "kind": "Pod", **make_pod(f"pod-{i}", f"uid-{i}")}
        pod["metadata"]["annotations"] = {"example.com/blob": "z" * 4000}  # type: ignore[index]
        (directory / f"pod-{i}.yaml").write_text(yaml.safe_dump(pod))
    with serving(tmp_path / "run", "--fixtures", str(directory), "--qps", "0") as served:
        assert list_pods(served) == 300
        for _ in range(20):
            _leave_after_first_data(served.socket)
        served.wait_for_line("a gRPC client went away before its answer was sent (/v1alpha1.Pods/ListPods)")
        assert list_pods(served) == 300
        served.stop()
    assert "ExecuteBatchError" not in "".join(served.lines)
    assert_no_traceback(served)


# -- echoes, prefaces, HEAD ------------------------------------------------------------------------


def test_a_huge_pod_uid_is_not_found_with_a_short_message_on_both_surfaces(
    tmp_path: Path, fixtures: Path
) -> None:
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        uid = "x" * 1_000_000
        with grpc.insecure_channel(served.target) as channel, pytest.raises(grpc.RpcError) as err:
            pods_v1alpha1_pb2_grpc.PodsStub(channel).GetPod(pods_v1alpha1_pb2.GetPodRequest(podUID=uid))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND  # not RESOURCE_EXHAUSTED
        assert len(err.value.details()) < 300 and "(1000000 characters)" in err.value.details()
        response = http_get(served, "/v1/pods/" + "y" * 10_000)
        assert response.status_code == 404
        assert len(response.json()["error"]["message"]) < 300


# `in` with 5,000 values: each pod was compared with every value on the event loop (4 s for
# 4,000 values), while /healthz and every watch waited.
HUGE_SET = "app in (" + ",".join(f"v{i}" for i in range(5_000)) + ")"
MANY_REQUIREMENTS = ",".join(f"!k{i}" for i in range(100))


@pytest.fixture
def many_pods(tmp_path: Path) -> Path:
    directory = tmp_path / "many"
    directory.mkdir()
    items = [make_pod(f"pod-{i}", f"uid-many-{i}") for i in range(2000)]
    (directory / "pods.yaml").write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "PodList", "items": items})
    )
    return directory


@pytest.mark.parametrize(
    ("selector", "limit"),
    [
        ({"labelSelector": HUGE_SET}, "a selector has at most 8192"),
        ({"labelSelector": "app in (" + ",".join(f"v{i}" for i in range(1100)) + ")"}, "over 1024 values"),
        ({"labelSelector": MANY_REQUIREMENTS}, "over 32 requirements"),
        ({"fieldSelector": ",".join(f"metadata.name=n{i}" for i in range(40))}, "over 32 requirements"),
    ],
    ids=["length", "values", "label-requirements", "field-requirements"],
)
def test_a_selector_over_the_limits_is_refused_on_every_surface(
    tmp_path: Path, fixtures: Path, selector: dict[str, str], limit: str
) -> None:
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        for path in ("/v1/pods", "/api/v1/pods"):
            for watch in ({}, {"watch": "true"}):
                response = http_get(served, path, params={**selector, **watch})
                assert response.status_code == 400, (path, watch, response.text[:300])
                assert limit in response.text and len(response.text) < 1000, response.text
        with grpc.insecure_channel(served.target) as channel:
            stub = podsapi_v1_pb2_grpc.PodLookupStub(channel)
            request = {"label_selector": selector.get("labelSelector", "")}
            request["field_selector"] = selector.get("fieldSelector", "")
            for call in (
                lambda: stub.ListPods(podsapi_v1_pb2.ListPodsRequest(**request), timeout=TIMEOUT),
                lambda: next(
                    iter(stub.WatchPods(podsapi_v1_pb2.WatchPodsRequest(**request), timeout=TIMEOUT))
                ),
            ):
                with pytest.raises(grpc.RpcError) as err:
                    call()
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert limit in err.value.details() and len(err.value.details()) < 1000


def test_healthz_answers_while_pathological_selectors_are_in_flight(tmp_path: Path, many_pods: Path) -> None:
    """Four Lists with the worst selectors sent, unread, then /healthz: it answers, and so do
    they (refused at parse), instead of the loop matching 2,000 pods against 10,000 values each."""
    with serving(tmp_path / "run", "--fixtures", str(many_pods)) as served:
        heavy = []
        for path in ("/v1/pods", "/api/v1/pods"):
            for selector in (HUGE_SET, MANY_REQUIREMENTS):
                sock = connect(served.http_socket)
                query = httpx.QueryParams({"labelSelector": selector})
                sock.sendall(
                    f"GET {path}?{query} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode()
                )
                heavy.append(sock)
        try:
            assert http_get(served, "/healthz").text == "ok\n"
            for sock in heavy:
                assert read_until_closed(sock).startswith(b"HTTP/1.1 400 "), "refused at parse"
        finally:
            for sock in heavy:
                sock.close()


def test_a_file_name_with_a_newline_cannot_forge_a_log_line(tmp_path: Path, fixtures: Path) -> None:
    (fixtures / "bad\nERROR pods_api.fake: INJECTED\x1b[2J.yaml").write_text("kind: [unclosed\n")
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        line = served.wait_for_line("INJECTED")
    assert "bad\\nERROR pods_api.fake: INJECTED\\x1b[2J.yaml" in line, line
    assert not any(other.startswith("ERROR pods_api.fake") for other in served.lines)
    assert "\x1b" not in "".join(served.lines)


def test_a_long_invalid_mask_is_invalid_argument_within_a_default_clients_metadata_limit(
    tmp_path: Path, fixtures: Path
) -> None:
    """The message echoed the mask three times: 12 KB of grpc-message, which a default client's
    8 KiB soft limit refused as RESOURCE_EXHAUSTED."""
    mask = "metadata." + "x" * 4000
    with (
        serving(tmp_path / "run", "--fixtures", str(fixtures)) as served,
        grpc.insecure_channel(served.target) as channel,
        pytest.raises(grpc.RpcError) as err,
    ):
        pods_v1alpha1_pb2_grpc.PodsStub(channel).ListPods(
            pods_v1alpha1_pb2.ListPodsRequest(), metadata=[("x-kubernetes-fieldmask", mask)], timeout=TIMEOUT
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert "(4009 characters)" in err.value.details() and len(err.value.details()) < 1000


def _grpc_over_curl(served: Served, path: str, *headers: bytes) -> subprocess.CompletedProcess[bytes]:
    """One gRPC call with empty request bytes, as curl sends it: it sends header bytes a gRPC
    client library refuses to (metadata that is not UTF-8)."""
    command = [
        "curl",
        "-s",
        "-o",
        "/dev/null",
        "--http2-prior-knowledge",
        "--unix-socket",
        str(served.socket),
    ]
    command += ["-H", "content-type: application/grpc", "-H", "te: trailers"]
    for header in headers:
        command += ["-H", header]
    command += ["--data-binary", "@-", f"http://localhost{path}"]
    return subprocess.run(command, input=b"\x00\x00\x00\x00\x00", capture_output=True, timeout=TIMEOUT)


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl to send metadata that is not UTF-8")
def test_mask_metadata_that_is_not_utf8_is_one_throttled_line(tmp_path: Path, fixtures: Path) -> None:
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        for _ in range(5):
            _grpc_over_curl(served, "/v1alpha1.Pods/ListPods", b"x-kubernetes-fieldmask: metadata.\xff\xfe")
        served.wait_for_line("metadata that is not UTF-8")
        assert list_pods(served) == len(UIDS)
        served.stop()
    assert_no_traceback(served)
    assert sum("not UTF-8" in line for line in served.lines) == 1, "".join(served.lines)


def test_an_http2_preface_on_the_http_socket_does_not_echo_the_socket_path(
    tmp_path: Path, fixtures: Path
) -> None:
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        sock = connect(served.http_socket)
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        answer = read_until_closed(sock)
        sock.close()
    assert answer.startswith(b"HTTP/1.1 4")
    assert str(served.run_dir).encode() not in answer


def test_a_last_event_id_that_is_no_revision_is_400_as_on_the_kubernetes_view(
    tmp_path: Path, fixtures: Path
) -> None:
    """-1 and a 5,000-digit id were taken silently and answered with a whole snapshot."""
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        transport = httpx.HTTPTransport(uds=str(served.http_socket))
        with httpx.Client(transport=transport, timeout=TIMEOUT) as client:
            for last in ("-1", "9" * 5000, "1e3"):
                headers = {"Last-Event-ID": last}
                with client.stream("GET", "http://localhost/v1/pods?watch=true", headers=headers) as response:
                    assert response.status_code == 400, last
                    assert "is not a revision" in response.read().decode()
            kube = client.get("http://localhost/api/v1/pods", params={"watch": "1", "resourceVersion": "-1"})
            assert kube.status_code == 400
            # Ahead of the server: a full snapshot, as documented (a restarted server may count
            # behind the one before it).
            ahead = {"Last-Event-ID": str(2**62)}
            with client.stream("GET", "http://localhost/v1/pods?watch=true", headers=ahead) as response:
                assert response.status_code == 200
                lines = response.iter_lines()
                assert any(line == "event: INITIAL_SYNC_COMPLETE" for line in lines)


def test_head_answers_as_get_without_a_body_on_every_route(tmp_path: Path, fixtures: Path) -> None:
    """It was 405 everywhere; `curl -I` users expect the GET's status and headers."""
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        transport = httpx.HTTPTransport(uds=str(served.http_socket))
        with httpx.Client(transport=transport, timeout=TIMEOUT) as client:
            for path in ("/openapi.json", "/v1/pods", "/healthz", "/readyz", "/metrics", "/api/v1/pods"):
                head, get = client.head("http://localhost" + path), client.get("http://localhost" + path)
                assert (head.status_code, head.content) == (200, b""), path
                assert head.headers["content-type"] == get.headers["content-type"], path
            assert client.head("http://localhost/v1/pods/nope").status_code == 404
            for watch in ("/v1/pods?watch=true", "/api/v1/pods?watch=1"):  # ends: headers only
                head = client.head("http://localhost" + watch)
                assert (head.status_code, head.content) == (200, b""), watch
        assert http_get(served, "/healthz").text == "ok\n"  # the watches let go of their places
        served.stop()
    assert_no_traceback(served)


# -- how big a pod may get -------------------------------------------------------------------------


def test_a_yaml_alias_bomb_in_bytes_is_refused_before_it_becomes_a_pod() -> None:
    """Few values, each a long string: counting values let a 100 KB file become a 20 MB pod."""
    from pods_api.sources import ManifestError
    from pods_api.sources.parsing import MAX_EXPANDED_BYTES, parse_documents

    text = (
        "a: &a "
        + "x" * 50_000
        + "\nb: &b ["
        + ", ".join(["*a"] * 100)
        + "]\nc: ["
        + ", ".join(["*b"] * 10)
        + "]\n"
    )
    assert len(text) < 100_000
    with pytest.raises(ManifestError) as err:
        parse_documents(text.encode(), "bomb.yaml")
    assert (
        str(err.value) == f"bomb.yaml: over {MAX_EXPANDED_BYTES} bytes of text once YAML aliases are expanded"
    )


def _big_pod(uid: str, size: int) -> dict[str, object]:
    pod = {"apiVersion": "v1", "kind": "Pod", **make_pod(f"big-{uid}", uid)}
    pod["metadata"]["annotations"] = {"example.com/blob": "z" * size}  # type: ignore[index]
    return pod


def test_a_pod_over_the_size_limit_is_refused_and_the_others_are_served(
    tmp_path: Path, fixtures: Path
) -> None:
    """An 8 MiB field made every default gRPC client's List fail with RESOURCE_EXHAUSTED."""
    from pods_api.core.store.version import MAX_POD_BYTES

    (fixtures / "huge.yaml").write_text(yaml.safe_dump(_big_pod("uid-huge", 2 * 1024 * 1024)))
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        line = served.wait_for_line("huge.yaml")
        assert "pod shop/big-uid-huge' is " in line or "pod 'shop/big-uid-huge' is " in line
        assert f"over the {MAX_POD_BYTES} byte limit per pod" in line
        assert list_pods(served) == 3  # with a default client: every Get, event and this List fit


def test_a_list_over_4_mib_needs_a_client_with_a_larger_receive_limit(tmp_path: Path, fixtures: Path) -> None:
    """What README says happens: each pod fits, the List as a whole does not fit a default client."""
    for i in range(4):
        (fixtures / f"big-{i}.yaml").write_text(yaml.safe_dump(_big_pod(f"uid-big-{i}", 1_200_000)))
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        with grpc.insecure_channel(served.target) as channel, pytest.raises(grpc.RpcError) as err:
            pods_v1alpha1_pb2_grpc.PodsStub(channel).ListPods(pods_v1alpha1_pb2.ListPodsRequest())
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        with grpc.insecure_channel(served.target, options=options) as channel:
            reply = pods_v1alpha1_pb2_grpc.PodsStub(channel).ListPods(pods_v1alpha1_pb2.ListPodsRequest())
        assert len(reply.pods) == 7
        assert http_get(served, "/v1/pods").status_code == 200  # HTTP has no such limit


# -- clients that stop reading ---------------------------------------------------------------------


def _flood(fixtures: Path, served: Served, rounds: int, size: int = 100_000) -> None:
    """Rewrite five big pods `rounds` times, each round seen by a reading watcher before the next
    (so every round is events, not one change coalesced): megabytes a stuck client never takes."""
    with grpc.insecure_channel(served.target) as channel:
        watch = pods_v1alpha1_pb2_grpc.PodsStub(channel).WatchPods(
            pods_v1alpha1_pb2.WatchPodsRequest(), metadata=[("x-kubernetes-fieldmask", "metadata.labels")]
        )
        events = iter(watch)
        while next(events).type != SYNCED:
            pass
        for r in range(rounds):
            for i in range(5):
                pod = _big_pod(f"uid-flood-{i}", size)
                pod["metadata"]["labels"]["round"] = str(r)  # type: ignore[index]
                tmp = fixtures / f".flood-{i}.tmp"
                tmp.write_text(yaml.safe_dump(pod))
                os.replace(tmp, fixtures / f"flood-{i}.yaml")
            seen: set[str] = set()
            while len(seen) < 5:
                event = next(events)
                labels = pod_from_bytes(event.pod)["metadata"].get("labels", {})
                if labels.get("round") == str(r):
                    seen.add(labels["app"])
        watch.cancel()


NO_BDP = [("grpc.http2.bdp_probe", 0)]  # keep the client's flow-control window at 64 KiB


def test_cut_off_grpc_streams_that_read_nothing_still_count_against_max_watchers(
    tmp_path: Path, fixtures: Path
) -> None:
    """A cut-off freed the watcher slot while its stream stayed open: with --max-watchers 200,
    1,200 streams were held. The cap is on open streams."""
    args = (
        "--fixtures",
        str(fixtures),
        "--max-watchers",
        "3",
        "--watch-buffer",
        "2",
        "--send-timeout",
        "3600",
    )
    with serving(tmp_path / "run", *args) as served:
        stuck = [grpc.insecure_channel(served.target, options=NO_BDP) for _ in range(2)]
        try:
            calls = [
                pods_v1alpha1_pb2_grpc.PodsStub(ch).WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
                for ch in stuck
            ]
            for call in calls:  # started (the snapshot is on its way), then never read again
                assert call.initial_metadata() is not None
            _flood(fixtures, served, rounds=4)  # seen by a third watch, so both are cut off by now
            with grpc.insecure_channel(served.target) as channel:
                stub = pods_v1alpha1_pb2_grpc.PodsStub(channel)
                holder = stub.WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
                assert next(iter(holder)).type == ADDED  # the third place
                with pytest.raises(grpc.RpcError) as err:
                    next(iter(stub.WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())))
                holder.cancel()
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "3 watches are open" in err.value.details()
        finally:
            for ch in stuck:
                ch.close()


def _kubelet_watch(channel: grpc.Channel) -> Any:
    return pods_v1alpha1_pb2_grpc.PodsStub(channel).WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())


def _lookup_watch(channel: grpc.Channel) -> Any:
    return podsapi_v1_pb2_grpc.PodLookupStub(channel).WatchPods(podsapi_v1_pb2.WatchPodsRequest())


@pytest.mark.parametrize("open_watch", [_kubelet_watch, _lookup_watch], ids=["v1alpha1", "podsapi.v1"])
def test_a_grpc_stream_that_reads_nothing_is_ended_after_the_send_timeout(
    tmp_path: Path, fixtures: Path, open_watch: Callable[[grpc.Channel], Any]
) -> None:
    args = ("--fixtures", str(fixtures), "--max-watchers", "2", "--watch-buffer", "2", "--send-timeout", "1")
    with serving(tmp_path / "run", *args) as served:
        channel = grpc.insecure_channel(served.target, options=NO_BDP)
        try:
            call = open_watch(channel)
            assert call.initial_metadata() is not None
            _flood(fixtures, served, rounds=6)
            served.wait_for_line("ending a gRPC watch whose client took nothing for 1 s")
            with grpc.insecure_channel(served.target) as fresh:  # its place is free again
                first = next(
                    iter(
                        pods_v1alpha1_pb2_grpc.PodsStub(fresh).WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
                    )
                )
                assert first.type == ADDED
            # The stalled client reads again: what was on its way, then the status that ends it
            # (grpc.aio sent none once the handler was cancelled: it waited for ever).
            assert ending_status(call) == grpc.StatusCode.RESOURCE_EXHAUSTED
        finally:
            channel.close()
    assert_no_traceback(served)


def ending_status(call: Any, within: float = TIMEOUT) -> grpc.StatusCode | None:
    """The status a stream ends with once its client reads everything, None if it is still open
    after `within` (a safety net: it ends long before)."""
    ended: list[grpc.StatusCode] = []

    def read() -> None:
        try:
            for _ in call:
                pass
        except grpc.RpcError as exc:
            ended.append(exc.code())
        else:
            ended.append(grpc.StatusCode.OK)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(within)
    if reader.is_alive():
        call.cancel()
        reader.join(TIMEOUT)
        return None
    return ended[0]


def test_an_sse_client_stalled_past_the_send_timeout_still_gets_its_final_error(
    tmp_path: Path, fixtures: Path
) -> None:
    """A stream cut off by the send timeout still ends with the final ERROR event that
    docs/http-gateway.md promises, never a dropped response ("ASGI callable returned without
    completing response")."""
    args = ("--fixtures", str(fixtures), "--send-timeout", "1", "--watch-buffer", "2")
    with serving(tmp_path / "run", *args) as served:
        sock = connect(served.http_socket)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(b"GET /v1/pods?watch=true HTTP/1.1\r\nHost: localhost\r\n\r\n")
        _flood(fixtures, served, rounds=6)
        served.wait_for_line("ending a watch whose client took nothing for 1 s")
        stream = read_until_closed(sock)  # now it reads: everything, then the end
        sock.close()
        served.stop()
    assert stream.startswith(b"HTTP/1.1 200 OK\r\n")
    assert stream.endswith(b"\r\n0\r\n\r\n"), stream[-200:]  # the chunked body ended properly
    last_event = stream.rsplit(b"event: ", 1)[1]
    assert last_event.startswith(b"ERROR\ndata: ")
    assert b'"status":"RESOURCE_EXHAUSTED"' in last_event
    assert "it could not be told" not in "".join(served.lines)
    assert_no_traceback(served)
    assert "ASGI callable returned without completing response" not in "".join(served.lines)


def _dechunked(body: bytes) -> bytes:
    """An HTTP/1.1 chunked body's data; raises if it does not end with its last chunk."""
    data = bytearray()
    while True:
        size_line, body = body.split(b"\r\n", 1)
        size = int(size_line, 16)
        if size == 0:
            assert body == b"\r\n", "trailing bytes after the last chunk"
            return bytes(data)
        data += body[:size]
        assert body[size : size + 2] == b"\r\n", "a chunk cut short"
        body = body[size + 2 :]


@pytest.mark.parametrize("path", ["/api/v1/pods?watch=1", "/api/v1/watch/pods"])
def test_a_kubernetes_watch_stalled_past_the_send_timeout_is_told_why_then_ends(
    tmp_path: Path, fixtures: Path, path: str
) -> None:
    """--send-timeout ends a Kubernetes-view watch too (it had a 30 s of its own): its client,
    reading again, gets what was on its way, an ERROR event with the Status saying why (429, as
    client-go backs off before it watches again), then the end of the chunked body, never a
    truncated one."""
    args = ("--fixtures", str(fixtures), "--send-timeout", "1", "--watch-buffer", "2")
    with serving(tmp_path / "run", *args) as served:
        sock = connect(served.http_socket)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(b"GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % path.encode())
        _flood(fixtures, served, rounds=6)
        served.wait_for_line("ending a watch whose client took nothing for 1 s")
        stream = read_until_closed(sock)  # now it reads: everything, then the end
        sock.close()
        served.stop()
    head, body = stream.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    events = [json.loads(line) for line in _dechunked(body).splitlines()]
    assert events[:-1] and all(e["type"] in ("ADDED", "MODIFIED") for e in events[:-1])
    last = events[-1]
    assert last["type"] == "ERROR", last["type"]
    status = last["object"]
    assert (status["kind"], status["status"], status["code"]) == ("Status", "Failure", 429)
    assert status["reason"] == "TooManyRequests"
    assert "took nothing for 1 s" in status["message"]
    assert "it could not be told" not in "".join(served.lines)
    assert_no_traceback(served)


# -- a source that cannot move on ------------------------------------------------------------------


def _check(served: Served) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PODS_API, "check", "--socket", str(served.socket)], capture_output=True, text=True, timeout=TIMEOUT
    )


def _connected(served: Served, source: str) -> str:
    """pods_api_source_connected{source} as /metrics shows it."""
    for line in http_get(served, "/metrics").text.splitlines():
        if line.startswith(f'pods_api_source_connected{{source="{source}"}} '):
            return line.rsplit(" ", 1)[1]
    raise AssertionError(f"no pods_api_source_connected for {source}")


def _static_pod(name: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, **_SPEC})


def _kubelet_pods(*names: str) -> str:
    pods = [{"metadata": {"name": n, "namespace": "default", "uid": f"uid-{n}"}, **_SPEC} for n in names]
    return json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": pods})


def _names(served: Served) -> list[str]:
    return sorted(p["metadata"]["name"] for p in http_get(served, "/v1/pods").json()["items"])


async def test_sources_past_their_resync_say_they_are_stale_in_check_metrics_and_readyz(
    tmp_path: Path,
) -> None:
    """A manifest URL that answers garbage, a kubelet's /pods that answers 500 and a container
    runtime (the status overlay here) that refuses every relist: each keeps its last good pods
    and statuses, as before, but no longer as if they were current (they said nothing: SERVING,
    no warning, no gauge)."""
    url, kubelet = ManifestServer(), ManifestServer()
    url.serve(_static_pod("web"))
    kubelet.serve(_kubelet_pods("cache"))
    url.start()
    kubelet.start()
    runtime = FakeRuntime(1, 1, events=False)
    cri = await start_runtime(runtime, tmp_path / "cri.sock")
    sources = {
        f"url:{url.url}": (url.url, "not valid YAML"),
        f"kubelet-pods:{kubelet.url}": (kubelet.url, "HTTP 500"),
        f"cri:{tmp_path / 'cri.sock'}": (f"the runtime at {tmp_path / 'cri.sock'}", "INTERNAL"),
    }
    args = ("--manifest-url", url.url, "--manifest-url-interval", "0.1", "--node-name", "node-1")
    args += ("--kubelet-pods-url", kubelet.url, "--kubelet-pods-interval", "0.1")
    args += ("--cri-socket", str(tmp_path / "cri.sock"), "--cri-relist", "0.1")
    # The fake runtime has no sandbox for the URL's static pod: served under our uid at once.
    args += ("--static-pod-uid-wait", "0.01")
    served = await asyncio.to_thread(start, tmp_path / "run", *args)
    try:
        # In a thread: the fake runtime answers on this event loop, which must not wait meanwhile.
        await asyncio.to_thread(served.wait_ready)
        assert [_connected(served, name) for name in sources] == ["1.0"] * 3
        assert "warning" not in (await asyncio.to_thread(_check, served)).stdout
        url.serve("kind: [not, a, pod")
        kubelet.serve("", status=500)
        runtime.failing = grpc.StatusCode.INTERNAL
        for name in sources:  # each resync: two periods, the second given its 10 s deadline
            await asyncio.to_thread(served.wait_for_line, f"pod source {name}: stale:", 3 * TIMEOUT)
        check = await asyncio.to_thread(_check, served)
        assert check.returncode == 0, check.stdout + check.stderr
        lines = [line.split(": ", 1) for line in check.stdout.splitlines()]
        report = dict(lines)
        assert report["ready"].strip() == "yes" and report["pods"].strip() == "2"
        warnings = sorted(value.strip() for key, value in lines if key == "warning")
        assert len(warnings) == len(sources), check.stdout
        for warning, (name, (upstream, problem)) in zip(warnings, sorted(sources.items()), strict=True):
            assert warning.startswith(f"{name}: stale: nothing applied from {upstream} since ")
            assert "(its resync is 10.2 s)" in warning and problem in warning
            assert _connected(served, name) == "0.0"
        readyz = http_get(served, "/readyz")
        assert readyz.status_code == 200
        assert readyz.text == "ok\n" + "".join(f"warning: {w}\n" for w in warnings)
        assert _names(served) == ["cache", "web-node-1"]  # the last good pods

        url.serve(_static_pod("db"))
        kubelet.serve(_kubelet_pods("cache", "queue"))
        runtime.failing = None
        for name in sources:
            await asyncio.to_thread(served.wait_for_line, f"pod source {name}: current again")
        assert http_get(served, "/readyz").text == "ok\n"
        assert [_connected(served, name) for name in sources] == ["1.0"] * 3
        assert _names(served) == ["cache", "db-node-1", "queue"]
    finally:
        served.close()
        url.stop()
        kubelet.stop()
        await cri.stop(0)


async def test_a_bridge_whose_kubelet_freezes_with_the_watch_open_says_it_is_stale(
    tmp_path: Path, fixtures: Path, harness: Harness, said: Said
) -> None:
    """A frozen upstream (SIGSTOP) holds the bridge's watch open and sends nothing, as a quiet one
    does: only an unanswered keepalive ping tells them apart (without one, the bridge served its
    last pods as current for as long as the freeze lasted)."""
    told: list[bool] = []
    with serving(tmp_path / "kubelet", "--fixtures", str(fixtures)) as kubelet:
        source = KubeletSocketSource(
            kubelet.socket,
            on_error=harness.on_error,
            on_connected=told.append,
            stale_after=0.5,
            keepalive=0.5,
        )
        await harness.start(source)
        kubelet.proc.send_signal(signal.SIGSTOP)
        try:
            await said.line(harness, f"pod source {source.name}: stale: ")
            assert told[-1] is False and len(harness.cache.snapshot().pods) == len(UIDS)
            assert "stale: nothing applied from" in harness.cache.warnings[source.name]
        finally:
            kubelet.proc.send_signal(signal.SIGCONT)
        await said.line(harness, f"pod source {source.name}: current again")
        assert told[-1] is True and source.name not in harness.cache.warnings


_SPEC = {"spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}
