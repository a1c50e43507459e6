"""What the Kubernetes routes answer in the OpenAPI document, a meta/v1 Status for every error
(their parameters are declared with their readers, in gateway/kube/listoptions.py)."""

from __future__ import annotations

from typing import Any

STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A Kubernetes meta/v1 Status: the error body of every Kubernetes path.",
    "required": ["kind", "apiVersion", "status", "message", "reason", "code"],
    "properties": {
        "kind": {"type": "string", "enum": ["Status"]},
        "apiVersion": {"type": "string", "enum": ["v1"]},
        "metadata": {"type": "object"},
        "status": {"type": "string", "enum": ["Failure"]},
        "message": {"type": "string"},
        "reason": {"type": "string"},
        "details": {"type": "object"},
        "code": {"type": "integer"},
    },
}
_STATUS_WHEN = {
    400: "BadRequest: a bad selector or parameter",
    404: "NotFound",
    406: "NotAcceptable: only protobuf was acceptable",
    410: "Expired: the resourceVersion or continue token is older than what is kept",
    422: "Invalid: ListOptions the API server's validation refuses, each field in details.causes",
    429: "TooManyRequests (Retry-After)",
    503: "ServiceUnavailable: the pod sources have not synced yet (Retry-After)",
    504: "Timeout: a resourceVersion newer than the cache's",
}


def _responses(ok: str, schema: str | None, *errors: int) -> dict[int | str, dict[str, Any]]:
    body = {"$ref": f"#/components/schemas/{schema}"} if schema else {"type": "object"}
    docs: dict[int | str, dict[str, Any]] = {
        200: {"description": ok, "content": {"application/json": {"schema": body}}}
    }
    for code in errors:
        docs[code] = {
            "description": _STATUS_WHEN[code],
            "content": {"application/json": {"schema": STATUS_SCHEMA}},
        }
    return docs


LIST_DOC = (
    "A PodList (pods-api's revisions as resourceVersions), a meta.k8s.io/v1 Table with "
    "`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, or with `watch=1` newline-delimited "
    '`{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":...}` events.'
)
LIST_RESPONSES = _responses(LIST_DOC, "io.k8s.api.core.v1.PodList", 400, 406, 410, 422, 429, 503, 504)
WATCH_DOC = (
    'Newline-delimited `{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":...}` events, as '
    "for `watch=1` on the list paths."
)
WATCH_RESPONSES = _responses(WATCH_DOC, None, 400, 406, 422, 429, 503, 504)
GET_RESPONSES = _responses("The Pod, or a Table.", "io.k8s.api.core.v1.Pod", 404, 406, 429, 503)
DISCOVERY_RESPONSES = _responses("The discovery document.", None)
