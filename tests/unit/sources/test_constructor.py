"""The manifests' YAML construction (pods_api/sources/constructor.py) gives what PyYAML's own safe
loader gives, value for value and error for error: it is a faster path to the same result, never
another reading of the file."""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from repo import ROOT

from bench import pods
from pods_api.core.api.codec import pod_to_bytes
from pods_api.core.api.pb import k8s_core_v1_pb2
from pods_api.sources import constructor
from pods_api.sources.staticpod import api_reference, validate_static_pod


class _Reference(yaml.CSafeLoader):
    """What the sources loaded with before: PyYAML's C loader and its pure-Python constructor,
    timestamps left as strings."""


_Reference.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.CSafeLoader.yaml_implicit_resolvers.items()
}


def _shape(value: Any, seen: frozenset[int] = frozenset()) -> Any:
    """A comparable form: types kept (True is not 1), NaN equal to itself, order of keys kept,
    a value that holds itself marked where it recurs."""
    if id(value) in seen:
        return ("recursion",)
    if isinstance(value, dict):
        inner = seen | {id(value)}
        return ("dict", [(_shape(k, inner), _shape(v, inner)) for k, v in value.items()])
    if isinstance(value, list):
        inner = seen | {id(value)}
        return ("list", [_shape(v, inner) for v in value])
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    if isinstance(value, set):
        return ("set", sorted(repr(v) for v in value))
    return (type(value).__name__, repr(value))


def _outcome(load: Any, text: str) -> Any:
    try:
        return ("ok", [_shape(doc) for doc in load(text.encode())])
    except yaml.YAMLError as exc:
        return ("error", type(exc).__name__, str(exc))
    except RecursionError:
        return ("recursion error",)
    except Exception as exc:  # `!!int yes`, `!!timestamp x`: PyYAML's constructors raise anything
        return ("error", type(exc).__name__, str(exc))


def _reference(data: bytes) -> list[Any]:
    return list(yaml.load_all(data, Loader=_Reference))


def _same(text: str) -> None:
    assert _outcome(constructor.load_all, text) == _outcome(_reference, text)


# Plain scalars whose YAML 1.1 type is the point: booleans, nulls, octal, sexagesimal, special
# floats, merge and value keys, timestamps (kept as strings), and things that only look so.
_TRICKY = [
    "yes", "No", "ON", "off", "y", "n", "true", "True", "TRUE", "tRUE", "false", "~", "null", "Null",
    "NULL", "", "0", "-0", "+12", "0777", "0o17", "0x1F", "0b101", "1_000", "1:30", "190:20:30.15",
    "1.5", "3.", ".5", "1e3", "1.5e+3", "-.inf", ".Inf", ".NaN", "12e03", "2024-05-01",
    "2024-05-01T10:00:00Z", "=", "<<", "80", "100m", "1Gi", "v1", "Pod", "name", "9" * 30,
]  # fmt: skip
_WORD = st.text(alphabet="abyzAN019_-. ", min_size=1, max_size=6).map(str.strip).filter(bool)
_PLAIN = st.sampled_from(_TRICKY) | _WORD
_QUOTED = _PLAIN.map(lambda s: f'"{s}"') | _PLAIN.map(lambda s: f"'{s}'")
_TAGS = [
    "",
    "",
    "",
    "",
    "!!str ",
    "!!int ",
    "!!float ",
    "!!bool ",
    "!!null ",
    "!!map ",
    "!!seq ",
    "!!binary ",
    "!!set ",
    "!!omap ",
    "!!pairs ",
    "!!timestamp ",
    "!custom ",
    "!!python/none ",
]
_ANCHORS = st.sampled_from(["", "", "", "&a ", "&b "])
_ALIASES = st.sampled_from(["*a", "*b", "*c"])


def _decorated(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(_ANCHORS, st.sampled_from(_TAGS), inner).map("".join)


def _flow(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    keys = _PLAIN | _QUOTED | _ALIASES.map(lambda a: a + " ") | children.map(lambda c: f"? {c}")
    sequence = st.lists(children, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]")
    mapping = st.lists(st.tuples(keys, children), max_size=4).map(
        lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}"
    )
    return _decorated(sequence | mapping)


_NODES = st.recursive(_decorated(_PLAIN | _QUOTED) | _ALIASES, _flow, max_leaves=24)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_PLAIN | st.just("<<"), _NODES), min_size=1, max_size=5), st.integers(1, 3))
def test_block_documents_of_flow_values_load_as_pyyaml_loads_them(
    entries: list[tuple[str, str]], docs: int
) -> None:
    document = "".join(f"{key}: {value}\n" for key, value in entries)
    _same("---\n".join([document] * docs))


@settings(max_examples=300, deadline=None)
@given(_NODES)
def test_flow_documents_load_as_pyyaml_loads_them(text: str) -> None:
    _same(text)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | _PLAIN,
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(_PLAIN, c, max_size=4),
                    max_leaves=30),
       st.booleans())  # fmt: skip
def test_block_style_dumps_load_as_pyyaml_loads_them(value: Any, flow: bool) -> None:
    _same(yaml.safe_dump(value, default_flow_style=flow, sort_keys=False))


@pytest.mark.parametrize(
    "text",
    [
        "base: &base {image: nginx, ports: [80]}\nother:\n  <<: *base\n  image: redis\n",  # merge key
        "a: &x [1, 2]\nb: *x\nc: *x\n",  # a shared list
        "&m {name: loop, labels: *m}\n",  # a mapping holding itself
        "&s [*s]\n",
        "? [a, b]\n: c\n",  # an unhashable key: PyYAML's error, line and column
        "a: !!binary aGVsbG8=\nb: !!set {x, y}\n",
        "a: !custom x\n",
        "a: b\n  c: d\n",  # a scanner error
        "[" * 300 + "]" * 300,  # deeper than the direct walk goes
    ],
)
def test_the_cases_left_to_pyyaml(text: str) -> None:
    _same(text)


def test_every_yaml_file_in_the_repository_and_the_benchmark_pods() -> None:
    root = ROOT
    texts = [
        p.read_text() for p in sorted(root.glob("examples/**/*.yaml")) + sorted(root.glob("deploy/**/*.yaml"))
    ]
    texts += [pods.encode(pods.fixture(i), "yaml").decode() for i in range(3)]
    texts += [pods.encode(pods.manifest(i), "yaml").decode() for i in range(3)]
    assert len(texts) > 10
    for text in texts:
        _same(text)


@pytest.mark.parametrize(
    "text",
    ["a: !!int yes\n", "a: !!timestamp soon\n", "a: !!float x\n"],
)
def test_a_value_that_does_not_fit_its_tag_is_a_clear_error(text: str) -> None:
    from pods_api.sources import ManifestError
    from pods_api.sources.parsing import parse_documents

    with pytest.raises(ManifestError, match=r"^f\.yaml: not valid YAML: a value does not fit its tag \("):
        parse_documents(text.encode(), "f.yaml")


def test_many_values_without_aliases_are_still_counted() -> None:
    from pods_api.sources import ManifestError
    from pods_api.sources.parsing import MAX_EXPANDED_VALUES, parse_documents

    text = "a: [" + "0, " * (MAX_EXPANDED_VALUES + 1) + "]\n"  # no `&`, but over the value limit
    with pytest.raises(ManifestError, match="YAML aliases are expanded"):
        parse_documents(text.encode(), "f.yaml")


def test_the_benchmarks_manifests_are_static_pods_the_kubelet_admits() -> None:
    """W6 measures loading manifests: a bench pod the kubelet refuses (a configMap or projected
    token volume, PreventStaticPodAPIReferences) would measure refusals instead."""
    for i in range(3):
        pod = pod_to_bytes(pods.manifest(i))
        decoded = k8s_core_v1_pb2.Pod.FromString(pod)
        assert api_reference(decoded) is None
        assert validate_static_pod(decoded, "node-1") == []
