"""The identity policy: first claim wins, mirror pods are their static pods, status overlays
merge by the precedence table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from builders import pod, stored
from hypothesis import given, settings
from hypothesis import strategies as st

from pods_api.core.api.codec import CodecError
from pods_api.core.store.cache import PodCache
from pods_api.core.store.identity import (
    CONFIG_HASH,
    MIRROR_ANNOTATION,
    Contribution,
    IdentityPolicy,
    Overlay,
    Served,
)
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import EventType, WatchHub

STATIC_UID = "3b2c6f0e9d8a47c1b5e4f6a7d8c9b0a1"
MIRROR_UID = "7f1e0d2c-mirror"


def etcd(uid: str, phase: str, *, status: dict[str, Any] | None = None, **meta: Any) -> PodVersion:
    """The static pod etcd-node-1 on node-1 as a source has it; `meta`: metadata fields."""
    body = pod(
        "etcd-node-1", namespace="kube-system", uid=uid, image="etcd:3.5", container="etcd", node="node-1",
        phase=phase, status=status, typed=False,
    )  # fmt: skip
    body["metadata"].update(meta)
    return PodVersion.from_json(body)


def static_pod(**extra_meta: Any) -> PodVersion:
    """What the manifests source serves: the kubelet's static pod, status only Pending."""
    annotations = {"kubernetes.io/config.hash": STATIC_UID, "kubernetes.io/config.source": "file"}
    meta: dict[str, Any] = {"annotations": annotations, **extra_meta}
    return etcd(meta.pop("uid", STATIC_UID), "Pending", **meta)


def mirror_pod(phase: str = "Running", ip: str = "192.168.56.10") -> PodVersion:
    """What the API server holds for it: another UID, the mirror annotation, the real status."""
    annotations = {MIRROR_ANNOTATION: STATIC_UID, "kubernetes.io/config.hash": STATIC_UID}
    status = {"podIP": ip, "podIPs": [{"ip": ip}], "conditions": [{"type": "Ready", "status": "True"}]}
    return etcd(MIRROR_UID, phase, annotations=annotations, status=status, resourceVersion="812")


def new_cache(policy: IdentityPolicy | None = None) -> PodCache:
    return PodCache(WatchHub(capacity=100, max_watchers=10), policy=policy)


def manifests_source(cache: PodCache) -> Any:
    return cache.source("manifests", configures_static_pods=True)


def drain(watcher: Any) -> list[tuple[EventType, str]]:
    out = []
    while watcher._queue:
        event = watcher._queue.popleft()
        if not event.notice:  # the kubelet's contracts' alone (test_cache.py)
            out.append((event.type, event.pod.uid))
    return out


# ---------------------------------------------------------------------------------------------
# mirror pods


def test_a_static_pod_and_its_mirror_are_served_as_one_pod() -> None:
    cache = new_cache()
    manifests, apiserver = manifests_source(cache), cache.source("apiserver")
    _, watcher = cache.watch()
    manifests.replace([static_pod()])
    apiserver.replace([mirror_pod()])
    [served] = cache.snapshot().pods
    assert served.uid == STATIC_UID
    assert MIRROR_ANNOTATION not in served.json["metadata"]["annotations"]  # metadata: the manifest's
    assert "resourceVersion" not in served.json["metadata"]
    assert served.json["status"]["phase"] == "Running"  # status: the mirror's
    assert served.json["status"]["podIPs"] == [{"ip": "192.168.56.10"}]
    assert cache.owner(STATIC_UID) == "manifests"
    assert cache.get(MIRROR_UID) is None
    apiserver.upsert(mirror_pod(phase="Failed"))
    assert drain(watcher) == [
        (EventType.ADDED, STATIC_UID),
        (EventType.MODIFIED, STATIC_UID),
        (EventType.MODIFIED, STATIC_UID),
    ]
    assert cache.by_name("kube-system", "etcd-node-1")[0].pod.json["status"]["phase"] == "Failed"


def test_a_mirror_alone_is_served_under_the_static_pods_identity() -> None:
    cache = new_cache()
    manifests, apiserver = manifests_source(cache), cache.source("apiserver")
    _, watcher = cache.watch()
    apiserver.replace([mirror_pod()])
    [served] = cache.snapshot().pods
    assert served.uid == STATIC_UID and served.json["metadata"]["resourceVersion"] == "812"
    assert cache.owner(STATIC_UID) is None
    manifests.replace([static_pod()])  # the static pod turns up: the same pod, now merged
    assert cache.get(STATIC_UID) is not None and cache.owner(STATIC_UID) == "manifests"
    manifests.replace([])  # and goes: the mirror alone again
    assert cache.get(STATIC_UID) is not None and cache.owner(STATIC_UID) is None
    apiserver.delete(MIRROR_UID)
    assert len(cache) == 0
    assert drain(watcher) == [
        (EventType.ADDED, STATIC_UID),
        (EventType.MODIFIED, STATIC_UID),
        (EventType.MODIFIED, STATIC_UID),
        (EventType.DELETED, STATIC_UID),
    ]


# A manifest without metadata.uid: the kubelet's uid (an FNV hash of Go's in-memory pod) is not
# ours, so the mirror's annotation and the kubelet's own view name another uid than our static pod.
KUBELET_UID = "9e4a1f0c7b2d4c3e8f6a5b4c3d2e1f00"


def named_mirror(phase: str = "Running", uid: str = MIRROR_UID, kubelet_uid: str = KUBELET_UID) -> PodVersion:
    """The API server's mirror of our static pod, naming the kubelet's uid, not ours."""
    pod = mirror_pod(phase).json
    annotations = {
        MIRROR_ANNOTATION: kubelet_uid,
        CONFIG_HASH: kubelet_uid,
        "kubernetes.io/config.source": "file",
    }
    meta = {**pod["metadata"], "uid": uid, "annotations": annotations}
    return PodVersion.from_json({**pod, "metadata": meta})


def kubelet_view(phase: str = "Running") -> PodVersion:
    """The static pod as the kubelet's /pods (or its Pods API) has it: the kubelet's uid,
    config.source file, no mirror annotation, its own status."""
    pod = static_pod().json
    meta = {**pod["metadata"], "uid": KUBELET_UID}
    meta["annotations"] = {**meta["annotations"], CONFIG_HASH: KUBELET_UID}
    status = {"phase": phase, "podIP": "192.168.56.10", "podIPs": [{"ip": "192.168.56.10"}]}
    return PodVersion.from_json({**pod, "metadata": meta, "status": status})


def test_a_mirror_naming_another_uid_is_matched_by_name_and_the_kubelets_uid_is_served() -> None:
    cache = new_cache()
    manifests, apiserver = manifests_source(cache), cache.source("apiserver")
    _, watcher = cache.watch()
    manifests.replace([static_pod()])
    apiserver.replace([named_mirror()])
    [served] = cache.snapshot().pods
    assert served.uid == KUBELET_UID  # the uid the kubelet, the CRI labels and the mirror use
    assert served.json["metadata"]["annotations"][CONFIG_HASH] == KUBELET_UID
    assert served.json["metadata"]["annotations"]["kubernetes.io/config.source"] == "file"
    assert MIRROR_ANNOTATION not in served.json["metadata"]["annotations"]  # metadata: the manifest's
    assert served.json["spec"]["containers"] == [{"name": "etcd", "image": "etcd:3.5"}]
    assert served.json["status"]["phase"] == "Running"  # status: the mirror's
    assert cache.owner(KUBELET_UID) == "manifests"
    assert cache.get(STATIC_UID) is None and cache.get(MIRROR_UID) is None
    assert [h.pod.uid for h in cache.by_name("kube-system", "etcd-node-1")] == [KUBELET_UID]
    apiserver.upsert(named_mirror(phase="Failed"))
    assert cache.get(KUBELET_UID).json["status"]["phase"] == "Failed"
    # Our uid first; the mirror's arrival moves the pod to the kubelet's uid: the old goes
    # first. A status change is a MODIFIED; the mirror gone moves it back to ours.
    apiserver.replace([])
    assert [p.uid for p in cache.snapshot().pods] == [STATIC_UID]
    assert cache.get(STATIC_UID).json["status"] == {"phase": "Pending"}
    assert drain(watcher) == [
        (EventType.ADDED, STATIC_UID),
        (EventType.DELETED, STATIC_UID),
        (EventType.ADDED, KUBELET_UID),
        (EventType.MODIFIED, KUBELET_UID),
        (EventType.DELETED, KUBELET_UID),
        (EventType.ADDED, STATIC_UID),
    ]


def test_a_mirror_first_then_its_static_pod_is_one_pod_modified() -> None:
    cache = new_cache()
    manifests, apiserver = manifests_source(cache), cache.source("apiserver")
    _, watcher = cache.watch()
    apiserver.replace([named_mirror()])
    manifests.replace([static_pod()])
    [served] = cache.snapshot().pods
    assert (served.uid, cache.owner(KUBELET_UID)) == (KUBELET_UID, "manifests")
    assert served.json["status"]["phase"] == "Running"
    manifests.replace([])  # the manifest removed: the mirror alone, until the kubelet deletes it
    assert cache.owner(KUBELET_UID) is None and len(cache) == 1
    assert drain(watcher) == [
        (EventType.ADDED, KUBELET_UID),
        (EventType.MODIFIED, KUBELET_UID),
        (EventType.MODIFIED, KUBELET_UID),
    ]


def test_the_kubelets_own_view_of_a_static_pod_is_one_pod_with_the_manifest() -> None:
    cache = new_cache()
    manifests, kubelet = manifests_source(cache), cache.source("kubelet-pods")
    kubelet.replace([kubelet_view()])
    manifests.replace([static_pod()])
    [served] = cache.snapshot().pods
    assert (served.uid, cache.owner(KUBELET_UID)) == (KUBELET_UID, "manifests")
    assert served.json["status"]["podIPs"] == [{"ip": "192.168.56.10"}]  # the kubelet's status
    assert served.json["spec"]["containers"] == [{"name": "etcd", "image": "etcd:3.5"}]
    # A CRI overlay keys its statuses by the kubelet's uid (io.kubernetes.pod.uid): it applies.
    cache.overlay("cri").set_status(KUBELET_UID, runtime_status())
    assert cache.get(KUBELET_UID).json["status"]["podIP"] == "10.0.0.7"


def test_the_kubelets_view_under_the_manifests_own_uid_is_a_report_not_a_conflict() -> None:
    cache = new_cache()
    manifests, kubelet = manifests_source(cache), cache.source("kubelet-pods")
    view = kubelet_view().json
    kubelet.replace([PodVersion.from_json({**view, "metadata": {**view["metadata"], "uid": STATIC_UID}})])
    manifests.replace([static_pod()])
    [served] = cache.snapshot().pods
    assert served.uid == STATIC_UID and cache.owner(STATIC_UID) == "manifests"
    assert served.json["status"]["phase"] == "Running"
    assert cache.get(STATIC_UID).json["metadata"]["annotations"][CONFIG_HASH] == STATIC_UID


def test_a_pod_of_another_name_is_never_matched() -> None:
    cache = new_cache()
    manifests_source(cache).replace([static_pod()])
    other = named_mirror().json
    cache.source("apiserver").replace(
        [PodVersion.from_json({**other, "metadata": {**other["metadata"], "name": "etcd-node-2"}})]
    )
    assert sorted(p.uid for p in cache.snapshot().pods) == sorted([STATIC_UID, KUBELET_UID])


def test_without_mirror_recognition_both_are_served_first_claim_wins() -> None:
    cache = new_cache(IdentityPolicy(name="first-claim", mirror_pods=False))
    cache.source("manifests").replace([static_pod()])
    cache.source("apiserver").replace([mirror_pod()])
    assert sorted(p.uid for p in cache.snapshot().pods) == sorted([STATIC_UID, MIRROR_UID])


# ---------------------------------------------------------------------------------------------
# status overlays


def owned_pod(uid: str = "web-uid", **status: Any) -> PodVersion:
    return stored(
        uid,
        None,
        name="web",
        namespace="shop",
        image="nginx",
        container="app",
        restartPolicy="Always",
        status=status,
    )


def runtime_status(container_id: str = "containerd://aaa", phase: str = "Running") -> dict[str, Any]:
    """What a CRI overlay computes: containers, IPs, phase, conditions except readiness."""
    return {
        "phase": phase,
        "podIP": "10.0.0.7",
        "podIPs": [{"ip": "10.0.0.7"}],
        "containerStatuses": [
            {
                "name": "app",
                "containerID": container_id,
                "image": "nginx",
                "imageID": "",
                "ready": False,
                "started": False,
                "restartCount": 1,
                "state": {"running": {"startedAt": "2026-11-30T01:00:00Z"}},
            }
        ],
        "conditions": [
            {"type": "Initialized", "status": "True"},
            {"type": "Ready", "status": "False"},
            {"type": "PodReadyToStartContainers", "status": "True"},
        ],
    }


def reported_status() -> dict[str, Any]:
    """What the owning source (e.g. the API server) reports: older, but with probe results."""
    return {
        "phase": "Pending",
        "qosClass": "BestEffort",
        "podIP": "10.0.0.99",
        "containerStatuses": [
            {
                "name": "app",
                "containerID": "containerd://aaa",
                "image": "nginx",
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
            },
        ],
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "False"}],
    }


def test_an_overlay_status_merges_by_the_precedence_table() -> None:
    cache = new_cache()
    source, cri = cache.source("apiserver"), cache.overlay("cri")
    source.replace([owned_pod(**reported_status())])
    _, watcher = cache.watch()
    cri.set_status("web-uid", runtime_status())
    status = cache.get("web-uid").json["status"]
    assert status["phase"] == "Running" and status["podIP"] == "10.0.0.7"  # the runtime's
    assert status["qosClass"] == "BestEffort"  # the owner's: the overlay has none
    [app] = status["containerStatuses"]
    assert app["restartCount"] == 1 and "running" in app["state"]  # the runtime's...
    assert app["ready"] is True and app["started"] is True  # ...but readiness is the kubelet's
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {"Initialized": "True", "Ready": "True", "PodReadyToStartContainers": "True"}
    assert cache.get("web-uid").json["metadata"]["name"] == "web"
    assert drain(watcher) == [(EventType.MODIFIED, "web-uid")]


def test_an_empty_resources_object_of_the_overlay_is_kept() -> None:
    """The kubelet writes a BestEffort pod's `status.resources` as `{}`; the owner has none."""
    cache = new_cache()
    cache.source("apiserver").replace([owned_pod(**reported_status())])
    cache.overlay("cri").set_status("web-uid", {**runtime_status(), "resources": {}})
    assert cache.get("web-uid").json["status"]["resources"] == {}


def test_a_restarted_container_does_not_inherit_readiness() -> None:
    cache = new_cache()
    cache.source("apiserver").replace([owned_pod(**reported_status())])
    cache.overlay("cri").set_status("web-uid", runtime_status(container_id="containerd://bbb"))
    [app] = cache.get("web-uid").json["status"]["containerStatuses"]
    assert app["containerID"] == "containerd://bbb" and app["ready"] is False


def test_a_terminal_phase_reported_by_the_owner_stays() -> None:
    cache = new_cache()
    cache.source("apiserver").replace([owned_pod(phase="Failed", reason="Evicted", message="low memory")])
    cache.overlay("cri").set_status("web-uid", runtime_status(phase="Running"))
    status = cache.get("web-uid").json["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "Evicted")


def test_an_overlay_never_makes_a_pod_exist_and_applies_when_one_does() -> None:
    cache = new_cache()
    source, cri = cache.source("fixtures"), cache.overlay("cri")
    _, watcher = cache.watch()
    cri.set_status("later-uid", runtime_status())
    assert len(cache) == 0 and drain(watcher) == []
    source.upsert(owned_pod("later-uid", phase="Pending"))
    assert cache.get("later-uid").json["status"]["phase"] == "Running"
    assert drain(watcher) == [(EventType.ADDED, "later-uid")]
    cri.clear("later-uid")
    assert cache.get("later-uid").json["status"] == {"phase": "Pending"}
    cri.replace({"later-uid": runtime_status()})
    cri.replace({})
    assert cache.get("later-uid").json["status"] == {"phase": "Pending"}
    assert [t for t, _ in drain(watcher)] == [EventType.MODIFIED] * 3


class CountingPolicy(IdentityPolicy):
    def __init__(self) -> None:
        super().__init__()
        self.merges = 0

    def merge(
        self, uid: str, contributions: Sequence[Contribution], overlays: Sequence[Overlay]
    ) -> Served | None:
        self.merges += 1
        return super().merge(uid, contributions, overlays)


def test_a_pod_is_merged_again_only_when_a_contribution_changed() -> None:
    policy = CountingPolicy()
    cache = new_cache(policy)
    source, cri = cache.source("apiserver"), cache.overlay("cri")
    source.replace([owned_pod(phase="Pending"), owned_pod("other", phase="Pending")])
    cri.set_status("web-uid", runtime_status())
    before, served = policy.merges, cache.get("web-uid")
    cri.set_status("web-uid", runtime_status())  # the same status again
    cri.replace({"web-uid": runtime_status()})
    source.replace([owned_pod(phase="Pending"), owned_pod("other", phase="Pending")])  # the same pods
    assert policy.merges == before and cache.get("web-uid") is served
    source.upsert(owned_pod("other", phase="Running"))
    assert policy.merges == before + 1  # only the pod that changed


def test_a_malformed_overlay_status_is_refused_whole_and_changes_nothing() -> None:
    cache = new_cache()
    cache.source("apiserver").replace([owned_pod(phase="Pending")])
    cri = cache.overlay("cri")
    with pytest.raises(CodecError, match=r"cri: pod x: status\.containerStatuses"):
        cri.replace({"web-uid": runtime_status(), "x": {"containerStatuses": "not a list"}})
    assert cache.get("web-uid").json["status"] == {"phase": "Pending"}
    assert cri.statuses == {}
    cri.set_status("web-uid", runtime_status())  # the good one, on its own, is taken
    assert cache.get("web-uid").json["status"]["phase"] == "Running"


def test_an_overlay_is_a_readiness_gate_and_its_name_is_unique() -> None:
    cache = new_cache()
    cache.source("apiserver").mark_synced()
    cri = cache.overlay("cri")
    assert not cache.ready
    cri.mark_synced()
    assert cache.ready
    with pytest.raises(ValueError, match="already registered"):
        cache.overlay("apiserver")


@given(
    st.lists(
        st.sampled_from(["static+", "static-", "mirror+", "mirror-", "mirror~", "cri+", "cri-"]), max_size=10
    )
)
def test_a_static_pod_is_never_served_twice_whatever_the_order(steps: list[str]) -> None:
    cache = new_cache()
    manifests, apiserver, cri = manifests_source(cache), cache.source("apiserver"), cache.overlay("cri")
    _, watcher = cache.watch()
    have_static = have_mirror = False
    for step in steps:
        match step:
            case "static+":
                manifests.replace([static_pod()])
                have_static = True
            case "static-":
                manifests.replace([])
                have_static = False
            case "mirror+":
                apiserver.upsert(mirror_pod())
                have_mirror = True
            case "mirror~":
                apiserver.upsert(mirror_pod(phase="Succeeded"))
                have_mirror = True
            case "mirror-":
                apiserver.delete(MIRROR_UID)
                have_mirror = False
            case "cri+":
                cri.set_status(STATIC_UID, runtime_status())
            case "cri-":
                cri.clear(STATIC_UID)
        assert [p.uid for p in cache.snapshot().pods] == ([STATIC_UID] if have_static or have_mirror else [])
        assert cache.owner(STATIC_UID) == ("manifests" if have_static else None)
    # Watchers saw a consistent life: ADDED first, nothing after DELETED but ADDED.
    alive = False
    for kind, uid in drain(watcher):
        assert uid == STATIC_UID
        assert (kind is EventType.ADDED) is not alive
        alive = kind is not EventType.DELETED


@settings(deadline=None)  # a shared machine's pauses are no failure
@given(
    st.lists(
        st.sampled_from(
            [
                "static+",
                "static-",
                "mirror+",
                "mirror-",
                "mirror~",
                "view+",
                "view-",
                "view~",
                "cri+",
                "cri-",
                "rt+",
                "rt-",
            ]
        ),
        max_size=12,
    )
)
def test_a_static_pod_matched_by_name_is_never_served_twice_whatever_the_order(steps: list[str]) -> None:
    cache = new_cache()
    manifests, apiserver = manifests_source(cache), cache.source("apiserver")
    kubelet, cri = cache.source("kubelet-pods"), cache.overlay("cri")
    _, watcher = cache.watch()
    have_static = have_mirror = have_view = have_rt = False
    for step in steps:
        match step:
            case "rt+" | "rt-":
                cri.report_static([runtime_pod()] if step == "rt+" else [])
                have_rt = step == "rt+"
            case "static+":
                manifests.replace([static_pod()])
                have_static = True
            case "static-":
                manifests.replace([])
                have_static = False
            case "mirror+" | "mirror~":
                apiserver.upsert(named_mirror(phase="Running" if step == "mirror+" else "Succeeded"))
                have_mirror = True
            case "mirror-":
                apiserver.delete(MIRROR_UID)
                have_mirror = False
            case "view+" | "view~":
                kubelet.replace([kubelet_view(phase="Running" if step == "view+" else "Failed")])
                have_view = True
            case "view-":
                kubelet.replace([])
                have_view = False
            case "cri+":
                cri.set_status(KUBELET_UID, runtime_status())
            case "cri-":
                cri.clear(KUBELET_UID)
        reported = have_mirror or have_view
        by_runtime = have_rt and (have_static or reported)
        expected = (
            [RUNTIME_UID]
            if by_runtime
            else [KUBELET_UID]
            if reported
            else [STATIC_UID]
            if have_static
            else []
        )
        assert [p.uid for p in cache.snapshot().pods] == expected
        if expected:
            served = cache.snapshot().pods[0]
            owner = "manifests" if have_static else "kubelet-pods" if have_view else None
            assert cache.owner(expected[0]) == owner
            if have_static:  # spec and metadata: the manifest's
                assert served.json["metadata"]["annotations"][CONFIG_HASH] == expected[0]
                assert MIRROR_ANNOTATION not in served.json["metadata"]["annotations"]
            if have_static and reported and not by_runtime:  # status: the view's, else the mirror's
                assert served.json["status"]["phase"] != "Pending"
            if by_runtime:  # the reports name an earlier uid: stale, not the pod's status
                assert served.json["status"]["phase"] == "Pending" or not have_static
    # Replaying the events gives the served pods, and each uid had a consistent life.
    alive: dict[str, bool] = {}
    while watcher._queue:
        event = watcher._queue.popleft()
        assert (event.type is EventType.ADDED) is not alive.get(event.pod.uid, False)
        alive[event.pod.uid] = event.type is not EventType.DELETED
        assert sum(alive.values()) <= 1  # never two pods for one static pod, even in between
    assert sorted(uid for uid, up in alive.items() if up) == [p.uid for p in cache.snapshot().pods]


RUNTIME_UID = "5d41402abc4b2a76b9719d911017c592"


def runtime_pod(uid: str = RUNTIME_UID, source: str = "file", name: str = "etcd-node-1") -> PodVersion:
    """The CRI overlay's word on a static pod: the uid on its current sandbox, nothing else."""
    meta = {"name": name, "namespace": "kube-system", "uid": uid}
    return PodVersion.from_json(
        {"metadata": {**meta, "annotations": {"kubernetes.io/config.source": source}}}
    )


def test_the_runtimes_uid_for_a_static_pod_is_served_and_its_word_alone_never_is() -> None:
    """pkg/kubelet/kuberuntime/labels.go newPodLabels: the sandbox carries the kubelet's uid of
    the pod it runs; the served uid follows it, whatever mirror or view names an older one."""
    cache = new_cache()
    manifests, apiserver, cri = manifests_source(cache), cache.source("apiserver"), cache.overlay("cri")
    cri.report_static([runtime_pod()])
    assert cache.snapshot().pods == ()  # the runtime's word never makes a pod exist
    manifests.replace([static_pod()])
    apiserver.replace([named_mirror()])  # a mirror of an earlier version (KUBELET_UID)
    [served] = cache.snapshot().pods
    assert served.uid == RUNTIME_UID
    assert served.json["metadata"]["annotations"][CONFIG_HASH] == RUNTIME_UID
    assert served.json["status"] == {"phase": "Pending"}  # not the stale mirror's Running
    cri.set_status(RUNTIME_UID, runtime_status())
    assert cache.get(RUNTIME_UID).json["status"]["phase"] == "Running"
    cri.report_static([])  # the runtime no longer runs it: the mirror's uid again
    assert [p.uid for p in cache.snapshot().pods] == [KUBELET_UID]


def test_a_stale_mirror_beside_the_kubelets_view_is_one_pod_with_the_kubelets_status() -> None:
    """pkg/kubelet/pod/mirror_client.go IsMirrorPodOf: a mirror whose hash is not the static
    pod's is an orphan the kubelet deletes; the kubelet serves its own pod."""
    cache = new_cache()
    apiserver, kubelet = cache.source("apiserver"), cache.source("kubelet-pods")
    apiserver.replace([named_mirror(phase="Failed", kubelet_uid="0ld0ld0ld0ld0ld0ld0ld0ld0ld0ld00")])
    kubelet.replace([kubelet_view(phase="Running")])
    [served] = cache.snapshot().pods
    assert served.uid == KUBELET_UID and cache.owner(KUBELET_UID) == "kubelet-pods"
    assert served.json["status"]["phase"] == "Running"  # not the orphan's terminal phase
    kubelet.replace([])
    assert [p.uid for p in cache.snapshot().pods] == ["0ld0ld0ld0ld0ld0ld0ld0ld0ld0ld00"]


def test_file_and_http_static_pods_of_one_name_each_take_their_own_reports() -> None:
    """pkg/kubelet/config/config.go filterInvalidPods: a name is unique within one source only."""
    cache = new_cache()
    files, url = manifests_source(cache), cache.source("url", configures_static_pods=True)
    cri = cache.overlay("cri")
    http_pod = static_pod(uid="http-ours")
    meta = {**http_pod.json["metadata"], "annotations": {"kubernetes.io/config.source": "http"}}
    files.replace([static_pod()])
    url.replace([PodVersion.from_json({**http_pod.json, "metadata": meta})])
    cri.report_static([runtime_pod("http-kubelet", source="http")])
    assert sorted(p.uid for p in cache.snapshot().pods) == sorted([STATIC_UID, "http-kubelet"])
    assert cache.owner("http-kubelet") == "url" and cache.owner(STATIC_UID) == "manifests"


def test_the_static_pod_config_sources_say_so_and_no_other_does(tmp_path: Path) -> None:
    from pods_api.sources import configures_static_pods
    from pods_api.sources.apiserver import APIServerSource
    from pods_api.sources.fixtures import FixturesSource
    from pods_api.sources.kubelet_pods import KubeletPodsSource
    from pods_api.sources.manifests import ManifestDirSource
    from pods_api.sources.url import ManifestURLSource

    assert configures_static_pods(ManifestDirSource(tmp_path, node_name="node-1"))
    assert configures_static_pods(ManifestURLSource("http://127.0.0.1:1/pods", node_name="node-1"))
    assert not configures_static_pods(FixturesSource(tmp_path))
    assert not configures_static_pods(KubeletPodsSource("http://127.0.0.1:1/pods"))
    assert not configures_static_pods(APIServerSource(node_name="node-1"))
