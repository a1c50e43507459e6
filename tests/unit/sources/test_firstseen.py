"""config.seen: decoding a static pod is a pure function of its bytes (no time in it), and the
source stamps when each uid was first seen afterwards, as the kubelet's merge does
(pkg/kubelet/config/config.go: recordFirstSeenTime for a uid new to the source, the existing
time copied over while the uid stays)."""

from __future__ import annotations

import pickle
from pathlib import Path

import orjson
from builders import pod
from sourceharness import dump

from pods_api.core.api.pb import k8s_core_v1_pb2
from pods_api.core.store.version import PodVersion
from pods_api.sources import workers
from pods_api.sources.firstseen import CONFIG_SEEN, PLACEHOLDER, FirstSeen, _overwrite, stamp_time, with_seen
from pods_api.sources.manifests import ManifestDecoder


def _decoded(obj: dict[str, object], origin: str = "/etc/kubernetes/manifests/web.yaml") -> PodVersion:
    pods, _, error = workers.outcome(ManifestDecoder("node-1"), origin, dump(obj).encode())
    assert error is None
    (only,) = pods
    return only


def _seen(version: PodVersion) -> str:
    value: str = orjson.loads(version.json_bytes)["metadata"]["annotations"][CONFIG_SEEN]
    assert version.message.metadata.annotations[CONFIG_SEEN] == value  # both encodings agree
    return value


def test_decoding_is_a_pure_function_of_the_bytes() -> None:
    """The same bytes give the same pod bytes from any decoder, in any process: what lets a
    worker decode with nothing from the source."""
    data = dump(pod("web", labels={"app": "web"})).encode()
    origin = "/etc/kubernetes/manifests/web.yaml"
    first = workers.outcome(ManifestDecoder("node-1"), origin, data)
    again = workers.outcome(pickle.loads(pickle.dumps(ManifestDecoder("node-1"))), origin, data)
    assert [p.framed for p in first[0]] == [p.framed for p in again[0]]
    assert [p.json_bytes for p in first[0]] == [p.json_bytes for p in again[0]]
    assert _seen(first[0][0]) == PLACEHOLDER


def test_a_uid_keeps_its_first_seen_time_while_served_and_a_returning_one_is_new() -> None:
    clock = iter(range(1_700_000_000_000_000_001, 1_800_000_000_000_000_000, 1_000_000_000))
    seen = FirstSeen(clock=lambda: next(clock))
    web, db = _decoded(pod("web", uid="web-uid")), _decoded(pod("db", uid="db-uid"))

    first = {p.uid: _seen(p) for p in seen.stamp([web, db])}
    assert first["web-uid"] == first["db-uid"]  # seen in one merge: one time, as the kubelet's
    edited = _decoded(pod("web", uid="web-uid", labels={"v": "2"}))  # an edit that keeps the uid
    assert _seen(seen.stamp([edited])[0]) == first["web-uid"]

    seen.retain({"db-uid"})  # web is no longer served
    assert _seen(seen.stamp([web])[0]) != first["web-uid"]  # back: a new pod to the source
    assert _seen(seen.stamp([db])[0]) == first["db-uid"]


def test_the_stamp_overwrites_the_placeholder_as_encoding_the_pod_with_the_time_would() -> None:
    decoded = _decoded(pod("web", annotations={"z": "after", "a": "before"}))
    when = stamp_time(1_764_000_000_123_456_789)
    assert _overwrite(decoded.framed, PLACEHOLDER.encode(), when.encode()) is not None  # in place

    stamped = with_seen(decoded, when)

    message = k8s_core_v1_pb2.Pod.FromString(decoded.pb)
    message.metadata.annotations[CONFIG_SEEN] = when
    encoded = PodVersion.from_message(message)
    assert stamped.framed == encoded.framed
    assert stamped.json_bytes == encoded.json_bytes
    assert (stamped.uid, stamped.name, stamped.namespace) == (decoded.uid, decoded.name, decoded.namespace)


def test_a_pod_that_holds_the_placeholder_elsewhere_is_encoded_again() -> None:
    """A label written as the annotation is cannot be told apart in the bytes: the pod is
    encoded again, and only its annotation changes."""
    decoded = _decoded(pod("odd", labels={CONFIG_SEEN: PLACEHOLDER}))
    when = stamp_time(1_764_000_000_123_456_789)
    stamped = orjson.loads(with_seen(decoded, when).json_bytes)["metadata"]
    assert (stamped["annotations"][CONFIG_SEEN], stamped["labels"][CONFIG_SEEN]) == (when, PLACEHOLDER)


def test_every_stamped_time_is_as_wide_as_the_placeholder() -> None:
    for ns in (1_764_000_000_000_000_000, 1_764_000_000_120_000_000, 1_764_000_000_123_456_789):
        when = stamp_time(ns)
        assert len(when) == len(PLACEHOLDER)
        assert when.startswith("2025-11-24T16:00:00.") and when.endswith("Z")
    assert stamp_time(1_764_000_000_120_000_000) == "2025-11-24T16:00:00.120000001Z"


def test_a_directory_source_serves_no_placeholder(tmp_path: Path) -> None:
    from pods_api.sources.manifests import ManifestDirSource

    (tmp_path / "web.yaml").write_text(dump(pod("web")))
    source = ManifestDirSource(tmp_path, node_name="node-1")
    source._scan.update(None)
    (state,) = source._scan.files.values()
    (served,) = state.pods
    assert _seen(served) == source.first_seen.times()[served.uid] != PLACEHOLDER
