"""The breaker: a decision for every tool call, from the turn's blocks and the circuits.

For each call, in span time: what state governed it when it was made (the worst of its
server's circuit, its tool's circuit and its turn's blocks), whether it was a dead call
(made while that state said no), and then what its outcome does to the circuits — whom
it blames is the data in ``blame.py``: every failure counts against its tool, only a
failure of the session counts against the server, and most of a server's tools open at
once opens the server too (the blast radius). Neutral and unknown outcomes change nothing.

Spans arrive out of order. A call is judged by the circuits' state of its own time, and a
failure that arrives after calls it stands in front of (a repeat decided before the
failure it repeats arrived, a call made after the moment a circuit opened) revises them
into dead calls within the reorder window (``reorder.py``): ``CallDecision.revised``.

Every decision carries its evidence and a model-facing message (``refusals.py``) built
only from the redacted excerpt, so a harness can tell the model what is out, why, and since
when.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from mcp_breaker_client.shared.cheap_dataclasses import builder, slot_init
from mcp_breaker_client.shared.verdict import FailureClass, Outcome

from processor.classify.events import ToolCall
from processor.config import BreakerConfig, Rule
from processor.engines.blame import Count, blame
from processor.engines.bounded import LruMap
from processor.engines.circuit import (
    BLOCKING,
    Circuit,
    CircuitKey,
    CircuitMachine,
    FailureRecord,
    Permit,
    Scope,
    State,
    Transition,
    Trigger,
)
from processor.engines.refusals import Evidence, refusal, turn_message
from processor.engines.reorder import ReorderWindow, Seen
from processor.engines.turns import NS_PER_S, Block, TurnBreaker, TurnScope, turn_key

# Which state governs a call: the worst of its circuits, except that an operator's word
# beats the evidence (forced closed on a server lets its tools through, too).
_SEVERITY = {
    State.CLOSED: 0,
    State.HALF_OPEN: 1,
    State.OPEN: 2,
    State.FORCED_CLOSED: 3,
    State.FORCED_OPEN: 4,
}
_FORCED = (State.FORCED_OPEN, State.FORCED_CLOSED)
_STATE_VALUE = {state: state.value for state in State}  # .value is a property: slower
_IN_THE_WAY = (State.OPEN, State.HALF_OPEN, State.FORCED_OPEN)  # a rule governed the call
NO_SERVER = "-"  # the server part of a key when no server could be named
# The members every call is compared with, read off their enums once: on Python 3.11 an
# enum member read off its class (Outcome.NEUTRAL) costs some 60 ns, a module name 10.
_NEUTRAL, _UNKNOWN = Outcome.NEUTRAL, Outcome.UNKNOWN
_ALLOW, _PROBE, _DENY = Permit.ALLOW, Permit.PROBE, Permit.DENY
_SERVER_SCOPE, _TOOL_SCOPE = Scope.SERVER, Scope.TOOL
_NOTHING, _FAILURE = Count.NOTHING, Count.FAILURE


# Built per call (a decision each, evidence for each refusal, refusals.py): ``slot_init``
# makes constructing one cheaper, as for the events, and keeps every dataclass behaviour.
@slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class CallDecision:
    call: ToolCall
    state: str  # the governing state when the call was made: a circuit state or turn_blocked
    rule: Rule | None  # which rule governed; None when nothing stood in the way
    key: str
    dead_call: bool
    repeat_of: bytes | None  # span id of the failure the call repeated
    enforced: bool
    forced_reason: str
    evidence: Evidence | None
    message: str  # for the model; empty when the call was not refused
    transitions: tuple[Transition, ...]
    # The call failed as an unknown tool that a listing of its turn had offered.
    stale_roster: bool = False
    # The within-turn block this call's failure opened: later calls it covers are dead.
    opened_block: Block | None = None
    # The scope of the half-open circuit that let this call through as its probe, if any.
    probe: Scope | None = None
    # Calls decided before this one arrived that it turned into dead calls (a late
    # failure they repeated, a circuit that opened before they were made): the revised
    # decisions, each ``late``. Their spans have gone on; the metrics count them now.
    revised: tuple[CallDecision, ...] = ()
    late: bool = False  # this decision revises one made when the call arrived


# One per call: the class called with these seventeen fields by keyword costs some 20% of
# ``observe`` (it gathers them into a dict first); the builder makes it a third cheaper.
build_call_decision = builder(CallDecision)


class Breaker:
    def __init__(
        self,
        config: BreakerConfig,
        *,
        jitter: Callable[[], float] | None = None,
    ) -> None:
        self.config = config
        self._jitter = jitter
        self.clear()

    def clear(self) -> None:
        """Forget every call: as new (a replica rebuilding its shared engines from the
        stream; readers that hold this breaker see the rebuilt state)."""
        config = self.config
        self.machine = CircuitMachine(config, self._jitter)
        self.turns = TurnBreaker(config)
        self.circuits: LruMap[CircuitKey, Circuit] = LruMap(config.max_circuits, self._evicted)
        # The tool circuits held for each (tenant, server): the blast radius reads these.
        self._tools_of: dict[tuple[str, str], set[CircuitKey]] = {}
        self.reorder = ReorderWindow(config.reorder_window_s, config.reorder_max_calls)
        self._keys_of: dict[tuple[str, str | None, str], tuple[CircuitKey | None, CircuitKey]] = {}
        # The latest span time any call carried: the breaker's own "now" for readers
        # between calls (a replay of old spans keeps its own clock).
        self.latest_s = 0.0

    # -- the decision -----------------------------------------------------------------
    def observe(self, call: ToolCall) -> CallDecision:
        made_s = call.start_ns / NS_PER_S
        ended_s = call.end_ns / NS_PER_S
        if ended_s > self.latest_s:  # as max(), without the call: every call passes here
            self.latest_s = ended_s
        self.reorder.prune(call.arrived_s)
        server_key, tool_key = self._keys(call.tenant, call.server, call.tool)
        transitions: list[Transition] = []
        if server_key is None:
            circuits: tuple[Circuit, ...] = (self._circuit(tool_key, call),)
        else:
            circuits = (self._circuit(server_key, call), self._circuit(tool_key, call))
        for circuit in circuits:
            transitions += self.machine.advance(circuit, made_s)
        # As of when the call was made: a span that arrives after its circuit moved meets
        # the state of its own time.
        state, governing = _governing(circuits, made_s)
        # A probe permit is for a call made now; a late call is judged by the state alone.
        late = made_s < governing.changed_s
        permit = _DENY if state in BLOCKING else _ALLOW
        outcome = call.verdict.outcome
        decisive = outcome is not _NEUTRAL and outcome is not _UNKNOWN
        if decisive and not late:
            permit, _ = self.machine.permit(governing, made_s)
        dead_across = outcome is not _NEUTRAL and permit is _DENY
        probe = governing.key.scope if permit is _PROBE else None
        rule = None
        if dead_across or state in _IN_THE_WAY:
            rule = Rule.SERVER if governing.key.scope is _SERVER_SCOPE else Rule.TOOL
        # Evidence as the harness would have seen it before making the call.
        evidence = self.evidence(governing) if rule else None
        first = governing.first_failure
        forced_reason = governing.forced_reason if state in _FORCED else ""
        turn = self.turns.observe(call)
        transitions += self._record(call, server_key, tool_key)
        if turn.dead_call and turn.block is not None:
            decision = self._decide(call, turn.block, transitions, probe, opened=turn.placed)
        else:
            decision = build_call_decision(
                call=call,
                state=_STATE_VALUE[state],
                rule=rule,
                key=governing.key.name if rule else "",
                dead_call=dead_across,
                repeat_of=first.span_id if dead_across and first else None,
                enforced=self.enforced(rule),
                forced_reason=forced_reason,
                evidence=evidence,
                message=refusal(call, governing, state, evidence, forced_reason)
                if dead_across and evidence
                else "",
                transitions=tuple(transitions),
                opened_block=turn.placed,
                probe=probe,
            )
        # Most calls open no block and move no circuit: nothing they could revise.
        revised: tuple[CallDecision, ...] = ()
        if turn.placed is not None or transitions:
            revised = self._revise(turn.placed, call, transitions)
        if outcome is not _NEUTRAL:
            keys = (
                (turn_key(call), tool_key, server_key) if server_key else (turn_key(call), tool_key)
            )
            self.reorder.add(Seen(call, keys, dead=decision.dead_call))
        return replace(decision, revised=revised) if revised else decision

    def _decide(
        self,
        call: ToolCall,
        block: Block,
        transitions: list[Transition],
        probe: Scope | None,
        *,
        late: bool = False,
        opened: Block | None = None,
    ) -> CallDecision:
        rule = Rule.TURN_TOOL if block.scope is TurnScope.TOOL else Rule.TURN_CALL
        return build_call_decision(
            call=call,
            state="turn_blocked",
            rule=rule,
            key=block.key,
            dead_call=True,
            repeat_of=block.span_id,
            enforced=self.enforced(rule),
            forced_reason="",
            evidence=Evidence(
                calls=0,
                failures=1,
                since_s=block.at_ns / NS_PER_S,
                first_failure_trace_id=block.trace_id,
                first_failure_span_id=block.span_id,
                failure_class=block.failure_class.value if block.failure_class else "",
                excerpt=block.excerpt,
                retry_after_s=None,
            ),
            message=turn_message(call, block),
            transitions=tuple(transitions),
            opened_block=opened,
            probe=probe,
            late=late,
        )

    # -- spans out of order ---------------------------------------------------------------
    def _revise(
        self, placed: Block | None, call: ToolCall, transitions: list[Transition]
    ) -> tuple[CallDecision, ...]:
        """The calls already decided that this call's failure stands in front of."""
        revised: list[CallDecision] = []
        if placed is not None:
            for seen in self.reorder.under(turn_key(call)):
                if not seen.dead and self.turns.repeats(placed, seen.call):
                    seen.dead = True
                    revised.append(self._decide(seen.call, placed, [], None, late=True))
        for transition in transitions:
            if transition.target is State.OPEN:
                revised += self._revise_open(transition)
        return tuple(revised)

    def _revise_open(self, opened: Transition) -> list[CallDecision]:
        """Calls made while this circuit was (as we now know) open, decided as allowed."""
        circuit = self.circuits.peek(opened.key)
        if circuit is None:
            return []
        rule = Rule.SERVER if opened.key.scope is Scope.SERVER else Rule.TOOL
        revised = []
        for seen in self.reorder.under(opened.key):
            made_s = seen.call.start_ns / NS_PER_S
            if seen.dead or not opened.at_s <= made_s < circuit.open_until_s:
                continue
            seen.dead = True
            evidence = self.evidence(circuit)
            revised.append(
                CallDecision(
                    call=seen.call,
                    state=State.OPEN.value,
                    rule=rule,
                    key=opened.key.name,
                    dead_call=True,
                    repeat_of=circuit.first_failure.span_id if circuit.first_failure else None,
                    enforced=self.enforced(rule),
                    forced_reason="",
                    evidence=evidence,
                    message=refusal(seen.call, circuit, State.OPEN, evidence, ""),
                    transitions=(),
                    late=True,
                )
            )
        return revised

    # -- what an outcome does to the circuits -----------------------------------------------
    def _record(
        self, call: ToolCall, server_key: CircuitKey | None, tool_key: CircuitKey
    ) -> list[Transition]:
        """The call's outcome, into the circuits it is evidence about (``blame.py``)."""
        counts = blame(call)
        nothing, against = _NOTHING, _FAILURE
        if counts.tool is nothing and counts.server is nothing:
            return []
        at_s = call.end_ns / NS_PER_S
        # Only a failure is kept as evidence: a success is not worth building one for.
        failure = None
        if counts.tool is against or counts.server is against:
            failure = FailureRecord(
                at_s=at_s,
                trace_id=call.trace_id,
                span_id=call.span_ids[0],
                failure_class=(call.failure_class or FailureClass.TOOL_ERROR).value,
                excerpt=call.verdict.error_excerpt,
            )
        events: list[Transition] = []
        if server_key is not None and counts.server is not nothing:
            server = self._circuit(server_key, call)
            failed = counts.server is against
            events += self.machine.record(server, failed, at_s, failure)
        if counts.tool is not nothing:
            tool = self._circuit(tool_key, call)
            failed = counts.tool is against
            moved = self.machine.record(tool, failed, at_s, failure)
            events += moved
            if server_key is not None and moved and any(t.target is State.OPEN for t in moved):
                events += self._blast_radius(server_key, tool, at_s)
        return events

    def _blast_radius(self, server_key: CircuitKey, tool: Circuit, at_s: float) -> list[Transition]:
        """A tool just opened: if most of its server's tools are open, the server is out."""
        server = self._circuit(server_key)
        if server.state not in (State.CLOSED, State.HALF_OPEN):
            return []
        if not self.server_out(server_key.name, server_key.tenant, at_s):
            return []
        if server.first_failure is None:  # the evidence the server's refusals quote
            server.first_failure, server.since_s = tool.first_failure, tool.since_s
        return [self.machine.trip(server, Trigger.BLAST_RADIUS, at_s)]

    # -- manual control -----------------------------------------------------------------
    def force(
        self, key: CircuitKey, target: State, until_s: float, reason: str, now_s: float
    ) -> Transition:
        return self.machine.force(self._circuit(key), target, until_s, reason, now_s)

    def release(self, key: CircuitKey, reason: str, now_s: float) -> Transition | None:
        circuit = self.circuits.peek(key)  # releasing an unknown circuit creates nothing
        return self.machine.release(circuit, reason, now_s) if circuit is not None else None

    # -- reading the state --------------------------------------------------------------
    def blocking(self, server: str | None, tool: str, tenant: str = "") -> bool:
        """Is the tool's or its server's circuit open now (the latest span time seen)?"""
        server_key, tool_key = self._keys(tenant, server, tool)
        for key in (tool_key, server_key):
            circuit = self.circuits.peek(key) if key is not None else None
            if circuit is not None and self.machine.state_at(circuit, self.latest_s) in BLOCKING:
                return True
        return False

    def server_out(self, server: str, tenant: str = "", now_s: float | None = None) -> bool:
        """Blast radius: more than ``blast_radius_ratio`` of a server's tools are open (as
        of ``now_s``: a circuit whose open period ran out is half-open, moved or not)."""
        now_s = self.latest_s if now_s is None else now_s
        tools = [
            c
            for key in self._tools_of.get((tenant, server), ())
            if (c := self.circuits.peek(key)) is not None
        ]
        if len(tools) < self.config.blast_radius_min_tools:
            return False
        open_tools = sum(1 for c in tools if self.machine.state_at(c, now_s) in BLOCKING)
        return open_tools / len(tools) > self.config.blast_radius_ratio

    def _keys(
        self, tenant: str, server: str | None, tool: str
    ) -> tuple[CircuitKey | None, CircuitKey]:
        """The circuits of a call: its server's (when named) and its tool's. Made once per
        tool: every call builds them, and making a key costs more than looking it up."""
        named = (tenant, server, tool)
        keys = self._keys_of.get(named)
        if keys is None:
            if len(self._keys_of) >= self.config.max_circuits:  # bounded like the circuits
                self._keys_of.clear()
            tool_key = CircuitKey(Scope.TOOL, f"{server or NO_SERVER}/{tool}", tenant)
            server_key = CircuitKey(Scope.SERVER, server, tenant) if server else None
            keys = self._keys_of[named] = (server_key, tool_key)
        return keys

    def _circuit(self, key: CircuitKey, call: ToolCall | None = None) -> Circuit:
        circuit = self.circuits.get(key)  # almost always there: no maker to build
        if circuit is None:
            circuit = self.circuits.setdefault(key, lambda: Circuit(key))
        if call is not None and not circuit.server and call.server and key.scope is _TOOL_SCOPE:
            circuit.server = call.server
            self._tools_of.setdefault((key.tenant, call.server), set()).add(key)
        return circuit

    def _evicted(self, key: CircuitKey, circuit: Circuit) -> None:
        if key.scope is Scope.TOOL and circuit.server:
            tools = self._tools_of.get((key.tenant, circuit.server))
            if tools is not None:
                tools.discard(key)
                if not tools:
                    del self._tools_of[(key.tenant, circuit.server)]

    def enforced(self, rule: Rule | None) -> bool:
        return not self.config.shadow and (
            rule is None or rule.value not in self.config.shadow_rules
        )

    def evidence(self, circuit: Circuit) -> Evidence:
        calls, failures = circuit.calls_and_failures()
        first = circuit.first_failure
        retry_after = None
        if circuit.state is State.OPEN:
            retry_after = max(0.0, circuit.open_until_s - circuit.last_s)
        elif circuit.state is State.FORCED_OPEN:
            retry_after = max(0.0, circuit.forced_until_s - circuit.last_s)
        return Evidence(
            calls=calls,
            failures=failures,
            since_s=circuit.since_s,
            first_failure_trace_id=first.trace_id if first else None,
            first_failure_span_id=first.span_id if first else None,
            failure_class=first.failure_class if first else "",
            excerpt=first.excerpt if first else "",
            retry_after_s=retry_after,
        )


def _governing(circuits: tuple[Circuit, ...], made_s: float) -> tuple[State, Circuit]:
    """The worst state among the call's circuits as of ``made_s``, and whose it is (the
    server's on a tie: it comes first)."""
    state, governing = circuits[0].state_as_of(made_s), circuits[0]
    for circuit in circuits[1:]:
        other = circuit.state_as_of(made_s)
        if _SEVERITY[other] > _SEVERITY[state]:
            state, governing = other, circuit
    return state, governing
