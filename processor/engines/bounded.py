"""Bounded maps for the engines' per-key state, built on OrderedDict.

Every tool call touches two or three of these, so they stay native where they can:
OrderedDict keeps recency order in C, and expiry looks only at the oldest entries.
(cachetools' LRUCache and TTLCache do the same job at several times the cost per touch.)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruMap(Generic[K, V]):
    """At most ``max_items`` entries; the least recently used goes first."""

    def __init__(self, max_items: int, on_evict: Callable[[K, V], object] | None = None) -> None:
        self._max_items = max_items
        self._items: OrderedDict[K, V] = OrderedDict()
        self._on_evict = on_evict  # told of every entry pushed out, to keep indexes in step

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: K) -> bool:
        return key in self._items

    def __getitem__(self, key: K) -> V:
        return self._items[key]

    def peek(self, key: K) -> V | None:
        """The value, without counting as a use."""
        return self._items.get(key)

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def setdefault(self, key: K, make: Callable[[], V]) -> V:
        value = self.get(key)
        if value is None:
            value = self._items[key] = make()
            if len(self._items) > self._max_items:
                evicted = self._items.popitem(last=False)
                if self._on_evict is not None:
                    self._on_evict(*evicted)
        return value

    def values(self) -> list[V]:
        return list(self._items.values())

    def pop(self, key: K) -> V | None:
        return self._items.pop(key, None)


class IdleMap(Generic[K, V]):
    """An LruMap whose entries also expire after ``idle_s`` without a touch.

    Time is passed in (span time, for the engines) and taken as the latest seen, so late
    spans never move it backwards.
    """

    def __init__(self, max_items: int, idle_s: float) -> None:
        self._max_items = max_items
        self._idle_s = idle_s
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._now = float("-inf")

    def __len__(self) -> int:
        return len(self._items)

    def touch(self, key: K, now_s: float, make: Callable[[], V]) -> V:
        """The entry for ``key`` (made if absent), marked as used at ``now_s``."""
        if now_s > self._now:  # as max(), without the call: every touch passes here
            self._now = now_s
        items = self._items
        entry = items.pop(key, None)  # first: touching a stored key must not evict it
        while items:
            oldest = next(iter(items.values()))
            if len(items) < self._max_items and self._now - oldest[0] < self._idle_s:
                break
            items.popitem(last=False)
        fresh = entry is not None and self._now - entry[0] < self._idle_s
        value = entry[1] if fresh and entry is not None else make()
        items[key] = (self._now, value)
        return value
