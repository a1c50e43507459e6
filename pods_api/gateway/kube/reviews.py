"""Who the client is and what it may do, answered as the API server answers them, truthfully
for this server: anyone who reaches the listener (loopback TCP or a 0600 socket) may do what
discovery says each resource serves (get, list and watch on pods; get and list on namespaces
and nodes), list the events `kubectl describe` reads, and nothing else. The answers are read
from discovery's own table (gateway/kube/objects.py), so that `kubectl auth can-i` and k9s,
which asks before it lists, never disagree with what `kubectl get` is told is there.

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

from pods_api.gateway.http import formats
from pods_api.gateway.kube import apistatus as kubeerrors
from pods_api.gateway.kube import objects as kubeobjects
from pods_api.gateway.kube.apistatus import bad_request

ACCESS_REVIEW = "SelfSubjectAccessReview"
RULES_REVIEW = "SelfSubjectRulesReview"
SELF_REVIEW = "SelfSubjectReview"
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
# Served, but not in discovery (gateway/kube/events.py): `kubectl describe pod` lists them.
_UNDISCOVERED = {"events": ("list",)}


def served_verbs() -> dict[str, tuple[str, ...]]:
    """Each resource of the core group by name, with the verbs this server answers on it."""
    discovered = {r["name"]: tuple(r["verbs"]) for r in kubeobjects.API_RESOURCE_LIST["resources"]}
    return {**discovered, **_UNDISCOVERED}


def _words(verbs: tuple[str, ...]) -> str:
    return verbs[0] if len(verbs) == 1 else f"{', '.join(verbs[:-1])} and {verbs[-1]}"


def _served_words() -> str:
    """'get, list and watch on pods; get and list on namespaces and nodes; ...', in table order."""
    by_verbs: dict[tuple[str, ...], list[str]] = {}
    for resource, verbs in served_verbs().items():
        by_verbs.setdefault(verbs, []).append(resource)
    return "; ".join(f"{_words(verbs)} on {_words(tuple(names))}" for verbs, names in by_verbs.items())


ALLOWED = f"pods-api serves this node's pods read-only: {_served_words()}"
DENIED = f"pods-api serves only {_served_words()}; and GET on its discovery and probes"
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


def decide(spec: dict[str, Any]) -> tuple[bool, str]:
    """Whether this server answers what the spec asks (a verb discovery lists on a resource, or
    a GET of a path it serves), and the reason the review gives."""
    resource = spec.get("resourceAttributes")
    if isinstance(resource, dict):
        subresource = resource.get("subresource")
        if subresource and resource.get("resource") == "pods":  # pods/log, pods/exec: as refused
            return False, kubeerrors.subresource_refusal(str(subresource), str(resource.get("name", "")))
        if subresource:  # nodes/proxy, ...: none is served
            return False, DENIED
        verbs = served_verbs().get(str(resource.get("resource", ""))) or ()
        yes = resource.get("group", "") == "" and resource.get("verb") in verbs
        return yes, ALLOWED if yes else DENIED
    path = spec.get("nonResourceAttributes")
    if isinstance(path, dict):
        yes = path.get("verb") == "get" and _readable(str(path.get("path", "")))
        return yes, ALLOWED if yes else DENIED
    return False, DENIED


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
    yes, reason = decide(spec)
    status = (
        {"allowed": True, "reason": reason} if yes else {"allowed": False, "denied": True, "reason": reason}
    )
    return _answer(body, ACCESS_REVIEW, "authorization.k8s.io/v1", status)


async def rules_review(request: Request) -> Response:
    body = await _body(request, RULES_REVIEW)
    status = {
        "resourceRules": [
            {"verbs": list(verbs), "apiGroups": [""], "resources": [resource]}
            for resource, verbs in served_verbs().items()
        ],
        "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": list(READABLE_PATHS)}],
        "incomplete": False,
    }
    return _answer(body, RULES_REVIEW, "authorization.k8s.io/v1", status)


async def self_review(request: Request) -> Response:
    body = await _body(request, SELF_REVIEW)
    return _answer(body, SELF_REVIEW, "authentication.k8s.io/v1", {"userInfo": ANONYMOUS})
