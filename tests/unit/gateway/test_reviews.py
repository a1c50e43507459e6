"""The self-reviews kubectl's `auth can-i` and `auth whoami` send, as JSON and as the protobuf
kubectl sends, and the OpenAPI v3 documents `kubectl explain` reads (kubectl itself:
tests/e2e/test_kube_clients.py)."""

from __future__ import annotations

from typing import Any

import orjson
from gatewayharness import Gateway

from pods_api.gateway.kube import openapiv3

ACCESS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
PROTOBUF = {"Content-Type": "application/vnd.kubernetes.protobuf"}


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (every size here is under 128: one-byte varints)."""
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def envelope(kind: str, review: bytes) -> bytes:
    """Kubernetes' protobuf body: the magic, then a runtime.Unknown (typeMeta 1, raw 2)."""
    type_meta = _field(1, b"authorization.k8s.io/v1") + _field(2, kind.encode())
    return b"k8s\x00" + _field(1, type_meta) + _field(2, review)


def access_review(**attributes: str) -> bytes:
    numbers = {"namespace": 1, "verb": 2, "group": 3, "resource": 5, "subresource": 6, "name": 7}
    fields = b"".join(_field(numbers[k], v.encode()) for k, v in attributes.items())
    return envelope("SelfSubjectAccessReview", _field(1, b"") + _field(2, _field(1, fields)))


async def review(gateway: Gateway, body: bytes, headers: dict[str, str] | None = None) -> dict[str, Any]:
    answer = await gateway.client.post(ACCESS, content=body, headers=headers or {})
    assert answer.status_code == 201, answer.text
    result: dict[str, Any] = answer.json()
    assert (result["kind"], result["apiVersion"]) == ("SelfSubjectAccessReview", "authorization.k8s.io/v1")
    return result


async def test_access_review_allows_reading_pods_only(gateway: Gateway) -> None:
    for verb in ("get", "list", "watch"):
        allowed = await review(gateway, access_review(verb=verb, resource="pods", namespace="shop"), PROTOBUF)
        assert allowed["status"]["allowed"] is True
        assert allowed["spec"]["resourceAttributes"] == {
            "namespace": "shop",
            "verb": verb,
            "resource": "pods",
        }
    for attributes in (
        {"verb": "delete", "resource": "pods"},
        {"verb": "get", "resource": "secrets"},
        {"verb": "watch", "resource": "nodes"},
        {"verb": "get", "resource": "nodes", "subresource": "proxy"},
        {"verb": "list", "resource": "pods", "group": "apps"},
    ):
        denied = await review(gateway, access_review(**attributes), PROTOBUF)
        assert denied["status"] == {"allowed": False, "denied": True, "reason": denied["status"]["reason"]}
        assert (
            "get, list and watch on pods; get and list on namespaces and nodes" in denied["status"]["reason"]
        )
    # A pod's log, as k9s asks before its log view: the words `kubectl logs` is refused with.
    log = await review(
        gateway, access_review(verb="get", resource="pods", subresource="log", name="web"), PROTOBUF
    )
    assert log["status"]["allowed"] is False
    assert log["status"]["reason"].startswith(
        "pods-api serves this node's pods read-only and does not serve pods/log (pod 'web'): "
    )
    assert "`crictl logs`" in log["status"]["reason"]
    as_json = {"spec": {"nonResourceAttributes": {"path": "/readyz", "verb": "get"}}}
    assert (await review(gateway, orjson.dumps(as_json)))["status"]["allowed"] is True
    as_json["spec"]["nonResourceAttributes"]["path"] = "/debug/pprof"
    assert (await review(gateway, orjson.dumps(as_json)))["status"]["allowed"] is False


async def test_access_review_allows_what_discovery_lists(gateway: Gateway) -> None:
    """Every verb discovery lists on every resource is allowed, and no other: k9s asks
    `list namespaces` before it offers them, and `get nodes` works."""
    resources = (await gateway.client.get("/api/v1")).json()["resources"]
    assert {r["name"] for r in resources} == {"pods", "namespaces", "nodes"}
    for resource in resources:
        for verb in ("get", "list", "watch", "create", "delete"):
            answer = await review(gateway, access_review(verb=verb, resource=resource["name"]), PROTOBUF)
            assert answer["status"]["allowed"] is (verb in resource["verbs"]), (verb, resource["name"])
    events = await review(gateway, access_review(verb="list", resource="events", namespace="shop"), PROTOBUF)
    assert events["status"]["allowed"] is True  # served for `kubectl describe`, not in discovery


async def test_malformed_reviews_are_bad_requests_saying_why(gateway: Gateway) -> None:
    for body, headers, says in (
        (b"{", {}, "is not JSON"),
        (b"[]", {}, "is not a JSON object"),
        (b"{}", {}, "exactly one of resourceAttributes or nonResourceAttributes"),
        (b"k8s\x00\x0a\x7f", PROTOBUF, "is not Kubernetes protobuf: a field runs past the end"),
        (b"\x0a\x00", PROTOBUF, "is not Kubernetes protobuf: no k8s envelope"),
        (b" " * (64 * 1024 + 1), {}, "over the 65536 this server reads"),
    ):
        answer = await gateway.client.post(ACCESS, content=body, headers=headers)
        assert answer.status_code == 400, body[:20]
        status = answer.json()
        assert (status["kind"], status["reason"]) == ("Status", "BadRequest")
        assert says in status["message"], status["message"]


async def test_whoami_is_the_anonymous_user(gateway: Gateway) -> None:
    answer = await gateway.client.post(
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        content=b"{}",
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code == 201
    assert answer.json()["status"]["userInfo"] == {
        "username": "system:anonymous",
        "groups": ["system:unauthenticated"],
    }


async def test_openapi_v3_discovery_names_the_hashed_document(gateway: Gateway) -> None:
    paths = (await gateway.client.get("/openapi/v3")).json()["paths"]
    url = paths["api/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/api/v1?hash=")
    document = await gateway.client.get(url)
    assert document.headers["cache-control"] == "public, immutable"
    assert document.content == openapiv3.document()
    body = document.json()
    gvk = {"group": "", "kind": "Pod", "version": "v1"}
    assert body["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["get"][openapiv3.GVK] == gvk
    assert body["components"]["schemas"]["io.k8s.api.core.v1.Pod"][openapiv3.GVK] == [gvk]
    unhashed = await gateway.client.get("/openapi/v3/api/v1")
    assert unhashed.headers["cache-control"] == "no-cache, private"
    assert (await gateway.client.get("/openapi/v3/apis/apps/v1")).status_code == 404
