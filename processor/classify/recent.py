"""A bounded set of recently seen keys, each forgotten after a time-to-live.

Every MCP span's id goes through one of these, so it is built for that: a dict for
membership and a deque in insertion order for expiry, both O(1) per key. (cachetools'
TTLCache does more, and costs several times as much per insertion.)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable


class RecentKeys:
    def __init__(self, max_keys: int, ttl_s: float) -> None:
        self._max_keys = max_keys
        self._ttl_s = ttl_s
        self._added: dict[Hashable, float] = {}
        self._order: deque[tuple[float, Hashable]] = deque()

    def __len__(self) -> int:
        return len(self._added)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._added

    def add(self, key: Hashable, now: float) -> bool:
        """Remember ``key``; False if it was already remembered (and not yet forgotten)."""
        self._forget_old(now)
        if key in self._added:
            return False
        self._added[key] = now
        self._order.append((now, key))
        return True

    def _forget_old(self, now: float) -> None:
        order, added = self._order, self._added
        while order and (len(added) >= self._max_keys or now - order[0][0] >= self._ttl_s):
            _, key = order.popleft()
            added.pop(key, None)
