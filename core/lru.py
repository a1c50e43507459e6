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
    """At most `size` entries; the least recently used goes first. Not thread-safe: every user
    lives on the event loop."""

    __slots__ = ("_items", "_size")

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K, make: Callable[[], V]) -> V:
        """The value for key, made (once, until it is evicted) by `make` when missing."""
        try:
            value = self._items[key]
        except KeyError:
            value = self._items[key] = make()
            if len(self._items) > self._size:
                self._items.popitem(last=False)
        else:
            self._items.move_to_end(key)
        return value

    def __len__(self) -> int:
        return len(self._items)
