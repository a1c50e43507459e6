"""`pods-api get`, `watch` and `check`, run as users run them (the installed command, a real
`pods-api serve` on real sockets), with every exit code produced by the condition it names."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubelet_server import KubeletServer
from printerpods import example_pods
from repo import DOCS, ROOT
from serve import PODS_API, TIMEOUT, Served, serving

import pods_api
from pods_api.client.exitcodes import HELP, Exit
from pods_api.core.api.codec import pod_to_bytes

FIXTURES = str(ROOT / "examples" / "fixtures")
NAMES = sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in example_pods())


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PODS_API, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("cli") / "run", "--fixtures", FIXTURES) as served:
        yield served


@pytest.fixture(scope="module")
def not_ready(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # Held back far longer than the tests run: readiness never arrives while they look.
    run = tmp_path_factory.mktemp("cli-not-ready") / "run"
    with serving(run, "--fixtures", FIXTURES, "--ready-delay", "3600", ready=False) as served:
        yield served


# What moves with the clock: ages (5m, 2y212d, "(57m ago)").
_CLOCK = re.compile(r"\b\d+[smhdy](\d+[smhd])?\b")


def _unclocked(text: str) -> list[list[str]]:
    return [_CLOCK.sub("T", line).split() for line in text.splitlines()]


def get(served: Served, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("get", "pods", "--socket", str(served.socket), *args)


# -- get ------------------------------------------------------------------------------------------


def test_get_pods_prints_kubectls_table_sorted_by_namespace_and_name(server: Served) -> None:
    result = get(server)
    assert result.returncode == Exit.OK, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [tuple(line.split()[:2]) for line in lines[1:]] == NAMES
    by_name = {line.split()[1]: line.split() for line in lines[1:]}
    assert by_name["orders-worker-6d5f7c9b8-q7zrt"][2:5] == ["0/1", "CrashLoopBackOff", "12"]


def test_get_pods_in_one_namespace_or_all_as_kubectl(server: Served) -> None:
    every = get(server, "-A")
    assert (every.returncode, every.stdout) == (Exit.OK, get(server).stdout)
    shop = get(server, "-n", "shop")
    assert shop.returncode == Exit.OK, shop.stderr
    lines = shop.stdout.splitlines()
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]  # as kubectl -n
    assert [line.split()[0] for line in lines[1:]] == [name for ns, name in NAMES if ns == "shop"]
    assert get(server, "-n", "shop", "-A").stdout == every.stdout  # -A over -n, as kubectl
    none = get(server, "-n", "nowhere", "-o", "name")
    assert (none.returncode, none.stdout) == (Exit.OK, "")
    across = cli("get", "pod", "web-7c9d8f6b5d-x2x9k", "-A", "--socket", str(server.socket))
    assert across.returncode == Exit.USAGE and "across all namespaces" in across.stderr


def test_get_pods_is_the_same_table_on_both_contracts(server: Served) -> None:
    for fmt in ("table", "wide"):
        kubelet = get(server, "-o", fmt, "--contract", "kubelet")
        documented = get(server, "-o", fmt, "--contract", "documented")
        assert kubelet.returncode == documented.returncode == Exit.OK
        assert _unclocked(kubelet.stdout) == _unclocked(documented.stdout)
        assert len(kubelet.stdout.splitlines()) == len(NAMES) + 1


def test_get_pods_wide_adds_ip_and_node(server: Served) -> None:
    lines = get(server, "-o", "wide").stdout.splitlines()
    assert lines[0].split()[6:] == ["IP", "NODE", "NOMINATED", "NODE", "READINESS", "GATES"]
    assert "192.168.56.10" in lines[2] and "node-1" in lines[2]


def test_get_pods_json_is_a_podlist_of_every_pod(server: Served) -> None:
    out = json.loads(get(server, "-o", "json").stdout)
    assert out["kind"] == "PodList" and out["apiVersion"] == "v1"
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in out["items"]] == NAMES
    assert all(p["kind"] == "Pod" for p in out["items"])


def test_get_pods_yaml_and_name(server: Served) -> None:
    out = yaml.safe_load(get(server, "-o", "yaml").stdout)
    assert [p["metadata"]["name"] for p in out["items"]] == [n for _, n in NAMES]
    assert get(server, "-o", "name").stdout.splitlines() == [f"pod/{n}" for _, n in NAMES]


def test_get_pods_jsonpath_and_custom_columns(server: Served) -> None:
    template = '{range .items[*]}{.metadata.namespace}/{.metadata.name}{"\\n"}{end}'
    listed = get(server, "-o", f"jsonpath={template}")
    assert listed.returncode == Exit.OK, listed.stderr
    assert listed.stdout.splitlines() == [f"{ns}/{n}" for ns, n in NAMES]
    columns = get(server, "-o", "custom-columns=NAME:.metadata.name,NOPE:.status.nope")
    assert columns.stdout.split("\n")[0].split() == ["NAME", "NOPE"]
    assert [line.split() for line in columns.stdout.splitlines()[1:]] == [[n, "<none>"] for _, n in NAMES]


def test_get_pods_jsonpath_file(server: Served, tmp_path: Path) -> None:
    template = tmp_path / "names.jsonpath"
    template.write_text('{range .items[*]}{.metadata.name}{"\\n"}{end}')
    listed = get(server, "-o", f"jsonpath-file={template}")
    assert listed.returncode == Exit.OK, listed.stderr
    assert listed.stdout.splitlines() == [n for _, n in NAMES]
    missing = get(server, "-o", f"jsonpath-file={tmp_path / 'nope'}")
    assert missing.returncode == Exit.USAGE and "nope" in missing.stderr


def test_a_bad_or_unsupported_template_is_a_usage_error_naming_it(server: Served) -> None:
    for output, says in [
        ("jsonpath={.items[x]}", "invalid array index x"),
        ("jsonpath={range .items[*]}{.metadata.name}", "has no {end}"),
        ("jsonpath={.items[::-1]}", "step must be > 0"),
        ("custom-columns=NAME", "expected <header>:<json-path-expr>"),
    ]:
        result = get(server, "-o", output)
        assert result.returncode == Exit.USAGE and says in result.stderr, (output, result.stderr)
        assert result.stdout == ""
    failed = get(server, "-o", "jsonpath={.items[99]}")
    assert failed.returncode == Exit.ERROR and "array index out of bounds" in failed.stderr
    assert failed.stdout == ""
    watch = cli("watch", "--socket", str(server.socket), "-o", "jsonpath={.metadata.name}")
    assert watch.returncode == Exit.USAGE and "for get, not watch" in watch.stderr


def test_get_pods_with_a_field_mask(server: Served) -> None:
    out = json.loads(get(server, "-o", "json", "--fields", "status.phase").stdout)
    assert {tuple(p["status"]) for p in out["items"]} <= {("phase",)}
    assert all("spec" not in p for p in out["items"])


def test_get_pod_by_uid(server: Served) -> None:
    pod = example_pods()[0]
    uid = pod["metadata"]["uid"]
    result = cli("get", "pod", uid, "--socket", str(server.socket), "-o", "json")
    assert result.returncode == Exit.OK, result.stderr
    assert json.loads(result.stdout)["metadata"]["name"] == pod["metadata"]["name"]
    table = cli("get", "pod", uid, "--socket", str(server.socket)).stdout.splitlines()
    assert len(table) == 2 and table[1].split()[1] == pod["metadata"]["name"]


def test_socket_comes_from_the_environment(server: Served) -> None:
    result = cli("get", "pods", "-o", "name", env={"PODS_API_SOCKET": str(server.socket)})
    assert result.returncode == Exit.OK, result.stderr
    assert len(result.stdout.splitlines()) == len(NAMES)


# -- exit codes -----------------------------------------------------------------------------------


def test_not_found_exits_5(server: Served) -> None:
    result = cli("get", "pod", "no-such-uid", "--socket", str(server.socket))
    assert result.returncode == Exit.NOT_FOUND
    assert "no-such-uid" in result.stderr and "not found" in result.stderr
    assert result.stdout == ""


def test_usage_exits_2(server: Served) -> None:
    assert cli("get", "nodes").returncode == Exit.USAGE
    assert cli("get", "pods", "-o", "xml").returncode == Exit.USAGE
    assert cli("get", "pods", "--timeout", "-1").returncode == Exit.USAGE
    bad_mask = get(server, "--fields", "status.phse")
    assert bad_mask.returncode == Exit.USAGE and "did you mean 'phase'" in bad_mask.stderr


def test_not_ready_exits_3_never_an_empty_list(not_ready: Served) -> None:
    for args in (["get", "pods"], ["get", "pods", "-o", "json"], ["watch"]):
        result = cli(*args, "--socket", str(not_ready.socket))
        assert result.returncode == Exit.NOT_READY, args
        assert result.stdout == "" and "--wait" in result.stderr


def test_wait_gives_up_at_the_timeout_with_not_ready(not_ready: Served) -> None:
    result = cli("get", "pods", "--socket", str(not_ready.socket), "--wait", "--timeout", "0.5")
    assert result.returncode == Exit.NOT_READY, result.stderr


def test_wait_retries_until_the_server_is_ready(tmp_path: Path) -> None:
    served = serving(tmp_path / "run", "--fixtures", FIXTURES, "--ready-delay", "1", ready=False)
    with served as s:
        result = cli("get", "pods", "-o", "name", "--socket", str(s.socket), "--wait", "--timeout", "15")
    assert result.returncode == Exit.OK, result.stderr
    assert len(result.stdout.splitlines()) == len(NAMES)


def test_rate_limited_exits_4_and_wait_outlasts_it(tmp_path: Path) -> None:
    # One token, refilled every 10 s: long enough that the next few CLI starts, each a second or
    # so on a loaded machine, all find the bucket empty.
    with serving(tmp_path / "run", "--fixtures", FIXTURES, "--qps", "0.1", "--burst", "1") as s:
        assert get(s, "-o", "name").returncode == Exit.OK
        refused = get(s, "-o", "name")
        assert refused.returncode == Exit.RATE_LIMITED and refused.stdout == ""
        # Health is not rate limited: a busy server's probes pass, and check says what it saw.
        assert cli("check", "-q", "--socket", str(s.socket)).returncode == Exit.OK
        report = cli("check", "--socket", str(s.socket))
        assert report.returncode == Exit.OK and "rate limited" in report.stdout
        waited = get(s, "-o", "name", "--wait", "--timeout", "30")
        assert waited.returncode == Exit.OK, waited.stderr


def test_unreachable_exits_6(tmp_path: Path) -> None:
    missing = cli("get", "pods", "--socket", str(tmp_path / "none.sock"))
    assert missing.returncode == Exit.UNREACHABLE and "no such socket" in missing.stderr
    stale = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(stale))  # bound, never listening: what a crashed server leaves
    for args in (["get", "pods"], ["watch"], ["check"]):
        result = cli(*args, "--socket", str(stale))
        assert result.returncode == Exit.UNREACHABLE, (args, result.stderr, result.stdout)
        assert "refused" in result.stderr + result.stdout
    for args in (["get", "pods"], ["watch"]):  # `--socket DIR`: said as `check` says it
        result = cli(*args, "--socket", str(tmp_path))
        assert result.returncode == Exit.UNREACHABLE, (args, result.stderr)
        assert result.stderr == f"pods-api: {tmp_path}: not a socket\n"


# -- permission denied, for real: a non-root user against a 0600 root socket ----------------------

SETPRIV = shutil.which("setpriv")
NOBODY = 65534


@pytest.fixture
def world_searchable() -> Iterator[Path]:
    """A run directory every user may enter, so that only the socket's own mode decides."""
    base = Path(tempfile.mkdtemp(prefix="pods-api-perm-"))
    base.chmod(0o755)
    (base / "run").mkdir(mode=0o755)
    (base / "run").chmod(0o755)
    try:
        yield base / "run"
    finally:
        shutil.rmtree(base)


def as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as uid/gid 65534, no groups. It keeps CAP_DAC_READ_SEARCH only so that it can read
    this interpreter under root's 0700 home: that capability bypasses read and search checks, not
    the write permission connect() needs on a socket."""
    assert SETPRIV is not None
    keep = [
        "--inh-caps=-all,+dac_read_search",
        "--ambient-caps=+dac_read_search",
        "--bounding-set=-all,+dac_read_search",
    ]
    cmd = [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *keep, "--"]
    return subprocess.run(
        [*cmd, sys.executable, "-m", "pods_api", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )


@pytest.mark.skipif(SETPRIV is None or os.geteuid() != 0, reason="needs root and setpriv (util-linux)")
def test_permission_denied_exits_7_and_says_so(world_searchable: Path) -> None:
    with serving(world_searchable, "--fixtures", FIXTURES) as s:
        assert os.stat(s.socket).st_mode & 0o777 == 0o600 and os.stat(s.socket).st_uid == 0
        for args in (["get", "pods"], ["get", "pods", "-o", "json"], ["watch"]):
            result = as_nobody(*args, "--socket", str(s.socket))
            assert result.returncode == Exit.PERMISSION_DENIED, (args, result.stderr)
            assert "permission denied" in result.stderr and result.stdout == ""
        check = as_nobody("check", "--socket", str(s.socket))
        assert check.returncode == Exit.PERMISSION_DENIED
        assert "access:" in check.stdout and "permission denied: uid 65534" in check.stdout
        assert "0600 root:root" in check.stdout and "pods:" not in check.stdout
        assert as_nobody("check", "--quiet", "--socket", str(s.socket)).returncode == Exit.PERMISSION_DENIED


# -- watch ----------------------------------------------------------------------------------------


def watch_lines(served: Served, *args: str, count: int) -> list[str]:
    """The first count lines of `pods-api watch`, read as they come (the command keeps running)."""
    proc = subprocess.Popen(
        [PODS_API, "watch", "--socket", str(served.socket), *args], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        return [proc.stdout.readline() for _ in range(count)]
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_watch_json_is_one_event_per_line(server: Served) -> None:
    lines = watch_lines(server, "-o", "json", count=len(NAMES) + 1)
    events = [json.loads(line) for line in lines]
    assert [e["type"] for e in events] == ["ADDED"] * len(NAMES) + ["INITIAL_SYNC_COMPLETE"]
    assert (
        sorted((e["object"]["metadata"]["namespace"], e["object"]["metadata"]["name"]) for e in events[:-1])
        == NAMES
    )


def test_watch_name_and_table(server: Served) -> None:
    names = watch_lines(server, "-o", "name", count=len(NAMES) + 1)
    assert sorted(names[:-1]) == sorted(f"ADDED pod/{n}\n" for _, n in NAMES)
    assert names[-1] == "INITIAL_SYNC_COMPLETE\n"
    table = watch_lines(server, count=len(NAMES) + 1)
    assert table[0].split()[:3] == ["EVENT", "NAMESPACE", "NAME"]
    assert [tuple(line.split()[1:3]) for line in table[1:]] == NAMES  # the snapshot, sorted


def test_watch_follows_changes_in_a_pipe(tmp_path: Path) -> None:
    """A new pod while a `| while read` loop reads: its line arrives without the stream ending."""
    fixtures = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, fixtures)
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as s:
        proc = subprocess.Popen(
            [
                "bash",
                "-c",
                f"{PODS_API} watch -o name --socket {s.socket}"
                ' | while read type pod; do echo "$type $pod"; done',
            ],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            assert proc.stdout is not None
            lines = [proc.stdout.readline() for _ in range(len(NAMES) + 1)]
            assert lines[-1] == "INITIAL_SYNC_COMPLETE \n"
            (fixtures / "web-7c9d8f6b5d-x2x9k.yaml").unlink()
            assert proc.stdout.readline() == "DELETED pod/web-7c9d8f6b5d-x2x9k\n"
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


# -- check ----------------------------------------------------------------------------------------


def test_check_reports_socket_server_contracts_and_pods(server: Served) -> None:
    result = cli("check", "--socket", str(server.socket))
    assert result.returncode == Exit.OK, result.stdout + result.stderr
    report = dict(line.split(":", 1) for line in result.stdout.splitlines())
    assert report["socket"].strip() == str(server.socket)
    assert report["file"].split()[:3] == ["srw-------", "0600", "root:root"]
    assert "can open it" in report["access"]
    assert "health SERVING" in report["server"]
    assert (
        "v1alpha1.Pods (kubelet) in" in report["contracts"] and "Pods (documented) in" in report["contracts"]
    )
    assert report["pods"].strip() == str(len(NAMES)) and report["ready"].strip() == "yes"
    quiet = cli("check", "--quiet", "--socket", str(server.socket))
    assert quiet.returncode == Exit.OK and quiet.stdout == quiet.stderr == ""


def test_check_not_ready_exits_3_but_is_alive(not_ready: Served) -> None:
    result = cli("check", "--socket", str(not_ready.socket))
    assert result.returncode == Exit.NOT_READY
    assert "health NOT_SERVING" in result.stdout and "not ready" in result.stdout
    assert cli("check", "-q", "--socket", str(not_ready.socket)).returncode == Exit.NOT_READY
    assert cli("check", "-q", "--liveness", "--socket", str(not_ready.socket)).returncode == Exit.OK


def test_check_on_a_wedged_server_exits_6(tmp_path: Path) -> None:
    """A stopped process still has the kernel accept connect(): only a real round trip tells."""
    with serving(tmp_path / "run", "--fixtures", FIXTURES) as s:
        os.kill(s.proc.pid, signal.SIGSTOP)
        try:
            result = cli("check", "--liveness", "--timeout", "1", "--socket", str(s.socket))
        finally:
            os.kill(s.proc.pid, signal.SIGCONT)
        assert result.returncode == Exit.UNREACHABLE
        assert "can open it" in result.stdout and "no answer within 1 s" in result.stdout
        assert cli("check", "-q", "--liveness", "--socket", str(s.socket)).returncode == Exit.OK


def test_check_without_a_socket_exits_6(tmp_path: Path) -> None:
    result = cli("check", "--socket", str(tmp_path / "none.sock"))
    assert result.returncode == Exit.UNREACHABLE and "no such file" in result.stdout


# -- a kubelet's socket: v1alpha1.Pods only, no health service -----------------------------------


async def acli(*args: str) -> tuple[int, str, str]:
    """The CLI as a subprocess, awaited, so that an in-process server keeps serving meanwhile."""
    proc = await asyncio.create_subprocess_exec(
        PODS_API, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_against_a_kubelet_socket(tmp_path: Path, server: Served) -> None:
    sock = tmp_path / "kubelet.sock"
    kubelet = KubeletServer(sock, {p["metadata"]["uid"]: pod_to_bytes(p) for p in example_pods()})
    await kubelet.start()
    try:
        code, table, err = await acli("get", "pods", "--socket", str(sock))
        assert code == Exit.OK, err
        assert _unclocked(table) == _unclocked(get(server).stdout)  # the same table as from ours
        code, out, _ = await acli("check", "--socket", str(sock))
        assert code == Exit.OK, out
        assert "no gRPC health service" in out and "v1alpha1.Pods (kubelet) in" in out
        assert "Pods (documented)" not in out and "ready:     yes" in out
        assert (await acli("check", "-q", "--socket", str(sock)))[0] == Exit.OK
        code, out, err = await acli("get", "pods", "--contract", "documented", "--socket", str(sock))
        assert code == Exit.ERROR and out == "" and "try --contract kubelet" in err
        watch = await asyncio.create_subprocess_exec(
            PODS_API, "watch", "-o", "name", "--socket", str(sock), stdout=asyncio.subprocess.PIPE
        )
        assert watch.stdout is not None
        lines = [(await watch.stdout.readline()).decode() for _ in NAMES]
        assert await watch.stdout.readline() == b"INITIAL_SYNC_COMPLETE\n"
        (uid, name) = next((p["metadata"]["uid"], p["metadata"]["name"]) for p in example_pods())
        kubelet.remove(uid)
        assert await watch.stdout.readline() == f"DELETED pod/{name}\n".encode()
        await kubelet.stop()  # the kubelet goes away: the watch ends, saying so in its exit code
        assert await asyncio.wait_for(watch.wait(), TIMEOUT) == Exit.UNREACHABLE
        assert sorted(lines) == sorted(f"ADDED pod/{n}\n" for _, n in NAMES)
    finally:
        await kubelet.stop()


async def test_a_kubelet_refusing_the_tables_own_mask_still_gets_the_table(
    tmp_path: Path, server: Served
) -> None:
    """A table asks for the printer's fields only, a mask the user never wrote: a server that
    refuses it (a kubelet whose Pod lacks one of those fields) must print the same table with
    the same exit code as a server that takes it; a mask the user gave is still theirs to fix."""
    sock = tmp_path / "kubelet.sock"
    pods = {p["metadata"]["uid"]: pod_to_bytes(p) for p in example_pods()}
    kubelet = KubeletServer(sock, pods, refuse_masks=True)
    await kubelet.start()
    try:
        for wide in ((), ("-o", "wide")):
            code, table, err = await acli("get", "pods", *wide, "--socket", str(sock))
            assert code == Exit.OK, err
            assert _unclocked(table) == _unclocked(get(server, *wide).stdout)
        assert kubelet.lists == 4  # each asked with the mask, then without it
        code, out, err = await acli("get", "pods", "--fields", "status.phase", "--socket", str(sock))
        assert code == Exit.USAGE and out == "" and "unknown field in mask" in err
    finally:
        await kubelet.stop()


# -- help -----------------------------------------------------------------------------------------


def test_watch_yaml_is_a_document_per_event(server: Served) -> None:
    lines = []
    proc = subprocess.Popen(
        [PODS_API, "watch", "-o", "yaml", "--socket", str(server.socket)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        while not lines or lines[-1] != "type: INITIAL_SYNC_COMPLETE\n":
            lines.append(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    documents = list(yaml.safe_load_all("".join(lines)))
    assert [d["type"] for d in documents] == ["ADDED"] * len(NAMES) + ["INITIAL_SYNC_COMPLETE"]
    assert all(d["object"]["kind"] == "Pod" for d in documents[:-1])


def test_readme_lists_the_exit_codes() -> None:
    text = (DOCS / "clients.md").read_text()
    table = re.search(r"\| exit code \| meaning \|\n\| --- \| --- \|\n((?:\|.*\n)+)", text)
    assert table is not None, "docs/clients.md has no exit code table"
    codes = [int(row.split("|")[1]) for row in table.group(1).splitlines()]
    assert codes == [int(e) for e in Exit]


def test_version() -> None:
    result = cli("--version")
    assert result.returncode == 0 and result.stdout == f"pods-api {pods_api.__version__}\n"


@pytest.mark.parametrize("command", [[], ["get"], ["watch"], ["check"]])
def test_help_documents_the_exit_codes(command: list[str]) -> None:
    result = cli(*command, "--help")
    assert result.returncode == 0
    for line in HELP.splitlines()[1:]:
        assert line in result.stdout


# What the probes' command may load: a DaemonSet runs `check` every few seconds on a busy node,
# so it must not pay for the server, the gateway's web stack or a source.
NOT_FOR_A_CLIENT = (
    "pods_api.serve.process",
    "pods_api.core.grpc",
    "pods_api.gateway",
    "pods_api.sources",
    "fastapi",
    "starlette",
    "uvicorn",
    "sse_starlette",
    "prometheus_client",
    "watchfiles",
    "kubernetes_asyncio",
)
# And a probe (`check --quiet`: gRPC health only) not even the codec and stubs `get` uses.
NOT_FOR_A_PROBE = (*NOT_FOR_A_CLIENT, "pods_api.core.api.codec", "pods_api.client.client", "yaml")


def loaded_by(*args: str) -> tuple[int, set[str]]:
    """Run the `pods-api` entry point in a fresh interpreter; its exit code and the modules it
    loaded (top-level names and pods_api's own)."""
    code = (
        "import sys, json\n"
        "from pods_api.serve.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "print(json.dumps([code, sorted(sys.modules)]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=TIMEOUT
    )
    exit_code, modules = json.loads(result.stdout.splitlines()[-1])
    return exit_code or 0, set(modules)


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


@pytest.mark.parametrize("liveness", [False, True], ids=["readiness", "liveness"])
def test_the_probe_loads_neither_the_server_nor_a_source_nor_the_codec(
    server: Served, liveness: bool
) -> None:
    args = [
        "check",
        "--quiet",
        "--timeout=2",
        f"--socket={server.socket}",
        *(["--liveness"] if liveness else []),
    ]
    code, modules = loaded_by(*args)
    assert code == Exit.OK
    assert _loaded(modules, NOT_FOR_A_PROBE) == []


def test_a_full_check_and_get_load_the_client_but_not_the_server(server: Served) -> None:
    for args in (["check", f"--socket={server.socket}"], ["get", "pods", f"--socket={server.socket}"]):
        code, modules = loaded_by(*args)
        assert code == Exit.OK, args
        assert "pods_api.client.client" in modules  # they do list pods
        assert _loaded(modules, (*NOT_FOR_A_CLIENT, "yaml")) == [], args  # yaml: for -o yaml only


def test_a_table_reads_the_messages_without_the_codec_or_the_template_printers(server: Served) -> None:
    """`get pods` prints from the messages themselves (core/api/messageview.py): the codec, the
    jsonpath and custom-columns printers and the informer are for other forms and retries."""
    for output in ("table", "wide"):
        code, modules = loaded_by("get", "pods", "-o", output, f"--socket={server.socket}")
        assert code == Exit.OK
        unneeded = ("pods_api.core.api.codec", "pods_api.client.jsonpath", "pods_api.client.informer")
        assert _loaded(modules, unneeded) == [], output


def test_version_loads_no_source_nor_the_codec() -> None:
    code, modules = loaded_by("--version")
    assert code == 0
    assert _loaded(modules, NOT_FOR_A_PROBE) == []
