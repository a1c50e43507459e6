"""The committed OpenAPI document is what the app serves, its Pod schema is real, every
response conforms to it (schemathesis), and every List item validates against it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest
import schemathesis
from gatewayharness import PODS, Gateway, version
from hypothesis import HealthCheck, settings
from repo import ROOT
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from pods_api.core.assembly import build_core
from pods_api.core.config import Config
from pods_api.gateway.app import create_app
from pods_api.serve import openapi_writer

# The `gateway` and `make_gateway` fixtures.

COMMITTED = ROOT / "openapi" / "openapi.json"
SCHEMAS = "#/components/schemas/"


async def test_committed_document_is_what_the_app_serves(gateway: Gateway) -> None:
    """Regenerate with `python -m pods_api.serve.openapi_writer` when this fails."""
    served = (await gateway.client.get("/openapi.json")).json()
    committed = COMMITTED.read_text()
    assert json.loads(committed) == served
    assert committed == openapi_writer.render(served)  # sorted keys, 2-space indent, trailing newline
    assert openapi_writer.main(["--check", str(COMMITTED)]) == 0


def test_the_writer_command_checks_the_committed_file(tmp_path: Path) -> None:
    module = "pods_api.serve.openapi_writer"
    check = [sys.executable, "-m", module, "--check"]
    assert subprocess.run([*check, str(COMMITTED)], capture_output=True).returncode == 0
    stale = tmp_path / "openapi.json"
    stale.write_text("{}\n")
    result = subprocess.run([*check, str(stale)], capture_output=True, text=True)
    assert result.returncode == 1
    assert "is stale: run python -m pods_api.serve.openapi_writer" in result.stderr
    subprocess.run([sys.executable, "-m", module, str(stale)], check=True)
    assert stale.read_text() == COMMITTED.read_text()


def schema(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(doc["components"]["schemas"][name])


def resolve(doc: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    return schema(doc, node["$ref"].removeprefix(SCHEMAS)) if "$ref" in node else node


def test_the_pod_schema_follows_the_kubernetes_json() -> None:
    doc = json.loads(COMMITTED.read_text())
    pod = schema(doc, "io.k8s.api.core.v1.Pod")
    assert {"kind", "apiVersion", "metadata", "spec", "status"} == set(pod["properties"])
    spec = resolve(doc, pod["properties"]["spec"])
    containers = spec["properties"]["containers"]
    assert containers["type"] == "array"
    container = resolve(doc, containers["items"])
    assert container["properties"]["image"] == {"type": "string"}
    assert container["properties"]["stdin"] == {"type": "boolean"}
    port = resolve(doc, container["properties"]["ports"]["items"])
    assert port["properties"]["containerPort"] == {"type": "integer", "format": "int32"}
    assert spec["properties"]["terminationGracePeriodSeconds"] == {"type": "integer", "format": "int64"}
    resources = resolve(doc, container["properties"]["resources"])
    quantity = resolve(doc, resources["properties"]["limits"]["additionalProperties"])
    assert quantity["type"] == "string"
    meta = resolve(doc, pod["properties"]["metadata"])
    assert meta["properties"]["labels"] == {"type": "object", "additionalProperties": {"type": "string"}}
    assert resolve(doc, meta["properties"]["creationTimestamp"])["format"] == "date-time"
    probe = resolve(doc, container["properties"]["livenessProbe"])
    http_get = resolve(doc, probe["properties"]["httpGet"])  # inline ProbeHandler, flattened
    int_or_string = resolve(doc, http_get["properties"]["port"])
    assert int_or_string["oneOf"] == [{"type": "integer", "format": "int32"}, {"type": "string"}]
    volume = resolve(doc, spec["properties"]["volumes"]["items"])
    assert "emptyDir" in volume["properties"] and "volumeSource" not in volume["properties"]
    managed = resolve(doc, meta["properties"]["managedFields"]["items"])
    assert resolve(doc, managed["properties"]["fieldsV1"])["type"] == "object"
    pod_list = schema(doc, "io.k8s.api.core.v1.PodList")
    assert pod_list["properties"]["items"]["items"] == {"$ref": SCHEMAS + "io.k8s.api.core.v1.Pod"}


KUBERNETES_PATHS = {
    "/version",
    "/api",
    "/apis",
    "/api/v1",
    "/api/v1/pods",
    "/api/v1/namespaces/{namespace}/pods",
    "/api/v1/namespaces/{namespace}/pods/{name}",
    "/api/v1/watch/pods",
    "/api/v1/watch/namespaces/{namespace}/pods",
    "/api/v1/watch/namespaces/{namespace}/pods/{name}",
}


def test_routes_document_errors_and_the_event_stream() -> None:
    doc = json.loads(COMMITTED.read_text())
    assert set(doc["paths"]) == {
        "/v1/pods",
        "/v1/pods/{uid}",
        "/v1/namespaces/{namespace}/pods/{name}",
        "/healthz",
        "/livez",
        "/readyz",
        "/metrics",
        *KUBERNETES_PATHS,
    }
    watch = doc["paths"]["/api/v1/pods"]["get"]
    assert {p["name"] for p in watch["parameters"]} >= {"watch", "resourceVersion", "allowWatchBookmarks"}
    assert watch["responses"]["410"]["content"]["application/json"]["schema"]["properties"]["kind"][
        "enum"
    ] == ["Status"]
    assert all(set(ops) == {"get"} for ops in doc["paths"].values())
    listing = doc["paths"]["/v1/pods"]["get"]
    assert set(listing["responses"]["200"]["content"]) == {
        "application/json",
        "application/yaml",
        "text/event-stream",
    }
    assert "INITIAL_SYNC_COMPLETE" in listing["responses"]["200"]["description"]
    parameters = {p["name"] for p in listing["parameters"]}
    assert {"fields", "labelSelector", "fieldSelector", "containerID", "podIP", "watch"} <= parameters
    assert "`matches`" in listing["responses"]["200"]["description"]
    by_name = doc["paths"]["/v1/namespaces/{namespace}/pods/{name}"]["get"]
    assert {p["name"] for p in by_name["parameters"]} >= {"namespace", "name", "fields"}
    assert "404" in by_name["responses"]
    assert listing["responses"]["429"]["headers"]["Retry-After"]["schema"] == {"type": "integer"}
    assert listing["responses"]["503"]["content"]["application/json"]["schema"] == {"$ref": SCHEMAS + "Error"}
    for path in doc["paths"].values():  # no FastAPI validation error: only the Kubernetes Status
        invalid = path["get"]["responses"].get("422")
        assert invalid is None or invalid["description"].startswith("Invalid: ListOptions"), invalid
    assert "HTTPValidationError" not in doc["components"]["schemas"]


def validator(name: str) -> jsonschema.Draft202012Validator:
    """A standalone schema whose #/components/... references resolve inside itself."""
    doc = json.loads(COMMITTED.read_text())
    return jsonschema.Draft202012Validator({**schema(doc, name), "components": doc["components"]})


async def test_every_response_validates_against_the_schema(gateway: Gateway) -> None:
    pod_list, pod, error = (
        validator("io.k8s.api.core.v1.PodList"),
        validator("io.k8s.api.core.v1.Pod"),
        validator("Error"),
    )
    pod_list.validate((await gateway.client.get("/v1/pods")).json())
    pod_list.validate((await gateway.client.get("/v1/pods", params={"fields": "status.phase"})).json())
    pod.validate((await gateway.client.get("/v1/pods/uid-a")).json())
    found = (await gateway.client.get("/v1/pods", params={"podIP": "10.1.0.7"})).json()
    assert len(found["items"]) == len(found["matches"]) == 3
    validator("PodLookupList").validate(found)
    pod_list.validate(found)  # a PodList reader reads it as one
    pod_list.validate((await gateway.client.get("/v1/pods", params={"labelSelector": "app=a"})).json())
    error.validate((await gateway.client.get("/v1/pods/nope")).json())
    with pytest.raises(jsonschema.ValidationError):
        pod.validate({"spec": {"containers": [{"ports": [{"containerPort": "80"}]}]}})


# -- schemathesis ----------------------------------------------------------------------------


def _app() -> Any:
    core = build_core(Config(node_name="schemathesis", qps=0))
    sink = core.cache.source("fixtures")
    sink.replace([version(p) for p in PODS])
    sink.mark_synced()
    return create_app(core)


# Over TCP (as the in-process client looks to the app) only loopback Hosts are served.
api = schemathesis.openapi.from_asgi("/openapi.json", _app(), headers={"Host": "localhost"})


@api.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case: Any) -> None:
    # A watch never ends; the event stream has its own tests (test_gateway_watch.py), and so
    # have the deprecated watch paths, which are a watch whatever the query (test_kube_view.py).
    if case.path.startswith("/api/v1/watch/"):
        pytest.skip("a watch path streams until its timeout: tests/e2e/test_kube_view.py")
    if case.query and str(case.query.get("watch", "")).lower() in {"1", "true", "t", "yes", "y", "on"}:
        case.query["watch"] = "false"
    # A resourceVersion newer than the cache's is the API server's 504 Timeout (documented; a
    # server error to this check): tests/test_kube.py covers it.
    if case.query and case.path.startswith("/api/"):
        case.query.pop("resourceVersion", None)
    headers = {"Accept": "application/json"} if case.path == "/v1/pods" else None
    case.call_and_validate(
        base_url="http://localhost", headers=headers, checks=[not_a_server_error, response_schema_conformance]
    )


def test_schemathesis_saw_every_route() -> None:
    operations = {op.ok().path for op in api.get_all_operations()}
    assert operations == {
        "/v1/pods",
        "/v1/pods/{uid}",
        "/v1/namespaces/{namespace}/pods/{name}",
        "/healthz",
        "/livez",
        "/readyz",
        "/metrics",
        *KUBERNETES_PATHS,
    }


@pytest.mark.parametrize("body", [b"{}", orjson.dumps({"kind": "Pod", "metadata": {"name": "x"}})])
def test_the_pod_schema_accepts_masked_pods(body: bytes) -> None:
    validator("io.k8s.api.core.v1.Pod").validate(orjson.loads(body))
