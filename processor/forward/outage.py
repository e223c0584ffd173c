"""What a failing next hop writes to the log: the first failure, a summary while it lasts,
and the recovery.

Each of the forwarder's consumers retries its own request, so while the next hop is down
attempts fail many times a minute, and a line per attempt would bury everything else in
the log without saying more than the first one did. ``OutageLog`` writes:

- one warning at the first failed attempt (the error, and that a summary will follow);
- while it fails, at most one summary per ``summary_interval_s``: attempts failed since
  the last line, spans waiting in the queue, spans given up on, the last error;
- one line at the first delivery that succeeds again, with how long it lasted.

Spans given up on (a permanent error, ``retry.max_elapsed_s`` run out) are data lost: the
first of an outage is an error line at once, the later ones are counted into the
summaries (``mcp_breaker_exporter_send_failed_spans_total`` counts every one).

Plain logic with the clock passed in; the forwarder tells it what happened. The summary is
written when an attempt fails after the interval is over, so a next hop that stays down
gets one within the interval plus one backoff delay (``retry.max_interval_s``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger("processor.forward.queue")  # where the forwarder's lines always were

SUMMARY_INTERVAL_S = 60.0


@dataclass(slots=True)
class _Outage:
    since: float
    reported: float  # when the last line about it was written
    attempts: int = 0  # failed attempts since that line
    attempts_total: int = 0
    dropped_spans: int = 0  # given up on since that line
    dropped_requests: int = 0
    dropped_total: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    last_error: str = ""


class OutageLog:
    def __init__(
        self,
        target: str,
        *,
        clock: Callable[[], float],
        summary_interval_s: float = SUMMARY_INTERVAL_S,
        logger: logging.Logger = log,
    ) -> None:
        self._target = target
        self._clock = clock
        self._interval_s = summary_interval_s
        self._log = logger
        self._outage: _Outage | None = None

    @property
    def failing(self) -> bool:
        return self._outage is not None

    def attempt_failed(self, error: str, *, spans: int, retry_in_s: float, held_spans: int) -> None:
        """An attempt failed and will be retried in ``retry_in_s``."""
        outage, started = self._failure(error)
        if started:
            self._log.warning(
                "next hop %s: %s; retrying %d spans in %.1fs (while it fails, a summary "
                "every %.0fs)",
                self._target,
                error,
                spans,
                retry_in_s,
                self._interval_s,
            )
            return
        outage.attempts += 1
        self._summarise_if_due(outage, held_spans)

    def gave_up(
        self, error: str, *, spans: int, attempts: int, reason: str, held_spans: int
    ) -> None:
        """The last attempt failed and the spans are dropped (counted by the caller)."""
        outage, started = self._failure(error)
        if not started:
            outage.attempts += 1
        first_drop = not outage.dropped_total
        outage.dropped_total += spans
        if first_drop:
            self._log.error(
                "dropped %d spans bound for %s after %d attempt(s): %s (%s)",
                spans,
                self._target,
                attempts,
                reason,
                error,
            )
            return
        outage.dropped_spans += spans
        outage.dropped_requests += 1
        outage.reasons[reason] += 1
        self._summarise_if_due(outage, held_spans)

    def delivered(self) -> None:
        """A delivery succeeded: the outage, if there was one, is over."""
        outage, self._outage = self._outage, None
        if outage is None:
            return
        dropped = f", {outage.dropped_total} spans dropped" if outage.dropped_total else ""
        self._log.info(
            "next hop %s: delivering again after %s of failures (%s%s)",
            self._target,
            _duration(self._clock() - outage.since),
            _attempts(outage.attempts_total),
            dropped,
        )

    def close(self, held_spans: int) -> None:
        """At shutdown: what the last summary has not said yet, said now."""
        outage = self._outage
        if outage is not None and (outage.attempts or outage.dropped_spans):
            self._summarise(outage, held_spans)

    def _failure(self, error: str) -> tuple[_Outage, bool]:
        """The outage this failed attempt belongs to, and whether it starts it."""
        outage = self._outage
        if outage is None:
            now = self._clock()
            self._outage = _Outage(since=now, reported=now, attempts_total=1, last_error=error)
            return self._outage, True
        outage.attempts_total += 1
        outage.last_error = error
        return outage, False

    def _summarise_if_due(self, outage: _Outage, held_spans: int) -> None:
        if self._clock() - outage.reported >= self._interval_s:
            self._summarise(outage, held_spans)

    def _summarise(self, outage: _Outage, held_spans: int) -> None:
        now = self._clock()
        dropped = ""
        if outage.dropped_spans:
            reasons = ", ".join(f"{r} {n}" for r, n in sorted(outage.reasons.items()))
            dropped = (
                f", {outage.dropped_spans} spans in {outage.dropped_requests} requests "
                f"dropped ({reasons})"
            )
        self._log.warning(
            "next hop %s still failing after %s: %s in the last %s, "
            "%d spans waiting%s; last error: %s",
            self._target,
            _duration(now - outage.since),
            _attempts(outage.attempts),
            _duration(now - outage.reported),
            held_spans,
            dropped,
            outage.last_error,
        )
        outage.reported = now
        outage.attempts = outage.dropped_spans = outage.dropped_requests = 0
        outage.reasons.clear()


def _duration(seconds: float) -> str:
    """``45s``, ``2m05s``, ``1h02m``: as a person reads a log."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _attempts(count: int) -> str:
    return f"{count} failed attempt{'' if count == 1 else 's'}"
