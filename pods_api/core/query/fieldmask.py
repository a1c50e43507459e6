"""Field masks: the `x-kubernetes-fieldmask` syntax, validated against the Pod schema and applied
to either form of a pod with the same result.

A mask is comma-separated dot paths of JSON names (`status.phase,status.podIPs`). A path
through a list applies to every element (`spec.containers.image`); a path that ends at a
message, list or map takes the whole subtree. `metadata.name`, `metadata.namespace` and
`metadata.uid` are always kept, so a masked pod (a DELETED event above all) can be told apart.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from google.protobuf.message import Message

from pods_api.core.api.marshal import go_marshal
from pods_api.core.api.pb import k8s_core_v1_pb2
from pods_api.core.api.schema import Field, MessageSchema, pod_schema
from pods_api.core.api.statuserrors import ECHO_LIMIT, InvalidArgumentError, quote

# A mask travels in one gRPC metadata value (grpc's default limit for all metadata is 8 KiB);
# selecting Pod fields never needs more than a few hundred characters.
MAX_MASK_LENGTH = 4096
# The Pod has about 640 fields: a mask with more paths than this is asking for most of the pod
# and costs more to compile and apply than sending it whole.
MAX_PATHS = 100
# Kept in every masked pod: the identity a client needs to match events to what it holds.
IDENTITY_PATHS = ("metadata.name", "metadata.namespace", "metadata.uid")
# Distinct masks compiled and kept: clients use a handful; the bound keeps a client that sends
# a new mask per request from growing memory.
_COMPILED_MASKS = 256


class FieldMaskError(InvalidArgumentError, ValueError):
    """An invalid mask: names the path and, for unknown names, the nearest valid ones."""


@dataclass(eq=False, slots=True)
class _Node:
    """Selected children of one message; a child of None takes that field whole."""

    schema: MessageSchema
    children: dict[str, tuple[Field, _Node | None]] = field(default_factory=dict)


@dataclass(frozen=True, eq=False, slots=True)
class FieldMask:
    key: str  # the normalised paths, comma-joined: equal masks share one key (and one cache)
    paths: tuple[str, ...]
    _json: _Node
    _pb: dict[str, Any]  # protobuf field name -> sub-tree, or None for "whole"

    def apply_json(self, pod: dict[str, Any]) -> dict[str, Any]:
        """The pod's JSON with only the selected paths kept, in Kubernetes key order."""
        return _apply_json(pod, self._json)

    def apply_message(self, pod: k8s_core_v1_pb2.Pod) -> k8s_core_v1_pb2.Pod:
        """A copy of the pod message carrying only the selected fields."""
        out = k8s_core_v1_pb2.Pod()
        out.CopyFrom(pod)
        _prune(out, self._pb)
        return out

    def apply_bytes(self, data: bytes) -> bytes:
        """A pod's bytes masked: Go's bytes (`go_marshal`) of the pod with only the selected
        fields, as Go would write that smaller pod (its unselected non-pointer fields at zero)."""
        pod = k8s_core_v1_pb2.Pod()
        pod.ParseFromString(data)
        _prune(pod, self._pb)
        return go_marshal(pod)


def parse_mask(text: str | None) -> FieldMask | None:
    """The mask for a header or query value; None when it selects everything (absent, or empty
    or blank as a whole). An empty path within a mask (`a,,b`, `a,`, `,,,`) is an error, like an
    empty name within a path (`status..phase`): it is a mistake, not a request for everything."""
    if text is None or not text.strip():
        return None
    if len(text) > MAX_MASK_LENGTH:
        raise FieldMaskError(f"field mask is {len(text)} characters long; the limit is {MAX_MASK_LENGTH}")
    elements = [p.strip() for p in text.split(",")]
    for i, element in enumerate(elements):
        if not element:
            raise FieldMaskError(
                f"invalid field mask {quote(text)}: path {i + 1} of {len(elements)} is empty"
            )
    paths = sorted(set(elements))
    if len(paths) > MAX_PATHS:
        raise FieldMaskError(f"field mask has {len(paths)} paths; the limit is {MAX_PATHS}")
    return _compile(",".join(paths))


@lru_cache(maxsize=_COMPILED_MASKS)
def _compile(key: str) -> FieldMask:
    root = _Node(pod_schema())
    paths = key.split(",")
    for path in (*paths, *IDENTITY_PATHS):
        _add_path(root, path)
    return FieldMask(key, tuple(paths), _sort(root), _pb_tree(root))


def _add_path(root: _Node, path: str) -> None:
    names = path.split(".")
    node = root
    for depth, name in enumerate(names):
        here = ".".join(names[: depth + 1])
        if not name:
            raise FieldMaskError(f"invalid field mask path {_echo(path)}: empty name")
        chain = node.schema.by_json.get(name)
        if chain is None:
            raise FieldMaskError(_unknown(path, here, name, node.schema))
        f = chain[-1]
        last = depth == len(names) - 1
        descendable = f.kind == "message" and f.special is None and not f.is_map
        if not last and not descendable:
            what = "a map" if f.is_map else "a value"
            raise FieldMaskError(
                f"invalid field mask path {_echo(path)}: {_echo(here)} is {what} and has no fields to select"
            )
        if name in node.children and node.children[name][1] is None:
            return  # already selected whole
        if last or not descendable:
            node.children[name] = (f, None)
            return
        existing = node.children.get(name)
        if existing is None:
            assert f.message is not None
            existing = (f, _Node(f.message))
            node.children[name] = existing
        assert existing[1] is not None
        node = existing[1]


def _unknown(path: str, here: str, name: str, ms: MessageSchema) -> str:
    close = difflib.get_close_matches(name, list(ms.by_json), n=3)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    kind = ms.full_name.rsplit(".", 1)[-1]
    return f"unknown field mask path {_echo(path)}: {kind} has no field {_echo(name)} at {_echo(here)}{hint}"


def _echo(text: str) -> str:
    """A piece of the mask in an error, double-quoted as Kubernetes quotes paths; a long one cut
    as `quote` cuts every echoed input, so the message fits a client's metadata limit (a
    4,000-character mask echoed three times was a 12 KB grpc-message, which a default client
    refuses as RESOURCE_EXHAUSTED)."""
    return f'"{text}"' if len(text) <= ECHO_LIMIT else quote(text)


def _sort(node: _Node) -> _Node:
    """Order children as Kubernetes JSON orders keys, so masked JSON keeps kubectl's order."""
    order = {name: i for i, name in enumerate(node.schema.by_json)}
    items = sorted(node.children.items(), key=lambda kv: order[kv[0]])
    node.children = {n: (f, None if sub is None else _sort(sub)) for n, (f, sub) in items}
    return node


def _pb_tree(node: _Node) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for name, (_, sub) in node.children.items():
        chain = node.schema.by_json[name]
        at = tree
        for step in chain[:-1]:  # inline structs: JSON flattens them, protobuf does not
            at = at.setdefault(step.name, {})
        at[chain[-1].name] = None if sub is None else _pb_tree(sub)
    return tree


def _apply_json(obj: dict[str, Any], node: _Node) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (f, sub) in node.children.items():
        if name not in obj:
            continue
        value = obj[name]
        if sub is None:
            out[name] = value
        elif isinstance(value, list):
            out[name] = [_apply_json(item, sub) for item in value]
        else:
            masked = _apply_json(value, sub)
            # Go prints a pointer struct that is set and a non-omitempty struct even when empty.
            if masked or f.pointer or not f.omitempty:
                out[name] = masked
    return out


def _prune(msg: Message, tree: dict[str, Any]) -> None:
    for fd, value in msg.ListFields():
        if fd.name not in tree:
            msg.ClearField(fd.name)
            continue
        sub = tree[fd.name]
        if sub is None:
            continue
        if fd.is_repeated:
            for item in value:
                _prune(item, sub)
        else:
            _prune(value, sub)
