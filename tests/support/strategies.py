"""Hypothesis strategies drawn from the Pod schema itself: random pods that touch every kind of
field, and random masks over real paths."""

from __future__ import annotations

from typing import Any

import orjson
from google.protobuf.message import Message
from hypothesis import strategies as st

from pods_api.core.api.pb import k8s_core_v1_pb2
from pods_api.core.api.schema import Field, MessageSchema, Special, pod_schema

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_QUANTITIES = st.sampled_from(["0", "1", "250m", "1500m", "1Gi", "1536Mi", "100M", "1e3", "2k", "-5", "3Ki"])
_INTS = {"int32": st.integers(-(2**31), 2**31 - 1), "int64": st.integers(-(2**63), 2**63 - 1)}
_MAX_DEPTH = 5


def _scalar(kind: str) -> st.SearchStrategy[Any]:
    if kind == "string":
        return _TEXT
    if kind == "bool":
        return st.booleans()
    if kind == "bytes":
        return st.binary(max_size=8)
    return _INTS[kind]


@st.composite
def _fill(draw: st.DrawFn, msg: Message, ms: MessageSchema, depth: int) -> None:
    if ms.special is not None:
        _fill_special(draw, msg, ms.special)
        return
    fields = ms.fields
    chosen = draw(st.sets(st.sampled_from(fields), max_size=4 if depth > 1 else 8)) if fields else set()
    for f in chosen:
        _fill_field(draw, msg, f, depth)


def _fill_special(draw: st.DrawFn, msg: Any, special: Special) -> None:
    if special is Special.QUANTITY:
        msg.string = draw(_QUANTITIES)
    elif special is Special.TIME:
        msg.seconds = draw(st.integers(1, 4_000_000_000))  # nanos are not in JSON: see test_codec
    elif special is Special.INT_OR_STRING:
        if draw(st.booleans()):
            msg.type, msg.strVal = 1, draw(_TEXT)
        else:
            msg.type, msg.intVal = 0, draw(_INTS["int32"])
    else:
        msg.Raw = orjson.dumps(
            draw(st.dictionaries(st.sampled_from(["f:a", "f:b", "."]), st.just({}), max_size=2))
        )


def _fill_field(draw: st.DrawFn, msg: Any, f: Field, depth: int) -> None:
    if f.kind == "message" and depth >= _MAX_DEPTH and f.special is None:
        return
    if f.is_map:
        keys = draw(st.lists(_TEXT, max_size=3, unique=True))
        target = getattr(msg, f.name)
        for key in keys:
            if f.map_value == "message":
                assert f.message is not None
                draw(_fill(target[key], f.message, depth + 1))
            else:
                target[key] = draw(_TEXT)
    elif f.repeated:
        n = draw(st.integers(0, 2))
        target = getattr(msg, f.name)
        for _ in range(n):
            if f.kind == "message":
                assert f.message is not None
                draw(_fill(target.add(), f.message, depth + 1))
            else:
                target.append(draw(_scalar(f.kind)))
    elif f.kind == "message":
        assert f.message is not None
        sub = getattr(msg, f.name)
        sub.SetInParent()
        draw(_fill(sub, f.message, depth + 1))
    else:
        setattr(msg, f.name, draw(_scalar(f.kind)))


@st.composite
def pods(draw: st.DrawFn) -> k8s_core_v1_pb2.Pod:
    pod = k8s_core_v1_pb2.Pod()
    draw(_fill(pod, pod_schema(), 0))
    pod.metadata.uid = draw(st.uuids()).hex
    pod.metadata.name = draw(_TEXT)
    return pod


def _json_paths(ms: MessageSchema, prefix: str, depth: int, out: list[str]) -> list[str]:
    for name, chain in ms.by_json.items():
        path = f"{prefix}{name}"
        out.append(path)
        f = chain[-1]
        if (f.is_struct and not f.is_map and depth < 3) or (
            f.repeated and f.kind == "message" and f.special is None and not f.is_map and depth < 3
        ):
            assert f.message is not None
            _json_paths(f.message, path + ".", depth + 1, out)
    return out


MASK_PATHS = sorted(_json_paths(pod_schema(), "", 0, []))
masks = st.lists(st.sampled_from(MASK_PATHS), min_size=1, max_size=6).map(",".join)
