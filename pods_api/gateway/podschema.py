"""OpenAPI schemas for Pod and PodList, walked from the proto schema (core.schema), so the
document describes exactly the JSON the codec prints: JSON names, inline structs flattened into
their parent, Kubernetes' special types as they appear in JSON. Named as Kubernetes' own OpenAPI
names them (io.k8s.api.core.v1.Pod)."""

from __future__ import annotations

from typing import Any

from pods_api.core.api.schema import Field, MessageSchema, Special, pod_schema

Schema = dict[str, Any]

POD = "io.k8s.api.core.v1.Pod"
POD_LIST = "io.k8s.api.core.v1.PodList"

_SCALARS: dict[str, Schema] = {
    "string": {"type": "string"},
    "bool": {"type": "boolean"},
    "int32": {"type": "integer", "format": "int32"},
    "int64": {"type": "integer", "format": "int64"},
    "bytes": {"type": "string", "format": "byte"},
}

# How the special types look in JSON (core/api/codec.py prints them).
_SPECIALS: dict[Special, Schema] = {
    Special.QUANTITY: {
        "type": "string",
        "description": 'A resource quantity in canonical form ("500m", "1Gi", "2").',
    },
    Special.TIME: {"type": "string", "format": "date-time", "description": "RFC 3339, UTC, seconds."},
    Special.INT_OR_STRING: {
        "oneOf": [{"type": "integer", "format": "int32"}, {"type": "string"}],
        "description": "An integer or a string (a port number or name, a percentage).",
    },
    Special.FIELDS_V1: {"type": "object", "description": "Server-side apply field set, as JSON."},
}


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def openapi_name(full_name: str) -> str:
    """k8s.io.api.core.v1.Pod -> io.k8s.api.core.v1.Pod: Kubernetes' reversed-domain names."""
    head, _, rest = full_name.partition(".io.")
    return f"io.{head}.{rest}" if rest else full_name


def components() -> dict[str, Schema]:
    """Every schema Pod reaches, Pod and PodList included."""
    out: dict[str, Schema] = {}
    _add_message(pod_schema(), out)
    pod = out[openapi_name(pod_schema().full_name)]
    # TypeMeta: inline in Go's Pod, not in its protobuf; the gateway always prints it.
    pod["properties"] = {
        "kind": {"type": "string", "enum": ["Pod"]},
        "apiVersion": {"type": "string", "enum": ["v1"]},
        **pod["properties"],
    }
    pod["description"] = "A pod, as `kubectl get pod -o json` prints it."
    out[POD_LIST] = _pod_list()
    return out


def _add_message(ms: MessageSchema, out: dict[str, Schema]) -> None:
    name = openapi_name(ms.full_name)
    if name in out:
        return
    if ms.special is not None:
        out[name] = dict(_SPECIALS[ms.special])
        return
    out[name] = {}  # registered first: recursive types terminate
    properties: dict[str, Schema] = {}
    _add_fields(ms, properties, out)
    out[name] = {"type": "object", "properties": properties}


def _add_fields(ms: MessageSchema, properties: dict[str, Schema], out: dict[str, Schema]) -> None:
    for f in ms.fields:
        if f.inline:
            assert f.message is not None
            _add_fields(f.message, properties, out)  # JSON flattens an embedded struct
        else:
            properties[f.json] = _field(f, out)


def _field(f: Field, out: dict[str, Schema]) -> Schema:
    if f.is_map:
        return {"type": "object", "additionalProperties": _value(f, f.map_value or "string", out)}
    item = _value(f, f.kind, out)
    return {"type": "array", "items": item} if f.repeated else item


def _value(f: Field, kind: str, out: dict[str, Schema]) -> Schema:
    if kind != "message":
        return dict(_SCALARS[kind])
    assert f.message is not None
    _add_message(f.message, out)
    return ref(openapi_name(f.message.full_name))


def _pod_list() -> Schema:
    return {
        "type": "object",
        "description": "The node's pods in UID order; `metadata.resourceVersion` is the cache revision.",
        "required": ["kind", "apiVersion", "metadata", "items"],
        "properties": {
            "kind": {"type": "string", "enum": ["PodList"]},
            "apiVersion": {"type": "string", "enum": ["v1"]},
            "metadata": {
                "type": "object",
                "required": ["resourceVersion"],
                "properties": {"resourceVersion": {"type": "string"}},
            },
            "items": {"type": "array", "items": ref(POD)},
        },
    }
