"""The one bounded cache the hot paths share: masked encodings per pod version, assembled
responses per snapshot, watch frames per event. Each holds what clients ask for (masks), so each
must stay bounded whatever a client sends."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most `size` entries, and, when `weigh` is given, at most `max_weight` of their weight
    in all; the least recently used goes first. A value heavier than `max_weight` alone is made
    and returned but not kept. Not thread-safe: every user lives on the event loop."""

    __slots__ = ("_items", "_max_weight", "_size", "_weigh", "_weight")

    def __init__(self, size: int, weigh: Callable[[V], int] | None = None, max_weight: int = 0) -> None:
        self._size = size
        self._weigh = weigh
        self._max_weight = max_weight
        self._weight = 0
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K, make: Callable[[], V]) -> V:
        """The value for key, made (once, until it is evicted) by `make` when missing."""
        try:
            value = self._items[key]
        except KeyError:
            value = make()
            if self._weigh is None:
                self._items[key] = value
                if len(self._items) > self._size:
                    self._items.popitem(last=False)
            else:
                self._keep(key, value, self._weigh(value))
        else:
            self._items.move_to_end(key)
        return value

    def _keep(self, key: K, value: V, weight: int) -> None:
        assert self._weigh is not None
        if weight > self._max_weight:
            return
        self._items[key] = value
        self._weight += weight
        while len(self._items) > self._size or self._weight > self._max_weight:
            self._weight -= self._weigh(self._items.popitem(last=False)[1])

    @property
    def weight(self) -> int:
        """The weight of what is kept (0 without `weigh`)."""
        return self._weight

    def __contains__(self, key: K) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)
