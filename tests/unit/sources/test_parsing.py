"""Parsing manifests: documents, kinds, where a problem is, and hostile input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from builders import pod
from sourceharness import dump

from pods_api.sources import ManifestError, parsing
from pods_api.sources.parsing import FIXTURE_FORMAT, KUBELET_FORMAT, parse_documents, pod_objects


def objects(text: str | bytes, fmt: parsing.FileFormat = FIXTURE_FORMAT) -> list[tuple[str, dict[str, Any]]]:
    return pod_objects(text.encode() if isinstance(text, str) else text, "f.yaml", fmt)


def problem(text: str | bytes, fmt: parsing.FileFormat = FIXTURE_FORMAT) -> str:
    with pytest.raises(ManifestError) as caught:
        objects(text, fmt)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("f.yaml: ")
    return message.removeprefix("f.yaml: ")


# ---------------------------------------------------------------------------------------------
# documents


def test_yaml_keeps_timestamps_and_dates_as_strings() -> None:
    [(_, obj)] = objects(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  creationTimestamp: 2024-05-01T10:00:00Z\n"
        "  labels: {day: 2024-05-01}\n"
    )
    assert obj["metadata"] == {"creationTimestamp": "2024-05-01T10:00:00Z", "labels": {"day": "2024-05-01"}}


def test_json_yaml_flow_style_and_a_byte_order_mark() -> None:
    as_json = b'\xef\xbb\xbf  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}'
    as_flow = "{apiVersion: v1, kind: Pod, metadata: {name: a}}"  # YAML that looks like JSON at first
    expected = [("", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}})]
    assert objects(as_json) == objects(as_flow) == expected


def test_lists_and_documents_are_labelled() -> None:
    text = dump(
        pod("a"),
        {"apiVersion": "v1", "kind": "List", "items": [pod("b"), pod("c")]},
        {"apiVersion": "v1", "kind": "PodList", "items": [{"metadata": {"name": "d"}}]},  # items from the API
    )
    assert [(where, obj["metadata"]["name"]) for where, obj in objects(text + "---\n")] == [
        ("document 1", "a"),
        ("document 2, items[0]", "b"),
        ("document 2, items[1]", "c"),
        ("document 3, items[0]", "d"),
    ]


def test_an_empty_list_is_no_pods_but_an_empty_file_is_an_error() -> None:
    assert objects("apiVersion: v1\nkind: PodList\nitems: []\n") == []
    assert objects("apiVersion: v1\nkind: PodList\nitems:\n") == []
    assert problem("") == "empty file: no Pod in it"
    assert problem("# just a comment\n---\n") == "empty file: no Pod in it"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kind: Pod\nmetadata: {name: [\n", "not valid YAML: "),
        (
            "kind: Pod\n  bad: indent\n",
            "not valid YAML: mapping values are not allowed in this context at line 2, column 6",
        ),
        ('{"kind": "Pod", "apiVersion": "v1",', "not valid JSON: "),
        ("- a\n- b\n", "expected a Pod or List or PodList object, got a list"),
        ("just words\n", "expected a Pod or List or PodList object, got a string"),
        ("apiVersion: v1\nmetadata: {}\n", "kind is missing; expected Pod or List or PodList"),
        ("apiVersion: apps/v1\nkind: Deployment\n", "kind 'Deployment' is not Pod or List or PodList"),
        ("kind: Pod\n", "apiVersion is missing; a Pod is apiVersion v1"),
        ("apiVersion: v2\nkind: Pod\n", "apiVersion is 'v2'; a Pod is apiVersion v1"),
        ("apiVersion: v1\nkind: PodList\nitems: {}\n", "items: expected a list, got an object"),
        ("apiVersion: v1\nkind: List\nitems: [{kind: Service, apiVersion: v1}]\n", "items[0]: not a v1 Pod"),
        ("apiVersion: v1\nkind: List\nitems: [3]\n", "items[0]: expected a Pod object, got a number"),
        (b"kind: Pod\nname: \xff\xfe\n", "not valid YAML: unacceptable character #x00ff"),
    ],
)
def test_what_is_not_a_pod(text: str | bytes, expected: str) -> None:
    assert expected in problem(text)


def test_the_kubelet_format_is_one_pod_or_a_pod_list() -> None:
    assert (
        len(
            objects(
                dump({"apiVersion": "v1", "kind": "PodList", "items": [pod("a"), pod("b")]}), KUBELET_FORMAT
            )
        )
        == 2
    )
    assert problem(dump(pod("a"), pod("b")), KUBELET_FORMAT).startswith("2 YAML documents")
    assert "kind 'List' is not Pod or PodList" in problem(
        dump({"apiVersion": "v1", "kind": "List"}), KUBELET_FORMAT
    )


def test_decode_names_the_file_the_item_and_the_field() -> None:
    [(where, obj)] = objects(dump({"apiVersion": "v1", "kind": "List", "items": [pod("a", hostNetwork=1)]}))
    with pytest.raises(ManifestError) as caught:
        parsing.decode_pod(obj, where, "f.yaml", [])
    assert str(caught.value) == "f.yaml: items[0]: spec.hostNetwork: expected boolean, got 1"


@pytest.mark.parametrize(
    "text",
    [
        # A billion laughs: nine levels of ten aliases each, a few hundred bytes to load.
        "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)),
        "kind: Pod\nmetadata: &m {name: loop, labels: *m}\n",  # refers to itself
        "&a [*a]\n",
    ],
)
def test_alias_bombs_and_loops_are_refused(text: str) -> None:
    with pytest.raises(ManifestError, match="YAML aliases are expanded"):
        parse_documents(text.encode(), "bomb.yaml")


def test_an_alias_bomb_in_a_document_pyyaml_constructs_is_refused() -> None:
    """A document with an explicit tag the direct construction leaves to PyYAML's own, whose
    aliases it does not see one by one."""
    laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)
    )
    with pytest.raises(ManifestError, match="YAML aliases are expanded"):
        parse_documents(("odd: !!set {a: null}\n" + laughs).encode(), "bomb.yaml")


def test_aliases_within_reason_are_kept_as_written() -> None:
    """A probe shared by two containers, as PyYAML dumps shared objects: its values are counted,
    and the pod is what the YAML says."""
    text = "a: &p {path: /healthz, port: 8080}\nb: *p\nc: &s long\nd: [*s, *s]\n"
    (doc,) = parse_documents(text.encode(), "f.yaml")
    assert doc == {"a": {"path": "/healthz", "port": 8080}, "b": doc["a"], "c": "long", "d": ["long", "long"]}


# ---------------------------------------------------------------------------------------------
# hostile nesting: the error path itself must never raise


def _nested(kind: str, depth: int) -> str:
    """`depth` lists (or single-key objects) inside one another, as JSON text."""
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


# Where a value that is not a string, an object or a list of objects does not belong.
_PLACES = [
    ("metadata.name", lambda v: {"metadata": {"name": v, "uid": "u"}}),
    ("metadata.labels", lambda v: {"metadata": {"name": "a", "uid": "u", "labels": {"app": v}}}),
    ("metadata.annotations", lambda v: {"metadata": {"name": "a", "uid": "u", "annotations": v}}),
    ("spec.containers", lambda v: {"metadata": {"name": "a", "uid": "u"}, "spec": {"containers": v}}),
    (
        "spec.containers[0].image",
        lambda v: {
            "metadata": {"name": "a", "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": v}]},
        },
    ),
    ("status.hostIP", lambda v: {"metadata": {"name": "a", "uid": "u"}, "status": {"hostIP": v}}),
]


# Not hypothesis: it raises the recursion limit while a test runs, which hid this very defect.
@pytest.mark.parametrize("place", _PLACES, ids=[field for field, _ in _PLACES])
@pytest.mark.parametrize("kind", ["list", "object"])
@pytest.mark.parametrize("depth", [1, 256, 1000, 1020])
@pytest.mark.parametrize("as_yaml", [False, True], ids=["json", "yaml"])
@pytest.mark.parametrize("fmt", [FIXTURE_FORMAT, KUBELET_FORMAT], ids=["fixture", "kubelet"])
def test_deeply_nested_values_are_a_clear_error_wherever_they_are(
    place: tuple[str, Any], kind: str, depth: int, as_yaml: bool, fmt: parsing.FileFormat
) -> None:
    field, build = place
    marker = "__VALUE__"
    skeleton = json.dumps({"apiVersion": "v1", "kind": "Pod", **build(marker)})
    text = skeleton.replace(f'"{marker}"', _nested(kind, depth))
    if as_yaml:  # YAML's flow style: the same nesting, read by the YAML parser instead
        text = "# yaml\n" + text
    warnings: list[str] = []
    try:
        for where, obj in objects(text, fmt):
            parsing.decode_pod(obj, where, "f.yaml", warnings)
    except ManifestError as exc:  # the only exception allowed, and it is one line naming the file
        message = str(exc)
        assert message.startswith("f.yaml: ") and "\n" not in message and len(message) < 500
        if depth > 1:
            assert (
                field.split("[")[0].split(".")[0] in message
                or "nested too deeply" in message
                or "JSON" in message
            )
