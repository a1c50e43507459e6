"""A label and a field selector together: what both match, their normalised key, the bounds
on both."""

from __future__ import annotations

from typing import Any

import pytest
from builders import pod

from pods_api.core.api.statuserrors import SelectorError
from pods_api.core.query.fields import parse_fields
from pods_api.core.query.labels import parse_labels
from pods_api.core.query.selector import EVERYTHING, parse_selector


def web(**status: Any) -> dict[str, Any]:
    """A pod the selectors below select (app=web, tier=front) or not, with `status`."""
    return pod("web", namespace="shop", labels={"app": "web", "tier": "front"}, typed=False, status=status)


def test_a_selector_matches_labels_and_fields_and_has_a_normalised_key() -> None:
    sel = parse_selector("app=web,tier in (front,back),!canary", "status.phase=Running")
    assert sel.matches(web(phase="Running"))
    assert not sel.matches(web(phase="Pending"))
    assert not parse_selector("app=db").matches(web())
    assert parse_selector("!canary,tier in (back,front),app==web", "status.phase==Running").key == sel.key
    assert parse_selector("app=web,app=web").key == parse_selector("app=web").key
    assert parse_selector("app=web").key != parse_selector("", "metadata.name=web").key
    assert EVERYTHING.key == parse_selector("", "").key == "" and EVERYTHING.matches({})


def test_a_selector_at_the_limits_parses_and_one_past_them_is_refused_where_it_goes_over() -> None:
    from pods_api.core.query.limits import MAX_LENGTH, MAX_REQUIREMENTS, MAX_VALUES

    per = MAX_VALUES // MAX_REQUIREMENTS
    widest = ",".join(f"k{i} in ({','.join(f'v{j}' for j in range(per))})" for i in range(MAX_REQUIREMENTS))
    assert len(widest) <= MAX_LENGTH
    selector = parse_labels(widest)
    assert selector.matches({f"k{i}": "v0" for i in range(MAX_REQUIREMENTS)})
    assert not selector.matches({f"k{i}": f"v{per}" for i in range(MAX_REQUIREMENTS)})
    with pytest.raises(SelectorError) as err:
        parse_labels(widest + ",extra")
    assert err.value.position == len(widest) + 1 and f"over {MAX_REQUIREMENTS} requirements" in str(err.value)
    with pytest.raises(SelectorError) as err:
        parse_labels("app in (" + ",".join(f"v{i}" for i in range(MAX_VALUES + 1)) + ")")
    assert f"over {MAX_VALUES} values" in str(err.value)
    with pytest.raises(SelectorError) as err:
        parse_fields("metadata.name=" + "x" * MAX_LENGTH)
    assert f"a selector has at most {MAX_LENGTH}" in str(err.value) and len(str(err.value)) < 400
