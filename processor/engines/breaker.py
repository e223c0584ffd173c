"""The breaker: a decision for every tool call, from the turn's blocks and the circuits.

For each call, in span time: what state governed it when it was made (the worst of its
server's circuit, its tool's circuit and its turn's blocks), whether it was a dead call
(made while that state said no), and then what its outcome does to the circuits.
Transport and timeout failures count against the server, and any other answer for it;
the tool's own failures count against the tool (protocol errors, the caller's, do not);
a success counts for both. Neutral and unknown outcomes change nothing.

Every decision carries its evidence and a model-facing message built only from the
redacted excerpt, so a harness can tell the model what is out, why, and since when.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from processor.classify.events import FailureClass, Outcome, ToolCall
from processor.config import BreakerConfig, Rule
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
)
from processor.engines.turns import NS_PER_S, TOOL_WIDE, Block, TurnBreaker, TurnScope

# How bad a state is, to pick the one that governs a call.
_SEVERITY = {
    State.FORCED_CLOSED: 0,
    State.CLOSED: 1,
    State.HALF_OPEN: 2,
    State.OPEN: 3,
    State.FORCED_OPEN: 4,
}
_FORCED = (State.FORCED_OPEN, State.FORCED_CLOSED)
NO_SERVER = "-"  # the server part of a key when no server could be named


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    calls: int
    failures: int
    since_s: float | None
    first_failure_trace_id: bytes | None
    first_failure_span_id: bytes | None
    failure_class: str
    excerpt: str
    retry_after_s: float | None


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


class Breaker:
    def __init__(
        self,
        config: BreakerConfig,
        *,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.config = config
        self.machine = CircuitMachine(config, jitter)
        self.turns = TurnBreaker(config)
        self.circuits: LruMap[CircuitKey, Circuit] = LruMap(config.max_circuits)
        # The latest span time any call carried: the breaker's own "now" for readers
        # between calls (a replay of old spans keeps its own clock).
        self.latest_s = 0.0

    # -- the decision -----------------------------------------------------------------
    def observe(self, call: ToolCall) -> CallDecision:
        made_s = call.start_ns / NS_PER_S
        self.latest_s = max(self.latest_s, call.end_ns / NS_PER_S)
        server_key, tool_key = self._keys(call)
        transitions: list[Transition] = []
        circuits = [self._circuit(k) for k in (server_key, tool_key) if k is not None]
        for circuit in circuits:
            transitions += self.machine.advance(circuit, made_s)
        governing = max(circuits, key=lambda c: _SEVERITY[c.state])
        state = governing.state  # as it was when the call was made, before its outcome
        permit = Permit.ALLOW
        if call.outcome is not Outcome.NEUTRAL and call.outcome is not Outcome.UNKNOWN:
            permit, _ = self.machine.permit(governing, made_s)
        elif state in BLOCKING:
            permit = Permit.DENY
        dead_across = call.outcome is not Outcome.NEUTRAL and permit is Permit.DENY
        probe = governing.key.scope if permit is Permit.PROBE else None
        rule = None
        if dead_across or state is not State.CLOSED:
            rule = Rule.SERVER if governing.key.scope is Scope.SERVER else Rule.TOOL
        # Evidence as the harness would have seen it before making the call.
        evidence = self.evidence(governing) if rule else None
        first = governing.first_failure
        forced_reason = governing.forced_reason if state in _FORCED else ""
        turn = self.turns.observe(call)
        transitions += self._record(call, server_key, tool_key)
        if turn.dead_call and turn.block is not None:
            return self._decide(call, turn.block, transitions, probe)
        opened = turn.block  # not dead: a block, if any, was opened by this failure
        return CallDecision(
            call=call,
            state=state.value,
            rule=rule,
            key=governing.key.name if rule else "",
            dead_call=dead_across,
            repeat_of=first.span_id if dead_across and first else None,
            enforced=self.enforced(rule),
            forced_reason=forced_reason,
            evidence=evidence,
            message=_refusal(call, governing.key, evidence, forced_reason)
            if dead_across and evidence
            else "",
            transitions=tuple(transitions),
            opened_block=opened,
            probe=probe,
        )

    def _decide(
        self, call: ToolCall, block: Block, transitions: list[Transition], probe: Scope | None
    ) -> CallDecision:
        rule = Rule.TURN_TOOL if block.scope is TurnScope.TOOL else Rule.TURN_CALL
        return CallDecision(
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
            probe=probe,
        )

    def _record(
        self, call: ToolCall, server_key: CircuitKey | None, tool_key: CircuitKey
    ) -> list[Transition]:
        """The call's outcome, into the circuits it bears on.

        The server circuit tracks whether the server can be reached: a transport or
        timeout failure counts against it, and any answer from it (a success, or a tool
        that ran and failed) counts for it. The tool circuit tracks the tool: a success
        counts for it, its own failures against it, except protocol errors (invalid
        params), which are the caller's, not the tool's.
        """
        at_s = call.end_ns / NS_PER_S
        if call.outcome is not Outcome.OK and call.outcome is not Outcome.FAILED:
            return []  # neutral and unknown outcomes change nothing
        server_failed = call.outcome is Outcome.FAILED and call.failure_class in TOOL_WIDE
        tool_failed = call.outcome is Outcome.FAILED and not server_failed
        failure = FailureRecord(
            at_s=at_s,
            trace_id=call.trace_id,
            span_id=call.span_ids[0],
            failure_class=(call.failure_class or FailureClass.TOOL_ERROR).value,
            excerpt=call.verdict.error_excerpt,
        )
        events: list[Transition] = []
        if server_key is not None:
            server = self._circuit(server_key)
            events += self.machine.record(server, server_failed, at_s, failure)
        elif server_failed:
            tool_failed = True  # no server to blame: the tool is what the harness sees fail
        counts_for_tool = call.failure_class is not FailureClass.PROTOCOL
        if (not server_failed or server_key is None) and counts_for_tool:
            events += self.machine.record(self._circuit(tool_key), tool_failed, at_s, failure)
        return events

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
        """Is the tool's or its server's circuit open right now (as last seen)?"""
        keys = [CircuitKey(Scope.TOOL, f"{server or NO_SERVER}/{tool}", tenant)]
        if server:
            keys.append(CircuitKey(Scope.SERVER, server, tenant))
        return any(c is not None and c.state in BLOCKING for c in map(self.circuits.peek, keys))

    def server_out(self, server: str) -> bool:
        """Blast radius: when most of a server's tools are open, the server is out.

        Read from the circuits themselves (bounded), at the cost of a scan: it is asked
        when a circuit changes state, not on every call.
        """
        prefix = f"{server}/"
        tools = [
            c
            for c in self.circuits.values()
            if c.key.scope is Scope.TOOL and c.key.name.startswith(prefix)
        ]
        if len(tools) < self.config.blast_radius_min_tools:
            return False
        open_tools = sum(1 for c in tools if c.state in BLOCKING)
        return open_tools / len(tools) >= self.config.blast_radius_ratio

    def _keys(self, call: ToolCall) -> tuple[CircuitKey | None, CircuitKey]:
        server = call.server or NO_SERVER
        tool = CircuitKey(Scope.TOOL, f"{server}/{call.tool}", call.tenant)
        server_key = CircuitKey(Scope.SERVER, call.server, call.tenant) if call.server else None
        return server_key, tool

    def _circuit(self, key: CircuitKey) -> Circuit:
        return self.circuits.setdefault(key, lambda: Circuit(key))

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


def _refusal(call: ToolCall, key: CircuitKey, evidence: Evidence, forced_reason: str) -> str:
    what = (
        f"`{call.tool}` (MCP server `{key.name}`)"
        if key.scope is Scope.SERVER
        else f"`{call.tool}`"
    )
    return circuit_message(what, evidence, forced_reason)


def _clock(seconds: float | None) -> str:
    return time.strftime("%H:%M", time.gmtime(seconds)) if seconds is not None else "?"


def circuit_message(what: str, evidence: Evidence, forced_reason: str = "") -> str:
    """``what`` is unavailable: why; counts since when. Built only from redacted text."""
    why = evidence.excerpt or forced_reason or "it has been failing"
    successes = evidence.calls - evidence.failures
    return (
        f"{what} is unavailable: {why}; {evidence.calls} calls, {successes} successes since "
        f"{_clock(evidence.since_s)} UTC. Do not call it again this turn; answer what you "
        f"can without it."
    )


def turn_message(call: ToolCall, block: Block) -> str:
    why = block.excerpt or "it failed"
    if block.scope is TurnScope.TOOL:
        return (
            f"`{call.tool}` is unavailable for the rest of this turn: {why}. Do not call it "
            f"again this turn; answer what you can without it."
        )
    return (
        f"This exact call to `{call.tool}` already failed in this turn: {why}. Do not repeat "
        f"it; change the arguments or answer without it."
    )
