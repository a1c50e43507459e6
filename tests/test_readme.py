"""The README's cookbook, run as written (bash, curl, jq) against `pods-api serve` with the
example fixtures, so the commands people copy are the commands that work."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from serve import TIMEOUT, Served, serving

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(
    not (shutil.which("curl") and shutil.which("jq")), reason="the cookbook needs curl and jq"
)


def cookbook() -> list[str]:
    """The command lines of the shell block under '### Cookbook'."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"### Cookbook\n.*?```sh\n(.*?)```", text, re.S)
    assert block is not None, "README.md has no cookbook"
    lines = [line for line in block.group(1).splitlines() if line and not line.startswith(("#", "S="))]
    assert len(lines) >= 8
    return lines


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
    with serving(run, "--fixtures", str(ROOT / "examples" / "fixtures")) as served:
        yield served


@pytest.mark.parametrize("command", cookbook())
def test_cookbook_command(server: Served, command: str) -> None:
    watching = "watch=true" in command
    if watching:  # it follows changes forever: take what the first seconds bring
        command = command.replace("curl -N", "curl -N --max-time 2")
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"S={server.http_socket}; {command}"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    out = result.stdout
    assert result.returncode == (28 if watching else 0), result.stderr  # 28: curl's --max-time
    if "jq '.items[].metadata.name'" in command:
        assert out.split() == [json.dumps(name) for _, name in example_names()]
    elif watching:
        assert out.count("event: ADDED") == len(example_names()) and "event: INITIAL_SYNC_COMPLETE" in out
    elif "no-such-uid" in command:
        assert "HTTP/1.1 404" in out and '"status":"NOT_FOUND"' in out
    elif "status.phse" in command:
        assert '"status":"INVALID_ARGUMENT"' in out and "did you mean 'phase'" in out
    elif "application/yaml" in command:
        assert yaml.safe_load(out)["kind"] == "Pod"
    else:
        assert json.loads(out)["kind"] in ("Pod", "PodList")
