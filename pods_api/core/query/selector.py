"""A pod selector: a label selector and a field selector together, as the API server takes
`labelSelector` and `fieldSelector` (core/query/labels.py, core/query/fields.py).

A parsed `Selector` has `.key`: the same for selectors that mean the same (requirements in any
order, duplicates, `==` for `=`), so views and caches can be keyed by it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pods_api.core.api.statuserrors import SelectorError
from pods_api.core.query.fields import FieldSelector, parse_fields
from pods_api.core.query.labels import LabelSelector, parse_labels

__all__ = ["EVERYTHING", "SELECTED", "Selector", "SelectorError", "parse_selector", "selected_part"]

# What a pod selector reads of a pod: its labels and the fields the API server lets pods be
# selected by (core/query/fields.py POD_FIELDS), by where they are in its JSON. A pod pruned to
# these matches every selector as the whole pod does, and is kept with each version
# (PodVersion.selectable): matching it is ~1 µs, where decoding the whole pod's JSON for each
# match was ~30 µs, and a List of 5,000 pods with a selector of its own decoded them all at once.
SELECTED = {
    "metadata": ("name", "namespace", "labels"),
    "spec": ("nodeName", "restartPolicy", "schedulerName", "serviceAccountName", "hostNetwork"),
    "status": ("phase", "podIP", "podIPs", "nominatedNodeName"),
}


@dataclass(frozen=True, slots=True)
class Selector:
    """A label selector and a field selector together, matched against a pod's canonical JSON."""

    labels: LabelSelector = field(default_factory=LabelSelector)
    fields: FieldSelector = field(default_factory=FieldSelector)

    def matches(self, pod: Mapping[str, Any]) -> bool:
        if self.labels and not self.labels.matches((pod.get("metadata") or {}).get("labels") or {}):
            return False
        return self.fields.matches(pod)

    def __bool__(self) -> bool:
        return bool(self.labels) or bool(self.fields)

    @property
    def key(self) -> str:
        """Stable and normalised: selectors that mean the same share it; "" selects everything."""
        if not self:
            return ""
        return f"labels={self.labels.key};fields={self.fields.key}"


EVERYTHING = Selector()


def selected_part(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a pod's JSON that SELECTED names: what any selector reads of it."""
    part: dict[str, Any] = {}
    for section, keys in SELECTED.items():
        whole = pod.get(section)
        if isinstance(whole, Mapping):
            part[section] = {key: whole[key] for key in keys if key in whole}
    return part


def parse_selector(labels: str = "", fields: str = "") -> Selector:
    """`labelSelector` and `fieldSelector` as the API server takes them; raises SelectorError."""
    return Selector(parse_labels(labels), parse_fields(fields))
