"""The report's figures, gathered from what the pipeline emits: a sink of its findings.

Per server and per tool: calls, outcomes (every one has its column, ``unknown`` too),
failure classes, hidden failures, neutral outcomes (declined, dismissed, cancelled,
refused on an advisory). The counterfactual: every call the enforcing replay refused
(``enforce.py``: a decision that says ``dead_call`` and ``enforced``), within a turn (rules
``turn_call``, ``turn_tool``) or across turns (``tool``, ``server``); its recorded outcome
says what refusing it would have spared (a failure) or cost (a success). Dead calls no
harness could have refused (made before the failure they repeat had ended, or found dead
only when a late span came) are counted on their own, ``dead_calls_in_flight``. Circuits:
every transition the decisions carry. Turns and the roster have their own tallies. Every
count keeps the first ids behind it; every table keyed by names from the spans is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp_breaker_client.shared.verdict import FailureClass, Outcome

from processor.classify.events import ToolCall
from processor.engines.breaker import CallDecision
from processor.engines.circuit import BLOCKING, State, Transition
from processor.engines.roster import RosterFinding
from processor.engines.turns import NS_PER_S
from processor.offline.figures import Count, Rows, bump, iso, name, seconds_between
from processor.offline.roster_tally import RosterTally
from processor.offline.turn_tally import WITHIN, Turns, refused

MAX_TRANSITIONS_LISTED = 256  # per circuit; the counts go on past it


@dataclass(slots=True)
class CallRow:
    """Calls to one server, or to one tool of a server."""

    cap: int
    calls: int = 0
    seconds: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict)
    failure_classes: dict[str, int] = field(default_factory=dict)
    neutral: dict[str, int] = field(default_factory=dict)
    dialects: dict[str, int] = field(default_factory=dict)
    failures: Count = field(init=False)
    hidden: Count = field(init=False)
    dead: Count = field(init=False)
    refused_ok: Count = field(init=False)

    def __post_init__(self) -> None:
        self.failures, self.hidden = Count(self.cap), Count(self.cap)
        self.dead, self.refused_ok = Count(self.cap), Count(self.cap)

    def add(self, decision: CallDecision, seconds: float) -> None:
        """One call; ``dead_calls`` counts the ones refused (see ``refused``)."""
        call = decision.call
        ids = (call.trace_id, call.span_ids[0])
        self.calls += 1
        self.seconds += seconds
        bump(self.outcomes, call.outcome.value)
        bump(self.dialects, call.dialect.value)
        if call.failure_class is not None:
            bump(self.failure_classes, call.failure_class.value)
            self.failures.add(*ids, seconds)
            if call.failure_class is FailureClass.HIDDEN:
                self.hidden.add(*ids, seconds)
        if call.verdict.neutral_reason is not None:
            bump(self.neutral, call.verdict.neutral_reason.value)
        if refused(decision):
            self.dead.add(*ids, seconds)
            if call.outcome is Outcome.OK:
                self.refused_ok.add(*ids, seconds)

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "seconds": round(self.seconds, 3),
            "outcomes": {o.value: self.outcomes.get(o.value, 0) for o in Outcome},
            "failure_classes": dict(sorted(self.failure_classes.items(), key=lambda kv: -kv[1])),
            "neutral": dict(sorted(self.neutral.items(), key=lambda kv: -kv[1])),
            "dialects": dict(self.dialects),
            "failures": self.failures.to_json(),
            "hidden_failures": self.hidden.to_json(),
            "dead_calls": self.dead.to_json(),
            "refused_that_succeeded": self.refused_ok.to_json(),
        }

    def rank(self) -> tuple[int, int, int]:
        return (self.dead.n, self.failures.n, self.calls)


@dataclass(slots=True)
class CircuitRow:
    scope: str
    key: str
    tenant: str
    opened: int = 0  # closed -> open
    reopened: int = 0  # half-open -> open: a probe failed
    closed: int = 0
    first_opened_s: float | None = None
    open_seconds: float = 0.0
    state: State = State.CLOSED
    since_s: float = 0.0
    transitions: list[dict[str, Any]] = field(default_factory=list)
    not_listed: int = 0

    def move(self, transition: Transition, call: ToolCall) -> None:
        if self.state in BLOCKING:
            self.open_seconds += max(0.0, transition.at_s - self.since_s)
        self.state, self.since_s = transition.target, transition.at_s
        if transition.target is State.OPEN:
            if transition.source is State.HALF_OPEN:
                self.reopened += 1
            else:
                self.opened += 1
                if self.first_opened_s is None:
                    self.first_opened_s = transition.at_s
        elif transition.target is State.CLOSED:
            self.closed += 1
        if len(self.transitions) >= MAX_TRANSITIONS_LISTED:
            self.not_listed += 1
            return
        self.transitions.append(
            {
                "at": iso(transition.at_s),
                "at_s": round(transition.at_s, 3),
                "from": transition.source.value,
                "to": transition.target.value,
                "trigger": transition.trigger.value,
                "trace_id": call.trace_id.hex(),
                "span_id": call.span_ids[0].hex(),
            }
        )

    def to_json(self, end_s: float) -> dict[str, Any]:
        open_s = self.open_seconds
        if self.state in BLOCKING:
            open_s += max(0.0, end_s - self.since_s)
        return {
            "scope": self.scope,
            "key": name(self.key),
            "tenant": name(self.tenant),
            "opened": self.opened,
            "reopened": self.reopened,
            "closed": self.closed,
            "first_opened_at": iso(self.first_opened_s),
            "open_seconds": round(open_s, 3),
            "state_at_end": self.state.value,
            "transitions": self.transitions,
            "transitions_not_listed": self.not_listed,
        }


class Tally:
    """One analysis's sink: give it every finding of one pipeline, then ``to_json``."""

    def __init__(self, *, ids: int, max_rows: int, worst_turns: int, turn_idle_s: float) -> None:
        self._cap = ids
        self.servers: Rows[str, CallRow] = Rows(max_rows, lambda _: CallRow(ids))
        self.tools: Rows[tuple[str, str], CallRow] = Rows(max_rows, lambda _: CallRow(ids))
        self.all_calls = CallRow(ids)
        self.refused = Count(ids)
        self.within, self.across = Count(ids), Count(ids)
        self.in_flight = Count(ids)
        self.by_rule: dict[str, Count] = {}
        self.refused_by_outcome: dict[str, Count] = {}
        self.circuits: Rows[tuple[str, str, str], CircuitRow] = Rows(
            max_rows, lambda key: CircuitRow(*(key or ("", "(other)", "")))
        )
        self.turns = Turns(idle_s=turn_idle_s, max_open=max_rows, worst=worst_turns, cap=ids)
        self.roster = RosterTally(cap=ids, max_rows=max_rows)
        self.latest_s = 0.0

    def __call__(self, finding: object) -> None:
        if isinstance(finding, CallDecision):
            self._decision(finding)
        elif isinstance(finding, RosterFinding):
            self.latest_s = max(self.latest_s, finding.listing.end_ns / NS_PER_S)
            self.roster.listing(finding)
            self.turns.listing(finding)
        # Raw events come with the decision or finding made from them: counted there.

    def _decision(self, decision: CallDecision) -> None:
        call = decision.call
        seconds = seconds_between(call.start_ns, call.end_ns)
        if decision.late:
            # A call counted when it came, found dead since: it was made all the same.
            if decision.dead_call:
                self.in_flight.add(call.trace_id, call.span_ids[0], seconds)
            return
        self.latest_s = max(self.latest_s, call.end_ns / NS_PER_S)
        server = call.server or ""
        self.all_calls.add(decision, seconds)
        self.servers.at(server).add(decision, seconds)
        self.tools.at((server, call.tool)).add(decision, seconds)
        for transition in decision.transitions:
            key = transition.key
            self.circuits.at((key.scope.value, key.name, key.tenant)).move(transition, call)
        self.turns.decision(decision)
        self.roster.decision(decision)
        ids = (call.trace_id, call.span_ids[0])
        if not refused(decision):
            if decision.dead_call:
                self.in_flight.add(*ids, seconds)
            return
        self.refused.add(*ids, seconds)
        (self.within if decision.rule in WITHIN else self.across).add(*ids, seconds)
        rule = decision.rule.value if decision.rule else ""
        self._count(self.by_rule, rule).add(*ids, seconds)
        self._count(self.refused_by_outcome, call.outcome.value).add(*ids, seconds)

    def _count(self, counts: dict[str, Count], key: str) -> Count:
        count = counts.get(key)
        if count is None:
            count = counts[key] = Count(self._cap)
        return count

    def finish(self) -> None:
        self.turns.finish()

    # -- the figures ----------------------------------------------------------------------
    def counterfactual(self) -> dict[str, Any]:
        empty = Count(self._cap)
        spared = self.refused_by_outcome.get(Outcome.FAILED.value, empty)
        return {
            "would_refuse": self.refused.to_json(),
            "within_turns": self.within.to_json(),
            "across_turns": self.across.to_json(),
            "by_rule": {rule: c.to_json() for rule, c in sorted(self.by_rule.items())},
            "by_outcome": {o: c.to_json() for o, c in sorted(self.refused_by_outcome.items())},
            "dead_calls_spared": spared.to_json(),
            "tool_seconds_saved": round(spared.seconds, 3),
            "refused_that_succeeded": self.refused_by_outcome.get(
                Outcome.OK.value, empty
            ).to_json(),
            # None when it cannot be known: no turn with refused calls recorded rounds.
            "model_rounds_saved": self.turns.rounds_saved_known(),
            "turns_with_rounds_saved": self.turns.turns_with_rounds_saved,
            "turns_without_round_numbers": self.turns.without_rounds,
            "turns_with_dead_calls": self.turns.with_dead_calls,
            "dead_calls_in_flight": self.in_flight.to_json(),
        }

    def to_json(self) -> dict[str, Any]:
        servers = sorted(self.servers.items(), key=lambda kv: kv[1].rank(), reverse=True)
        tools = sorted(self.tools.items(), key=lambda kv: kv[1].rank(), reverse=True)
        circuits = sorted(
            self.circuits.values(),
            key=lambda c: (-c.opened - c.reopened, c.first_opened_s or float("inf")),
        )
        out_servers = [{"server": name(s), **row.to_json()} for s, row in servers]
        out_tools = [{"server": name(s), "tool": name(t), **row.to_json()} for (s, t), row in tools]
        for rows, table in ((out_servers, self.servers), (out_tools, self.tools)):
            if table.overflow is not None:
                rows.append({"server": "(other)", "tool": "(other)", **table.overflow.to_json()})
        return {
            "calls": {
                **self.all_calls.to_json(),
                "servers": out_servers,
                "tools": out_tools,
            },
            "counterfactual": self.counterfactual(),
            "turns": {
                "total": self.turns.total(),
                "with_dead_calls": self.turns.with_dead_calls,
                "worst": [t.to_json() for t in self.turns.worst()],
            },
            "circuits": [c.to_json(self.latest_s) for c in circuits],
            "roster": self.roster.to_json(),
        }
