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
from typing import cast

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
        # Under each key, its calls in arrival order: the call itself while it is the only
        # one (a turn of one call, the usual case, then costs no deque: some 600 bytes,
        # and one more object for the garbage collector, per call held), else a deque.
        self._by_key: dict[Hashable, Seen | deque[Seen]] = {}

    def __len__(self) -> int:
        return len(self._order)

    def add(self, seen: Seen) -> None:
        self._order.append(seen)
        by_key = self._by_key
        for key in seen.keys:
            held = by_key.get(key)
            if held is None:
                by_key[key] = seen
            elif isinstance(held, Seen):
                by_key[key] = deque((held, seen))
            else:
                held.append(seen)
        while len(self._order) > self._max_calls:
            self._drop_oldest()

    def prune(self, now_s: float) -> None:
        """Forget the calls that arrived more than the window before ``now_s``."""
        horizon = now_s - self._window_s
        while self._order and self._order[0].call.arrived_s < horizon:
            self._drop_oldest()

    def under(self, key: Hashable) -> Iterator[Seen]:
        held = self._by_key.get(key)
        if held is None:
            return iter(())
        return iter((held,)) if isinstance(held, Seen) else iter(held)

    def _drop_oldest(self) -> None:
        # Everything is appended in arrival order, so the oldest call overall is also the
        # oldest under each of its keys.
        seen = self._order.popleft()
        by_key = self._by_key
        for key in seen.keys:
            held = by_key[key]
            if held is seen:  # the only call under it
                del by_key[key]
                continue
            queue = cast("deque[Seen]", held)  # more than one: a Seen alone is ``seen``
            queue.popleft()
            if len(queue) == 1:
                by_key[key] = queue[0]
