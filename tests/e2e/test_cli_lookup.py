"""`pods-api get pods --container-id/--pod-ip`, `get pod -n NAMESPACE NAME`, `-l` and
`--field-selector` on `get` and `watch`, run as a user runs them against a real server holding a
node's pods; and against a kubelet, which has no lookups and says so."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubelet_server import KubeletServer
from nodepods import CART, CHECKOUT, IDS, KUBE_PROXY, NODE_EXPORTER, NODE_IPS, NODE_PODS, SHARED_PREFIX, write
from serve import PODS_API, TIMEOUT, Served, serving


def name(p: dict[str, object]) -> str:
    return str(p["metadata"]["name"])  # type: ignore[index]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("cli-lookup")
    (root / "fixtures").mkdir()
    for p in NODE_PODS:
        write(root / "fixtures", p)
    with serving(root / "run", "--fixtures", str(root / "fixtures"), "--qps", "0") as served:
        yield served


def get(served: Served, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PODS_API, "get", *args, "--socket", str(served.socket)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def names(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [line.removeprefix("pod/") for line in result.stdout.split()]


def test_get_by_container_id_pod_ip_and_name(server: Served) -> None:
    assert names(get(server, "pods", "--container-id", IDS["checkout/istio-init"][:12], "-o", "name")) == [
        name(CHECKOUT)
    ]
    assert names(get(server, "pods", "--pod-ip", NODE_IPS[0], "-o", "name")) == sorted(
        [name(KUBE_PROXY), name(NODE_EXPORTER)]
    )
    assert names(get(server, "pods", "--pod-ip", "10.9.9.9", "-o", "name")) == []
    pod = json.loads(get(server, "pod", name(CART), "-n", "shop", "-o", "json").stdout)
    assert pod["metadata"]["uid"] == CART["metadata"]["uid"]
    # kubectl's order too: the name after -n.
    assert names(get(server, "pod", "-n", "shop", name(CART), "-o", "name")) == [name(CART)]
    missing = get(server, "pod", name(CART), "-n", "default")
    assert missing.returncode == 5 and "default/" in missing.stderr
    table = get(server, "pods", "--container-id", f"containerd://{IDS['cart/app']}")
    assert table.returncode == 0 and name(CART) in table.stdout and "NAMESPACE" in table.stdout


def test_get_with_selectors(server: Served) -> None:
    assert names(get(server, "pods", "-l", "tier=web,!canary", "-o", "name")) == [name(CHECKOUT)]
    assert names(get(server, "pods", "--field-selector", "spec.hostNetwork=true", "-o", "name")) == sorted(
        [name(KUBE_PROXY), name(NODE_EXPORTER)]
    )
    bad = get(server, "pods", "-l", "app in (a")
    assert bad.returncode == 2 and "position 9" in bad.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("pods", "--container-id", "x", "--pod-ip", "10.0.0.1"),
        ("pod", "some-uid", "--pod-ip", "10.0.0.1"),
        ("pod", "some-uid", "-l", "app=web"),
        ("pod", "-n", "shop", "a", "b"),
        ("pods", "--bogus"),
    ],
)
def test_contradicting_keys_are_usage_errors(server: Served, args: tuple[str, ...]) -> None:
    result = get(server, *args)
    assert result.returncode == 2
    assert "pods-api get" in result.stderr or "unrecognized arguments" in result.stderr


def test_pod_with_a_namespace_and_no_name_lists_it_as_kubectl_does(server: Served) -> None:
    # kubectl reads `pod` and `pods` as one resource: `get pod -n NS` lists NS, it is no usage error.
    assert get(server, "pod", "-n", "shop").stdout == get(server, "pods", "-n", "shop").stdout


def test_an_ambiguous_prefix_names_the_candidates(server: Served) -> None:
    result = get(server, "pods", "--container-id", SHARED_PREFIX)
    assert (
        result.returncode == 2 and IDS["cart/app"] in result.stderr and IDS["checkout/app"] in result.stderr
    )


def test_watch_with_a_selector(server: Served) -> None:
    cmd = [PODS_API, "watch", "--socket", str(server.socket), "-l", "tier=web", "-o", "name"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().split() for _ in range(2)]
        proc.kill()
    assert sorted(line[-1].removeprefix("pod/") for line in lines) == sorted([name(CART), name(CHECKOUT)])


async def test_a_kubelet_has_no_lookups_and_the_cli_says_so(tmp_path: Path) -> None:
    kubelet = KubeletServer(tmp_path / "kubelet.sock", {})
    await kubelet.start()
    try:
        cmd = [PODS_API, "get", "pods", "--socket", str(tmp_path / "kubelet.sock"), "--pod-ip", "10.0.0.1"]
        proc = await asyncio.create_subprocess_exec(*cmd, stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
        assert proc.returncode == 1 and b"pods-api's extension" in err
    finally:
        await kubelet.stop()
