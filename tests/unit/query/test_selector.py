"""A label and a field selector together: what both match, their normalised key, the bounds
on both."""

from __future__ import annotations

from typing import Any

import pytest
import strategies
from builders import pod
from hypothesis import HealthCheck, given, settings
from vectors import vector_params, vector_pb

from pods_api.core.api.statuserrors import SelectorError
from pods_api.core.query.fields import POD_FIELDS, escape_value, parse_fields
from pods_api.core.query.labels import parse_labels
from pods_api.core.query.selector import EVERYTHING, parse_selector, selected_part
from pods_api.core.query.view import parse_view
from pods_api.core.store.version import PodVersion


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


def _selected_alike(whole: dict[str, Any]) -> None:
    """Every selector reads the same of a pod's SELECTED part as of the whole pod: each field
    the API server selects pods by, and the labels."""
    part = selected_part(whole)
    for name, get in POD_FIELDS.items():
        assert get(part) == get(whole), name
    labels = (whole.get("metadata") or {}).get("labels") or {}
    assert ((part.get("metadata") or {}).get("labels") or {}) == labels
    for text in ("", "app=web", "!app", "app notin (db)"):
        for fields in ("", f"metadata.name={escape_value(get_name(whole))}", "status.phase!=Running"):
            selector = parse_selector(text, fields)
            assert selector.matches(part) == selector.matches(whole), (text, fields)


def get_name(pod: dict[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name") or "")


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(strategies.pods())
def test_a_pods_selected_part_matches_every_selector_as_the_whole_pod(message: Any) -> None:
    """What a version keeps for its selectors (PodVersion.selectable) must select as the pod
    itself: a field the API server selects by and SELECTED left out would make a selector
    silently match "" there."""
    _selected_alike(PodVersion.from_message(message).json)


@pytest.mark.parametrize("vector", vector_params())
def test_a_reference_pods_selected_part_matches_as_the_whole_pod(vector: dict[str, Any]) -> None:
    _selected_alike(PodVersion.from_bytes(vector_pb(vector)).json)


def test_a_version_keeps_its_selected_part_and_selects_by_it() -> None:
    version = PodVersion.from_json(web(phase="Running", podIPs=[{"ip": "10.0.0.7"}]))
    assert version.selectable is version.selectable  # decoded once, then kept
    assert version.selectable == {
        "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web", "tier": "front"}},
        "spec": version.selectable["spec"],
        "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.7"}]},
    }
    assert parse_view(None, "app=web", "status.podIP=10.0.0.7").shows(version)
    assert not parse_view(None, "app=web", "status.phase=Pending").shows(version)
