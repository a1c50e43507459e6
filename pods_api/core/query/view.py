"""What a client asked to see: which fields of each pod (a field mask) and, later, which pods (a
selector). One value with a stable `key`, so that every cache of what is made for a client (a
pod's masked encodings, a snapshot's assembled List, a watch's frames) is keyed the same way.

A pod's encodings depend only on the mask, so views that differ only in their selector share
them (`PodVersion.masked` keys by the mask); everything assembled from many pods or from events
depends on both, and is keyed by `View.key`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar, Protocol, TypeVar

from pods_api.core.query.fieldmask import FieldMask, parse_mask
from pods_api.core.query.selector import parse_selector


class Selects(Protocol):
    """Decides whether a pod is in a view, from the pod's Kubernetes JSON (what `kubectl get -o
    json` prints, Go's zero values included). `key` is the selector's canonical text: two
    selectors that select the same way have the same key, a key names one selection only, and
    "" is the selector of every pod.
    The label/field selector parser (core/query/selector.py) makes these; any object of this shape
    works."""

    @property
    def key(self) -> str: ...

    def matches(self, pod: Mapping[str, Any]) -> bool: ...


class _Pod(Protocol):
    @property
    def selectable(self) -> Mapping[str, Any]:
        """What a selector reads of the pod, in the shape of its Kubernetes JSON
        (core/query/selector.py SELECTED)."""
        ...


P = TypeVar("P", bound=_Pod)

# Between the mask's key and the selector's in a view's key. A mask key is validated field
# paths (letters, digits, dots, commas), so it never holds this and the split is unambiguous.
_KEY_SEPARATOR = "|"


@dataclass(frozen=True, eq=False, slots=True)
class View:
    """A mask (None: every field) and a selector (None: every pod). Equal views have equal keys
    and compare and hash by key, so a view rebuilt from the same request text finds what an
    earlier one cached."""

    mask: FieldMask | None = None
    selector: Selects | None = None
    # Made once: every frame-cache lookup of every watcher uses it.
    key: str = field(init=False)

    EVERYTHING: ClassVar[View]

    def __post_init__(self) -> None:
        if self.selector is not None and not self.selector.key:
            object.__setattr__(self, "selector", None)  # selects every pod: the same view as none
        mask = self.mask.key if self.mask is not None else ""
        key = mask if self.selector is None else f"{mask}{_KEY_SEPARATOR}{self.selector.key}"
        object.__setattr__(self, "key", key)

    def shows(self, pod: _Pod) -> bool:
        """Whether a pod is in the view: a watch asks this of every event per watcher that is
        behind, and a List of every pod."""
        return self.selector is None or self.selector.matches(pod.selectable)

    def select(self, pods: Iterable[P]) -> Iterator[P]:
        """The pods (PodVersions, in practice) in the view, in their order, as they are
        iterated: a List made in slices (core/store/slices.py) selects one slice at a time."""
        selector = self.selector
        if selector is None:
            return iter(pods)
        return (pod for pod in pods if selector.matches(pod.selectable))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, View) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"View({self.key!r})"


View.EVERYTHING = View()


def parse_view(mask: str | None = None, label_selector: str = "", field_selector: str = "") -> View:
    """The view a request asks for, from its text as every surface receives it: a field mask
    (the `x-kubernetes-fieldmask` rules; None or "" is every field), a `labelSelector` and a
    `fieldSelector` (Kubernetes syntax; "" is every pod). Raises FieldMaskError or
    SelectorError, both InvalidArgument, naming the problem and where it is."""
    return View(parse_mask(mask), _selector(label_selector, field_selector))


# Distinct selectors in use at once: a handful of agents' own; bounded against a client that
# sends a new one each time. Errors are not cached (lru_cache keeps only returned values).
_SELECTORS_KEPT = 256


@lru_cache(maxsize=_SELECTORS_KEPT)
def _selector(label_selector: str, field_selector: str) -> Selects:
    return parse_selector(label_selector, field_selector)
