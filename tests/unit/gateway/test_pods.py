"""The HTTP/JSON gateway's List, Get, errors, probes, metrics and guards, over a real UNIX socket
(and loopback TCP for the Host check)."""

from __future__ import annotations

import asyncio
import inspect
import socket
from typing import Any

import httpx
import orjson
import pytest
import yaml
from gatewayharness import (
    PODS,
    Gateway,
    GatewayFactory,
    make_pod,
    serving,
    unix_client,
)
from gatewayjson import TYPE_META, canonical, deserialize
from prometheus_client.parser import text_string_to_metric_families
from repo import ROOT

from pods_api.core.query.fieldmask import parse_mask
from pods_api.gateway.http.errors import HTTP_STATUS, Code
from pods_api.gateway.http.hosts import is_loopback_host

# prometheus-fastapi-instrumentator's default buckets for its label-free histogram.
LATENCY_HIGHR_BUCKETS = [
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1,
    1.5,
    2,
    2.5,
    3,
    3.5,
    4,
    4.5,
    5,
    7.5,
    10,
    30,
    60,
]

# The `gateway` and `make_gateway` fixtures.


def assert_error(response: httpx.Response, code: Code, http_status: int | None = None) -> dict[str, Any]:
    status = http_status or HTTP_STATUS[code]
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.headers["grpc-status"] == str(code.number)
    error = response.json()["error"]
    assert error["code"] == status
    assert error["status"] == code.name
    assert error["grpcCode"] == code.number
    assert error["message"]
    assert set(error) == {"code", "status", "grpcCode", "message"}
    return dict(error)


# -- List ------------------------------------------------------------------------------------


async def test_list_is_a_podlist_in_uid_order_with_the_cache_revision(gateway: Gateway) -> None:
    r = await gateway.client.get("/v1/pods")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert list(body) == ["kind", "apiVersion", "metadata", "items"]
    assert body["kind"] == "PodList" and body["apiVersion"] == "v1"
    assert body["metadata"] == {"resourceVersion": str(gateway.core.cache.revision)}
    assert [p["metadata"]["uid"] for p in body["items"]] == ["uid-a", "uid-b", "uid-c"]
    by_uid = {p["metadata"]["uid"]: p for p in PODS}
    for item in body["items"]:
        assert item == canonical(by_uid[item["metadata"]["uid"]])
        assert list(item)[:3] == ["kind", "apiVersion", "metadata"]


async def test_list_and_get_deserialize_with_the_kubernetes_client(gateway: Gateway) -> None:
    pods = deserialize((await gateway.client.get("/v1/pods")).text, "V1PodList")
    assert [p.metadata.name for p in pods.items] == ["db", "web", "cache"]
    assert pods.items[0].spec.containers[0].resources.requests == {"cpu": "500m", "memory": "1Gi"}
    assert pods.items[0].spec.containers[0].liveness_probe.http_get.port == "http"
    assert pods.items[0].status.start_time.year == 2026
    pod = deserialize((await gateway.client.get("/v1/pods/uid-b")).text, "V1Pod")
    assert (pod.kind, pod.api_version, pod.metadata.uid) == ("Pod", "v1", "uid-b")


async def test_empty_list_has_empty_items(make_gateway: GatewayFactory) -> None:
    async with make_gateway(pods=[]) as gw:
        body = (await gw.client.get("/v1/pods")).json()
    assert body["items"] == []


async def test_list_bytes_are_assembled_once_per_revision_and_mask(gateway: Gateway) -> None:
    first = await gateway.client.get("/v1/pods")
    snapshot = gateway.core.cache.snapshot()
    assert snapshot.memo(("http-list", _json_format(), ""), lambda: b"rebuilt") == first.content
    gateway.publish(make_pod("api", "uid-d"))
    second = await gateway.client.get("/v1/pods")
    assert second.json()["metadata"]["resourceVersion"] == str(gateway.core.cache.revision)
    assert len(second.json()["items"]) == 4


def _json_format() -> Any:
    from pods_api.gateway.http.formats import Format

    return Format.JSON


@pytest.mark.parametrize(
    "fields",
    [
        "status.phase",
        "status.phase,status.podIPs",
        "spec.containers.image",
        "metadata.labels,spec.containers.resources",
        "spec.volumes.emptyDir",
        "metadata",
    ],
)
async def test_list_mask_equals_the_core_mask_of_the_full_json(gateway: Gateway, fields: str) -> None:
    mask = parse_mask(fields)
    assert mask is not None
    full = (await gateway.client.get("/v1/pods")).json()["items"]
    masked = (await gateway.client.get("/v1/pods", params={"fields": fields})).json()["items"]
    expected = [
        {**TYPE_META, **mask.apply_json({k: v for k, v in p.items() if k not in TYPE_META})} for p in full
    ]
    assert masked == expected
    for item in masked:
        assert set(item["metadata"]) >= {"name", "namespace", "uid"}


async def test_repeated_fields_parameter_is_one_mask(gateway: Gateway) -> None:
    joined = await gateway.client.get("/v1/pods", params={"fields": "status.phase,spec.nodeName"})
    repeated = await gateway.client.get(
        "/v1/pods", params=[("fields", "status.phase"), ("fields", "spec.nodeName")]
    )
    assert repeated.content == joined.content
    assert repeated.json()["items"][0] == {
        **TYPE_META,
        "metadata": {"name": "db", "namespace": "shop", "uid": "uid-a"},
        "spec": {"nodeName": "node-1"},
        "status": {"phase": "Running"},
    }


async def test_empty_fields_is_the_whole_pod(gateway: Gateway) -> None:
    whole = await gateway.client.get("/v1/pods")
    assert (await gateway.client.get("/v1/pods", params={"fields": ""})).content == whole.content


async def test_an_empty_fields_parameter_among_others_adds_nothing(gateway: Gateway) -> None:
    """An empty parameter is as if absent; an empty path inside a value is an error (above)."""
    alone = await gateway.client.get("/v1/pods", params={"fields": "status.phase"})
    among = await gateway.client.get("/v1/pods", params=[("fields", ""), ("fields", "status.phase")])
    assert among.status_code == 200 and among.content == alone.content


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ("status.phas", "did you mean 'phase'"),
        ("status.phase.x", "has no fields to select"),
        ("metadata.labels.app", "is a map"),
        ("a" * 5000, "the limit is"),
        (",,,", "path 1 of 4 is empty"),  # never "no mask"
        ("status.phase,", "path 2 of 2 is empty"),
    ],
)
async def test_invalid_mask_is_invalid_argument(gateway: Gateway, fields: str, message: str) -> None:
    for path in ("/v1/pods", "/v1/pods/uid-a"):
        error = assert_error(await gateway.client.get(path, params={"fields": fields}), Code.INVALID_ARGUMENT)
        assert message in error["message"]


async def test_pretty_is_indented_json_of_the_same_list(gateway: Gateway) -> None:
    compact = await gateway.client.get("/v1/pods")
    pretty = await gateway.client.get("/v1/pods", params={"pretty": "true"})
    assert pretty.headers["content-type"] == "application/json"
    assert pretty.text.startswith('{\n  "kind": "PodList",\n  "apiVersion": "v1",\n')
    assert pretty.json() == compact.json()


@pytest.mark.parametrize(
    "accept",
    ["application/yaml", "application/x-yaml", "text/yaml", "application/json;q=0.5, application/yaml"],
)
async def test_yaml_when_asked_for_in_kubernetes_key_order(gateway: Gateway, accept: str) -> None:
    compact = (await gateway.client.get("/v1/pods")).json()
    r = await gateway.client.get("/v1/pods", headers={"Accept": accept})
    assert r.headers["content-type"] == "application/yaml"
    assert r.text.startswith("kind: PodList\napiVersion: v1\nmetadata:\n")
    assert yaml.safe_load(r.text) == compact
    one = await gateway.client.get("/v1/pods/uid-a", headers={"Accept": accept})
    assert one.text.startswith("kind: Pod\napiVersion: v1\nmetadata:\n  name: db\n")


@pytest.mark.parametrize(
    "accept", ["*/*", "application/json", "text/html", "application/*", "application/yaml;q=0, */*"]
)
async def test_json_for_any_other_accept(gateway: Gateway, accept: str) -> None:
    r = await gateway.client.get("/v1/pods", headers={"Accept": accept})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"


# -- Get -------------------------------------------------------------------------------------


async def test_get_is_the_pod_with_kind_and_api_version(gateway: Gateway) -> None:
    r = await gateway.client.get("/v1/pods/uid-c")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.json() == canonical(PODS[2])
    assert r.content.startswith(b'{"kind":"Pod","apiVersion":"v1","metadata":{"name":"cache"')


async def test_get_with_mask(gateway: Gateway) -> None:
    r = await gateway.client.get("/v1/pods/uid-c", params={"fields": "status.phase"})
    assert r.json() == {
        **TYPE_META,
        "metadata": {"name": "cache", "namespace": "shop", "uid": "uid-c"},
        "status": {"phase": "Pending"},
    }


async def test_get_unknown_uid_is_not_found(gateway: Gateway) -> None:
    error = assert_error(await gateway.client.get("/v1/pods/uid-zzz"), Code.NOT_FOUND)
    assert "uid-zzz" in error["message"]


# -- errors ----------------------------------------------------------------------------------


async def test_unknown_route_is_not_found_with_the_error_body(gateway: Gateway) -> None:
    assert_error(await gateway.client.get("/v2/pods"), Code.NOT_FOUND)
    assert_error(await gateway.client.get("/docs"), Code.NOT_FOUND)
    assert_error(await gateway.client.get("/redoc"), Code.NOT_FOUND)


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
async def test_other_methods_are_405_unimplemented(gateway: Gateway, method: str) -> None:
    for path in ("/v1/pods", "/v1/pods/uid-a", "/healthz", "/metrics"):
        r = await gateway.client.request(method, path)
        assert r.status_code == 405
        assert r.headers["allow"] == "GET, HEAD"  # HEAD is answered on every GET route
        assert r.headers["grpc-status"] == str(Code.UNIMPLEMENTED.number)
        assert_error(r, Code.UNIMPLEMENTED, 405)


async def test_head_is_the_get_without_its_body(gateway: Gateway) -> None:
    for path in ("/v1/pods", "/v1/pods/uid-a", "/v1/pods/nope", "/healthz", "/metrics"):
        head, get = await gateway.client.head(path), await gateway.client.get(path)
        assert (head.status_code, head.content) == (get.status_code, b""), path
        assert head.headers["content-type"] == get.headers["content-type"], path


async def test_bad_query_parameter_is_invalid_argument(gateway: Gateway) -> None:
    error = assert_error(
        await gateway.client.get("/v1/pods", params={"pretty": "maybe"}), Code.INVALID_ARGUMENT
    )
    assert '"pretty"' in error["message"]
    assert_error(await gateway.client.get("/v1/pods", params={"watch": "sometimes"}), Code.INVALID_ARGUMENT)


@pytest.mark.parametrize(
    ("path", "params", "named"),
    [
        ("/v1/pods", {"namespace": "default"}, "'namespace'"),
        ("/v1/pods", {"fields": "status.phase", "feilds": "spec"}, "'feilds'"),
        ("/v1/pods", {"watch": "true", "since": "5"}, "'since'"),
        ("/v1/pods/uid-a", {"watch": "true"}, "'watch'"),
        ("/healthz", {"verbose": "1"}, "'verbose'"),
        ("/metrics", {"name[]": "x"}, "'name[]'"),
    ],
)
async def test_an_unknown_query_parameter_is_400_naming_it(
    gateway: Gateway, path: str, params: dict[str, str], named: str
) -> None:
    """Never ignored: `?namespace=default` quietly answered every pod."""
    error = assert_error(await gateway.client.get(path, params=params), Code.INVALID_ARGUMENT)
    assert f"unknown query parameter {named}" in error["message"]


async def test_the_allowed_parameters_are_the_ones_each_route_declares(gateway: Gateway) -> None:
    error = assert_error(await gateway.client.get("/v1/pods", params={"x": "1"}), Code.INVALID_ARGUMENT)
    takes = "containerID, fieldSelector, fields, labelSelector, podIP, pretty, resourceVersion, watch"
    assert error["message"].endswith(f"(this path takes: {takes})")  # read from the route itself
    error = assert_error(await gateway.client.get("/readyz", params={"x": "1"}), Code.INVALID_ARGUMENT)
    assert error["message"].endswith("(this path takes: none)")
    many = {f"p{i}": "1" for i in range(50)}
    error = assert_error(await gateway.client.get("/v1/pods", params=many), Code.INVALID_ARGUMENT)
    assert "and 45 more" in error["message"]
    ok = await gateway.client.get("/v1/pods", params={"fields": "status.phase", "pretty": "true"})
    assert ok.status_code == 200


async def test_a_bug_is_a_500_internal_that_reveals_nothing(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(uid: str) -> None:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(gateway.core.cache, "get", broken)
    error = assert_error(await gateway.client.get("/v1/pods/uid-a"), Code.INTERNAL)
    assert error["message"] == "internal error"
    labels = {"server_api_version": "http", "status_code": "Internal"}
    assert gateway.counter("kubelet_pod_requests_get_total", **labels) == 1


def test_the_error_table_follows_grpc_with_failed_precondition_as_503() -> None:
    expected = {
        "OK": 200, "CANCELLED": 499, "UNKNOWN": 500, "INVALID_ARGUMENT": 400, "DEADLINE_EXCEEDED": 504,
        "NOT_FOUND": 404, "ALREADY_EXISTS": 409, "PERMISSION_DENIED": 403, "RESOURCE_EXHAUSTED": 429,
        "FAILED_PRECONDITION": 503, "ABORTED": 409, "OUT_OF_RANGE": 400, "UNIMPLEMENTED": 501,
        "INTERNAL": 500, "UNAVAILABLE": 503, "DATA_LOSS": 500, "UNAUTHENTICATED": 401,
    }  # fmt: skip
    assert {code.name: HTTP_STATUS[code] for code in Code} == expected
    assert [code.number for code in Code] == list(range(17))
    table = (ROOT / "pods_api" / "gateway" / "ERRORS.md").read_text()
    for code in Code:
        assert f"| `{code.name}` | {code.number} | {HTTP_STATUS[code]} |" in table.replace("**", "")


# -- readiness -------------------------------------------------------------------------------


async def test_not_ready_is_503_failed_precondition_with_retry_after(make_gateway: GatewayFactory) -> None:
    async with make_gateway(synced=False) as gw:
        for path in ("/v1/pods", "/v1/pods/uid-a"):  # a watch waits instead: test_gateway_watch.py
            r = await gw.client.get(path)
            error = assert_error(r, Code.FAILED_PRECONDITION, 503)
            assert error["message"] == "pod sources have not finished their initial sync"
            assert r.headers["retry-after"] == "1"
        r = await gw.client.get("/readyz")
        error = assert_error(r, Code.UNAVAILABLE)
        assert "test" in error["message"]
        assert r.headers["retry-after"] == "1"
        assert (await gw.client.get("/healthz")).status_code == 200

        gw.sink.mark_synced()
        ready = await gw.client.get("/readyz")
        assert (ready.status_code, ready.text) == (200, "ok\n")
        assert (await gw.client.get("/v1/pods")).status_code == 200


async def test_readyz_lists_every_gate_not_yet_open(make_gateway: GatewayFactory) -> None:
    async with make_gateway(synced=False) as gw:
        hold = gw.core.cache.hold("ready-delay")
        assert "test, ready-delay" in (await gw.client.get("/readyz")).json()["error"]["message"]
        gw.sink.mark_synced()
        message = (await gw.client.get("/readyz")).json()["error"]["message"]
        assert "ready-delay" in message and "test" not in message.replace("ready-delay", "")
        hold.set_open()
        assert (await gw.client.get("/readyz")).status_code == 200


async def test_readyz_stays_200_and_says_each_source_warning_after_ok(make_gateway: GatewayFactory) -> None:
    """A stale source serves its last pods: ready, with the warning clients also get over gRPC."""
    async with make_gateway() as gw:
        gw.sink.warn("stale: nothing applied from upstream since 2026-12-01T10:00:00Z", key="stale")
        gw.sink.warn("upstream speaks another version")
        ready = await gw.client.get("/readyz")
        assert ready.status_code == 200
        assert ready.text == (
            "ok\nwarning: test: upstream speaks another version; "
            "stale: nothing applied from upstream since 2026-12-01T10:00:00Z\n"
        )
        gw.sink.warn(None, key="stale")
        assert (await gw.client.get("/readyz")).text == "ok\nwarning: test: upstream speaks another version\n"
        gw.sink.warn(None)
        assert (await gw.client.get("/readyz")).text == "ok\n"


# -- rate limit ------------------------------------------------------------------------------


async def test_list_and_get_share_the_limiter_and_watch_is_exempt(make_gateway: GatewayFactory) -> None:
    async with make_gateway(qps=0.001, burst=3) as gw:
        assert gw.core.limiter is not None
        assert (await gw.client.get("/v1/pods")).status_code == 200
        assert (await gw.client.get("/v1/pods/uid-a")).status_code == 200
        gw.core.limiter.allow()  # a gRPC call takes the third token
        for path in ("/v1/pods", "/v1/pods/uid-a"):
            r = await gw.client.get(path)
            error = assert_error(r, Code.RESOURCE_EXHAUSTED)
            assert "rate limit" in error["message"]
            assert int(r.headers["retry-after"]) >= 1
        async with gw.client.stream("GET", "/v1/pods", params={"watch": "true"}) as watch:
            assert watch.status_code == 200
        for path in ("/healthz", "/readyz", "/metrics", "/openapi.json"):
            assert (await gw.client.get(path)).status_code == 200


async def test_retry_after_is_whole_seconds_rounded_up(make_gateway: GatewayFactory) -> None:
    async with make_gateway(qps=0.4, burst=1) as gw:
        assert (await gw.client.get("/v1/pods")).status_code == 200
        r = await gw.client.get("/v1/pods")
        assert r.status_code == 429
        assert r.headers["retry-after"] == "3"  # 1 token at 0.4/s: 2.5 s, rounded up


# -- metrics ---------------------------------------------------------------------------------


async def test_requests_are_counted_by_call_and_go_code_name(make_gateway: GatewayFactory) -> None:
    async with make_gateway(qps=0.001, burst=4) as gw:
        await gw.client.get("/v1/pods")
        await gw.client.get("/v1/pods/uid-a")
        await gw.client.get("/v1/pods/nope")
        await gw.client.get("/v1/pods", params={"fields": "nope"})
        await gw.client.get("/v1/pods")  # the fifth List/Get: rate limited
        await gw.client.post("/v1/pods")  # not a Pods call
        await gw.client.get("/healthz")
        count = gw.counter
        assert count("kubelet_pod_requests_list_total", server_api_version="http", status_code="OK") == 1
        assert (
            count("kubelet_pod_requests_list_total", server_api_version="http", status_code="InvalidArgument")
            == 1
        )
        assert (
            count(
                "kubelet_pod_requests_list_total", server_api_version="http", status_code="ResourceExhausted"
            )
            == 1
        )
        assert count("kubelet_pod_requests_get_total", server_api_version="http", status_code="OK") == 1
        assert count("kubelet_pod_requests_get_total", server_api_version="http", status_code="NotFound") == 1
        assert count("kubelet_pod_requests_total", server_api_version="http", status_code="OK") == 2
        assert (
            sum(
                count("kubelet_pod_requests_total", server_api_version="http", status_code=c.go_name)
                for c in Code
            )
            == 5
        )


async def test_not_ready_is_counted_as_failed_precondition(make_gateway: GatewayFactory) -> None:
    async with make_gateway(synced=False) as gw:
        await gw.client.get("/v1/pods")  # a watch is accepted and waits: test_gateway_watch.py
        labels = {"server_api_version": "http", "status_code": "FailedPrecondition"}
        assert gw.counter("kubelet_pod_requests_list_total", **labels) == 1


async def test_metrics_is_one_exposition_of_core_and_http_metrics(gateway: Gateway) -> None:
    await gateway.client.get("/v1/pods")
    await gateway.client.get("/no/such/path")
    r = await gateway.client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert 'kubelet_pod_requests_total{server_api_version="http",status_code="OK"} 1.0' in text
    assert 'http_requests_total{handler="/v1/pods",method="GET",status="200"} 1.0' in text
    assert 'http_requests_total{handler="none",method="GET",status="404"} 1.0' in text
    for name in (
        "http_request_duration_seconds",
        "pods_api_pods 3.0",
        "pods_api_ready 1.0",
        "kubelet_pod_watch_events_dropped_total",
        "pods_api_watch_event_delay_seconds",
    ):
        assert name in text
    # The rest of prometheus-fastapi-instrumentator's series, kept.
    for name in ("http_request_size_bytes", "http_response_size_bytes", "http_request_duration_highr"):
        assert name in text
    openmetrics = await gateway.client.get("/metrics", headers={"Accept": "application/openmetrics-text"})
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert openmetrics.text.rstrip().endswith("# EOF")


async def test_http_metrics_count_each_request_once_by_route_and_bounded_labels(gateway: Gateway) -> None:
    """Served by the plain endpoints or by FastAPI, a request is counted once, by route template;
    a method a client invents is counted as OTHER, so it cannot add series."""
    client, count = gateway.client, gateway.counter
    await client.get("/v1/pods/uid-a")
    await client.get("/v1/pods/uid-zzz")
    await client.get("/healthz")
    for method in ("BREW", "WHEN"):
        assert (await client.request(method, "/v1/pods")).status_code == 405
    assert count("http_requests_total", handler="/v1/pods/{uid}", method="GET", status="200") == 1
    assert count("http_requests_total", handler="/v1/pods/{uid}", method="GET", status="404") == 1
    assert count("http_requests_total", handler="/healthz", method="GET", status="200") == 1
    assert count("http_requests_total", handler="/v1/pods", method="OTHER", status="405") == 2
    labels = {"handler": "/v1/pods/{uid}", "method": "GET"}
    assert count("http_request_duration_seconds_count", **labels) == 2
    assert count("http_response_size_bytes_count", handler="/v1/pods/{uid}") == 2
    assert count("kubelet_pod_requests_get_total", server_api_version="http", status_code="NotFound") == 1


async def test_http_series_are_the_instrumentators_for_call_routes_and_the_rest(gateway: Gateway) -> None:
    """The five series prometheus-fastapi-instrumentator makes, by its names, help, labels and
    buckets, for a route the call router answers and for one FastAPI answers."""
    await gateway.client.get("/v1/pods/uid-a")
    await gateway.client.get("/healthz")
    text = (await gateway.client.get("/metrics")).text
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert (
        families["http_requests"].documentation == "Total number of requests by method, status and handler."
    )
    for handler in ("/v1/pods/{uid}", "/healthz"):
        for name, labels in (
            ("http_requests_total", {"handler": handler, "method": "GET", "status": "200"}),
            ("http_request_size_bytes_count", {"handler": handler}),
            ("http_response_size_bytes_count", {"handler": handler}),
            ("http_request_duration_seconds_count", {"handler": handler, "method": "GET"}),
        ):
            assert gateway.counter(name, **labels) == 1, (name, handler)
    highr = families["http_request_duration_highr_seconds"]
    bounds = [float(s.labels["le"]) for s in highr.samples if s.name.endswith("_bucket")]
    assert bounds == [*LATENCY_HIGHR_BUCKETS, float("inf")]
    assert all(set(s.labels) <= {"le"} for s in highr.samples)
    lowr = families["http_request_duration_seconds"].samples
    assert {float(s.labels["le"]) for s in lowr if s.name.endswith("_bucket")} == {0.1, 0.5, 1, float("inf")}
    assert gateway.counter("http_request_duration_highr_seconds_count") == 3  # and the scrape


# -- TCP: DNS-rebinding defence --------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True), ("LOCALHOST:8080", True), ("127.0.0.1", True), ("127.0.0.1:80", True),
        ("127.255.3.4:1", True), ("[::1]", True), ("[::1]:8080", True),
        ("evil.example", False), ("evil.example:80", False), ("localhost.evil.example", False),
        ("10.0.0.1", False), ("0.0.0.0", False), ("[::]:80", False), ("::1", False), ("[::1]x", False),
        ("localhost:http", False), ("127.1", False), ("", False), ("[::ffff:127.0.0.1]", False),
        ("localhost:80:80", False),
    ],
)  # fmt: skip
def test_loopback_host_names(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


async def test_tcp_requests_need_a_loopback_host_and_unix_ones_do_not(gateway: Gateway) -> None:
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted sockets only then (as --http-listen
    # should bind it; otherwise every keep-alive response waits ~40 ms on Nagle + delayed ACK).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    app = gateway.server.config.app  # the same app, now also on TCP, as --http-listen runs it
    async with serving(app, [listener]), httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as tcp:
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost", "[::1]"):
            assert (await tcp.get("/v1/pods", headers={"Host": host})).status_code == 200
        for host in ("evil.example", f"evil.example:{port}", "192.168.1.1"):
            for path in ("/v1/pods", "/healthz", "/metrics", "/openapi.json", "/nowhere"):
                r = await tcp.get(path, headers={"Host": host})
                error = assert_error(r, Code.PERMISSION_DENIED)
                assert host in error["message"]
        r = await tcp.get("/v1/pods", headers={"Host": "evil.example", "Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in r.headers
    # Over the UNIX socket, any Host is served: no browser can reach it.
    assert (await gateway.client.get("/v1/pods", headers={"Host": "evil.example"})).status_code == 200


async def test_no_cors(gateway: Gateway) -> None:
    headers = {"Origin": "http://evil.example", "Access-Control-Request-Method": "GET"}
    preflight = await gateway.client.options("/v1/pods", headers=headers)
    assert preflight.status_code == 405
    r = await gateway.client.get("/v1/pods", headers={"Origin": "http://evil.example"})
    assert not any(h.startswith("access-control-") for h in r.headers)


async def test_openapi_is_served_and_names_kubernetes_schemas(gateway: Gateway) -> None:
    doc = orjson.loads((await gateway.client.get("/openapi.json")).content)
    assert {"io.k8s.api.core.v1.Pod", "io.k8s.api.core.v1.PodList", "Error"} <= set(
        doc["components"]["schemas"]
    )


def test_every_handler_and_dependency_runs_on_the_event_loop() -> None:
    """FastAPI runs a plain `def` in a thread pool; the cache and the limiter are not thread-safe."""
    from fastapi.routing import APIRoute

    from pods_api.core.assembly import build_core
    from pods_api.core.config import Config
    from pods_api.gateway.app import create_app

    app = create_app(build_core(Config(node_name="test")))
    routes = list(app.routes)
    for route in app.routes:  # FastAPI keeps an included router's routes on the router
        routes.extend(getattr(getattr(route, "original_router", None), "routes", []))
    pending = [route.dependant for route in routes if isinstance(route, APIRoute)]
    seen = 0
    while pending:
        dependant = pending.pop()
        pending.extend(dependant.dependencies)
        call = dependant.call
        if call is not None and call.__module__.startswith("pods_api.gateway"):
            assert inspect.iscoroutinefunction(call), call.__qualname__
            seen += 1
    assert seen >= 10


# A node of 5,000 pods of ~9 KiB: each unmasked List is ~45 MB, past the 16 MiB every node of
# 1,000 pods fits in.
BIG_NODE = 5000
CONCURRENT_LISTS = 8


def big_pod(i: int) -> dict[str, Any]:
    pod = make_pod(f"p-{i:04d}", f"uid-{i:04d}")
    pod["metadata"]["annotations"] = {"filler": "x" * 8192}
    return pod


@pytest.mark.parametrize("path", ["/v1/pods", "/api/v1/pods"])
async def test_concurrent_full_lists_of_a_big_node_each_get_the_whole_body(
    make_gateway: GatewayFactory, path: str
) -> None:
    """Eight callers of a 45 MB List at once: every one gets the whole body, the same bytes,
    assembled once for the revision and sent to each in slices (a connection used to come back
    closed mid-body while each call held its own copies)."""
    async with make_gateway(pods=[big_pod(i) for i in range(BIG_NODE)]) as gw:

        async def full_list() -> bytes:
            async with unix_client(gw.path) as client:
                response = await client.get(path)
                assert response.status_code == 200
                assert len(response.content) == int(response.headers["content-length"])
                return response.content

        bodies = await asyncio.gather(*(full_list() for _ in range(CONCURRENT_LISTS)))
        assert len(set(bodies)) == 1 and len(bodies[0]) > 40_000_000
        assert len(orjson.loads(bodies[0])["items"]) == BIG_NODE
