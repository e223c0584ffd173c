"""How long one export attempt waits for the next hop, learnt from it (pure: clock passed in).

A fixed deadline below the next hop's latency multiplies what it receives: each attempt
times out after the next hop took the request, and the retry sends it again (issue 29: a
next hop slower than ``forward.timeout_s`` received each span 3.6 times after 30 s and 6.3
times after 90 s, none of them counted as sent). So the deadline follows the next hop:

- an attempt that timed out after ``d`` says the next hop may need more than ``d``: the
  same request's next attempt waits ``GROWTH`` times as long, and so do the first attempts
  of other requests (every consumer meets the same next hop);
- an attempt that was answered says how long the next hop takes: attempts wait at least
  ``MARGIN`` times a high percentile of the recent answers' latencies;
- never less than ``forward.timeout_s``, never more than ``forward.max_timeout_s``; what
  was learnt is forgotten after ``MEMORY_S``, so a next hop fast again is given
  ``timeout_s`` again.

A long deadline costs nothing while the next hop answers; it costs time only while the
next hop holds a request and never answers (a consumer then waits longer before sending it
again). A short one costs a copy of the request per attempt. One request's deadlines grow
by ``GROWTH`` from attempt to attempt whatever the others learnt, so a next hop ``k`` times
slower than ``timeout_s`` (k >= 1) receives it at most ``2 + floor(log2(k))`` times (4 for
``k`` up to 4), as long as ``max_timeout_s`` reaches the deadline that outlasts it
(docs/delivery.md).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

GROWTH = 2.0  # a request's next attempt after a timeout waits this many times as long
MARGIN = 2.0  # attempts wait this many times the recent answers' latency percentile
PERCENTILE = 0.95
SAMPLES = 64  # the latest answers kept
MEMORY_S = 300.0  # what was learnt (a latency, a timeout) is forgotten after this


class AttemptDeadline:
    """The per-attempt deadline for one next hop, shared by the forwarder's consumers."""

    def __init__(self, *, base_s: float, max_s: float, clock: Callable[[], float]) -> None:
        self._base_s = base_s
        self._max_s = max(max_s, base_s)
        self._clock = clock
        self._answers: deque[tuple[float, float]] = deque(maxlen=SAMPLES)  # (at, latency)
        self._raised_s = base_s  # what the latest timeouts asked for
        self._raised_at = -math.inf

    @property
    def max_s(self) -> float:
        return self._max_s

    def first_s(self) -> float:
        """The deadline of a request's first attempt (and the least of any later one)."""
        now = self._clock()
        raised = self._raised_s if now - self._raised_at < MEMORY_S else self._base_s
        return min(self._max_s, max(self._base_s, raised, self._learnt_s(now)))

    def answered(self, latency_s: float) -> None:
        """An attempt the next hop answered with success, after ``latency_s``."""
        self._answers.append((self._clock(), latency_s))

    def timed_out(self, deadline_s: float) -> float:
        """An attempt that waited ``deadline_s`` in vain; the deadline of that request's
        next attempt, which new requests' first attempts get too."""
        now = self._clock()
        grown = min(self._max_s, deadline_s * GROWTH)
        if now - self._raised_at >= MEMORY_S:
            self._raised_s = self._base_s
        self._raised_s = max(self._raised_s, grown)
        self._raised_at = now
        return max(grown, self.first_s())

    def _learnt_s(self, now: float) -> float:
        while self._answers and now - self._answers[0][0] >= MEMORY_S:
            self._answers.popleft()
        if not self._answers:
            return 0.0
        latencies = sorted(latency for _, latency in self._answers)
        rank = max(0, math.ceil(PERCENTILE * len(latencies)) - 1)
        return MARGIN * latencies[rank]
