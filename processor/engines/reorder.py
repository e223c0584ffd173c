"""The reorder window: calls decided in the last few seconds of arrival, kept for revision.

Spans of one turn come in several export requests, and not in span-time order (batching
span processors, several processes, a collector tier in front). A repeat of a failed call
can arrive before the failure it repeats: when it was decided, nothing stood in its way.
When the failure arrives, the breaker looks here for the calls it now stands in front of
and revises them into dead calls (their spans are gone; the metrics count them then).

Bounded twice: a call leaves ``reorder_window_s`` of arrival time after it came (the
pipeline's clock, ``ToolCall.arrived_s``), and at most ``reorder_max_calls`` are held, the
oldest going first. Indexed by turn, tool circuit and server circuit, so a revision looks
only at the calls it could concern.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterator
from dataclasses import dataclass

from processor.classify.events import ToolCall


@dataclass(slots=True, eq=False)
class Seen:
    """One decided call, and whether it was counted a dead call (set once, never unset)."""

    call: ToolCall
    keys: tuple[Hashable, ...]  # the indexes it is found under
    dead: bool = False


class ReorderWindow:
    def __init__(self, window_s: float, max_calls: int) -> None:
        self._window_s = window_s
        self._max_calls = max_calls
        self._order: deque[Seen] = deque()
        self._by_key: dict[Hashable, deque[Seen]] = {}

    def __len__(self) -> int:
        return len(self._order)

    def add(self, seen: Seen) -> None:
        self._order.append(seen)
        by_key = self._by_key
        for key in seen.keys:
            queue = by_key.get(key)  # not setdefault: it would make a deque every time
            if queue is None:
                queue = by_key[key] = deque()
            queue.append(seen)
        while len(self._order) > self._max_calls:
            self._drop_oldest()

    def prune(self, now_s: float) -> None:
        """Forget the calls that arrived more than the window before ``now_s``."""
        horizon = now_s - self._window_s
        while self._order and self._order[0].call.arrived_s < horizon:
            self._drop_oldest()

    def under(self, key: Hashable) -> Iterator[Seen]:
        return iter(self._by_key.get(key, ()))

    def _drop_oldest(self) -> None:
        # Everything is appended in arrival order, so the oldest call overall is also the
        # oldest under each of its keys.
        seen = self._order.popleft()
        for key in seen.keys:
            queue = self._by_key[key]
            queue.popleft()
            if not queue:
                del self._by_key[key]
