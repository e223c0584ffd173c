"""Per turn: its calls round by round, its dead calls and what they repeated, its roster.

Every figure comes from the pipeline's findings: a call decision says whether the call was
dead, under which rule and which failure it repeated; a roster finding says what the
model was offered in a round and whether the surface collapsed. Nothing is judged here.

Turns are followed while they are open. A turn closes when no call or listing of it has
been seen for ``idle_s`` of span time (the breaker's ``turn_idle_s``: the breaker forgets
it then too), or when more than ``max_open`` turns are open (the least recently seen
closes first); at the end every turn closes. A closed turn adds to the totals, and the
``worst`` of them are kept whole, worst first: most dead calls, then most seconds spent
on them, then most failures.

**Model rounds saved**, per turn: the rounds after the round of the turn's first refused
call (by start time) in which every call the turn made was refused. With the breaker
enforcing, the model would have had the refusal in hand instead of making those calls;
rounds without a recorded call, and calls without a round number, count for nothing. When
the turn's first refused call has no round number the figure cannot be known: it is None,
and the turn counts in ``without_rounds``, never as a turn that saved 0.
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from mcp_breaker_client.shared.verdict import Outcome

from processor.classify.events import ToolCall
from processor.config import Rule
from processor.engines.breaker import CallDecision
from processor.engines.roster import Collapse, RosterFinding
from processor.engines.turns import NS_PER_S
from processor.offline.figures import Count, iso, name, seconds_between

WITHIN = frozenset({Rule.TURN_CALL, Rule.TURN_TOOL})
MAX_ROUNDS = 512  # rounds followed per turn (as the roster engine)
MAX_REPEATED = 64  # distinct failures repeated, per turn
MAX_TRACES = 8  # trace ids named per turn


def refused(decision: CallDecision) -> bool:
    """Did the enforcing replay refuse the call (``enforce.py``)? A dead call it let
    through (in flight when its twin failed) was made: it saved nothing."""
    return decision.dead_call and decision.enforced


@dataclass(slots=True)
class RoundTally:
    calls: int = 0
    ok: int = 0
    failed: int = 0
    dead: int = 0
    dead_ok: int = 0  # dead calls that succeeded: refusing them would have cost the result
    dead_failed: int = 0
    offered: int | None = None  # tools offered to the model, from the round's listing


@dataclass(slots=True)
class Repeated:
    """A failure that dead calls of the turn repeated."""

    trace_id: bytes
    tool: str
    failure_class: str
    excerpt: str  # redacted by the classifier
    count: Count


@dataclass(slots=True)
class TurnTally:
    turn: str
    tenant: str
    cap: int
    harness: str = ""
    first_s: float = float("inf")
    last_s: float = float("-inf")
    traces: list[bytes] = field(default_factory=list)
    calls: int = 0
    failed: int = 0
    within: int = 0
    across: int = 0
    refused_ok: int = 0
    first_dead: tuple[int, int | None] | None = None  # (start ns, round) of the first
    rounds: dict[int, RoundTally] = field(default_factory=dict)
    repeated: dict[bytes, Repeated] = field(default_factory=dict)
    collapses: dict[int, Collapse] = field(default_factory=dict)  # by first round
    dead: Count = field(init=False)

    def __post_init__(self) -> None:
        self.dead = Count(self.cap)

    def seen(self, trace_id: bytes, start_ns: int, end_ns: int) -> None:
        self.first_s = min(self.first_s, start_ns / NS_PER_S)
        self.last_s = max(self.last_s, end_ns / NS_PER_S)
        if trace_id not in self.traces and len(self.traces) < MAX_TRACES:
            self.traces.append(trace_id)

    def round(self, number: int | None) -> RoundTally | None:
        if number is None:
            return None
        tally = self.rounds.get(number)
        if tally is None and len(self.rounds) < MAX_ROUNDS:
            tally = self.rounds[number] = RoundTally()
        return tally

    def rounds_saved(self) -> int | None:
        """None: the turn refused calls, but its first refused call has no round number."""
        if self.first_dead is None:
            return 0
        if self.first_dead[1] is None:
            return None
        after = self.first_dead[1]
        return sum(1 for n, r in self.rounds.items() if n > after and r.calls and r.dead == r.calls)

    def rank(self) -> tuple[int, float, int, int, int]:
        collapsed = sum(c.to_round - c.from_round + 1 for c in self.collapses.values())
        return (self.dead.n, self.dead.seconds, self.failed, collapsed, self.calls)

    def interesting(self) -> bool:
        return bool(self.dead.n or self.failed or self.collapses)

    def to_json(self) -> dict[str, Any]:
        repeated = sorted(self.repeated.items(), key=lambda kv: -kv[1].count.n)
        return {
            "turn": name(self.turn),
            "tenant": name(self.tenant),
            "harness": name(self.harness),
            "trace_ids": [t.hex() for t in self.traces],
            "first_at": iso(self.first_s),
            "last_at": iso(self.last_s),
            "calls": self.calls,
            "failed": self.failed,
            "dead_calls": self.dead.to_json(),
            "dead_within_turn": self.within,
            "dead_across_turns": self.across,
            "refused_that_succeeded": self.refused_ok,
            "model_rounds_saved": self.rounds_saved(),
            "repeated_failures": [
                {
                    "span_id": span.hex(),
                    "trace_id": r.trace_id.hex(),
                    "tool": name(r.tool),
                    "failure_class": r.failure_class,
                    "error": r.excerpt,
                    "repeats": r.count.to_json(),
                }
                for span, r in repeated
            ],
            "rounds": [
                {
                    "round": n,
                    "calls": r.calls,
                    "ok": r.ok,
                    "failed": r.failed,
                    "dead": r.dead,
                    "dead_ok": r.dead_ok,
                    "dead_failed": r.dead_failed,
                    "offered_tools": r.offered,
                }
                for n, r in sorted(self.rounds.items())
            ],
            "collapses": [_collapse(c) for _, c in sorted(self.collapses.items())],
        }


def _collapse(collapse: Collapse) -> dict[str, Any]:
    return {
        "from_round": collapse.from_round,
        "to_round": collapse.to_round,
        "recovered_round": collapse.recovered_round,
        "offered_before": collapse.offered_before,
    }


class Turns:
    def __init__(self, *, idle_s: float, max_open: int, worst: int, cap: int) -> None:
        self._idle_s = idle_s
        self._max_open = max_open
        self._worst_n = worst
        self._cap = cap
        self._open: OrderedDict[tuple[str, str], tuple[float, TurnTally]] = OrderedDict()
        self._worst: list[tuple[tuple[int, float, int, int, int], int, TurnTally]] = []
        self._order = itertools.count()
        self._now = float("-inf")
        self.closed = 0  # turns closed, each with a call at least
        self.with_dead_calls = 0
        self.rounds_saved = 0
        self.turns_with_rounds_saved = 0
        self.without_rounds = 0  # turns with refused calls whose rounds saved are unknown

    def total(self) -> int:
        """The turns seen: those closed, and those open that made a call."""
        return self.closed + sum(1 for _, tally in self._open.values() if tally.calls)

    def rounds_saved_known(self) -> int | None:
        """Model rounds saved in every turn; None when no turn that refused calls recorded
        the round of its first refusal (nothing to sum but unknowns)."""
        if self.with_dead_calls and self.without_rounds == self.with_dead_calls:
            return None
        return self.rounds_saved

    def _touch(self, tenant: str, turn: str, at_s: float) -> TurnTally:
        self._now = max(self._now, at_s)
        key = (tenant, turn)
        entry = self._open.pop(key, None)
        while self._open:
            last, oldest = next(iter(self._open.values()))
            if len(self._open) < self._max_open and self._now - last < self._idle_s:
                break
            self._open.popitem(last=False)
            self._close(oldest)
        if entry is not None and self._now - entry[0] >= self._idle_s:
            self._close(entry[1])
            entry = None
        tally = entry[1] if entry is not None else TurnTally(turn, tenant, self._cap)
        self._open[key] = (self._now, tally)
        return tally

    def decision(self, decision: CallDecision) -> None:
        call = decision.call
        tally = self._touch(call.tenant, call.turn, call.end_ns / NS_PER_S)
        tally.harness = tally.harness or call.harness
        tally.seen(call.trace_id, call.start_ns, call.end_ns)
        tally.calls += 1
        round_ = tally.round(call.round)
        failed = call.outcome is Outcome.FAILED
        tally.failed += failed
        if round_ is not None:
            round_.calls += 1
            round_.ok += call.outcome is Outcome.OK
            round_.failed += failed
        if not refused(decision):
            return
        seconds = seconds_between(call.start_ns, call.end_ns)
        tally.dead.add(call.trace_id, call.span_ids[0], seconds)
        if decision.rule in WITHIN:
            tally.within += 1
        else:
            tally.across += 1
        tally.refused_ok += call.outcome is Outcome.OK
        if round_ is not None:
            round_.dead += 1
            round_.dead_ok += call.outcome is Outcome.OK
            round_.dead_failed += failed
        if tally.first_dead is None or call.start_ns < tally.first_dead[0]:
            tally.first_dead = (call.start_ns, call.round)
        if decision.repeat_of is not None:
            self._repeat(tally, decision, call, seconds)

    def _repeat(
        self, tally: TurnTally, decision: CallDecision, call: ToolCall, seconds: float
    ) -> None:
        assert decision.repeat_of is not None
        repeated = tally.repeated.get(decision.repeat_of)
        if repeated is None:
            if len(tally.repeated) >= MAX_REPEATED:
                return
            evidence = decision.evidence
            repeated = tally.repeated[decision.repeat_of] = Repeated(
                trace_id=(evidence.first_failure_trace_id if evidence else None) or b"",
                tool=call.tool,
                failure_class=evidence.failure_class if evidence else "",
                excerpt=evidence.excerpt if evidence else "",
                count=Count(self._cap),
            )
        repeated.count.add(call.trace_id, call.span_ids[0], seconds)

    def listing(self, finding: RosterFinding) -> None:
        listing = finding.listing
        tally = self._touch(listing.tenant, listing.turn, listing.end_ns / NS_PER_S)
        tally.harness = tally.harness or listing.harness
        tally.seen(listing.trace_id, listing.start_ns, listing.end_ns)
        round_ = tally.round(listing.round)
        if round_ is not None and listing.offered is not None:
            round_.offered = listing.offered
        collapse = finding.collapse
        if collapse is not None:
            # Listings of a turn may come in any order: a later finding may move the first
            # round of a collapse back, or extend it; it replaces what it overlaps.
            for first in [
                f
                for f, c in tally.collapses.items()
                if c.from_round <= collapse.to_round and collapse.from_round <= c.to_round
            ]:
                del tally.collapses[first]
            tally.collapses[collapse.from_round] = collapse

    def _close(self, tally: TurnTally) -> None:
        if not tally.calls:
            return  # listings alone: not a turn
        self.closed += 1
        if tally.dead.n:
            self.with_dead_calls += 1
        saved = tally.rounds_saved()
        if saved is None:
            self.without_rounds += 1
        else:
            self.rounds_saved += saved
            self.turns_with_rounds_saved += saved > 0
        if not tally.interesting():
            return
        entry = (tally.rank(), -next(self._order), tally)
        if len(self._worst) < self._worst_n:
            heapq.heappush(self._worst, entry)
        else:
            heapq.heappushpop(self._worst, entry)

    def finish(self) -> None:
        while self._open:
            self._close(self._open.popitem(last=False)[1][1])

    def worst(self) -> list[TurnTally]:
        return [entry[2] for entry in sorted(self._worst, reverse=True)]
