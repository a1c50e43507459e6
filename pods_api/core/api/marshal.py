"""A pod's bytes exactly as Go's `v1.Pod.Marshal()` writes them (k8s.io/api's gogo-generated code).

Go writes every field that is not a pointer, a slice or a map, zero values included: "" for a
string, false, 0, and a struct that is not a pointer as a message even when it is empty, all
the way down; a pointer when it is set (a pointer to a struct: its fields by the same rule); each
element of a list as given; a map's entries sorted by key (Go's sort.Strings: byte order), each
with its key and value; fields in number order. Three types write themselves
(k8s.io/apimachinery): a `Time` is an empty message at Go's zero time (0001-01-01) and otherwise
its seconds and `nanos: 0` (Go drops the nanoseconds both ways); a `Quantity` is its canonical
string, "0" at zero; an `IntOrString` is its type, int and string, all three. A `[]byte`
(FieldsV1's Raw) is written when set, like a pointer.

    go_marshal(pod) -> bytes    Go's bytes of the pod (the message is not changed)
    is_go_zero_time(time) -> bool   whether Go reads a Time message as its zero time

upb writes the fields a message has set in number order, which is Go's; but its deterministic
map order is not Go's (of two keys where one begins the other, it writes the longer first: "ab"
before "a"). So the pod is written through a twin of the schema in which every map is what it
is on the wire, a list of entry messages, kept in the order given: its entries are sorted here,
and the twin's bytes are the pod's bytes. Decoding needs none of this: Go's form and the form
without zero fields read the same (core/api/codec.py).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from pods_api.core.api.pb import k8s_core_v1_pb2, k8s_intstr_pb2, k8s_meta_v1_pb2, k8s_resource_pb2
from pods_api.core.api.quantity import QuantityError, canonical_quantity
from pods_api.core.api.schema import MessageSchema, Special, pod_schema, zero_of

__all__ = ["GO_ZERO_TIME_SECONDS", "go_marshal", "is_go_zero_time"]

# time.Time{}.Unix(): the seconds of Go's zero time, 0001-01-01T00:00:00Z. Go's Unmarshal reads
# these seconds as the zero time, which its Marshal writes as an empty message.
GO_ZERO_TIME_SECONDS = -62135596800
# What Go's zero Quantity prints (Quantity.String() of Quantity{}).
ZERO_QUANTITY = "0"
# The schema's files, dependencies first: the twin is built from their descriptors.
_FILES = (k8s_resource_pb2, k8s_intstr_pb2, k8s_meta_v1_pb2, k8s_core_v1_pb2)
# Imported by the schema's files for the Go facts (field options), which change no byte.
_GOFACTS = "gofacts.proto"


@dataclass(frozen=True, slots=True)
class _Plan:
    """What writing one message type as Go does takes, from its schema: computed once per type."""

    scalars: tuple[tuple[str, Any], ...]  # non-pointer singular scalars: (name, Go's zero)
    structs: tuple[tuple[str, MessageSchema], ...]  # non-pointer singular messages
    pointers: tuple[tuple[str, MessageSchema], ...]  # pointer messages: filled when set
    lists: tuple[tuple[str, MessageSchema], ...]  # repeated messages: each element filled
    maps: tuple[tuple[str, Any, MessageSchema | None], ...]  # (name, value's zero, its message)


def go_marshal(pod: k8s_core_v1_pb2.Pod) -> bytes:
    """The bytes Go's `v1.Pod.Marshal()` writes for this pod; `pod` itself is not changed."""
    twin = _twin_class(pod_schema().full_name).FromString(pod.SerializeToString(deterministic=True))
    _fill(twin, pod_schema())
    return twin.SerializeToString()


def is_go_zero_time(time: Any) -> bool:
    """Whether Go's `Time.Unmarshal` reads this Time message as the zero time (JSON null): an
    empty message, or the zero time's seconds. Any other, even one with only nanos (which Go
    ignores), is a time: 1970-01-01T00:00:00Z is not the zero time."""
    if not time.HasField("seconds"):
        return not time.HasField("nanos")
    return bool(time.seconds == GO_ZERO_TIME_SECONDS)


def _fill(msg: Any, ms: MessageSchema) -> None:
    """Set, in the twin message `msg`, every field Go writes at its zero value and `msg` leaves
    unset; sort its maps' entries; write the special types as Go does."""
    if ms.special is not None:
        _fill_special(msg, ms.special)
        return
    plan = _plan(ms)
    has = msg.HasField
    for name, zero in plan.scalars:
        if not has(name):
            setattr(msg, name, zero)
    for name, sub in plan.structs:
        if has(name):
            _fill(getattr(msg, name), sub)
        else:
            target = getattr(msg, name)
            target.SetInParent()  # set even when its zero is empty: Go writes it (length 0)
            target.MergeFrom(_zero(sub))
    for name, sub in plan.pointers:
        if has(name):
            _fill(getattr(msg, name), sub)
    for name, sub in plan.lists:
        for item in getattr(msg, name):
            _fill(item, sub)
    for name, zero, value in plan.maps:
        entries = getattr(msg, name)
        for entry in entries:
            _fill_entry(entry, zero, value)
        keys = [entry.key for entry in entries]
        if keys != sorted(keys):  # str order is code point order: UTF-8's byte order, Go's
            entries.sort(key=lambda entry: entry.key)


def _fill_entry(entry: Any, zero: Any, value: MessageSchema | None) -> None:
    """A map entry as Go writes it: its key and its value, zero or not."""
    if not entry.HasField("key"):
        entry.key = ""
    if value is None:
        if not entry.HasField("value"):
            entry.value = zero
    elif entry.HasField("value"):
        _fill(entry.value, value)
    else:
        entry.value.SetInParent()
        entry.value.MergeFrom(_zero(value))


def _fill_special(msg: Any, special: Special) -> None:
    if special is Special.TIME:
        if is_go_zero_time(msg):
            msg.Clear()  # Go's zero time: an empty message
            return
        msg.seconds = msg.seconds  # set even at 0 (1970-01-01 is not Go's zero time)
        msg.nanos = 0
    elif special is Special.QUANTITY:
        # Go writes the canonical string of the quantity it parsed; "" is no quantity Go reads,
        # and an absent string is its zero. A string Go could not parse either is kept.
        with contextlib.suppress(QuantityError):
            msg.string = canonical_quantity(msg.string) if msg.string else ZERO_QUANTITY
    elif special is Special.INT_OR_STRING:
        for name, zero in (("type", 0), ("intVal", 0), ("strVal", "")):
            if not msg.HasField(name):
                setattr(msg, name, zero)
    # FieldsV1: its one field is a []byte, written when set, as it is.


@cache
def _plan(ms: MessageSchema) -> _Plan:
    scalars: list[tuple[str, Any]] = []
    structs: list[tuple[str, MessageSchema]] = []
    pointers: list[tuple[str, MessageSchema]] = []
    lists: list[tuple[str, MessageSchema]] = []
    maps: list[tuple[str, Any, MessageSchema | None]] = []
    for f in ms.fields:
        if f.is_map:
            kind = f.map_value or "string"
            maps.append((f.name, None if f.message is not None else zero_of(kind), f.message))
        elif f.repeated:
            if f.message is not None:
                lists.append((f.name, f.message))
        elif f.message is not None:
            (pointers if f.pointer else structs).append((f.name, f.message))
        elif not f.pointer and f.kind != "bytes":  # a []byte is written when set, as a pointer
            scalars.append((f.name, zero_of(f.kind)))
    return _Plan(tuple(scalars), tuple(structs), tuple(pointers), tuple(lists), tuple(maps))


@cache
def _zero(ms: MessageSchema) -> Message:
    """The type's Go zero value as a twin message, filled: merged in where a struct is unset.
    Never handed out to be changed."""
    msg = _twin_class(ms.full_name)()
    _fill(msg, ms)
    return msg


def _twin_class(full_name: str) -> type[Message]:
    return _TWIN_CLASSES[full_name]


def _build_twin_pool() -> descriptor_pool.DescriptorPool:
    """The schema's messages, with each map's entry type an ordinary message: the same wire
    form, and a list that keeps its order. Without the Go facts' options, which it never reads."""
    pool = descriptor_pool.DescriptorPool()
    for module in _FILES:
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        kept = [name for name in proto.dependency if name != _GOFACTS]
        del proto.dependency[:]
        proto.dependency.extend(kept)
        _as_lists(proto.message_type)
        pool.Add(proto)
    return pool


def _as_lists(messages: Any) -> None:
    for message in messages:
        for fd in message.field:
            fd.ClearField("options")
        for nested in message.nested_type:
            nested.ClearField("options")  # map_entry is a map entry's only option
        _as_lists(message.nested_type)


def _classes(pool: descriptor_pool.DescriptorPool) -> dict[str, type[Message]]:
    """Every message class of the twin, by full name (map entries included)."""
    found: dict[str, type[Message]] = {}

    def add(desc: Any) -> None:
        found[desc.full_name] = message_factory.GetMessageClass(desc)
        for nested in desc.nested_types:
            add(nested)

    for module in _FILES:
        for desc in pool.FindFileByName(module.DESCRIPTOR.name).message_types_by_name.values():
            add(desc)
    return found


# Built once, on import (~5 ms): made on first use, two sources' threads encoding their first
# pods at once each made a pool, and a message of one pool cannot merge another's zero value.
_TWIN_CLASSES = _classes(_build_twin_pool())
