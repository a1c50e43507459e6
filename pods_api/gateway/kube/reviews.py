"""Who the client is and what it may do, answered as the API server answers them, truthfully
for this server: anyone who reaches the listener (loopback TCP or a 0600 socket) may get, list
and watch pods, and nothing else.

    POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews   `kubectl auth can-i VERB RES`
    POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews    `kubectl auth can-i --list`
    POST /apis/authentication.k8s.io/v1/selfsubjectreviews        `kubectl auth whoami`

The listener takes no credentials, so the user is the API server's anonymous one. The reviews
are created, not stored: the answer is the request with its status filled in, as the API
server's is.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from pods_api.gateway import formats
from pods_api.gateway.kube.errors import bad_request

ACCESS_REVIEW = "SelfSubjectAccessReview"
RULES_REVIEW = "SelfSubjectRulesReview"
SELF_REVIEW = "SelfSubjectReview"
READ_VERBS = ("get", "list", "watch")
# The paths outside the resources that answer a GET (gateway/health.py, the discovery, the
# OpenAPI documents, /metrics); `*` as the API server's non-resource rules write a prefix.
READABLE_PATHS = (
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/readyz",
    "/metrics",
    "/openapi/*",
    "/version",
)
ALLOWED = "pods-api serves this node's pods read-only: get, list and watch on pods"
DENIED = "pods-api serves only get, list and watch on pods, and GET on its discovery and probes"
# The API server's names for a user it did not authenticate.
ANONYMOUS = {"username": "system:anonymous", "groups": ["system:unauthenticated"]}
# A review is a few hundred bytes; more is not one.
_MAX_BODY = 64 * 1024
# kubectl's typed clients send built-in kinds as protobuf (and accept JSON back).
PROTOBUF = "application/vnd.kubernetes.protobuf"
# The envelope of every Kubernetes protobuf body: these four bytes, then a runtime.Unknown.
_MAGIC = b"k8s\x00"
# Field numbers of k8s.io/api authorization/v1 (generated.proto): the review's spec, the
# spec's two attribute kinds, and their string fields by JSON name.
_SPEC = 2
_RESOURCE_ATTRIBUTES = 1
_NON_RESOURCE_ATTRIBUTES = 2
_RESOURCE_FIELDS = {
    1: "namespace",
    2: "verb",
    3: "group",
    4: "version",
    5: "resource",
    6: "subresource",
    7: "name",
}
_NON_RESOURCE_FIELDS = {1: "path", 2: "verb"}
_RULES_FIELDS = {1: "namespace"}
# runtime.Unknown: its raw bytes are the object.
_UNKNOWN_RAW = 2


async def _body(request: Request, kind: str) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > _MAX_BODY:
        raise bad_request(f"a {kind} of {len(raw)} bytes is over the {_MAX_BODY} this server reads")
    if request.headers.get("content-type", "").startswith(PROTOBUF):
        try:
            return _from_protobuf(raw, kind)
        except ValueError as exc:
            raise bad_request(f"the {kind} is not Kubernetes protobuf: {exc}") from None
    try:
        body = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"the {kind} is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise bad_request(f"the {kind} is not a JSON object")
    return body


def _from_protobuf(raw: bytes, kind: str) -> dict[str, Any]:
    """The spec of a review sent as protobuf, in its JSON shape (what the review reads of it)."""
    if not raw.startswith(_MAGIC):
        raise ValueError("no k8s envelope")
    review = _fields(_one(_fields(raw[len(_MAGIC) :]), _UNKNOWN_RAW))
    spec_fields = _fields(_one(review, _SPEC))
    if kind == RULES_REVIEW:
        return {"spec": _strings(spec_fields, _RULES_FIELDS)}
    spec: dict[str, Any] = {}
    if kind != ACCESS_REVIEW:  # SelfSubjectReview: no spec
        return {}
    if _RESOURCE_ATTRIBUTES in spec_fields:
        resource = _fields(_one(spec_fields, _RESOURCE_ATTRIBUTES))
        spec["resourceAttributes"] = _strings(resource, _RESOURCE_FIELDS)
    if _NON_RESOURCE_ATTRIBUTES in spec_fields:
        spec["nonResourceAttributes"] = _strings(
            _fields(_one(spec_fields, _NON_RESOURCE_ATTRIBUTES)), _NON_RESOURCE_FIELDS
        )
    return {"spec": spec}


def _one(fields: dict[int, list[bytes]], number: int) -> bytes:
    values = fields.get(number)
    return values[-1] if values else b""


def _strings(fields: dict[int, list[bytes]], names: dict[int, str]) -> dict[str, str]:
    return {name: _one(fields, number).decode() for number, name in names.items() if number in fields}


def _fields(data: bytes) -> dict[int, list[bytes]]:
    """The length-delimited fields of one protobuf message by number (varints and fixed-width
    fields skipped: the reviews' specs have none that matter)."""
    out: dict[int, list[bytes]] = {}
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, at = _varint(data, at)
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ValueError("a field runs past the end")
            out.setdefault(number, []).append(data[at : at + size])
            at += size
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise ValueError(f"wire type {wire}")
    return out


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("a truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def _answer(body: dict[str, Any], kind: str, group_version: str, status: dict[str, Any]) -> Response:
    answered = {
        "kind": kind,
        "apiVersion": group_version,
        "metadata": body.get("metadata") or {},
        "spec": body.get("spec") or {},
        "status": status,
    }
    if kind == SELF_REVIEW:
        del answered["spec"]
    return Response(orjson.dumps(answered), status_code=201, media_type=formats.JSON)


def allowed(spec: dict[str, Any]) -> bool:
    """Whether this server answers what the spec asks: a read of pods, or a GET of a path it serves."""
    resource = spec.get("resourceAttributes")
    if isinstance(resource, dict):
        return (
            resource.get("verb") in READ_VERBS
            and resource.get("group", "") == ""
            and resource.get("resource") == "pods"
            and not resource.get("subresource")
        )
    path = spec.get("nonResourceAttributes")
    if isinstance(path, dict):
        return path.get("verb") == "get" and _readable(str(path.get("path", "")))
    return False


def _readable(path: str) -> bool:
    return any(
        path == rule or (rule.endswith("/*") and path.startswith(rule[:-1])) for rule in READABLE_PATHS
    )


async def access_review(request: Request) -> Response:
    body = await _body(request, ACCESS_REVIEW)
    spec = body.get("spec")
    if not isinstance(spec, dict) or not ({"resourceAttributes", "nonResourceAttributes"} & spec.keys()):
        raise bad_request(
            f"{ACCESS_REVIEW}: exactly one of resourceAttributes or nonResourceAttributes must be set"
        )
    yes = allowed(spec)
    status = (
        {"allowed": True, "reason": ALLOWED} if yes else {"allowed": False, "denied": True, "reason": DENIED}
    )
    return _answer(body, ACCESS_REVIEW, "authorization.k8s.io/v1", status)


async def rules_review(request: Request) -> Response:
    body = await _body(request, RULES_REVIEW)
    status = {
        "resourceRules": [{"verbs": list(READ_VERBS), "apiGroups": [""], "resources": ["pods"]}],
        "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": list(READABLE_PATHS)}],
        "incomplete": False,
    }
    return _answer(body, RULES_REVIEW, "authorization.k8s.io/v1", status)


async def self_review(request: Request) -> Response:
    body = await _body(request, SELF_REVIEW)
    return _answer(body, SELF_REVIEW, "authentication.k8s.io/v1", {"userInfo": ANONYMOUS})
