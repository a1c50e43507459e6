"""A pod's protobuf message read as its Kubernetes JSON, one key at a time: what a reader of a few
fields (the printer's table) needs, without rendering the whole pod to dicts first.

`pod_view(message).get("status")` answers what `pod_from_message(message).get("status")` would
for every key the reader asks, under the printer's reading (core/api/printer.py): a message is
absent where Go's JSON omits it (and a view where it prints one), a list or map is absent when
empty, a scalar is its value or Go's zero value, and a Time is an aware datetime at second
precision (None for Go's zero time). Names, inline structs and special types come from the
schema (core/api/schema.py); nothing is decoded until asked for.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from google.protobuf.message import Message

from pods_api.core.api.marshal import is_go_zero_time
from pods_api.core.api.schema import Field, MessageSchema, Special, pod_schema

__all__ = ["MessageView", "pod_view"]


# How a key is read, by what its field is in the schema.
_SCALAR, _STRUCT, _SPECIAL, _LIST, _SCALARS, _MAP, _SCALAR_MAP, _INLINE = range(8)

# A key's plan: (how, the protobuf field's name, the plans of its message's keys (its items',
# for a list or a map), its special type); for _INLINE, (_INLINE, the embedded structs' names
# to cross (Volume's volumeSource), the field's own plan, None). Tuples: `get` runs for every
# key the printer reads of every pod, and unpacking one is the cheapest read there is.
Plan = tuple[int, Any, Any, Special | None]


def _plans(schema: MessageSchema) -> dict[str, Plan]:
    """Each JSON key of the message's, planned once per message type (the schema's tree is
    shared, so this is once per type for the process)."""
    plans = _BY_TYPE.get(schema.full_name)
    if plans is None:
        plans = _BY_TYPE[schema.full_name] = {}  # before its fields: recursive types terminate
        for key, chain in schema.by_json.items():
            plan = _plan(chain[-1])
            if len(chain) > 1:
                plan = (_INLINE, tuple(f.name for f in chain[:-1]), plan, None)
            plans[key] = plan
    return plans


def _plan(f: Field) -> Plan:
    sub = _plans(f.message) if f.message is not None and f.special is None else None
    if f.is_map:
        how = _SCALAR_MAP if f.message is None else _MAP
    elif f.repeated:
        how = _SCALARS if f.kind != "message" else _LIST
    elif f.kind != "message":
        how = _SCALAR
    else:
        how = _STRUCT if f.special is None else _SPECIAL
    return (how, f.name, sub, f.special)


_BY_TYPE: dict[str, dict[str, Plan]] = {}


class MessageView:
    """One message (or the Pod) seen through its JSON names; read-only, like the message."""

    __slots__ = ("_message", "_plans")

    def __init__(self, message: Message, plans: dict[str, Plan]) -> None:
        self._message = message
        self._plans = plans

    def get(self, key: str, default: Any = None, /) -> Any:
        """The JSON value under key, as the printer reads it; `default` where JSON has none."""
        plan = self._plans.get(key)
        if plan is None:
            return default
        how, name, sub, _ = plan
        message = self._message
        # The printer's reads, most frequent first: every branch costs each read after it.
        if how == _SCALAR:
            return getattr(message, name)
        if how == _STRUCT:
            return MessageView(getattr(message, name), sub) if message.HasField(name) else default
        return _read(message, plan, default)

    def __getitem__(self, key: str, /) -> Any:
        value = self.get(key, _ABSENT)
        if value is _ABSENT:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key, _ABSENT) is not _ABSENT


_ABSENT: Any = object()


def _read(message: Any, plan: Plan, default: Any) -> Any:
    how, name, sub, special = plan
    if how == _SCALAR:
        return getattr(message, name)
    if how == _STRUCT:
        return MessageView(getattr(message, name), sub) if message.HasField(name) else default
    if how == _SPECIAL:
        return _special(special, getattr(message, name), default) if message.HasField(name) else default
    if how == _INLINE:  # an embedded struct's fields are the outer object's keys
        for embedded in name:
            message = getattr(message, embedded)
        return _read(message, sub, default)
    value = getattr(message, name)
    if not value:  # an empty list or map: Go's JSON omits it or prints null
        return default
    if how == _SCALARS:
        return list(value)
    if how == _SCALAR_MAP:
        return dict(value)
    if special is not None:
        items = value.values() if how == _MAP else value
        specials = [_special(special, item, None) for item in items]
        return dict(zip(value, specials, strict=True)) if how == _MAP else specials
    if how == _MAP:
        return {k: MessageView(v, sub) for k, v in value.items()}
    return [MessageView(item, sub) for item in value]


def pod_view(message: Message) -> MessageView:
    """A v1.Pod message as its Kubernetes JSON (see the module's docstring)."""
    return MessageView(message, _plans(pod_schema()))


def _special(special: Special | None, value: Any, default: Any) -> Any:
    if special is Special.TIME:
        if is_go_zero_time(value):
            return default  # Go's zero time: JSON null
        return datetime.fromtimestamp(value.seconds, UTC)  # metav1.Time's JSON has no fraction
    if special is Special.INT_OR_STRING:
        return value.strVal if value.type == 1 else value.intVal
    if special is Special.QUANTITY:
        from pods_api.core.api.quantity import QuantityError, canonical_quantity

        try:
            return canonical_quantity(value.string) if value.string else "0"
        except QuantityError:
            return value.string  # as the codec prints it: what the sender wrote
    if not value.Raw:  # FieldsV1: its bytes are a JSON object
        return default
    import orjson

    return orjson.loads(value.Raw)
