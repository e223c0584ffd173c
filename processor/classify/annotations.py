"""The annotations written on each MCP span, remembered so a span exported twice goes out
annotated the same the second time.

The classifier reads a span once (``RecentKeys`` drops the second copy, so a retried
export never counts a call twice), which means the pipeline decides nothing about the
second copy and would forward it bare. Exporters do send a span twice: an SDK whose
export timed out retries the whole request, though we took it the first time. So what
``enrich`` wrote on a span (its ``mcp.breaker.*`` or ``mcp.roster.*`` values) is kept here
by trace and span id, and written again on a later copy of the same span.

Bounded in entries and in age, like the classifier's memory of the spans it has seen. An
entry holds the very mapping enrich wrote from (shared by every span given the same
attributes, and never changed), so keeping it costs a dictionary slot, not a copy.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping

SpanKey = tuple[bytes, bytes]  # trace id, span id
Values = Mapping[str, object]


class AnnotationMemory:
    def __init__(self, max_spans: int, ttl_s: float, clock: Callable[[], float]) -> None:
        self._max_spans = max_spans
        self._ttl_s = ttl_s
        self._clock = clock
        self._kept: dict[SpanKey, Values] = {}
        # The keys in the order kept, and when: two deques rather than one of pairs, which
        # would be one more object per span for the garbage collector to walk.
        self._order: deque[SpanKey] = deque()
        self._times: deque[float] = deque()

    def __len__(self) -> int:
        return len(self._kept)

    def keep(self, key: SpanKey, values: Values) -> None:
        """What was written on the span ``key``; added to what it was given before."""
        now = self._clock()
        times, kept = self._times, self._kept
        # _forget_old's own test, first: one span is kept per MCP span, and most find
        # nothing to forget (the call is what costs).
        if times and (len(kept) >= self._max_spans or now - times[0] >= self._ttl_s):
            self._forget_old(now)
        earlier = kept.get(key)
        if earlier is None:
            self._order.append(key)
            times.append(now)
            kept[key] = values
        elif earlier is not values:  # a span annotated twice in one request: both kept
            kept[key] = {**values, **earlier}

    def recall(self, key: SpanKey) -> Values | None:
        self._forget_old(self._clock())
        return self._kept.get(key)

    def _forget_old(self, now: float) -> None:
        order, times, kept = self._order, self._times, self._kept
        while times and (len(kept) >= self._max_spans or now - times[0] >= self._ttl_s):
            times.popleft()
            kept.pop(order.popleft(), None)
