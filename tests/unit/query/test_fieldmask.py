"""Field masks: the syntax, validation errors, and the same result on JSON and protobuf."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import MASK_PATHS, masks, pods
from vectors import vector_params, vector_pb

from pods_api.core.api.codec import pod_from_bytes, pod_from_message, pod_to_message
from pods_api.core.api.marshal import go_marshal
from pods_api.core.api.pb import k8s_core_v1_pb2
from pods_api.core.query.fieldmask import MAX_MASK_LENGTH, MAX_PATHS, FieldMaskError, parse_mask

POD: dict[str, Any] = {
    "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1", "labels": {"app": "web"}},
    "spec": {
        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}],
        "containers": [
            {"name": "app", "image": "shop/web:1", "ports": [{"containerPort": 80}]},
            {"name": "sidecar", "image": "envoy:1"},
        ],
        "nodeName": "node-1",
    },
    "status": {
        "phase": "Running",
        "podIPs": [{"ip": "10.0.0.5"}],
        "containerStatuses": [
            {"name": "app", "ready": True, "restartCount": 2, "image": "shop/web:1", "imageID": "x"}
        ],
    },
}
IDENTITY = {"name": "web-1", "namespace": "shop", "uid": "u-1"}


def _masked(text: str) -> dict[str, Any]:
    mask = parse_mask(text)
    assert mask is not None
    return mask.apply_json(pod_from_message(pod_to_message(POD).message))


def test_selected_paths_and_identity_are_kept_in_kubectl_order() -> None:
    got = _masked("status.podIPs, status.phase")
    assert got == {"metadata": IDENTITY, "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}]}}
    assert list(got["status"]) == ["phase", "podIPs"]


def test_a_path_through_a_list_applies_to_every_element() -> None:
    got = _masked("spec.containers.image")
    assert got["spec"] == {"containers": [{"image": "shop/web:1"}, {"image": "envoy:1"}]}


def test_inline_fields_are_selected_by_their_json_names() -> None:
    assert _masked("spec.volumes.emptyDir")["spec"] == {"volumes": [{"emptyDir": {}}, {}]}


def test_paths_ending_at_a_message_list_or_map_take_the_subtree() -> None:
    got = _masked("metadata.labels,status,spec.containers.ports,status.phase")
    assert got["metadata"] == {**IDENTITY, "labels": {"app": "web"}}
    assert got["status"] == pod_from_message(pod_to_message(POD).message)["status"]
    assert got["spec"]["containers"] == [{"ports": [{"containerPort": 80}]}, {}]


def test_equal_masks_share_one_compiled_mask() -> None:
    assert parse_mask("status.phase, spec.nodeName") is parse_mask("spec.nodeName,status.phase,status.phase")
    assert parse_mask("") is None and parse_mask(None) is None and parse_mask("  ") is None


@pytest.mark.parametrize("text", [",,,", " , ", "status.phase,", ",status.phase", "status.phase,,spec"])
def test_an_empty_path_is_an_error_not_everything(text: str) -> None:
    """Like an empty name in a path (`status..phase`): `,,,` is a mistake, never "no mask"."""
    with pytest.raises(FieldMaskError, match=r"path \d+ of \d+ is empty"):
        parse_mask(text)


@given(
    paths=st.lists(st.sampled_from(MASK_PATHS), min_size=1, max_size=6),
    at=st.integers(min_value=0, max_value=6),
    blank=st.sampled_from(["", " ", "  "]),
)
def test_an_empty_path_anywhere_in_a_valid_mask_is_an_error(paths: list[str], at: int, blank: str) -> None:
    assert parse_mask(",".join(paths)) is not None
    paths.insert(min(at, len(paths)), blank)
    with pytest.raises(FieldMaskError, match=f"path {min(at, len(paths) - 1) + 1} of {len(paths)} is empty"):
        parse_mask(",".join(paths))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "status.phse",
            'unknown field mask path "status.phse": PodStatus has no field "phse" at "status.phse"'
            " (did you mean 'phase'?)",
        ),
        ("spec.containers.imag", "did you mean 'image'"),
        ("metadata.labels.app", '"metadata.labels" is a map and has no fields to select'),
        ("status.phase.x", '"status.phase" is a value and has no fields to select'),
        ("status..phase", 'invalid field mask path "status..phase": empty name'),
        ("kind", 'Pod has no field "kind"'),
    ],
)
def test_invalid_masks_name_the_path(text: str, message: str) -> None:
    with pytest.raises(FieldMaskError) as err:
        parse_mask(text)
    assert message in str(err.value)


def test_masks_are_capped() -> None:
    with pytest.raises(FieldMaskError, match="limit is"):
        parse_mask("status.phase," * (MAX_MASK_LENGTH // 12))
    with pytest.raises(FieldMaskError, match=f"limit is {MAX_PATHS}"):
        parse_mask(",".join(MASK_PATHS[: MAX_PATHS + 1]))


def test_masked_protobuf_carries_exactly_the_selected_fields() -> None:
    mask = parse_mask("status.phase")
    assert mask is not None
    pb = mask.apply_message(pod_to_message(POD).message)
    assert [fd.name for fd, _ in pb.ListFields()] == ["metadata", "status"]
    assert [fd.name for fd, _ in pb.metadata.ListFields()] == ["name", "namespace", "uid"]
    assert [fd.name for fd, _ in pb.status.ListFields()] == ["phase"]


def _same_on_both_forms(pb: bytes, text: str) -> None:
    """On a pod as served (Go's bytes, zero fields written): masked as JSON or as protobuf, the
    same pod."""
    mask = parse_mask(text)
    assert mask is not None
    full = pod_from_bytes(pb)
    via_json = mask.apply_json(full)
    via_pb = pod_from_bytes(mask.apply_bytes(pb))
    # Decoding prints Go's zero values (non-omitempty scalars) that nobody selected; masking
    # that again gives exactly the masked JSON.
    assert mask.apply_json(via_pb) == via_json
    assert _is_subtree(via_json, full)
    for key in ("name", "namespace", "uid"):
        if key in full.get("metadata", {}):
            assert via_json["metadata"][key] == full["metadata"][key]


def _is_subtree(part: Any, whole: Any) -> bool:
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(
            k in whole and _is_subtree(v, whole[k]) for k, v in part.items()
        )
    if isinstance(part, list):
        return isinstance(whole, list) and len(part) == len(whole) and all(map(_is_subtree, part, whole))
    return bool(part == whole)


@pytest.mark.parametrize("vector", vector_params())
def test_vectors_mask_the_same_on_both_forms(vector: dict[str, Any]) -> None:
    for text in (
        "status.phase,status.podIPs",
        "spec.containers.image,spec.volumes.hostPath",
        "spec",
        "metadata.labels",
    ):
        _same_on_both_forms(go_marshal(k8s_core_v1_pb2.Pod.FromString(vector_pb(vector))), text)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(pods(), masks)
def test_random_masks_on_random_pods_agree(pod: k8s_core_v1_pb2.Pod, text: str) -> None:
    _same_on_both_forms(go_marshal(pod), text)
