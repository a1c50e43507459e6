"""Kubernetes field selectors on pods, as apimachinery's `fields.ParseSelector` reads them.

`field=value`, `field==value`, `field!=value` separated by commas, `\\` escaping `\\`, `,` and
`=` in values; and only the fields the API server lets pods be selected by (below), compared as
the API server compares them (a missing value is "", `spec.hostNetwork` is "true" or "false",
`status.podIP` is the first of podIPs). `spec.host` is read as `spec.nodeName`, as the API
server does for old clients. `status.podIPs` is refused: the API server accepts the name but
gives it no value, so `=` never matches there; an error says more than a silently empty answer.
Every error is a SelectorError naming the selector and the 0-based character offset; a selector
over the limits of core/query/limits.py is one too.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pods_api.core.api.statuserrors import SelectorError
from pods_api.core.query.limits import check_length, check_requirements

FieldGetter = Callable[[Mapping[str, Any]], str]


def _pod_ip(pod: Mapping[str, Any]) -> str:
    status = pod.get("status") or {}
    ips = status.get("podIPs") or []
    if ips:
        return str(ips[0].get("ip") or "")
    return str(status.get("podIP") or "")


def path_getter(*keys: str) -> FieldGetter:
    """Reads the string at a JSON path; a missing value is "" (Go's zero value)."""

    def get(pod: Mapping[str, Any]) -> str:
        value: Any = pod
        for key in keys:
            value = value.get(key) if isinstance(value, Mapping) else None
        return "" if value is None else str(value)

    return get


# What the API server lets pods be selected by (pkg/registry/core/pod ToSelectableFields), and
# how it renders each value.
POD_FIELDS: dict[str, FieldGetter] = {
    "metadata.name": path_getter("metadata", "name"),
    "metadata.namespace": path_getter("metadata", "namespace"),
    "spec.nodeName": path_getter("spec", "nodeName"),
    "spec.restartPolicy": path_getter("spec", "restartPolicy"),
    "spec.schedulerName": path_getter("spec", "schedulerName"),
    "spec.serviceAccountName": path_getter("spec", "serviceAccountName"),
    "spec.hostNetwork": lambda pod: "true" if (pod.get("spec") or {}).get("hostNetwork") else "false",
    "status.phase": path_getter("status", "phase"),
    "status.podIP": _pod_ip,
    "status.nominatedNodeName": path_getter("status", "nominatedNodeName"),
}
# What the API server lets core/v1 Events be selected by (pkg/registry/core/event
# ToSelectableFields): `kubectl describe` asks for a pod's by involvedObject name, namespace, uid.
EVENT_FIELDS: dict[str, FieldGetter] = {
    "metadata.name": path_getter("metadata", "name"),
    "metadata.namespace": path_getter("metadata", "namespace"),
    **{
        f"involvedObject.{key}": path_getter("involvedObject", key)
        for key in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    },
    "reason": path_getter("reason"),
    "reportingComponent": path_getter("reportingComponent"),
    "source": path_getter("source", "component"),
    "type": path_getter("type"),
}
# Old clients' names the API server still accepts.
FIELD_ALIASES = {"spec.host": "spec.nodeName"}


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    negated: bool  # != rather than =
    value: str
    get: FieldGetter = dataclasses.field(compare=False, repr=False, default=lambda pod: "")

    def matches(self, pod: Mapping[str, Any]) -> bool:
        return (self.get(pod) == self.value) != self.negated

    def __str__(self) -> str:
        return f"{self.field}{'!=' if self.negated else '='}{escape_value(self.value)}"


@dataclass(frozen=True, slots=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, pod: Mapping[str, Any]) -> bool:
        return all(r.matches(pod) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)

    @property
    def key(self) -> str:
        return ",".join(sorted({str(r) for r in self.requirements}))


def escape_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape(text: str, value: str, at: int) -> str:
    out: list[str] = []
    escaped = False
    for i, ch in enumerate(value):
        if escaped:
            if ch not in "\\,=":
                raise SelectorError("field", text, at + i - 1, f"invalid escape sequence \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise SelectorError("field", text, at + i, f"unescaped {ch!r} in a value (write \\{ch})")
        else:
            out.append(ch)
    if escaped:
        raise SelectorError(
            "field", text, at + len(value) - 1, "invalid escape sequence: a lone \\ at the end"
        )
    return "".join(out)


def _terms(text: str) -> Iterator[tuple[str, int]]:
    """The comma-separated terms with their offsets; a backslash escapes the next character."""
    start, escaped = 0, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            yield text[start:i], start
            start = i + 1
    yield text[start:], start


def parse_fields(
    text: str, selectable: Mapping[str, FieldGetter] = POD_FIELDS, kind: str = "pods"
) -> FieldSelector:
    """A field selector on pods; raises SelectorError. The empty string selects everything.
    `selectable`: the fields that may be selected by, and how to read each from the JSON, of
    objects of this kind (as errors name them)."""
    check_length("field", text)
    requirements: list[FieldRequirement] = []
    for term, at in _terms(text) if text else ():
        if not term:
            continue  # apimachinery skips empty terms
        check_requirements("field", text, len(requirements) + 1, at)
        found = re.search(r"!=|==|=", term)
        if found is None:
            raise SelectorError(
                "field", text, at, f"can't understand {term!r}: expected field=value or field!=value"
            )
        name, op, raw = term[: found.start()], found.group(), term[found.end() :]
        name = FIELD_ALIASES.get(name, name)
        if name not in selectable:
            raise SelectorError(
                "field",
                text,
                at,
                f"field label not supported: {name!r}; {kind} can be selected by {', '.join(selectable)}",
            )
        value = _unescape(text, raw, at + found.end())
        requirements.append(FieldRequirement(name, op == "!=", value, selectable[name]))
    return FieldSelector(tuple(sorted(requirements, key=str)))
