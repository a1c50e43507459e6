"""The Kubernetes view over a real socket: discovery, PodList/Pod with pods-api's revisions as
resourceVersions, selectors, paging, resourceVersion semantics, Status errors, Tables, and the
watch (resume, 410, bookmarks, watch-list, selector transitions, timeoutSeconds)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import orjson
import pytest
from builders import make_pod
from gatewayharness import TIMEOUT, Gateway, GatewayFactory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from printerpods import NOW, example_pods
from strategies import pods

from pods_api.core.api.printer import POD_COLUMNS, pod_row
from pods_api.core.store.version import PodVersion
from pods_api.gateway.kube import objects as kubeobjects
from pods_api.gateway.kube.objects import AGGREGATED_MEDIA_TYPE, INITIAL_EVENTS_END, LIST_BLUEPRINT

# What kubectl 1.37 sends for `get`.
TABLE = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
    "application/json"
)


def other_namespace(name: str, uid: str) -> dict[str, Any]:
    pod = make_pod(name, uid)
    pod["metadata"]["namespace"] = "batch"
    return pod


@contextlib.asynccontextmanager
async def kube_watch(
    client: httpx.AsyncClient, path: str = "/api/v1/pods", **params: Any
) -> AsyncIterator[Any]:
    """The watch's events, parsed line by line."""
    async with client.stream("GET", path, params={"watch": "1", **params}) as r:
        assert r.status_code == 200, await r.aread()
        assert r.headers["content-type"] == "application/json"
        lines = r.aiter_lines()

        async def take(count: int = 1) -> list[dict[str, Any]]:
            return [orjson.loads(await asyncio.wait_for(anext(lines), TIMEOUT)) for _ in range(count)]

        yield take


def rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def status_of(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["code"] == response.status_code
    return body


# -- discovery --------------------------------------------------------------------------------


async def test_discovery_legacy_and_aggregated(gateway: Gateway) -> None:
    client = gateway.client
    assert (await client.get("/api")).json()["versions"] == ["v1"]
    assert (await client.get("/apis")).json() == {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
    resources = (await client.get("/api/v1")).json()["resources"]
    assert [(r["name"], r["namespaced"], r["kind"], r["verbs"]) for r in resources] == [
        ("pods", True, "Pod", ["get", "list", "watch"]),
        ("namespaces", False, "Namespace", ["get", "list"]),
        ("nodes", False, "Node", ["get", "list"]),
    ]
    # What client-go asks first; the Content-Type tells it which form came back.
    accept = {"Accept": f"{AGGREGATED_MEDIA_TYPE},application/json"}
    aggregated = await client.get("/api", headers=accept)
    assert aggregated.headers["content-type"] == AGGREGATED_MEDIA_TYPE
    (group,) = aggregated.json()["items"]
    assert [r["resource"] for r in group["versions"][0]["resources"]] == ["pods", "namespaces", "nodes"]
    assert (await client.get("/apis", headers=accept)).json()["items"] == []
    assert (await client.get("/version")).json()["major"] == "1"


# -- list and get -----------------------------------------------------------------------------


async def test_list_carries_revisions_in_key_order(gateway: Gateway) -> None:
    gateway.publish(other_namespace("report", "uid-z"))
    body = (await gateway.client.get("/api/v1/pods")).json()
    assert body["kind"] == "PodList"
    names = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in body["items"]]
    assert names == sorted(names)  # the API server's order, not UID order
    assert rv(body) == gateway.core.cache.revision
    for item in body["items"]:
        assert item["kind"] == "Pod"
        assert rv(item) == gateway.core.cache.get(item["metadata"]["uid"]).revision  # type: ignore[union-attr]
        assert list(item["metadata"])[:4] == ["name", "namespace", "uid", "resourceVersion"]  # Go's order
    gateway.publish(make_pod("web", "uid-b", "Succeeded"))
    changed = (await gateway.client.get("/api/v1/namespaces/shop/pods/web")).json()
    assert rv(changed) == gateway.core.cache.revision
    assert changed["status"]["phase"] == "Succeeded"


async def test_namespace_and_selectors(gateway: Gateway) -> None:
    gateway.publish(other_namespace("report", "uid-z"))

    async def names(path: str, **params: str) -> list[str]:
        body = (await gateway.client.get(path, params=params)).json()
        return [p["metadata"]["name"] for p in body["items"]]

    assert await names("/api/v1/namespaces/batch/pods") == ["report"]
    assert await names("/api/v1/namespaces/nowhere/pods") == []
    assert await names("/api/v1/namespaces/shop/pods", labelSelector="app in (db,web)") == ["db", "web"]
    assert await names("/api/v1/pods", fieldSelector="status.phase=Pending") == ["cache"]
    assert await names("/api/v1/namespaces/batch/pods", fieldSelector="metadata.namespace=shop") == []
    bad = await gateway.client.get("/api/v1/pods", params={"labelSelector": "app in (a"})
    assert bad.status_code == 400 and status_of(bad)["reason"] == "BadRequest"


async def test_limit_and_continue_page_one_snapshot(gateway: Gateway) -> None:
    first = (await gateway.client.get("/api/v1/pods", params={"limit": "2"})).json()
    assert len(first["items"]) == 2 and first["metadata"]["remainingItemCount"] == 1
    gateway.publish(make_pod("zzz", "uid-y"))  # a change between pages does not show in this list
    rest = (
        await gateway.client.get(
            "/api/v1/pods", params={"limit": "2", "continue": first["metadata"]["continue"]}
        )
    ).json()
    assert rv(rest) == rv(first)
    assert "continue" not in rest["metadata"]
    assert [p["metadata"]["name"] for p in first["items"] + rest["items"]] == ["cache", "db", "web"]
    bad = await gateway.client.get("/api/v1/pods", params={"continue": "not-a-token"})
    assert bad.status_code == 400


async def test_resource_version_semantics(gateway: Gateway) -> None:
    current = gateway.core.cache.revision
    get = gateway.client.get
    assert rv((await get("/api/v1/pods", params={"resourceVersion": "0"})).json()) == current
    assert rv((await get("/api/v1/pods", params={"resourceVersion": str(current - 1)})).json()) == current
    exact = await get(
        "/api/v1/pods", params={"resourceVersion": str(current), "resourceVersionMatch": "Exact"}
    )
    assert rv(exact.json()) == current
    before = await get(
        "/api/v1/pods", params={"resourceVersion": str(current - 1), "resourceVersionMatch": "Exact"}
    )
    assert rv(before.json()) == current - 1  # the pods before the last change, from the ring
    old = await get("/api/v1/pods", params={"resourceVersion": "1", "resourceVersionMatch": "Exact"})
    assert old.status_code == 410 and status_of(old)["reason"] == "Expired"
    future = await get("/api/v1/pods", params={"resourceVersion": str(current + 5)})
    assert future.status_code == 504
    assert status_of(future)["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    forbidden = await get("/api/v1/pods", params={"resourceVersionMatch": "NotOlderThan"})
    assert forbidden.status_code == 422 and status_of(forbidden)["reason"] == "Invalid"


async def test_errors_are_status_objects(gateway: Gateway) -> None:
    client = gateway.client
    missing = await client.get("/api/v1/namespaces/shop/pods/nope")
    assert missing.status_code == 404
    assert status_of(missing) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "kind": "pods"},
        "code": 404,
    }
    for method, path in [
        ("POST", "/api/v1/namespaces/shop/pods"),
        ("DELETE", "/api/v1/namespaces/shop/pods/web"),
        ("PATCH", "/api/v1/namespaces/shop/pods/web"),
        ("PUT", "/api/v1/namespaces/shop/pods/web"),
        ("DELETE", "/api/v1/pods"),
    ]:
        r = await client.request(method, path)
        assert (r.status_code, status_of(r)["reason"]) == (405, "MethodNotAllowed"), (method, path)
        assert r.headers["allow"] == "GET, HEAD", (method, path)  # a 405 names what is allowed
    for path in [
        "/api/v1/namespaces/shop/pods/web/log",
        "/api/v1/namespaces/shop/pods/web/status",
        "/api/v1/nodes/another-node",
        "/api/v1/namespaces/nowhere",
        "/api/v1/services",
        "/apis/apps/v1/deployments",
    ]:
        r = await client.get(path)
        assert (r.status_code, status_of(r)["reason"]) == (404, "NotFound"), path
    r = await client.post("/api/v1/namespaces/shop/pods/web/exec")
    assert (r.status_code, status_of(r)["reason"]) == (404, "NotFound")
    protobuf_only = await client.get(
        "/api/v1/pods", headers={"Accept": "application/vnd.kubernetes.protobuf"}
    )
    assert (protobuf_only.status_code, status_of(protobuf_only)["reason"]) == (406, "NotAcceptable")
    # client-go's own Accept lists JSON after protobuf: JSON it gets, and decodes by Content-Type.
    fallback = await client.get(
        "/api/v1/pods", headers={"Accept": "application/vnd.kubernetes.protobuf,application/json"}
    )
    assert fallback.status_code == 200 and fallback.headers["content-type"] == "application/json"


async def test_not_ready_and_rate_limited(make_gateway: GatewayFactory) -> None:
    async with make_gateway(synced=False) as gw:
        r = await gw.client.get("/api/v1/pods")
        assert (r.status_code, status_of(r)["reason"]) == (503, "ServiceUnavailable")
        assert r.headers["retry-after"] == "1"
        assert (await gw.client.get("/api")).status_code == 200  # discovery is not a Pods call
    async with make_gateway(qps=0.001, burst=1) as gw:
        assert (await gw.client.get("/api/v1/pods")).status_code == 200
        r = await gw.client.get("/api/v1/namespaces/shop/pods/web")
        assert (r.status_code, status_of(r)["reason"]) == (429, "TooManyRequests")
        assert int(r.headers["retry-after"]) >= 1
        assert status_of(r)["details"]["retryAfterSeconds"] == int(r.headers["retry-after"])
        labels = {"server_api_version": "http", "status_code": "ResourceExhausted"}
        assert gw.counter("kubelet_pod_requests_get_total", **labels) == 1
        assert gw.counter("kubelet_pod_requests_list_total", server_api_version="http", status_code="OK") == 1


async def test_table_and_other_forms(gateway: Gateway) -> None:
    table = (await gateway.client.get("/api/v1/pods", headers={"Accept": TABLE})).json()
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"]] == [c.name for c in POD_COLUMNS]
    assert [row["cells"][0] for row in table["rows"]] == ["cache", "db", "web"]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    one = await gateway.client.get(
        "/api/v1/namespaces/shop/pods/web", params={"includeObject": "Object"}, headers={"Accept": TABLE}
    )
    assert (
        one.json()["rows"][0]["object"]["metadata"]["resourceVersion"]
        == one.json()["metadata"]["resourceVersion"]
    )
    yaml = await gateway.client.get(
        "/api/v1/namespaces/shop/pods/web", headers={"Accept": "application/yaml"}
    )
    assert yaml.headers["content-type"] == "application/yaml" and "kind: Pod" in yaml.text
    pretty = await gateway.client.get("/api/v1/pods", params={"pretty": "true"})
    assert pretty.text.startswith('{\n  "kind": "PodList"')


def _expected_table(
    pods: list[tuple[PodVersion, int]], include: str, group_version: str, at: Any
) -> dict[str, Any]:
    """The Table the API server sends for these pods, written out from the printer's rows."""
    rows = []
    for pod, revision in pods:
        body = kubeobjects.pod_object(pod, revision)
        printed = pod_row(body, at)
        row: dict[str, Any] = {"cells": printed.cells(wide=True)}
        if printed.conditions:
            row["conditions"] = [dict(c) for c in printed.conditions]
        objects = {
            "None": None,
            "Metadata": {
                "kind": "PartialObjectMetadata",
                "apiVersion": group_version,
                "metadata": body["metadata"],
            },
            "Object": body,
        }
        row["object"] = objects[include]
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": group_version,
        "metadata": {"resourceVersion": "41"},
        "columnDefinitions": [c.to_json() for c in POD_COLUMNS],
        "rows": rows,
    }


@pytest.mark.parametrize("include", ["None", "Metadata", "Object"])
@pytest.mark.parametrize("group_version", ["meta.k8s.io/v1", "meta.k8s.io/v1beta1"])
def test_a_tables_rows_are_encoded_once_per_pod_version_and_aged_at_each_call(
    include: Any, group_version: str
) -> None:
    """Each version's row is encoded by the first Table that shows it; a later Table (another
    second, another form) reuses it, and only its AGE and RESTARTS' "(ago)" follow the clock."""
    versions = [PodVersion.from_json(pod) for pod in example_pods()]
    for revision, version in enumerate(versions, start=7):
        version.revision = revision
    pairs = [(v, v.revision) for v in versions]
    for at in (NOW, NOW + timedelta(minutes=90), NOW + timedelta(days=3)):
        body = kubeobjects.table(pairs, 41, include, group_version=group_version, now=at)
        # Byte for byte the API server's key order, as orjson writes the whole Table at once.
        assert body == orjson.dumps(_expected_table(pairs, include, group_version, at))
    kept = [v.table_row for v in versions]
    assert all(row is not None for row in kept)
    kubeobjects.table(pairs, 41, include, group_version=group_version, now=NOW)
    assert [v.table_row for v in versions] == kept and all(
        a is b for a, b in zip(kept, (v.table_row for v in versions), strict=True)
    )


def test_a_table_row_of_another_revision_is_made_for_it_not_kept() -> None:
    """A watch's DELETED row carries the deletion's revision, not the version's: its object says
    that revision, and the version's kept row stays the version's own."""
    version = PodVersion.from_json(example_pods()[0])
    version.revision = 7
    kubeobjects.table([(version, 7)], 7, "Metadata", now=NOW)
    kept = version.table_row
    deleted = orjson.loads(kubeobjects.table([(version, 9)], 9, "Metadata", now=NOW))
    assert deleted["rows"][0]["object"]["metadata"]["resourceVersion"] == "9"
    assert version.table_row is kept


# -- watch ------------------------------------------------------------------------------------


async def test_watch_from_list_resumes_exactly_after_each_event(gateway: Gateway) -> None:
    listed = (await gateway.client.get("/api/v1/pods")).json()
    async with kube_watch(gateway.client, resourceVersion=listed["metadata"]["resourceVersion"]) as take:
        gateway.publish(make_pod("api", "uid-d"))
        gateway.publish(make_pod("web", "uid-b", "Succeeded"))
        gateway.sink.delete("uid-c")
        events = await take(3)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "api"),
        ("MODIFIED", "web"),
        ("DELETED", "cache"),
    ]
    revisions = [rv(e["object"]) for e in events]
    assert revisions == sorted(revisions) and revisions[-1] == gateway.core.cache.revision
    # A client that saw only the first event resumes from its resourceVersion: the rest, exactly.
    async with kube_watch(gateway.client, resourceVersion=str(revisions[0])) as take:
        assert [(e["type"], rv(e["object"])) for e in await take(2)] == [
            ("MODIFIED", revisions[1]),
            ("DELETED", revisions[2]),
        ]


async def test_watch_without_revision_starts_with_the_pods(gateway: Gateway) -> None:
    async with kube_watch(gateway.client, "/api/v1/namespaces/shop/pods") as take:
        start = await take(3)
        assert {e["type"] for e in start} == {"ADDED"}
        assert {e["object"]["metadata"]["name"] for e in start} == {"cache", "db", "web"}
        gateway.sink.delete("uid-a")
        (deleted,) = await take()
        assert deleted["type"] == "DELETED" and rv(deleted["object"]) == gateway.core.cache.revision


async def test_watch_too_old_is_an_expired_error_event(gateway: Gateway) -> None:
    async with kube_watch(gateway.client, resourceVersion="5") as take:  # before this process began
        (error,) = await take()
    assert error["type"] == "ERROR"
    assert (error["object"]["code"], error["object"]["reason"]) == (410, "Expired")
    assert error["object"]["message"].startswith("too old resource version: 5 (")


async def test_selector_transitions_are_added_and_deleted(gateway: Gateway) -> None:
    listed = (
        await gateway.client.get("/api/v1/pods", params={"fieldSelector": "status.phase=Running"})
    ).json()
    params = {
        "fieldSelector": "status.phase=Running",
        "resourceVersion": listed["metadata"]["resourceVersion"],
    }
    async with kube_watch(gateway.client, **params) as take:
        gateway.publish(make_pod("web", "uid-b", "Failed"))  # leaves the selection
        gateway.publish(make_pod("cache", "uid-c", "Running"))  # enters it
        events = await take(2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("DELETED", "web"),
        ("ADDED", "cache"),
    ]
    assert events[0]["object"]["status"]["phase"] == "Running"  # the last version that matched


async def test_bookmarks_carry_the_current_revision(make_gateway: GatewayFactory) -> None:
    async with make_gateway(heartbeat=0.05) as gw:
        params = {"resourceVersion": str(gw.core.cache.revision), "allowWatchBookmarks": "true"}
        async with kube_watch(gw.client, fieldSelector="metadata.name=db", **params) as take:
            gw.publish(make_pod("web", "uid-b", "Failed"))  # not in the view: only a bookmark says it
            for _ in range(100):
                (event,) = await take()
                assert event["type"] == "BOOKMARK"
                if rv(event["object"]) == gw.core.cache.revision:
                    break
            else:
                raise AssertionError("no bookmark reached the current revision")
        assert event["object"] == {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": str(gw.core.cache.revision), "creationTimestamp": None},
            "spec": {"containers": None},
            "status": {},
        }


async def test_watch_list_ends_initial_events_with_annotated_bookmark(gateway: Gateway) -> None:
    params = {
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
    }
    async with kube_watch(gateway.client, resourceVersion="", **params) as take:
        events = await take(4)
    assert [e["type"] for e in events] == ["ADDED"] * 3 + ["BOOKMARK"]
    end = events[3]["object"]["metadata"]
    blueprint = end["annotations"].pop(LIST_BLUEPRINT)
    assert end["annotations"] == {INITIAL_EVENTS_END: "true"}
    assert orjson.loads(base64.b64decode(blueprint)) == {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {},
        "items": [],
    }
    assert int(end["resourceVersion"]) == gateway.core.cache.revision
    refused = await gateway.client.get("/api/v1/pods", params={"watch": "1", "sendInitialEvents": "true"})
    assert refused.status_code == 422


async def test_timeout_seconds_ends_the_watch(gateway: Gateway) -> None:
    r = await gateway.client.get(
        "/api/v1/pods", params={"watch": "1", "timeoutSeconds": "1", "resourceVersion": "0"}
    )
    assert r.status_code == 200
    assert [orjson.loads(line)["type"] for line in r.text.splitlines()] == ["ADDED"] * 3


async def test_table_watch_has_headers_once(gateway: Gateway) -> None:
    revision = str(gateway.core.cache.revision)
    async with gateway.client.stream(
        "GET",
        "/api/v1/pods",
        params={"watch": "true", "resourceVersion": revision},
        headers={"Accept": TABLE},
    ) as r:
        lines = r.aiter_lines()
        gateway.publish(make_pod("api", "uid-d"))
        gateway.sink.delete("uid-d")
        first, second = [orjson.loads(await asyncio.wait_for(anext(lines), TIMEOUT)) for _ in range(2)]
    assert first["object"]["kind"] == "Table" and len(first["object"]["columnDefinitions"]) == len(
        POD_COLUMNS
    )
    assert second["object"]["columnDefinitions"] is None
    assert [e["object"]["rows"][0]["cells"][0] for e in (first, second)] == ["api", "api"]


@pytest.mark.parametrize("value", ["True", "1", "t"])
async def test_go_booleans(gateway: Gateway, value: str) -> None:
    r = await gateway.client.get("/api/v1/pods", params={"watch": value, "timeoutSeconds": "1"})
    assert len(r.text.splitlines()) == 3


@pytest.mark.parametrize("value", ["yes", "on", "maybe"])
async def test_watch_is_read_once_as_go_reads_a_boolean(gateway: Gateway, value: str) -> None:
    """A value strconv.ParseBool refuses is the API server's 400, and the request is counted as
    the List it was named (not a Watch that a looser reading would have started)."""
    r = await gateway.client.get("/api/v1/pods", params={"watch": value})
    assert (r.status_code, status_of(r)["reason"]) == (400, "BadRequest")
    assert f'watch: Invalid value: "{value}": must be a boolean' in status_of(r)["message"]
    labels = {"server_api_version": "http", "status_code": "InvalidArgument"}
    assert gateway.counter("kubelet_pod_requests_list_total", **labels) == 1
    assert gateway.counter("kubelet_pod_requests_watch_total", **labels) == 0


# -- the resourceVersion splice (property) ----------------------------------------------------


@given(pod=pods(), revision=st.integers(min_value=0, max_value=2**63 - 1))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_spliced_revision_is_the_pod_with_that_resource_version(pod: Any, revision: int) -> None:
    """Any pod (a source's resourceVersion or none, any metadata before it): the spliced bytes
    are the pod with `metadata.resourceVersion` = the revision, in Go's key order."""
    version = PodVersion.from_message(pod)
    spliced = kubeobjects.pod_bytes(version, revision)
    expected = kubeobjects.pod_object(version, revision)
    decoded = orjson.loads(spliced)
    assert decoded == expected
    assert list(decoded["metadata"]) == list(expected["metadata"])
    assert decoded["metadata"]["resourceVersion"] == str(revision)
    others = [k for k in version.json.get("metadata", {}) if k != "resourceVersion"]
    assert [k for k in decoded["metadata"] if k != "resourceVersion"] == others
    # Where it splices is found once per version and kept: the next revision's bytes from it.
    assert version.kube_splice is not None
    assert orjson.loads(kubeobjects.pod_bytes(version, 7)) == kubeobjects.pod_object(version, 7)
