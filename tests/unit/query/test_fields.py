"""Field selectors on pods, against the cases of apimachinery's fields/selector_test.go, plus
properties."""

from __future__ import annotations

from typing import Any

import pytest
from builders import pod
from hypothesis import given
from hypothesis import strategies as st

from pods_api.core.api.statuserrors import SelectorError
from pods_api.core.query.fields import FieldSelector, escape_value, parse_fields, path_getter

# fields/selector_test.go
FIELD_GOOD = ["x=a,y=b,z=c", "", "x!=a,y=b", r"x=a||y\=b", r"x=a\=\=b"]

FIELD_BAD = ["x=a||y=b", "x==a==b", "x=a,b", "x in (a)", "x in (a,b,c)", "x", r"k=\a", "k=\\", "k=\\\\\\"]

GENERIC = {name: path_getter(name) for name in "abxyzk"}


def _generic(text: str) -> FieldSelector:
    """Our parser over plain fields, to run apimachinery's generic cases."""
    return parse_fields(text, GENERIC)


@pytest.mark.parametrize("text", FIELD_GOOD)
def test_field_selectors_restring(text: str) -> None:
    assert str(_generic(text)) == text


@pytest.mark.parametrize("text", FIELD_BAD)
def test_invalid_field_selectors_say_where(text: str) -> None:
    with pytest.raises(SelectorError) as caught:
        _generic(text)
    assert 0 <= caught.value.position <= len(text)


def test_field_escapes_round_trip() -> None:
    # TestEscapeValue
    for raw, escaped in {
        "": "",
        "a": "a",
        "=": r"\=",
        ",": r"\,",
        "\\": "\\\\",
        r"\=\,\ ".strip(): r"\\\=\\\,\\",
    }.items():
        assert escape_value(raw) == escaped
        assert _generic(f"x={escaped}").requirements[0].value == raw
    # TestSelectorMatches, the complex value
    complex_pod = {"x": "=value\\,\\"}
    assert _generic(r"x=\=value\\\,\\").matches(complex_pod)
    # TestDeterministicParse; `==` normalises to `=`; empty terms are skipped
    assert str(_generic("x=a,a=x")) == str(_generic("a=x,x=a"))
    assert str(_generic("x==a")) == "x=a"
    assert str(_generic("x=a,,y=b,")) == "x=a,y=b"


def web(**status: Any) -> dict[str, Any]:
    """The pod the selectors below are matched against, with `status`."""
    labels = {"app": "web", "tier": "front"}
    return pod(
        "web", namespace="shop", labels=labels, image=None, node="node-1", typed=False,
        restartPolicy="Always", hostNetwork=True, status=status,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("metadata.name=web,metadata.namespace=shop", True),
        ("metadata.name!=web", False),
        ("spec.nodeName==node-1", True),
        ("spec.host=node-1", True),  # the API server's alias for old clients
        ("spec.restartPolicy=Never", False),
        ("spec.hostNetwork=true", True),
        ("spec.schedulerName=", True),  # a missing value is ""
        ("spec.serviceAccountName!=", False),
        ("status.phase=Running", True),
        ("status.podIP=10.0.0.7", True),  # the first of podIPs
        ("status.podIP=fd00::7", False),
        ("status.nominatedNodeName=", True),
    ],
)
def test_pod_field_selectors(text: str, expected: bool) -> None:
    served = web(phase="Running", podIP="10.0.0.7", podIPs=[{"ip": "10.0.0.7"}, {"ip": "fd00::7"}])
    assert parse_fields(text).matches(served) is expected


def test_unsupported_pod_fields_are_named() -> None:
    with pytest.raises(SelectorError, match=r"field label not supported: 'spec\.containers'") as caught:
        parse_fields("status.phase=Running,spec.containers=x")
    assert caught.value.position == len("status.phase=Running,")
    with pytest.raises(SelectorError, match=r"'status\.phase '"):
        parse_fields("status.phase = Running")  # as the API server: no trimming


@given(st.dictionaries(st.sampled_from("xyzk"), st.text(max_size=6), max_size=4), st.booleans())
def test_field_selectors_round_trip_any_value(values: dict[str, str], negated: bool) -> None:
    op = "!=" if negated else "="
    sel = _generic(",".join(f"{k}{op}{escape_value(v)}" for k, v in values.items()))
    assert _generic(str(sel)) == sel
    assert sel.matches(values) is (not negated or not values)
