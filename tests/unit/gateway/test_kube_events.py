"""The Kubernetes view's events: what a source observed, as core/v1 Events from pods-api, selected
as the API server selects them (kubectl describe's involvedObject name, namespace and uid)."""

from __future__ import annotations

import yaml
from gatewayharness import Gateway

from pods_api.core.store.observations import NORMAL, Involved, Observation

SECOND = 1_000_000_000
WEB = Involved("shop", "web", "uid-b", "spec.containers{app}")
DB = Involved("shop", "db", "uid-a", "spec.containers{app}")
ELSEWHERE = Involved("batch", "report", "uid-z", "spec.initContainers{setup}")


def observe(gateway: Gateway, involved: Involved, reason: str, at: int) -> None:
    gateway.sink.observe(Observation(involved, NORMAL, reason, f"{reason} container app", at * SECOND))


async def test_describe_gets_one_pods_events_counted_and_named_as_pods_apis(gateway: Gateway) -> None:
    observe(gateway, WEB, "Started", 100)
    observe(gateway, WEB, "Started", 160)
    observe(gateway, DB, "Started", 120)
    selector = "involvedObject.name=web,involvedObject.namespace=shop,involvedObject.uid=uid-b"
    response = await gateway.client.get(
        "/api/v1/namespaces/shop/events", params={"fieldSelector": selector, "limit": "500"}
    )
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    listed = response.json()
    assert (listed["kind"], listed["apiVersion"]) == ("EventList", "v1")
    (event,) = listed["items"]
    assert event["involvedObject"] == {
        "kind": "Pod",
        "namespace": "shop",
        "name": "web",
        "uid": "uid-b",
        "apiVersion": "v1",
        "fieldPath": "spec.containers{app}",
    }
    assert (event["reason"], event["type"], event["count"]) == ("Started", "Normal", 2)
    assert (event["firstTimestamp"], event["lastTimestamp"]) == (
        "1970-01-01T00:01:40Z",
        "1970-01-01T00:02:40Z",
    )
    assert event["source"] == {"component": "pods-api", "host": "test"}
    assert (event["reportingComponent"], event["reportingInstance"]) == ("pods-api", "test")
    assert event["metadata"]["name"].startswith("web.") and event["metadata"]["namespace"] == "shop"


async def test_a_namespace_path_holds_its_namespace_only_and_the_cluster_path_all(gateway: Gateway) -> None:
    observe(gateway, WEB, "Created", 100)
    observe(gateway, ELSEWHERE, "Created", 101)
    shop = (await gateway.client.get("/api/v1/namespaces/shop/events")).json()["items"]
    every = (await gateway.client.get("/api/v1/events")).json()["items"]
    assert [e["involvedObject"]["name"] for e in shop] == ["web"]
    assert sorted(e["involvedObject"]["name"] for e in every) == ["report", "web"]
    by_source = await gateway.client.get(
        "/api/v1/events",
        params={"fieldSelector": "source=pods-api,involvedObject.fieldPath!=spec.containers{app}"},
    )
    assert [e["involvedObject"]["name"] for e in by_source.json()["items"]] == ["report"]


async def test_yaml_and_a_selector_the_api_server_refuses(gateway: Gateway) -> None:
    observe(gateway, WEB, "Started", 100)
    answer = await gateway.client.get("/api/v1/events", headers={"Accept": "application/yaml"})
    assert yaml.safe_load(answer.text)["items"][0]["reason"] == "Started"
    refused = await gateway.client.get("/api/v1/events", params={"fieldSelector": "status.phase=Running"})
    assert refused.status_code == 400
    assert refused.json()["reason"] == "BadRequest"
    assert "field label not supported: 'status.phase'; events can be selected by" in refused.json()["message"]


async def test_with_no_observing_source_the_list_is_empty(gateway: Gateway) -> None:
    listed = (await gateway.client.get("/api/v1/namespaces/shop/events")).json()
    assert listed["items"] == [] and int(listed["metadata"]["resourceVersion"]) > 0
