"""The identity policy where a container runtime reports static pods (the standalone mode:
--manifests with --cri-socket): a static pod is served only under the uid the runtime shows the
kubelet runs it as, that uid is remembered across a sandbox gap, and an edit is two pods.

The kubelet's side: pkg/kubelet/config/common.go applyDefaults (an edit is a new uid),
pkg/kubelet/kuberuntime/labels.go newPodLabels (the sandbox carries that uid),
pkg/kubelet/pod_workers.go (the new pod starts once the old one with its name has terminated).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from builders import pod

from pods_api.core.store.cache import OverlaySink, PodCache, SourceSink
from pods_api.core.store.identity import CONFIG_HASH, SANDBOX_READY, IdentityPolicy
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import EventType, Watcher, WatchHub

OURS = "3b2c6f0e9d8a47c1b5e4f6a7d8c9b0a1"  # pods-api's hash of the manifest
KUBELET = "5d41402abc4b2a76b9719d911017c592"  # the kubelet's uid, on the sandbox
WAIT = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def configured(uid: str = OURS, tier: str = "control-plane") -> PodVersion:
    """What the manifests source serves for etcd.yaml: our uid, status only Pending."""
    body = pod(
        "etcd-node-1", namespace="kube-system", uid=uid, image="etcd:3.5", container="etcd", node="node-1",
        phase="Pending", typed=False,
    )  # fmt: skip
    annotations = {CONFIG_HASH: uid, "kubernetes.io/config.source": "file"}
    body["metadata"].update(labels={"tier": tier}, annotations=annotations)
    return PodVersion.from_json(body)


def sandbox(uid: str = KUBELET, *, ready: bool = True) -> PodVersion:
    """The CRI overlay's report of the static pod's current sandbox."""
    meta = {"name": "etcd-node-1", "namespace": "kube-system", "uid": uid}
    condition = {"type": SANDBOX_READY, "status": "True" if ready else "False"}
    return PodVersion.from_json(
        {
            "metadata": {**meta, "annotations": {"kubernetes.io/config.source": "file"}},
            "status": {"conditions": [condition]},
        }
    )


RUNNING: dict[str, Any] = {
    "phase": "Running",
    "containerStatuses": [
        {
            "name": "etcd",
            "containerID": "containerd://aaa",
            "image": "etcd:3.5",
            "imageID": "",
            "ready": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": "2026-12-02T01:00:00Z"}},
        }
    ],
}


class Node:
    """A cache with a manifests source and a CRI overlay that reports static pods."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.cache = PodCache(
            WatchHub(capacity=100, max_watchers=10), policy=IdentityPolicy(clock=self.clock)
        )
        self.manifests: SourceSink = self.cache.source("manifests", configures_static_pods=True)
        self.cri: OverlaySink = self.cache.overlay("cri")
        self.cri.expect_static(WAIT)
        self.watcher: Watcher = self.cache.hub.subscribe()

    def events(self) -> list[tuple[EventType, str]]:
        out = []
        while self.watcher._queue:
            event = self.watcher._queue.popleft()
            out.append((event.type, event.pod.uid))
        return out

    def uids(self) -> list[str]:
        return [p.uid for p in self.cache.snapshot().pods]

    def label(self, uid: str) -> str:
        found = self.cache.get(uid)
        assert found is not None, uid
        return str(found.json["metadata"]["labels"]["tier"])


def test_a_new_static_pod_is_one_added_under_the_kubelets_uid() -> None:
    node = Node()
    node.manifests.replace([configured()])
    node.manifests.mark_synced()
    node.cri.report_static([])
    node.cri.mark_synced()
    # Ready (the kubelet lists a pod once it knows it): the held pod does not keep the gate shut.
    assert node.cache.ready
    assert node.uids() == [] and node.events() == []
    node.cri.report_static([sandbox()])
    assert node.events() == [(EventType.ADDED, KUBELET)]
    served = node.cache.get(KUBELET)
    assert served is not None and served.json["metadata"]["annotations"][CONFIG_HASH] == KUBELET


def test_a_static_pod_the_runtime_never_shows_falls_back_to_our_uid_with_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    node = Node()
    node.manifests.replace([configured()])
    node.clock.now += WAIT - 1
    node.cri.report_static([])
    assert node.events() == []
    node.clock.now += 1
    with caplog.at_level(logging.WARNING, logger="pods_api.core.store.identity"):
        node.cri.report_static([])  # every relist (or failed retry) reports again
        node.clock.now += WAIT
        node.cri.report_static([])
    assert node.events() == [(EventType.ADDED, OURS)]
    (line,) = [r.getMessage() for r in caplog.records]
    assert "kube-system/etcd-node-1" in line and "manifests" in line and OURS in line
    # The kubelet was only slow: its uid is served from then on, a different pod to clients.
    node.cri.report_static([sandbox()])
    assert node.events() == [(EventType.DELETED, OURS), (EventType.ADDED, KUBELET)]


def test_a_sandbox_gap_is_only_modified() -> None:
    """A node restart: containerd's state is gone, then the kubelet makes the sandbox again
    under the same uid (the manifest did not change)."""
    node = Node()
    node.manifests.replace([configured()])
    node.cri.report_static([sandbox()])
    node.cri.replace({KUBELET: RUNNING})
    node.events()
    node.cri.report_static([])
    node.cri.replace({})
    node.cri.report_static([sandbox()])
    node.cri.replace({KUBELET: RUNNING})
    assert node.events() == [(EventType.MODIFIED, KUBELET), (EventType.MODIFIED, KUBELET)]
    assert node.uids() == [KUBELET]


def test_a_manifest_that_comes_back_is_held_again_until_the_runtime_shows_it() -> None:
    node = Node()
    node.manifests.replace([configured()])
    node.cri.report_static([sandbox()])
    node.cri.report_static([])
    node.manifests.replace([])  # a file briefly unreadable: the kubelet would kill the pod too
    assert node.events() == [(EventType.ADDED, KUBELET), (EventType.DELETED, KUBELET)]
    node.manifests.replace([configured()])
    node.clock.now += WAIT / 2
    node.cri.report_static([sandbox()])  # the same content: the kubelet's same uid
    assert node.events() == [(EventType.ADDED, KUBELET)]


def test_an_edit_is_the_old_uid_with_the_old_content_then_the_new_uid_with_the_new() -> None:
    node = Node()
    node.manifests.replace([configured()])
    node.cri.report_static([sandbox()])
    node.cri.replace({KUBELET: RUNNING})
    node.events()
    edited = "0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e"
    node.manifests.replace([configured(edited, tier="edited")])
    # The kubelet still runs the old pod: the old uid, the old label; the new one is held.
    assert node.events() == [] and node.uids() == [KUBELET] and node.label(KUBELET) == "control-plane"
    node.cri.report_static([sandbox(ready=False)])  # the kubelet stopped the old pod
    assert node.events() == [(EventType.DELETED, KUBELET)] and node.uids() == []
    new_uid = "6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e"
    node.cri.report_static([sandbox(new_uid)])  # and started the new one
    assert node.events() == [(EventType.ADDED, new_uid)]
    assert node.label(new_uid) == "edited"


def test_an_edit_undone_while_the_old_pod_runs_keeps_serving_it() -> None:
    node = Node()
    node.manifests.replace([configured()])
    node.cri.report_static([sandbox()])
    node.events()
    node.manifests.replace([configured("0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e", tier="edited")])
    node.manifests.replace([configured()])
    node.cri.report_static([sandbox(ready=False)])  # a sandbox gap, not a removal
    assert node.events() == [] and node.uids() == [KUBELET]


def test_a_removed_manifest_is_served_until_its_sandbox_stops() -> None:
    node = Node()
    node.manifests.replace([configured()])
    node.cri.report_static([sandbox()])
    node.events()
    node.manifests.replace([])
    assert node.uids() == [KUBELET] and node.events() == []
    node.cri.report_static([sandbox(ready=False)])
    assert node.events() == [(EventType.DELETED, KUBELET)]
    node.cri.report_static([])
    assert node.uids() == [] and node.events() == []


def test_pods_configured_before_the_runtime_is_expected_are_held_then() -> None:
    """The CRI overlay says it reports static pods when it starts, maybe after the manifests
    were read: those pods are held too (the cache is not ready yet, no client saw them)."""
    cache = PodCache(WatchHub(capacity=100, max_watchers=10))
    manifests = cache.source("manifests", configures_static_pods=True)
    manifests.replace([configured()])
    cri = cache.overlay("cri")
    cri.expect_static(WAIT)
    assert cache.snapshot().pods == ()
    cri.report_static([sandbox()])
    assert [p.uid for p in cache.snapshot().pods] == [KUBELET]


def mirror(kubelet_uid: str) -> PodVersion:
    """The API server's mirror of the static pod, naming the kubelet's uid."""
    body = configured().json
    annotations = {
        "kubernetes.io/config.mirror": kubelet_uid,
        CONFIG_HASH: kubelet_uid,
        "kubernetes.io/config.source": "file",
    }
    meta = {**body["metadata"], "uid": "mirror-uid", "annotations": annotations}
    return PodVersion.from_json({**body, "metadata": meta})


def test_a_mirror_naming_a_uid_no_content_has_ends_the_hold_and_a_stale_one_does_not() -> None:
    node = Node()
    apiserver = node.cache.source("apiserver")
    node.manifests.replace([configured()])
    node.cri.report_static([sandbox()])
    apiserver.replace([mirror(KUBELET)])
    node.events()
    node.manifests.replace([configured("0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e", tier="edited")])
    node.cri.report_static([])  # the old pod gone; its mirror, not yet updated, names it still
    assert node.events() == [(EventType.DELETED, KUBELET)] and node.uids() == []
    apiserver.replace([mirror("6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e")])  # the kubelet's new mirror
    assert node.events() == [(EventType.ADDED, "6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e")]
    assert node.label("6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e") == "edited"
