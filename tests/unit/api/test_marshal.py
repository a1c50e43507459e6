"""Every pod pods-api encodes is byte for byte what Go's `v1.Pod.Marshal()` writes for it: held
against k8s.io/api itself (tests/go/kubelet/cmd/remarshal: Unmarshal our bytes, Marshal them
again), over the shared vectors, bench's realistic pods, random pods, a DELETED's identity and
masked pods; and, without Go, the rules that are easy to get wrong."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from google.protobuf import empty_pb2, unknown_fields
from hypothesis import HealthCheck, given, settings
from strategies import masks, pods
from vectors import shared_vectors, vector_pb

from bench import pods as bench_pods
from pods_api.core.api.codec import pod_from_bytes, pod_from_message, pod_to_bytes, pod_to_message
from pods_api.core.api.marshal import go_marshal
from pods_api.core.api.pb import k8s_core_v1_pb2
from pods_api.core.query.fieldmask import parse_mask
from pods_api.core.query.view import View
from pods_api.core.store.version import PodVersion

Remarshal = Callable[[Sequence[bytes]], list[bytes]]
# Random pods held against Go in its one process: enough to meet every kind of field many times.
RANDOM_PODS = 300
MASKS = ("status.phase", "status.phase,status.podIPs", "spec.containers.image,metadata.labels", "spec")
# Go's bytes of a pod with nothing set: its metadata, spec and status at their zero values.
EMPTY_POD_BYTES = 69


def _differences(ours: Sequence[bytes], names: Sequence[str], go_remarshal: Remarshal) -> list[str]:
    """The pods whose bytes Go writes otherwise, named, with both sizes."""
    theirs = go_remarshal(ours)
    return [
        f"{n}: ours {len(o)} bytes, Go's {len(t)}"
        for n, o, t in zip(names, ours, theirs, strict=True)
        if o != t
    ]


def test_every_vector_is_encoded_as_go_writes_it(go_remarshal: Remarshal) -> None:
    vectors = shared_vectors()
    if not vectors:
        pytest.skip("../shared/k8s/pod-vectors.json is absent")
    ours = [pod_to_bytes(v["json"]) for v in vectors]
    assert _differences(ours, [v["name"] for v in vectors], go_remarshal) == []
    # The vectors' own bytes leave Go's zero fields out: ours are longer by those.
    assert sum(map(len, ours)) > sum(len(vector_pb(v)) for v in vectors)


def test_realistic_pods_are_encoded_as_go_writes_them(go_remarshal: Remarshal) -> None:
    given_pods = {f"fixture-{i}": bench_pods.fixture(i) for i in range(3)}
    given_pods |= {f"manifest-{i}": bench_pods.manifest(i) for i in range(3)}
    ours = [PodVersion.from_json(pod).pb for pod in given_pods.values()]
    assert _differences(ours, list(given_pods), go_remarshal) == []


def test_a_deleted_pods_identity_is_what_the_kubelet_writes(go_remarshal: Remarshal) -> None:
    """The kubelet's DELETED is Marshal of a new pod with only name, namespace and uid set: Go
    reads ours into exactly that pod, and writes it as we did."""
    version = PodVersion.from_json(bench_pods.fixture(1))
    identity = version.identity
    assert _differences([identity], ["identity"], go_remarshal) == []
    assert pod_from_bytes(identity) == {
        "metadata": {"name": version.name, "namespace": version.namespace, "uid": version.uid}
    }
    strings = len(version.name) + len(version.namespace) + len(version.uid)
    assert len(identity) == EMPTY_POD_BYTES + strings


def test_masked_pods_are_encoded_as_go_writes_them(go_remarshal: Remarshal) -> None:
    """A masked pod is Go's bytes of the pod holding only the selected fields."""
    versions = [PodVersion.from_json(bench_pods.fixture(i)) for i in range(2)]
    masked = {f"{v.name} {text}": v.masked(View(parse_mask(text))).pb for v in versions for text in MASKS}
    assert _differences(list(masked.values()), list(masked), go_remarshal) == []


# Quantities whose canonical form is easy to get wrong.
QUANTITIES = (
    *("1.441", "+1", "1E3", "01"),  # Go keeps these as written when it reads them from JSON
    *("1000E", "1e100", "8Ei", "-0.0000000001", "0.000001", "1n"),  # exponents, the cap, rounding
    *("0.5", "1024Mi", "1.5Gi", "100M", "2048Ki", "12345678901234567890", "-5", "0"),
)


def test_quantities_are_written_as_go_writes_them(go_remarshal: Remarshal) -> None:
    ours = [
        pod_to_bytes({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": q}}}]}})
        for q in QUANTITIES
    ]
    assert _differences(ours, list(QUANTITIES), go_remarshal) == []


def test_random_pods_are_encoded_as_go_writes_them(go_remarshal: Remarshal) -> None:
    """Random pods from the schema, encoded from the message, from the JSON it decodes to, and
    masked: collected first, then held against Go in one process."""
    ours: list[bytes] = []
    names: list[str] = []

    @settings(
        max_examples=RANDOM_PODS,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(pods(), masks)
    def collect(pod: k8s_core_v1_pb2.Pod, text: str) -> None:
        served = go_marshal(pod)
        mask = parse_mask(text)
        assert mask is not None
        ours.extend([served, pod_to_bytes(pod_from_bytes(served)), mask.apply_bytes(served)])
        shown = str(pod_from_bytes(served))
        names.extend([f"pod {shown}", f"pod from JSON {shown}", f"pod {shown} masked {text!r}"])

    collect()
    assert _differences(ours, names, go_remarshal)[:3] == []


# -- the rules, without Go ---------------------------------------------------------------------


def _fields(data: bytes) -> list[tuple[int, bytes]]:
    """A message's fields as written, in order: (number, bytes), read by protobuf itself as the
    unknown fields of an empty message."""
    message = empty_pb2.Empty.FromString(data)
    return [(f.field_number, f.data) for f in unknown_fields.UnknownFieldSet(message)]


def test_map_keys_are_in_gos_order_where_one_begins_another() -> None:
    """upb's deterministic order writes "ab" before "a"; Go's sort.Strings (byte order), "a"."""
    labels = {"ab": "1", "a": "2", "b": "3", "": "4", "a\x00": "5", "é": "6"}
    data = pod_to_bytes({"metadata": {"labels": labels}})
    [metadata] = [payload for number, payload in _fields(data) if number == 1]
    written = [dict(_fields(entry))[1] for number, entry in _fields(metadata) if number == 11]
    assert written == sorted(key.encode() for key in labels)


def test_times_are_written_as_go_writes_them() -> None:
    pod = pod_to_message(
        {
            "metadata": {
                "creationTimestamp": "2026-01-01T00:00:00.5Z",
                "deletionTimestamp": "1970-01-01T00:00:00Z",
            },
            "status": {"conditions": [{"type": "A", "lastTransitionTime": "0001-01-01T00:00:00Z"}]},
        }
    ).message
    data = go_marshal(pod)
    written = k8s_core_v1_pb2.Pod.FromString(data)

    def fields(message: Any) -> list[tuple[str, Any]]:
        return [(fd.name, value) for fd, value in message.ListFields()]

    # Seconds and nanos, both always, the nanoseconds dropped (Go's ProtoTime leaves them out).
    assert fields(written.metadata.creationTimestamp) == [("seconds", 1767225600), ("nanos", 0)]
    # 1970-01-01 is a time, at seconds 0; Go's zero time (0001-01-01, or unset) an empty message.
    assert fields(written.metadata.deletionTimestamp) == [("seconds", 0), ("nanos", 0)]
    condition = written.status.conditions[0]
    assert condition.HasField("lastTransitionTime") and fields(condition.lastTransitionTime) == []
    assert condition.HasField("lastProbeTime") and fields(condition.lastProbeTime) == []
    decoded = pod_from_bytes(data)
    assert decoded["metadata"]["deletionTimestamp"] == "1970-01-01T00:00:00Z"
    assert decoded["status"]["conditions"] == [{"type": "A", "status": ""}]


def test_go_marshal_leaves_its_pod_as_it_was() -> None:
    pod = pod_to_message({"metadata": {"name": "p"}}).message
    before = pod.SerializeToString()
    assert len(go_marshal(pod)) == EMPTY_POD_BYTES + len("p")
    assert pod.SerializeToString() == before
    assert [fd.name for fd, _ in pod.ListFields()] == ["metadata"]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(pods())
def test_a_pod_renders_with_go_zeros_as_its_go_bytes_decode(pod: k8s_core_v1_pb2.Pod) -> None:
    """What a version's JSON is made from (its message, not its bytes) gives the same JSON."""
    assert pod_from_message(pod, go_zeros=True) == pod_from_bytes(go_marshal(pod))


def test_go_zeros_print_unset_structs_as_go_reads_them() -> None:
    pod = pod_to_message(
        {
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "env": [
                            {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}
                        ],
                        "livenessProbe": {"httpGet": {"path": "/"}},
                    }
                ]
            }
        }
    ).message
    container = pod_from_message(pod, go_zeros=True)["spec"]["containers"][0]
    assert container["env"][0]["valueFrom"]["resourceFieldRef"] == {"resource": "limits.cpu", "divisor": "0"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/", "port": 0}
    plain = pod_from_message(pod)["spec"]["containers"][0]  # the shared vectors' reading
    assert plain["livenessProbe"]["httpGet"] == {"path": "/"}
