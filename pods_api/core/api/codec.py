"""Pod JSON <-> protobuf, the way Kubernetes does it.

JSON here is Kubernetes JSON as `kubectl get -o json` prints it (Go's encoding/json over the
k8s.io/api structs); protobuf is the bytes of Go's `v1.Pod.Marshal()`. Go's JSON rules and the
special types' JSON live here and nowhere else; Go's protobuf writing rules (every non-pointer
field, zero values included) in core/api/marshal.py.

    pod_from_bytes(data) -> dict        kubelet bytes (Go's form, or without zero fields) to JSON
    pod_to_bytes(pod) -> bytes           Kubernetes JSON (or a manifest) to Go's bytes of the pod
"""

from __future__ import annotations

import base64
import calendar
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from google.protobuf.message import DecodeError, Message

from pods_api.core.api.marshal import go_marshal, is_go_zero_time
from pods_api.core.api.pb import k8s_core_v1_pb2
from pods_api.core.api.quantity import QuantityError, canonical_quantity
from pods_api.core.api.schema import Field, MessageSchema, Special, pod_schema, zero_of

__all__ = [
    "CodecError",
    "Decoded",
    "check_renders",
    "pod_from_bytes",
    "pod_from_message",
    "pod_to_bytes",
    "pod_to_message",
]

_INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
# Fields of the Pod's TypeMeta: inline in Go's Pod, absent from its protobuf message.
_TYPE_META = frozenset({"kind", "apiVersion"})


class CodecError(ValueError):
    """A value that cannot be a Pod: names the JSON path and what was expected."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}" if path else problem)
        self.path = path
        self.problem = problem


# ---------------------------------------------------------------------------------------------
# protobuf -> JSON


def pod_from_bytes(data: bytes) -> dict[str, Any]:
    """Decode the bytes of a `v1.Pod` (what the kubelet sends) into Kubernetes JSON."""
    msg = k8s_core_v1_pb2.Pod()
    try:
        msg.ParseFromString(data)
    except DecodeError as exc:
        raise CodecError("", f"not a v1.Pod in protobuf: {exc}") from None
    return pod_from_message(msg)


def pod_from_message(msg: Message, *, go_zeros: bool = False) -> dict[str, Any]:
    """The message as Kubernetes JSON. A struct or special type that is not a pointer and that
    `msg` leaves unset is printed, with `go_zeros`, as Go's Unmarshal leaves it: at its zero
    value (an httpGet's `"port": 0`, a resourceFieldRef's `"divisor": "0"`), which is the JSON of
    the pod's Go bytes (core/api/marshal.py) without writing them; without it, not at all, as the
    shared vectors print a pod without those fields."""
    out: dict[str, Any] = {}
    _render_into(msg, pod_schema(), out, go_zeros)
    return out


def check_renders(msg: k8s_core_v1_pb2.Pod) -> None:
    """Raises the CodecError pod_from_message would raise for `msg`, without rendering it: a
    parsed message renders to JSON unless a managedFields entry's fieldsV1 holds bytes that are
    not JSON (FieldsV1 is only there)."""
    for entry in msg.metadata.managedFields:
        if entry.fieldsV1.Raw:
            _fields_v1(entry.fieldsV1.Raw)


def _render_into(msg: Message, ms: MessageSchema, out: dict[str, Any], go_zeros: bool) -> bool:
    """Write msg's JSON fields into out; return whether msg is non-zero in Go's sense."""
    present = {fd.name: value for fd, value in msg.ListFields()}
    nonzero = False
    for f in ms.fields:
        value = present.get(f.name, _ABSENT)
        if f.inline:
            assert f.message is not None
            # Absent or not, the embedded struct's zero-value fields are printed.
            sub_msg = f.message.cls() if value is _ABSENT else value
            nonzero |= _render_into(sub_msg, f.message, out, go_zeros)
            continue
        if value is _ABSENT:
            if f.kind != "message":
                if not f.repeated and not f.pointer and not f.omitempty:
                    out[f.json] = zero_of(f.kind) if f.kind != "bytes" else ""
                continue
            if not go_zeros or f.pointer or f.repeated or f.is_map:
                continue
            assert f.message is not None
            value = f.message.cls()  # what Go's Unmarshal leaves an unset struct at: its zero
        rendered = _render_value(f, value, go_zeros)
        if rendered is _ABSENT:
            continue
        if f.is_struct:
            sub, sub_nonzero = rendered
            if f.pointer or sub_nonzero or not f.omitempty:
                out[f.json] = sub
                nonzero |= f.pointer or sub_nonzero
        elif f.pointer or f.repeated or f.is_map or f.special is not None:
            out[f.json] = rendered
            nonzero = True
        elif rendered or not f.omitempty:
            out[f.json] = rendered
            nonzero |= bool(rendered)
    return nonzero


class _Absent:
    pass


_ABSENT: Any = _Absent()


def _render_value(f: Field, value: Any, go_zeros: bool) -> Any:
    """JSON for a present field; _ABSENT where Go prints nothing. Structs give (dict, nonzero)."""
    if f.is_map:
        if not value:
            return _ABSENT
        if f.map_value == "message":
            assert f.message is not None
            return {k: _render_special_or_struct(f, value[k], go_zeros) for k in sorted(value)}
        return {k: value[k] for k in sorted(value)}
    if f.repeated:
        if not value:
            return _ABSENT
        if f.kind == "message":
            return [_render_special_or_struct(f, item, go_zeros) for item in value]
        if f.kind == "bytes":
            return [base64.b64encode(item).decode() for item in value]
        return list(value)
    if f.special is not None:
        return _render_special(f.special, value)
    if f.kind == "message":
        assert f.message is not None
        sub: dict[str, Any] = {}
        return sub, _render_into(value, f.message, sub, go_zeros)
    if f.kind == "bytes":
        return base64.b64encode(value).decode()
    return value


def _render_special_or_struct(f: Field, value: Message, go_zeros: bool) -> Any:
    if f.special is not None:
        rendered = _render_special(f.special, value)
        return None if rendered is _ABSENT else rendered
    assert f.message is not None
    sub: dict[str, Any] = {}
    _render_into(value, f.message, sub, go_zeros)
    return sub


def _render_special(special: Special, msg: Any) -> Any:
    if special is Special.QUANTITY:
        try:
            return canonical_quantity(msg.string) if msg.string else "0"
        except QuantityError:
            return msg.string  # what the sender wrote is more useful than an error here
    if special is Special.TIME:
        if is_go_zero_time(msg):
            return _ABSENT  # Go's zero time: an empty message, JSON null
        return format_time(msg.seconds)
    if special is Special.INT_OR_STRING:
        return msg.strVal if msg.type == 1 else msg.intVal
    # FieldsV1: its bytes are a JSON object, printed as itself.
    if not msg.Raw:
        return _ABSENT
    return _fields_v1(msg.Raw)


def _fields_v1(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise CodecError("", "a fieldsV1 value holds bytes that are not JSON") from None


def format_time(seconds: int) -> str:
    """RFC 3339 in UTC at second precision, as metav1.Time prints."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


# ---------------------------------------------------------------------------------------------
# JSON -> protobuf


@dataclass
class Decoded:
    """A pod read from people's JSON or YAML: the message, and what was dropped on the way."""

    message: k8s_core_v1_pb2.Pod
    warnings: list[str] = field(default_factory=list)


def pod_to_message(pod: Mapping[str, Any]) -> Decoded:
    """Read a Pod from Kubernetes JSON (or YAML loaded into Python values).

    Accepts what Kubernetes accepts (a number where a Quantity goes, 80 or "80" for an
    IntOrString, null for "unset"); unknown fields are dropped and reported in `warnings`;
    a value of the wrong type raises CodecError naming its path.
    """
    out = Decoded(k8s_core_v1_pb2.Pod())
    if not isinstance(pod, Mapping):
        raise CodecError("", f"expected a Pod object, got {_show(pod)}")
    ms = pod_schema()
    _fill(out.message, ms, {k: v for k, v in pod.items() if k not in _TYPE_META}, "", out.warnings)
    return out


def pod_to_bytes(pod: Mapping[str, Any], *, warnings: list[str] | None = None) -> bytes:
    """Encode a Pod in Kubernetes JSON into the bytes Go's `v1.Pod.Marshal()` writes for the same
    pod (core/api/marshal.py): every non-pointer field the JSON leaves out at its zero value, in
    field-number order, map keys sorted as Go sorts them. Dropped unknown fields are appended to
    `warnings` when it is given.
    """
    decoded = pod_to_message(pod)
    if warnings is not None:
        warnings.extend(decoded.warnings)
    return go_marshal(decoded.message)


def _fill(msg: Message, ms: MessageSchema, obj: Any, path: str, warnings: list[str]) -> None:
    if not isinstance(obj, Mapping):
        raise CodecError(path, f"expected object, got {_show(obj)}")
    for key, value in obj.items():
        here = f"{path}.{key}" if path else str(key)
        chain = ms.by_json.get(key) if isinstance(key, str) else None
        if chain is None:
            warnings.append(f"{here}: unknown field, dropped")
            continue
        if value is None:
            continue  # JSON null leaves a field unset, as in Go
        target = msg
        for step in chain[:-1]:
            target = getattr(target, step.name)
            target.SetInParent()
        _set(target, chain[-1], value, here, warnings)


def _set(msg: Message, f: Field, value: Any, path: str, warnings: list[str]) -> None:
    if f.is_map:
        if not isinstance(value, Mapping):
            raise CodecError(path, f"expected object, got {_show(value)}")
        target = getattr(msg, f.name)
        for k, v in value.items():
            here = f"{path}[{_show(k)}]"
            if not isinstance(k, str):
                raise CodecError(here, f"expected a string key, got {_show(k)}")
            if v is None:
                continue
            if f.map_value == "message":
                _set_message(target[k], f, v, here, warnings)
            else:
                target[k] = _scalar(f.map_value or "string", v, here)
        return
    if f.repeated:
        if not isinstance(value, list):
            raise CodecError(path, f"expected list, got {_show(value)}")
        target = getattr(msg, f.name)
        for i, item in enumerate(value):
            here = f"{path}[{i}]"
            if f.kind == "message":
                _set_message(target.add(), f, {} if item is None else item, here, warnings)
            else:
                target.append(_scalar(f.kind, item, here))
        return
    if f.kind == "message":
        sub = getattr(msg, f.name)
        sub.SetInParent()
        _set_message(sub, f, value, path, warnings)
        return
    setattr(msg, f.name, _scalar(f.kind, value, path))


def _set_message(sub: Any, f: Field, value: Any, path: str, warnings: list[str]) -> None:
    special = f.special
    if special is None:
        assert f.message is not None
        _fill(sub, f.message, value, path, warnings)
    elif special is Special.QUANTITY:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise CodecError(path, f"expected a quantity, got {_show(value)}")
        try:
            sub.string = canonical_quantity(value)
        except QuantityError as exc:
            raise CodecError(path, str(exc)) from None
    elif special is Special.TIME:
        if not isinstance(value, str):
            raise CodecError(path, f"expected an RFC 3339 time, got {_show(value)}")
        seconds, nanos = parse_time(value, path)
        sub.seconds = seconds
        if nanos:
            sub.nanos = nanos
    elif special is Special.INT_OR_STRING:
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise CodecError(path, f"expected an integer or a string, got {_show(value)}")
        if isinstance(value, str):
            sub.type, sub.strVal = 1, value
        else:
            sub.type, sub.intVal = 0, _scalar("int32", value, path)
    else:
        if not isinstance(value, Mapping):
            raise CodecError(path, f"expected object, got {_show(value)}")
        try:
            sub.Raw = orjson.dumps(value)
        except orjson.JSONEncodeError as exc:  # YAML allows non-string keys; orjson caps depth
            raise CodecError(path, f"not a JSON object: {exc}") from None


def _scalar(kind: str, value: Any, path: str) -> Any:
    if kind == "string":
        if not isinstance(value, str):
            raise CodecError(path, f"expected string, got {_show(value)}")
        if not value.isascii():
            try:
                value.encode()
            except UnicodeEncodeError:  # protobuf strings are UTF-8; a lone surrogate is not
                raise CodecError(path, "not valid Unicode (a lone surrogate?)") from None
        return value
    if kind == "bool":
        if isinstance(value, bool):
            return value
        raise CodecError(path, f"expected boolean, got {_show(value)}")
    if kind == "bytes":
        if isinstance(value, str):
            try:
                return base64.b64decode(value, validate=True)
            except ValueError:
                pass
        raise CodecError(path, f"expected base64 string, got {_show(value)}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise CodecError(path, f"expected integer, got {_show(value)}")
    low, high = _INT_RANGE[kind]
    if not low <= value <= high:
        raise CodecError(path, f"integer {_show(value)} out of range for {kind}")
    return value


_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)


def parse_time(text: str, path: str = "") -> tuple[int, int]:
    """RFC 3339 (what metav1.Time accepts) to (seconds, nanos) since the epoch."""
    m = _RFC3339.fullmatch(text)
    if m is None:
        raise CodecError(path, f"expected an RFC 3339 time, got {_show(text)}")
    year, month, day, hour, minute, second = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    try:
        seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
        time.struct_time((year, month, day, hour, minute, second, 0, 0, 0))
        if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]):
            raise ValueError
        if hour > 23 or minute > 59 or second > 60:
            raise ValueError
    except ValueError:
        raise CodecError(path, f"expected an RFC 3339 time, got {_show(text)}") from None
    if m.group(9):
        offset = int(m.group(10)) * 3600 + int(m.group(11)) * 60
        seconds -= offset if m.group(9) == "+" else -offset
    nanos = int((m.group(7) or "0")[:9].ljust(9, "0"))
    return seconds, nanos


def _show(value: Any) -> str:
    """A value as an error message quotes it: JSON, cut short. Never raises, whatever the value:
    this runs on hostile input (a 1000-deep list, a 10,000-digit integer), and an error path
    that raises turns a clear per-file error into a failed source."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:  # nested deeper than orjson writes, a non-string key, bytes, a huge int
        text = _brief(value, _SHOW_DEPTH)
    return text if len(text) <= _SHOW_CHARS else text[: _SHOW_CHARS - 3] + "..."


# How much of a value an error message quotes: enough to recognise it, bounded for any input.
_SHOW_CHARS = 60
_SHOW_DEPTH = 3
_SHOW_ITEMS = 4


def _brief(value: Any, depth: int) -> str:
    """A short JSON-like rendering that looks at most `depth` levels and a few items deep."""
    if isinstance(value, dict | list):
        if depth == 0:
            return "{...}" if isinstance(value, dict) else "[...]"
        if isinstance(value, dict):
            shown = [f"{_brief(k, 0)}: {_brief(v, depth - 1)}" for k, v in list(value.items())[:_SHOW_ITEMS]]
            more = ", ..." if len(value) > _SHOW_ITEMS else ""
            return "{" + ", ".join(shown) + more + "}"
        shown = [_brief(v, depth - 1) for v in value[:_SHOW_ITEMS]]
        return "[" + ", ".join(shown) + (", ..." if len(value) > _SHOW_ITEMS else "") + "]"
    if isinstance(value, bool) or value is None:
        return orjson.dumps(value).decode()
    if isinstance(value, int):
        # str() of an int over 4300 digits raises ValueError; a size says enough.
        return str(value) if value.bit_length() <= 64 else f"<an integer of {value.bit_length()} bits>"
    if isinstance(value, str | bytes):
        return repr(value[:_SHOW_CHARS])
    if isinstance(value, float):
        return repr(value)
    return f"<{type(value).__name__}>"
