"""The v1.Pod schema as data: built once from the generated descriptors and the Go facts that
proto/gofacts.proto attaches to each field. The codec and field masks read it; nothing else
knows field numbers or JSON names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from typing import Any, cast

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from pods_api.core.api.pb import gofacts_pb2, k8s_core_v1_pb2

POD = "k8s.io.api.core.v1.Pod"


class Special(Enum):
    """Messages whose JSON is not the shape of their protobuf."""

    QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
    TIME = "k8s.io.apimachinery.pkg.apis.meta.v1.Time"
    INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
    FIELDS_V1 = "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1"


_SPECIAL = {s.value: s for s in Special}

_SCALARS = {
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_BYTES: "bytes",
}


@dataclass(eq=False, slots=True)
class Field:
    name: str  # protobuf name
    json: str  # Kubernetes JSON name; "" for an inline (embedded) struct
    kind: str  # "string", "bool", "int32", "int64", "bytes" or "message"
    repeated: bool
    omitempty: bool
    pointer: bool
    inline: bool
    message: MessageSchema | None = None  # the message type, or a map's message value type
    map_value: str | None = None  # a map's value kind ("string" or "message"); None if not a map
    special: Special | None = None  # the special type of `message`, if any

    def __repr__(self) -> str:  # the default would print the whole schema below this field
        return f"Field({self.name!r})"

    @property
    def is_map(self) -> bool:
        return self.map_value is not None

    @property
    def is_struct(self) -> bool:
        """A singular message field of ordinary (not special) type."""
        return self.kind == "message" and not self.repeated and self.special is None


@dataclass(eq=False, slots=True)
class MessageSchema:
    full_name: str
    cls: type[Message]
    fields: tuple[Field, ...] = ()  # Go struct order, which is Kubernetes JSON key order
    by_pb: dict[str, Field] = field(default_factory=dict)
    # JSON name -> the fields that reach it; more than one where inline structs are crossed
    # (Volume's "emptyDir" is volumeSource.emptyDir on the wire).
    by_json: dict[str, tuple[Field, ...]] = field(default_factory=dict)
    special: Special | None = None

    def __repr__(self) -> str:
        return f"MessageSchema({self.full_name!r})"


def _message_class(desc: Descriptor) -> type[Message]:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(desc)


def _field_of(fd: FieldDescriptor, build: dict[str, MessageSchema]) -> Field:
    opts: Any = fd.GetOptions()  # the stubs do not type custom options
    repeated = fd.is_repeated
    inline: bool = opts.Extensions[gofacts_pb2.inline]
    f = Field(
        name=fd.name,
        json="" if inline else fd.json_name,
        kind=_SCALARS.get(fd.type, "message"),
        repeated=repeated,
        omitempty=opts.Extensions[gofacts_pb2.omitempty],
        pointer=opts.Extensions[gofacts_pb2.pointer],
        inline=inline,
    )
    if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        value = fd.message_type.fields_by_name["value"]
        f.map_value = _SCALARS.get(value.type, "message")
        if value.message_type is not None:
            f.message = _schema_of(value.message_type, build)
            f.special = f.message.special
    elif fd.message_type is not None:
        f.message = _schema_of(fd.message_type, build)
        f.special = f.message.special
    return f


def _schema_of(desc: Descriptor, build: dict[str, MessageSchema]) -> MessageSchema:
    if desc.full_name in build:
        return build[desc.full_name]
    ms = MessageSchema(desc.full_name, _message_class(desc), special=_SPECIAL.get(desc.full_name))
    build[desc.full_name] = ms  # registered before its fields, so a recursive type terminates
    ms.fields = tuple(_field_of(fd, build) for fd in desc.fields)
    ms.by_pb = {f.name: f for f in ms.fields}
    return ms


def _index_json(ms: MessageSchema, seen: set[str]) -> None:
    if ms.full_name in seen:
        return
    seen.add(ms.full_name)
    for f in ms.fields:
        if f.message is not None:
            _index_json(f.message, seen)
        if f.inline:
            assert f.message is not None
            _index_json(f.message, seen)
            for name, chain in f.message.by_json.items():
                ms.by_json[name] = (f, *chain)
        elif f.json:
            ms.by_json[f.json] = (f,)


@cache
def pod_schema() -> MessageSchema:
    build: dict[str, MessageSchema] = {}
    ms = _schema_of(cast(Descriptor, k8s_core_v1_pb2.Pod.DESCRIPTOR), build)
    _index_json(ms, set())
    return ms


def zero_of(kind: str) -> Any:
    return {"string": "", "bool": False, "int32": 0, "int64": 0, "bytes": b""}[kind]
