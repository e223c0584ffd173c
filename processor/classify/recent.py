"""Bounded sets of recent keys, each forgotten after a time-to-live.

Every MCP span's id goes through one of these, so they are built for that, O(1) per key.
(cachetools' TTLCache does more, and costs several times as much per insertion.)
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Hashable, Iterable


class RecentKeys:
    def __init__(self, max_keys: int, ttl_s: float) -> None:
        self._max_keys = max_keys
        self._ttl_s = ttl_s
        self._added: dict[Hashable, float] = {}
        # The keys in the order added, and when: two deques rather than one of (time, key)
        # pairs, each of which would be one more object for the garbage collector to walk.
        self._order: deque[Hashable] = deque()
        self._times: deque[float] = deque()

    def __len__(self) -> int:
        return len(self._added)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._added

    def add(self, key: Hashable, now: float) -> bool:
        """Remember ``key``; False if it was already remembered (and not yet forgotten)."""
        order, times, added = self._order, self._times, self._added
        # The old are forgotten first, here rather than in a method of their own: this runs
        # for every MCP span.
        while times and (len(added) >= self._max_keys or now - times[0] >= self._ttl_s):
            times.popleft()
            added.pop(order.popleft(), None)
        if key in added:
            return False
        added[key] = now
        order.append(key)
        times.append(now)
        return True


class ExpiringKeys:
    """Keys kept ``ttl_s`` after they were last set, at most ``max_keys`` of them, the one
    set longest ago evicted first: cachetools' TTLCache as the classifier used it (set and
    membership only, the clock passed in), at a fraction of its cost per call.

    Unlike RecentKeys, setting a key again renews it (and moves it last in line), and a key
    is gone the moment its time is up, whether or not it has been removed yet.
    """

    def __init__(self, max_keys: int, ttl_s: float) -> None:
        self._max_keys = max_keys
        self._ttl_s = ttl_s
        self._expires: OrderedDict[Hashable, float] = OrderedDict()  # in the order last set

    def __len__(self) -> int:
        return len(self._expires)

    def any_of(self, keys: Iterable[Hashable], now: float) -> bool:
        """Whether any of ``keys`` is kept (set, and its time not up) at ``now``."""
        expiring = self._expires
        for key in keys:
            expires = expiring.get(key)
            if expires is not None and now < expires:
                return True
        return False

    def set(self, key: Hashable, now: float) -> None:
        self.set_all((key,), now)

    def set_all(self, keys: Iterable[Hashable], now: float) -> None:
        """``set`` for each of ``keys``, in order, in one call: a call is marked decided by
        every key its halves are found by."""
        expiring, max_keys, expires = self._expires, self._max_keys, now + self._ttl_s
        for key in keys:
            # What is due goes first, in the order set, stopping at the first that is not
            # due (as TTLCache's expiry list does, even should the clock have gone back).
            while expiring:
                first = next(iter(expiring))
                if now < expiring[first]:
                    break
                del expiring[first]
            if key in expiring:
                expiring.move_to_end(key)
            elif len(expiring) >= max_keys:
                expiring.popitem(last=False)
            expiring[key] = expires


class ExpiringValues:
    """ExpiringKeys that keep a value with each key: the same bounds, the same order of
    eviction."""

    def __init__(self, max_keys: int, ttl_s: float) -> None:
        self._max_keys = max_keys
        self._ttl_s = ttl_s
        self._kept: OrderedDict[Hashable, tuple[float, object]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, key: Hashable, now: float) -> object | None:
        """The value set with ``key``, or None if it is not kept at ``now``."""
        kept = self._kept.get(key)
        if kept is None or now >= kept[0]:
            return None
        return kept[1]

    def set(self, key: Hashable, value: object, now: float) -> None:
        self.set_all(((key, value),), now)

    def set_all(self, items: Iterable[tuple[Hashable, object]], now: float) -> None:
        """``set`` for each key and value of ``items``, in order, in one call."""
        kept, max_keys, expires = self._kept, self._max_keys, now + self._ttl_s
        for key, value in items:
            while kept:
                first = next(iter(kept))
                if now < kept[first][0]:
                    break
                del kept[first]
            if key in kept:
                kept.move_to_end(key)
            elif len(kept) >= max_keys:
                kept.popitem(last=False)
            kept[key] = (expires, value)
