"""A pod version made from upstream bytes (the bridge): kept as sent, indexed from its message,
its JSON rendered only when something reads it, and refused at once if that JSON could not be;
and what any version holds in memory for its bytes."""

from __future__ import annotations

import tracemalloc

import orjson
import pytest
from builders import stored

from pods_api.core.api.codec import CodecError, pod_from_bytes
from pods_api.core.api.pb import k8s_core_v1_pb2, k8s_meta_v1_pb2
from pods_api.core.query.fieldmask import parse_mask
from pods_api.core.query.view import View
from pods_api.core.store.cache import PodCache
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import WatchHub

CONTAINER_ID = "containerd://" + "ab12" * 16


def bridged(version: PodVersion) -> PodVersion:
    """The same pod as it arrives from an upstream Pods API: its protobuf bytes."""
    return PodVersion.from_bytes(version.pb)


def test_a_bridged_pod_is_indexed_and_served_without_rendering_its_json() -> None:
    status = {
        "podIP": "10.0.0.7",
        "podIPs": [{"ip": "10.0.0.7"}, {"ip": "fd00::7"}],
        "initContainerStatuses": [
            {"name": "app", "image": "busybox", "ready": True, "restartCount": 0, "containerID": CONTAINER_ID}
        ],
    }
    eager = stored("web-uid", name="web", image="busybox", container="c", status=status)
    version = bridged(eager)
    cache = PodCache(WatchHub(capacity=100, max_watchers=10))
    cache.source("upstream").replace([version])
    [by_id] = cache.by_container_id(CONTAINER_ID)
    assert by_id.pod is version and by_id.container.name == "app"
    assert by_id.container.list == "initContainerStatuses"
    assert [hit.pod.uid for hit in cache.by_pod_ip("fd00::7")] == ["web-uid"]
    assert cache.get("web-uid") is version
    assert version.framed == eager.framed  # the upstream's bytes, as they came
    assert version.held == len(version.framed)  # no JSON held: none was rendered
    # Read, it is what the eager path makes, and then it is kept.
    assert version.json_bytes == eager.json_bytes == orjson.dumps(pod_from_bytes(version.pb))
    assert version.held == len(version.framed) + len(version.json_bytes)


def test_upstream_bytes_whose_json_could_not_render_are_refused_at_once() -> None:
    entry = k8s_meta_v1_pb2.ManagedFieldsEntry(
        manager="kubelet", fieldsV1=k8s_meta_v1_pb2.FieldsV1(Raw=b"{no")
    )
    meta = k8s_meta_v1_pb2.ObjectMeta(name="p", namespace="ns", uid="u1", managedFields=[entry])
    data = k8s_core_v1_pb2.Pod(metadata=meta).SerializeToString()
    with pytest.raises(CodecError, match="fieldsV1 value holds bytes that are not JSON"):
        pod_from_bytes(data)  # what rendering says
    with pytest.raises(CodecError, match="fieldsV1 value holds bytes that are not JSON"):
        PodVersion.from_bytes(data)  # said when the pod arrives, not when a reader asks
    good = meta.managedFields[0].fieldsV1
    good.Raw = b'{"f:metadata":{}}'
    version = PodVersion.from_bytes(k8s_core_v1_pb2.Pod(metadata=meta).SerializeToString())
    assert version.json["metadata"]["managedFields"][0]["fieldsV1"] == {"f:metadata": {}}


VERSIONS = 50
# A pod of long strings (an annotation of 24 KB, as large annotations are), where the
# encoder's reserve for escaping is largest.
PAD = "x" * 24_000


def _held() -> tuple[list[PodVersion], int]:
    """VERSIONS versions and one masked encoding of each; the bytes traced while they live."""
    tracemalloc.start()
    try:
        versions = [stored(f"uid-{i}", annotations={"pad": PAD}) for i in range(VERSIONS)]
        masked = [v.masked(View(mask=parse_mask("status.phase"))) for v in versions]
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert masked
    return versions, held


def test_a_version_holds_about_its_own_bytes_and_a_masked_encoding_little() -> None:
    """Every version lives as long as the cache serves it or the watch ring keeps it: what it
    holds is the pods' memory per 1,000 pods (docs/deploying.md), so its encodings must cost
    their length, not an encoder's spare capacity (orjson's was 10x for this pod)."""
    versions, held = _held()
    own = sum(len(v.framed) + len(v.json_bytes) for v in versions)  # the masked ones: ~100 bytes
    # Allowed: the bytes themselves, the decoding on the way (freed), the objects around them.
    assert held < 1.5 * own, f"{held / VERSIONS:.0f} bytes held per version of {own / VERSIONS:.0f}"
