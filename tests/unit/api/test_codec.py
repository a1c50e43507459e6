"""The codec against the shared vectors, people's input, and random pods from the schema."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from builders import pod
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from strategies import MASK_PATHS, pods
from vectors import vector_params, vector_pb

from pods_api.core.api.codec import CodecError, pod_from_bytes, pod_from_message, pod_to_bytes, pod_to_message
from pods_api.core.api.marshal import go_marshal
from pods_api.core.api.pb import k8s_core_v1_pb2
from pods_api.core.api.schema import pod_schema


@pytest.mark.parametrize("vector", vector_params())
def test_vector_decodes_to_exactly_its_json(vector: dict[str, Any]) -> None:
    got = pod_from_bytes(vector_pb(vector))
    assert got == vector["json"]
    # Key order too: our JSON is byte-for-byte what kubectl prints (modulo whitespace).
    assert json.dumps(got) == json.dumps(vector["json"])


@pytest.mark.parametrize("vector", vector_params())
def test_vector_encodes_to_gos_bytes_of_its_pod(vector: dict[str, Any]) -> None:
    warnings: list[str] = []
    data = pod_to_bytes(vector["json"], warnings=warnings)
    assert warnings == []
    # The JSON and the vector's own bytes are one pod (which decodes to that JSON): encoded from
    # either, its bytes are Go's of it (test_marshal.py holds them against Go itself). They
    # decode to the vector's JSON and Go's zero values of what that leaves out (httpGet's port).
    assert data == go_marshal(k8s_core_v1_pb2.Pod.FromString(vector_pb(vector)))


def _pod(**container: Any) -> dict[str, Any]:
    """A pod whose one container has the fields given."""
    return pod("web", uid="u1", image=None, typed=False, containers=[{"name": "c", **container}])


def test_wrong_type_names_the_path_and_what_was_expected() -> None:
    with pytest.raises(CodecError) as err:
        pod_to_bytes(_pod(ports=[{"containerPort": "8o"}]))
    assert str(err.value) == 'spec.containers[0].ports[0].containerPort: expected integer, got "8o"'


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"image": 1.27}, "spec.containers[0].image: expected string, got 1.27"),
        ({"tty": "yes"}, 'spec.containers[0].tty: expected boolean, got "yes"'),
        ({"args": "run"}, 'spec.containers[0].args: expected list, got "run"'),
        (
            {"resources": {"limits": {"cpu": "lots"}}},
            'spec.containers[0].resources.limits["cpu"]: invalid quantity',
        ),
        (
            {"resources": {"limits": {"cpu": True}}},
            'spec.containers[0].resources.limits["cpu"]: expected a quantity, got true',
        ),
        (
            {"livenessProbe": {"tcpSocket": {"port": 1.5}}},
            "spec.containers[0].livenessProbe.tcpSocket.port: expected an integer or a string",
        ),
        (
            {"ports": [{"containerPort": 2**40}]},
            "spec.containers[0].ports[0].containerPort: integer 1099511627776 out of range for int32",
        ),
        ({"securityContext": "root"}, 'spec.containers[0].securityContext: expected object, got "root"'),
    ],
)
def test_bad_values_are_errors_with_their_path(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(CodecError) as err:
        pod_to_bytes(_pod(**spec))
    assert str(err.value).startswith(message)


def test_bad_time_is_an_error() -> None:
    with pytest.raises(
        CodecError, match=r"^metadata.creationTimestamp: expected an RFC 3339 time, got \"yesterday\""
    ):
        pod_to_bytes({"metadata": {"creationTimestamp": "yesterday"}})
    with pytest.raises(CodecError, match="RFC 3339"):
        pod_to_bytes({"metadata": {"creationTimestamp": "2026-02-30T00:00:00Z"}})


def test_unknown_fields_are_dropped_and_reported_with_their_paths() -> None:
    pod = _pod(imagePullPolicyy="Always")
    pod["spec"]["hostnetwork"] = True
    pod["kind"], pod["apiVersion"] = "Pod", "v1"  # TypeMeta: known, not on the protobuf wire
    warnings: list[str] = []
    data = pod_to_bytes(pod, warnings=warnings)
    assert warnings == [
        "spec.containers[0].imagePullPolicyy: unknown field, dropped",
        "spec.hostnetwork: unknown field, dropped",
    ]
    assert "imagePullPolicyy" not in json.dumps(pod_from_bytes(data))


def test_people_values_become_kubernetes_values() -> None:
    pod = _pod(
        resources={"requests": {"cpu": 0.5, "memory": "1024Mi"}, "limits": {"cpu": 1, "memory": "1.5Gi"}},
        livenessProbe={"httpGet": {"port": "http"}, "tcpSocket": {"port": 8080}},
        env=[{"name": "A", "value": None}],
    )
    pod["metadata"]["creationTimestamp"] = "2026-11-28T10:00:01.5+02:00"
    pod["metadata"]["deletionTimestamp"] = None
    got = pod_from_bytes(pod_to_bytes(pod))
    container = got["spec"]["containers"][0]
    assert container["resources"] == {
        "limits": {"cpu": "1", "memory": "1536Mi"},
        "requests": {"cpu": "500m", "memory": "1Gi"},
    }
    assert container["livenessProbe"]["httpGet"]["port"] == "http"
    assert container["livenessProbe"]["tcpSocket"]["port"] == 8080
    assert container["env"] == [{"name": "A"}]
    assert got["metadata"]["creationTimestamp"] == "2026-11-28T08:00:01Z"
    assert "deletionTimestamp" not in got["metadata"]


def test_go_zero_value_rules() -> None:
    got = pod_from_bytes(
        pod_to_bytes(
            {
                "metadata": {"name": "p"},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "volumes": [{"name": "v", "emptyDir": {}}],
                    "containers": [{"name": "c"}],
                },
                "status": {"containerStatuses": [{"name": "c"}]},
            }
        )
    )
    # pointer: printed when present, zero or not
    assert got["spec"]["terminationGracePeriodSeconds"] == 0
    assert got["spec"]["volumes"] == [{"name": "v", "emptyDir": {}}]
    # non-pointer, non-omitempty scalars: printed at zero value though never on the wire
    assert got["status"]["containerStatuses"] == [
        {"name": "c", "ready": False, "restartCount": 0, "image": "", "imageID": ""}
    ]
    # an empty non-pointer struct is left out; so are empty lists and maps
    assert got["spec"]["containers"] == [{"name": "c"}]
    assert pod_from_bytes(b"") == {}


def test_fields_v1_is_raw_json_and_time_nanos_truncate() -> None:
    msg = pod_to_message(
        {
            "metadata": {
                "managedFields": [
                    {
                        "manager": "m",
                        "fieldsV1": {"f:spec": {"f:x": {}}},
                        "time": "2026-01-01T00:00:00.999999999Z",
                    }
                ]
            }
        }
    ).message
    entry = msg.metadata.managedFields[0]
    assert orjson.loads(entry.fieldsV1.Raw) == {"f:spec": {"f:x": {}}}
    assert entry.time.nanos == 999999999
    assert pod_from_message(msg)["metadata"]["managedFields"][0]["time"] == "2026-01-01T00:00:00Z"


def test_garbage_bytes_are_an_error() -> None:
    with pytest.raises(CodecError, match=r"not a v1\.Pod"):
        pod_from_bytes(b"\xff\xff\xff")


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(pods())
def test_random_pods_round_trip(pod: k8s_core_v1_pb2.Pod) -> None:
    served = go_marshal(pod)  # what a version of this pod serves
    as_json = pod_from_bytes(served)
    orjson.dumps(as_json)  # plain JSON values only
    warnings: list[str] = []
    again = pod_to_bytes(as_json, warnings=warnings)
    assert warnings == []
    # The JSON of a pod encodes to the very bytes served for it, which decode to that JSON.
    assert again == served
    assert pod_from_bytes(again) == as_json


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=6) | st.integers() | st.booleans(), inner, max_size=3)
    ),
    max_leaves=20,
)


def _shaped_like_a_pod(field_paths: list[list[str]], values: list[Any]) -> dict[str, Any]:
    """Real field names (lists made lists, as the schema says), random values at the ends: the
    wrong-type values are what people get wrong."""
    pod: dict[str, Any] = {}
    for path, value in zip(field_paths, values, strict=False):
        at, ms = pod, pod_schema()
        for name in path[:-1]:
            f = ms.by_json[name][-1]
            assert f.message is not None
            if f.repeated:
                # An earlier path may have set this list to a value of its own, even an empty one.
                items = at.setdefault(name, [{}])
                first = items[0] if isinstance(items, list) and items else None
                at = first if isinstance(first, dict) else {}
            else:
                nxt = at.setdefault(name, {})
                at = nxt if isinstance(nxt, dict) else {}
            ms = f.message
        at[path[-1]] = value
    return pod


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from([p.split(".") for p in MASK_PATHS]), min_size=1, max_size=6),
    st.lists(_JSONISH, min_size=1, max_size=6),
)
@example([["metadata", "managedFields", "fieldsV1"]], [{1: "x"}])  # YAML's non-string keys
@example([["metadata", "name"]], ["\ud800"])  # YAML's "\ud800" escape: not UTF-8
@example([["spec", "containers", "resources"]], [{"limits": {"cpu": float("nan")}}])
# A list set empty by one path, then walked into by the next.
@example([["metadata"], ["spec", "initContainers"], ["spec", "initContainers", "args"]], [None, [], None])
def test_any_input_is_a_pod_or_a_codec_error(paths: list[list[str]], values: list[Any]) -> None:
    """Nothing a manifest can hold gets past the codec as anything but a CodecError (a crash
    here would take a pod source down with it)."""
    try:
        data = pod_to_bytes(_shaped_like_a_pod(paths, values))
    except CodecError as exc:
        assert exc.path or exc.problem
    else:
        pod_from_bytes(data)


def test_values_yaml_allows_but_json_does_not_are_codec_errors() -> None:
    with pytest.raises(CodecError, match=r"^metadata\.managedFields\[0\]\.fieldsV1: not a JSON object"):
        pod_to_bytes({"metadata": {"managedFields": [{"fieldsV1": {1: "x"}}]}})
    with pytest.raises(CodecError, match=r"^metadata\.name: not valid Unicode"):
        pod_to_bytes({"metadata": {"name": "\ud800"}})
