"""The cache's named indexes: (namespace, name), container ID, pod IP, kept current through a
pod's whole life at the cache's write points."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from builders import stored
from hypothesis import given
from hypothesis import strategies as st

from pods_api.core.store.cache import PodCache
from pods_api.core.store.index import (
    BY_NAME,
    MIN_PREFIX,
    AmbiguousPrefix,
    ContainerIDIndex,
    ContainerRef,
    InvalidLookup,
)
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import WatchHub

NODE_IP = "192.168.56.10"


def cid(n: int, prefix: str = "") -> str:
    """A 64-hex container ID; `prefix` makes IDs that share a leading part."""
    return prefix + hashlib.sha256(str(n).encode()).hexdigest()[len(prefix) :]


def container(name: str, container_id: str | None, runtime: str = "containerd") -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name,
        "image": "busybox",
        "imageID": "",
        "ready": True,
        "restartCount": 0,
    }
    if container_id is not None:
        entry["containerID"] = f"{runtime}://{container_id}"
    return entry


def pod(
    uid: str,
    name: str | None = None,
    *,
    namespace: str = "shop",
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    ephemeral: list[dict[str, Any]] | None = None,
    ips: list[str] | None = None,
    host_network: bool = False,
) -> PodVersion:
    status: dict[str, Any] = {"phase": "Running"}
    if containers:
        status["containerStatuses"] = containers
    if init:
        status["initContainerStatuses"] = init
    if ephemeral:
        status["ephemeralContainerStatuses"] = ephemeral
    if ips:
        status["podIP"] = ips[0]
        status["podIPs"] = [{"ip": ip} for ip in ips]
    status.pop("phase")
    return stored(
        uid,
        name=name,
        namespace=namespace,
        image="busybox",
        container="c",
        hostNetwork=host_network,
        status=status,
    )


def new_cache() -> PodCache:
    return PodCache(WatchHub(capacity=100, max_watchers=10))


def uids(hits: list[Any]) -> list[str]:
    return [hit.pod.uid for hit in hits]


def web(restarted: bool = False) -> PodVersion:
    """Two app containers, an init and an ephemeral container; dual-stack."""
    return pod(
        "web-uid",
        "web",
        containers=[container("app", cid(2 if restarted else 1)), container("sidecar", cid(3))],
        init=[container("migrate", cid(4))],
        ephemeral=[container("debugger", cid(5))],
        ips=["10.0.0.7", "fd00::7"],
    )


def test_every_container_id_resolves_and_names_its_container() -> None:
    cache = new_cache()
    cache.source("a").replace([web()])
    for n, name, where in [
        (1, "app", "containerStatuses"),
        (3, "sidecar", "containerStatuses"),
        (4, "migrate", "initContainerStatuses"),
        (5, "debugger", "ephemeralContainerStatuses"),
    ]:
        full = f"containerd://{cid(n)}"
        for query in (full, cid(n), cid(n)[:MIN_PREFIX], cid(n)[:40]):
            [hit] = cache.by_container_id(query)
            assert hit.pod.uid == "web-uid"
            assert hit.container == ContainerRef(name, where, full)
    assert cache.by_container_id(f"docker://{cid(1)}") == []  # same ID, another runtime
    assert cache.by_container_id(cid(99)) == []


def test_container_id_prefixes_short_and_ambiguous_are_errors() -> None:
    cache = new_cache()
    shared = "abcdef012345"
    cache.source("a").replace(
        [
            pod("p1", containers=[container("one", cid(1, shared + "1"))]),
            pod("p2", containers=[container("two", cid(2, shared + "2"))]),
        ]
    )
    with pytest.raises(AmbiguousPrefix) as caught:
        cache.by_container_id(shared)
    message = str(caught.value)
    assert cid(1, shared + "1") in message and cid(2, shared + "2") in message
    assert "(container one)" in message and "(container two)" in message
    assert uids(cache.by_container_id(shared + "1")) == ["p1"]  # 13 characters: unique
    with pytest.raises(InvalidLookup, match="at least 12 characters"):
        cache.by_container_id(shared[:11])
    with pytest.raises(InvalidLookup, match="must not be empty"):
        cache.by_container_id("containerd://")


def test_an_ambiguous_prefix_lists_at_most_ten_and_counts_the_rest() -> None:
    index = ContainerIDIndex()
    for n in range(25):
        index.update(f"u{n}", None, pod(f"u{n}", containers=[container("c", cid(n, "f" * 20))]))
    with pytest.raises(AmbiguousPrefix, match="and 15 more") as caught:
        index.lookup("f" * 20)
    assert len(caught.value.candidates) == 10


def test_a_container_restart_moves_the_id_and_the_old_one_stops_resolving() -> None:
    cache = new_cache()
    sink = cache.source("a")
    sink.replace([web()])
    sink.upsert(web(restarted=True))
    assert cache.by_container_id(cid(1)) == []
    assert [h.container.name for h in cache.by_container_id(cid(2)) if h.container] == ["app"]
    assert uids(cache.by_container_id(cid(3))) == ["web-uid"]  # the sidecar did not restart


def test_pod_ips_dual_stack_and_host_network_pods_sharing_the_node_ip() -> None:
    cache = new_cache()
    cache.source("a").replace(
        [
            web(),
            pod("proxy-uid", "kube-proxy", namespace="kube-system", ips=[NODE_IP], host_network=True),
            pod("cni-uid", "cni", namespace="kube-system", ips=[NODE_IP], host_network=True),
            pod("pending-uid"),  # no IP yet
        ]
    )
    assert uids(cache.by_pod_ip("10.0.0.7")) == ["web-uid"]
    assert uids(cache.by_pod_ip("fd00::7")) == ["web-uid"]
    assert uids(cache.by_pod_ip("fd00:0:0:0::7")) == ["web-uid"]  # IPv6 in any spelling
    assert uids(cache.by_pod_ip(NODE_IP)) == ["cni-uid", "proxy-uid"]
    assert cache.by_pod_ip("10.9.9.9") == []
    with pytest.raises(InvalidLookup, match="not an IP address"):
        cache.by_pod_ip("10.0.0")


def test_namespace_and_name() -> None:
    cache = new_cache()
    cache.source("a").replace([web(), pod("other", "web", namespace="staging")])
    assert uids(cache.by_name("shop", "web")) == ["web-uid"]
    assert uids(cache.by_index(BY_NAME, ("staging", "web"))) == ["other"]
    assert cache.by_name("shop", "nope") == []
    with pytest.raises(KeyError):
        cache.by_index("no-such-index", "x")


def test_deletion_removes_every_entry() -> None:
    cache = new_cache()
    sink = cache.source("a")
    sink.replace([web(), pod("keep", ips=["10.0.0.8"], containers=[container("k", cid(9))])])
    sink.delete("web-uid")
    assert cache.by_name("shop", "web") == []
    assert cache.by_pod_ip("10.0.0.7") == [] and cache.by_pod_ip("fd00::7") == []
    for n in (1, 3, 4, 5):
        assert cache.by_container_id(cid(n)) == []
    indexes = cache._indexes.values()
    assert all(not any(uid == "web-uid" for holders in i._map.values() for uid in holders) for i in indexes)
    assert uids(cache.by_pod_ip("10.0.0.8")) == ["keep"]


def test_replace_snapshots_update_the_indexes() -> None:
    cache = new_cache()
    sink = cache.source("a")
    sink.replace([web()])
    sink.replace([pod("new", "web2", ips=["10.0.0.7"], containers=[container("app", cid(7))])])
    assert cache.by_name("shop", "web") == [] and uids(cache.by_name("shop", "web2")) == ["new"]
    assert uids(cache.by_pod_ip("10.0.0.7")) == ["new"]
    assert cache.by_container_id(cid(1)) == [] and uids(cache.by_container_id(cid(7))) == ["new"]
    sink.replace([])
    assert len(cache._indexes["containerID"]) == 0
    assert cache._indexes["containerID"]._sorted == []


def test_a_uid_served_by_another_source_after_a_conflict_is_reindexed() -> None:
    cache = new_cache()
    first, second = cache.source("first"), cache.source("second")
    first.replace([pod("shared", "mine", ips=["10.0.0.1"], containers=[container("a", cid(1))])])
    second.replace([pod("shared", "theirs", ips=["10.0.0.2"], containers=[container("b", cid(2))])])
    assert uids(cache.by_name("shop", "mine")) == ["shared"] and cache.by_name("shop", "theirs") == []
    assert cache.by_container_id(cid(2)) == []  # refused: not served, not indexed
    first.replace([])
    assert cache.by_name("shop", "mine") == [] and uids(cache.by_name("shop", "theirs")) == ["shared"]
    assert cache.by_pod_ip("10.0.0.1") == [] and uids(cache.by_pod_ip("10.0.0.2")) == ["shared"]
    assert cache.by_container_id(cid(1)) == []
    [hit] = cache.by_container_id(cid(2))
    assert hit.container is not None and hit.container.name == "b"


def test_an_index_added_late_is_filled_from_what_is_served() -> None:
    cache = PodCache(WatchHub(capacity=10, max_watchers=1), indexes=[])
    cache.source("a").replace([web()])
    cache.add_index(ContainerIDIndex())
    assert uids(cache.by_container_id(cid(5))) == ["web-uid"]
    with pytest.raises(ValueError, match="already registered"):
        cache.add_index(ContainerIDIndex())


# ---------------------------------------------------------------------------------------------
# property: after any sequence of changes, every index answers what a scan would

_IDS = [cid(n) for n in range(6)]
_IPS = ["10.0.0.1", "10.0.0.2", "fd00::1", NODE_IP]


@st.composite
def changes(draw: st.DrawFn) -> tuple[str, str, PodVersion | None]:
    source = draw(st.sampled_from(["a", "b"]))
    uid = draw(st.sampled_from(["u1", "u2", "u3"]))
    if draw(st.booleans()):
        return source, uid, None
    ids = draw(st.lists(st.sampled_from(_IDS), max_size=3, unique=True))
    return (
        source,
        uid,
        pod(
            uid,
            draw(st.sampled_from(["x", "y"])),
            containers=[container(f"c{i}", c) for i, c in enumerate(ids)],
            ips=draw(st.lists(st.sampled_from(_IPS), max_size=2, unique=True)),
        ),
    )


@given(st.lists(changes(), max_size=12))
def test_indexes_agree_with_a_scan_after_any_changes(steps: list[tuple[str, str, PodVersion | None]]) -> None:
    cache = new_cache()
    sinks = {"a": cache.source("a"), "b": cache.source("b")}
    for source, uid, version in steps:
        if version is None:
            sinks[source].delete(uid)
        else:
            sinks[source].upsert(version)
    served = cache.snapshot().pods
    for name in ("x", "y"):
        assert uids(cache.by_name("shop", name)) == [p.uid for p in served if p.name == name]
    for ip in _IPS:
        want = [p.uid for p in served if ip in {e["ip"] for e in p.json["status"].get("podIPs", [])}]
        assert uids(cache.by_pod_ip(ip)) == want
    for full in _IDS:
        want = [
            p.uid
            for p in served
            if f"containerd://{full}"
            in {c["containerID"] for c in p.json["status"].get("containerStatuses", [])}
        ]
        assert uids(cache.by_container_id(full)) == want
