"""kubectl's JSONPath in-process: what the kubectl comparisons (tests/e2e/test_cli_kubectl.py)
cannot reach with the example pods, and the templates refused before any pod is read."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pods_api.client.jsonpath import CustomColumnsPrinter, JSONPathError, JSONPathPrinter, go_float, go_value

DOC: dict[str, Any] = {
    "items": [
        {"name": "a", "n": 1, "x": 1.5, "ok": True, "tags": ["p", "q"], "m": {"k": "v", "j": None}},
        {"name": "b", "n": 3, "x": 0.25, "ok": False, "tags": [], "m": {}},
    ]
}


def run(template: str, doc: Any = DOC) -> str:
    return JSONPathPrinter.parse(template).render(doc)


@pytest.mark.parametrize(
    ("template", "printed"),
    [
        ("{.items[*].name}", "a b"),
        ("{.items[?(@.n>=2)].name}", "b"),
        ("{.items[?(@.x<1.0)].name}", "b"),
        ("{.items[?(@.ok==false)].name}", "b"),
        ("{.items[?(@.nope=='z')].name}", ""),  # a missing key matches nothing
        ("{.items[0].m}", '{"j":null,"k":"v"}'),
        ("{.items[0].m.j}", "<nil>"),
        ("{.items[*].x}", "1.5 0.25"),
        ("{range .items[*]}{.name}:{range .tags[*]}{@}.{end};{end}", "a:p.q.;b:;"),
        ('{"a\\tb"}{"\\u00e9"}', "a\tbé"),
        ("{.items[0]['name']}", "a"),
    ],
)
def test_templates_print_as_client_go(template: str, printed: str) -> None:
    assert run(template) == printed


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("{.items", "unclosed action"),
        ("{end}", "not in range"),
        ("{range .items[*]}{.name}", "has no {end}"),
        ("{.items[::0]}", "step must be > 0"),
        ("{.items[a]}", "invalid array index a"),
        ("{.items[?(@.n=1)]}", "unrecognized filter operator ="),
        ("{.items..*}", "unrecognized character"),
        ("{.a....b}", "multiple recursive descent"),
        ("{nope}", "unrecognized identifier nope"),
    ],
)
def test_bad_templates_are_refused_when_parsed(template: str, says: str) -> None:
    with pytest.raises(JSONPathError, match=says.replace("{", r"\{").replace("[", r"\[").replace("?", r"\?")):
        JSONPathPrinter.parse(template)


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("{.items[5]}", "array index out of bounds: index 5, length 2"),
        ("{.items[0].name[0]}", "string is not array or slice"),
        ("{.items[?(@.name>1)]}", "incompatible types for comparison"),
        ("{.items[?(@.n==1.0)]}", "incompatible types for comparison"),
        ("{.items[?(@.tags=='p')]}", "invalid type for comparison"),
        ("{.items[0].m[?(@.k)]}", "cannot be filtered"),
    ],
)
def test_templates_that_fail_on_the_data_raise(template: str, says: str) -> None:
    with pytest.raises(JSONPathError, match=says):
        run(template)


def test_custom_columns_pad_as_kubectls_tabwriter_and_print_go_values() -> None:
    printer = CustomColumnsPrinter.parse("NAME:.name,TAGS:.tags,M:{.m},NONE:.nope")
    assert printer.render(DOC["items"]) == (
        "NAME   TAGS    M                  NONE\n"
        "a      [p q]   map[j:<nil> k:v]   <none>\n"
        "b      []      map[]              <none>\n"
    )
    assert go_value({"b": [1, {"c": 2.5}], "a": True}) == "map[a:true b:[1 map[c:2.5]]]"


# What Go 1.26's fmt.Sprint printed for each.
GO_FLOATS = [
    (0.0, "0"),
    (1.5, "1.5"),
    (12.0, "12"),
    (100000.0, "100000"),
    (3.0e5, "300000"),
    (999999.5, "999999.5"),
    (123456.789, "123456.789"),
    (1e6, "1e+06"),
    (1234567.0, "1.234567e+06"),
    (123456789.123, "1.23456789123e+08"),
    (1e20, "1e+20"),
    (1.2345678901234567e22, "1.2345678901234568e+22"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (0.0001, "0.0001"),
    (0.000123, "0.000123"),
    (0.00001, "1e-05"),
    (-2.5e-7, "-2.5e-07"),
    (5e-324, "5e-324"),
]


@pytest.mark.parametrize(("value", "printed"), GO_FLOATS)
def test_floats_print_as_gos_percent_v(value: float, printed: str) -> None:
    assert go_float(value) == printed


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_go_floats_read_back_as_the_same_float(value: float) -> None:
    assert struct.pack("<d", float(go_float(value))) == struct.pack("<d", value)
