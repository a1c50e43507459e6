"""pods_api.client's lookups and selectors against a real `pods-api serve` holding a node's pods,
and against a kubelet (no extension: Unimplemented, never "no pods")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubelet_server import KubeletServer
from nodepods import (
    CART,
    CHECKOUT,
    IDS,
    KUBE_PROXY,
    NODE_EXPORTER,
    NODE_IPS,
    NODE_PODS,
    SHARED_PREFIX,
    uid,
    write,
)
from serve import Served, serving

from pods_api.client import (
    Client,
    ContainerKind,
    Contract,
    EventType,
    InvalidArgument,
    MatchedContainer,
    Unimplemented,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("client-lookup")
    (root / "fixtures").mkdir()
    for p in NODE_PODS:
        write(root / "fixtures", p)
    with serving(root / "run", "--fixtures", str(root / "fixtures"), "--qps", "0") as served:
        yield served


async def test_lookup_by_each_key(server: Served) -> None:
    async with Client(server.socket) as client:
        (match,) = await client.lookup(container_id=IDS["checkout/debugger"][:12], fields="status.phase")
        assert match.pod.uid == uid(CHECKOUT)
        assert match.container == MatchedContainer(
            "debugger", ContainerKind.EPHEMERAL_CONTAINER, f"containerd://{IDS['checkout/debugger']}"
        )
        assert set(match.pod.json()) == {"metadata", "status"}  # masked
        found = await client.lookup(pod_ip=NODE_IPS[1])
        assert [m.pod.uid for m in found] == sorted([uid(NODE_EXPORTER), uid(KUBE_PROXY)])
        assert all(m.container is None for m in found)
        (by_name,) = await client.lookup(namespace="shop", name=CART["metadata"]["name"])
        assert by_name.pod.uid == uid(CART)
        assert await client.lookup(pod_ip="10.9.9.9") == []
        assert await client.lookup(pod_ip=NODE_IPS[0], label_selector="k8s-app") != []


async def test_bad_lookups_raise_what_is_wrong(server: Served) -> None:
    async with Client(server.socket) as client:
        with pytest.raises(InvalidArgument, match="ambiguous") as caught:
            await client.lookup(container_id=SHARED_PREFIX)
        assert IDS["cart/app"] in str(caught.value)
        with pytest.raises(InvalidArgument, match="not an IP address"):
            await client.lookup(pod_ip="10.0.0")
        for several in ({"container_id": "x", "pod_ip": "10.0.0.1"}, {"name": "x"}, {}):
            with pytest.raises(ValueError, match="exactly one"):
                await client.lookup(**several)


async def test_list_and_watch_with_selectors(server: Served) -> None:
    # Either contract: the selectors are the extension's, whichever contract the client speaks.
    for contract in Contract:
        async with Client(server.socket, contract=contract) as client:
            web = await client.list(label_selector="tier=web", field_selector="status.phase=Running")
            assert [p.uid for p in web] == sorted([uid(CHECKOUT), uid(CART)])
            assert len(await client.list()) == len(NODE_PODS)
            with pytest.raises(InvalidArgument, match="position 9"):
                await client.list(label_selector="app in (a")
            events = client.watch("status.phase", field_selector="spec.hostNetwork=true")
            seen = []
            async for event in events:
                seen.append(event)
                if event.type is EventType.INITIAL_SYNC_COMPLETE:
                    break
            await events.aclose()
            added = seen[:-1]
            assert all(e.type is EventType.ADDED for e in added)
            assert sorted(e.pod.uid for e in added if e.pod) == sorted([uid(NODE_EXPORTER), uid(KUBE_PROXY)])


async def test_a_kubelet_has_no_lookups_and_says_so(tmp_path: Path) -> None:
    kubelet = KubeletServer(tmp_path / "kubelet.sock", {})
    await kubelet.start()
    try:
        async with Client(tmp_path / "kubelet.sock") as client:
            assert await client.list() == []  # the kubelet's own contract answers
            with pytest.raises(Unimplemented):
                await client.lookup(pod_ip="10.0.0.1")
            with pytest.raises(Unimplemented):
                await client.list(label_selector="app=web")
    finally:
        await kubelet.stop()
