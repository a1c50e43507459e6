"""The Kubernetes view's reading of ListOptions, against a real `pods-api serve --http-listen`,
each as the API server (k8s.io/apiserver, k8s.io/apimachinery v0.37) behaves; every test names
the upstream function whose behaviour it encodes. Pods change by editing `--fixtures` files."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubenode import free_port
from repo import ROOT
from serve import TIMEOUT, serving

EXAMPLES = ROOT / "examples" / "fixtures"
WEB_FILE = "web-7c9d8f6b5d-x2x9k.yaml"
PODS = "/api/v1/pods"
TABLE_V1 = "application/json;as=Table;v=v1;g=meta.k8s.io"


@dataclass
class View:
    url: str
    fixtures: Path

    def get(self, path: str = PODS, accept: str = "application/json", **params: str) -> httpx.Response:
        return httpx.get(f"{self.url}{path}", params=params, headers={"Accept": accept}, timeout=TIMEOUT)

    def list(self, path: str = PODS, **params: str) -> dict[str, Any]:
        response = self.get(path, **params)
        assert response.status_code == 200, response.text
        listed: dict[str, Any] = response.json()
        return listed

    def change(self, revision: str) -> str:
        """Edit the web pod's phase and wait, on a watch from `revision`, for the MODIFIED:
        the revision of the change."""
        path = self.fixtures / WEB_FILE
        text = path.read_text()
        old, new = ("Running", "Failed") if "phase: Running" in text else ("Failed", "Running")
        tmp = path.with_name(f".{WEB_FILE}.new")
        tmp.write_text(text.replace(f"phase: {old}", f"phase: {new}"))
        with httpx.stream(
            "GET", f"{self.url}{PODS}", params={"watch": "1", "resourceVersion": revision}, timeout=TIMEOUT
        ) as watch:
            tmp.rename(path)
            for line in watch.iter_lines():
                event = json.loads(line)
                if event["type"] == "MODIFIED":
                    return str(event["object"]["metadata"]["resourceVersion"])
        raise AssertionError("the watch ended before the change")


@pytest.fixture
def view(tmp_path: Path) -> Iterator[View]:
    fixtures = tmp_path / "fixtures"
    shutil.copytree(EXAMPLES, fixtures)
    port = free_port()
    with serving(tmp_path / "run", "--fixtures", str(fixtures), "--http-listen", f"127.0.0.1:{port}"):
        yield View(f"http://127.0.0.1:{port}", fixtures)


def invalid(*causes: tuple[str, str, str]) -> dict[str, Any]:
    """apimachinery pkg/api/errors NewInvalid(meta.k8s.io/ListOptions, "", errs): its message
    aggregates `field: body` (utilerrors: one alone, several in brackets)."""
    words = [f"{path}: {body}" for _, path, body in causes]
    aggregated = words[0] if len(words) == 1 else f"[{', '.join(words)}]"
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'ListOptions.meta.k8s.io "" is invalid: {aggregated}',
        "reason": "Invalid",
        "details": {
            "group": "meta.k8s.io",
            "kind": "ListOptions",
            "causes": [{"reason": reason, "message": body, "field": path} for reason, path, body in causes],
        },
        "code": 422,
    }


FORBIDDEN = "FieldValueForbidden"
MATCH = "resourceVersionMatch"


def test_list_options_validation_is_422_invalid_naming_the_field(view: View) -> None:
    """apimachinery pkg/apis/meta/internalversion/validation ValidateListOptions (list) and
    validateWatchOptions (watch), answered by apiserver pkg/endpoints/handlers/get.go listOpts
    as errors.NewInvalid."""
    rv = view.list()["metadata"]["resourceVersion"]
    no_version = "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
    cases: list[tuple[dict[str, str], dict[str, Any]]] = [
        ({MATCH: "NotOlderThan"}, invalid((FORBIDDEN, MATCH, no_version))),
        (
            {MATCH: "Exact", "resourceVersion": "0"},
            invalid(
                (
                    FORBIDDEN,
                    MATCH,
                    'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
            ),
        ),
        (
            {MATCH: "Newest", "resourceVersion": rv},
            invalid(
                (
                    "FieldValueNotSupported",
                    MATCH,
                    'Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""',
                )
            ),
        ),
        (
            # Every refusal at once, in upstream's order.
            {MATCH: "Exact", "continue": "x", "sendInitialEvents": "false"},
            invalid(
                (FORBIDDEN, MATCH, no_version),
                (FORBIDDEN, MATCH, "Forbidden: resourceVersionMatch is forbidden when continue is provided"),
                (FORBIDDEN, "sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list"),
            ),
        ),
        # A list refuses sendInitialEvents whatever its value.
        (
            {"sendInitialEvents": "true"},
            invalid((FORBIDDEN, "sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list")),
        ),
        (
            {"watch": "1", "sendInitialEvents": "true", "allowWatchBookmarks": "true"},
            invalid(
                (
                    FORBIDDEN,
                    MATCH,
                    "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                )
            ),
        ),
        (
            {"watch": "1", MATCH: "NotOlderThan", "resourceVersion": rv},
            invalid(
                (
                    FORBIDDEN,
                    MATCH,
                    "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                    "provided",
                )
            ),
        ),
        (
            {"watch": "1", MATCH: "Exact", "sendInitialEvents": "true", "resourceVersion": rv},
            invalid(
                (
                    FORBIDDEN,
                    MATCH,
                    "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ),
                (
                    "FieldValueNotSupported",
                    MATCH,
                    'Unsupported value: "Exact": supported values: "NotOlderThan"',
                ),
            ),
        ),
    ]
    for query, status in cases:
        response = view.get(**query)
        assert (response.status_code, response.json()) == (422, status), query
    # What the query's decoding refuses stays a 400 BadRequest (get.go: DecodeParameters).
    assert view.get(limit="many").status_code == 400
    assert view.get(sendInitialEvents="maybe").status_code == 400


def test_exact_reads_serve_a_recent_revision_as_it_was(view: View) -> None:
    """apiserver pkg/storage/cacher/delegator ShouldDelegateList and watch_cache.go
    waitAndListExactRV: resourceVersionMatch=Exact, and the legacy `limit` with
    resourceVersion=N, list exactly N; without a limit, N is NotOlderThan (the newest)."""
    before = view.list()
    rv = before["metadata"]["resourceVersion"]
    changed = view.change(rv)
    assert int(changed) > int(rv)

    exact = view.list(resourceVersion=rv, resourceVersionMatch="Exact")
    assert exact == before  # the very pods, with their resourceVersions, of that revision

    first = view.list(resourceVersion=rv, limit="2")
    assert first["metadata"]["resourceVersion"] == rv
    assert first["items"] == before["items"][:2]
    rest = view.list(limit="10", **{"continue": first["metadata"]["continue"]})
    assert first["items"] + rest["items"] == before["items"]

    newest = view.list(resourceVersion=rv)  # NotOlderThan: the newest
    assert newest["metadata"]["resourceVersion"] == changed
    assert newest["items"] != before["items"]
    assert view.list(resourceVersion=rv, resourceVersionMatch="NotOlderThan") == newest


def test_exact_reads_past_the_kept_revisions_are_410(view: View) -> None:
    """apiserver pkg/storage/cacher/store watch_cache_storage.go: an exact revision the watch
    cache no longer holds is NewResourceExpired("too old resource version: N"). pods-api holds
    what its watch ring holds; a revision of an earlier run, or before the ring, is gone."""
    rv = int(view.list()["metadata"]["resourceVersion"])
    for query in ({"resourceVersionMatch": "Exact"}, {"limit": "1"}):
        gone = view.get(resourceVersion=str(rv - 10**7), **query)
        assert gone.status_code == 410, gone.text
        assert gone.json()["reason"] == "Expired"
        assert gone.json()["message"] == f"too old resource version: {rv - 10**7}"


def test_remaining_item_count_only_for_an_unfiltered_list(view: View) -> None:
    """apiserver pkg/storage/continue.go PrepareContinueToken: remainingItemCount only when the
    predicate (label and field selectors) is empty; the namespace of the path is not one."""
    every = view.list(limit="2")
    assert every["metadata"]["remainingItemCount"] == 3
    namespaced = view.list("/api/v1/namespaces/shop/pods", limit="1")
    assert namespaced["metadata"]["remainingItemCount"] == 1
    running = view.list(limit="1", fieldSelector="status.phase=Running")
    assert "continue" in running["metadata"] and "remainingItemCount" not in running["metadata"]
    labelled = view.list(limit="1", labelSelector="app!=nothing")
    assert "continue" in labelled["metadata"] and "remainingItemCount" not in labelled["metadata"]
    tables = [
        view.get(accept=TABLE_V1, limit="1", **selector).json()
        for selector in ({}, {"labelSelector": "a!=b"})
    ]
    assert tables[0]["metadata"]["remainingItemCount"] == 4
    assert "continue" in tables[1]["metadata"] and "remainingItemCount" not in tables[1]["metadata"]
