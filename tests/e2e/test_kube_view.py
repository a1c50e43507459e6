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
WEB = "web-7c9d8f6b5d-x2x9k"
WEB_FILE = f"{WEB}.yaml"
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


def watched(view: View, path: str, **params: str) -> list[dict[str, Any]]:
    """The events of a watch that ends by itself after a second (timeoutSeconds)."""
    response = view.get(path, timeoutSeconds="1", **params)
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines()]


def test_the_deprecated_watch_paths_are_served(view: View) -> None:
    """apiserver pkg/endpoints/installer.go, MethodWatchList and MethodWatch (deprecated in 1.11,
    still served): /api/v1/watch/pods, .../namespaces/{ns}/pods and .../pods/{name} are watches
    whatever `watch` says; handlers/get.go listOpts makes the name a field selector, and refuses
    one that names another pod."""
    every = watched(view, "/api/v1/watch/pods")
    assert [e["type"] for e in every] == ["ADDED"] * 5
    shop = watched(view, "/api/v1/watch/namespaces/shop/pods")
    assert sorted(e["object"]["metadata"]["name"] for e in shop) == ["orders-worker-6d5f7c9b8-q7zrt", WEB]
    one = watched(view, f"/api/v1/watch/namespaces/shop/pods/{WEB}")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in one] == [("ADDED", WEB)]
    same = watched(view, f"/api/v1/watch/namespaces/shop/pods/{WEB}", fieldSelector=f"metadata.name={WEB}")
    assert same == one
    other = view.get(f"/api/v1/watch/namespaces/shop/pods/{WEB}", fieldSelector="metadata.name=db")
    assert other.status_code == 400
    assert other.json()["message"] == "fieldSelector metadata.name doesn't match requested name"
    # Validated as a list unless `watch` is given too, as upstream (ValidateListOptions reads
    # the decoded `watch`, not the path).
    refused = view.get("/api/v1/watch/pods", sendInitialEvents="true")
    assert refused.status_code == 422
    assert (
        refused.json()["details"]["causes"][0]["message"]
        == "Forbidden: sendInitialEvents is forbidden for list"
    )

    rv = view.list()["metadata"]["resourceVersion"]
    with httpx.stream(
        "GET",
        f"{view.url}/api/v1/watch/namespaces/shop/pods/{WEB}",
        params={"resourceVersion": rv},
        timeout=TIMEOUT,
    ) as stream:
        changed = view.change(rv)
        event = json.loads(next(stream.iter_lines()))
    assert (event["type"], event["object"]["metadata"]["resourceVersion"]) == ("MODIFIED", changed)


TABLE_V1BETA1 = "application/json;as=Table;v=v1beta1;g=meta.k8s.io"


def test_a_v1beta1_table_request_gets_a_v1beta1_table(view: View) -> None:
    """apiserver pkg/endpoints/handlers/response.go asTable: a Table in the group-version asked
    for (meta.k8s.io v1 or v1beta1), its rows' PartialObjectMetadata in that version too."""
    beta = view.get(accept=f"{TABLE_V1BETA1},application/json").json()
    assert (beta["kind"], beta["apiVersion"]) == ("Table", "meta.k8s.io/v1beta1")
    assert {row["object"]["apiVersion"] for row in beta["rows"]} == {"meta.k8s.io/v1beta1"}
    v1 = view.get(accept=f"{TABLE_V1},{TABLE_V1BETA1},application/json").json()  # kubectl's order
    assert v1["apiVersion"] == "meta.k8s.io/v1"
    assert {row["object"]["apiVersion"] for row in v1["rows"]} == {"meta.k8s.io/v1"}
    assert beta["rows"] == [
        {**row, "object": {**row["object"], "apiVersion": "meta.k8s.io/v1beta1"}} for row in v1["rows"]
    ]
    one = view.get(f"/api/v1/namespaces/shop/pods/{WEB}", accept=TABLE_V1BETA1).json()
    assert one["apiVersion"] == "meta.k8s.io/v1beta1"
    events = watched(view, PODS, accept=TABLE_V1BETA1, watch="1")
    assert {e["object"]["apiVersion"] for e in events} == {"meta.k8s.io/v1beta1"}
    assert events[0]["object"]["columnDefinitions"] == v1["columnDefinitions"]
