"""Advisories: what a harness needs to know to stop calling a dead tool, as plain data.

An advisory names what is out (a server, a tool, a tool for one turn, one exact call for
one turn), its state, why, since when, until when, and the message for the model. It is
made from the breaker's decisions: a circuit that moved (``from_transition``) or a
failure that opened a block for the rest of its turn (``from_block``). A change is an
advisory with the same id and a new state; ``closed`` means it no longer applies.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace

from mcp_breaker_client.shared import messages

from processor.classify.events import ToolCall, ToolListing
from processor.engines.breaker import NO_SERVER
from processor.engines.circuit import Circuit, Scope, State
from processor.engines.refusals import Evidence, circuit_message, turn_message
from processor.engines.roster import Collapse
from processor.engines.turns import NS_PER_S, Block, TurnScope


class AdvisoryScope(enum.StrEnum):
    SERVER = "server"
    TOOL = "tool"
    TURN_TOOL = "turn_tool"
    TURN_CALL = "turn_call"
    TURN_ROSTER = "turn_roster"


TURN_BLOCKED = "turn_blocked"
ROSTER_COLLAPSED = "roster_collapsed"  # tells the harness to re-list; refuses no call
CLOSED = State.CLOSED.value
# States in which the harness must not make the call (half-open asks for a probe permit).
BLOCKING_STATES = frozenset({State.OPEN.value, State.FORCED_OPEN.value, TURN_BLOCKED})
TURN_SCOPES = (AdvisoryScope.TURN_TOOL, AdvisoryScope.TURN_CALL, AdvisoryScope.TURN_ROSTER)


@dataclass(frozen=True, slots=True, kw_only=True)
class Advisory:
    id: str
    scope: AdvisoryScope
    key: str
    state: str  # a circuit State value, or turn_blocked
    tenant: str
    server: str = ""
    tool: str = ""
    turn: str = ""
    fingerprint: str = ""
    cause: str = ""
    message: str = ""
    retry_after_s: float = 0.0
    expires_s: float = 0.0  # Unix seconds; 0 = until changed
    evidence: Evidence | None = None
    enforced: bool = True
    harness: str = ""

    @property
    def blocking(self) -> bool:
        return self.state in BLOCKING_STATES

    @property
    def in_force(self) -> bool:
        return self.state not in (CLOSED, State.FORCED_CLOSED.value)

    def closed(self, cause: str) -> Advisory:
        return replace(self, state=CLOSED, cause=cause, message="", retry_after_s=0.0)


def circuit_id(tenant: str, scope: Scope, name: str) -> str:
    return f"{tenant}|{scope.value}|{name}"


def turn_tool_id(tenant: str, turn: str, server: str, tool: str) -> str:
    return f"{tenant}|turn_tool|{turn}|{server}/{tool}"


def turn_call_id(tenant: str, turn: str, fingerprint: str) -> str:
    return f"{tenant}|turn_call|{turn}|{fingerprint}"


def turn_roster_id(tenant: str, turn: str) -> str:
    return f"{tenant}|turn_roster|{turn}"


def from_circuit(
    circuit: Circuit,
    state: State,
    *,
    cause: str,
    evidence: Evidence,
    enforced: bool,
    half_open_ttl_s: float,
    harness: str = "",
    now_s: float | None = None,
) -> Advisory:
    """The advisory for a circuit as it now stands (closed ones say it no longer applies).

    ``now_s``: the advisory is read at this time (a Check, an operator), so how long to
    wait counts from it; without it, from the circuit's latest span, as the evidence does.
    """
    key = circuit.key
    server, _, tool = key.name.partition("/") if key.scope is Scope.TOOL else (key.name, "", "")
    if server == NO_SERVER:
        server = ""
    subject = (
        messages.tool_subject(tool, server)
        if key.scope is Scope.TOOL
        else messages.server_subject(key.name)
    )
    expires = 0.0
    if state is State.OPEN:
        expires = circuit.open_until_s  # then half-open: a probe may go
    elif state is State.HALF_OPEN:
        expires = circuit.last_s + half_open_ttl_s
    elif state in (State.FORCED_OPEN, State.FORCED_CLOSED):
        expires = circuit.forced_until_s
    blocking = state in (State.OPEN, State.FORCED_OPEN)
    # A released circuit keeps its last reason; it explains only a forced state.
    forced = state in (State.FORCED_OPEN, State.FORCED_CLOSED)
    forced_reason = circuit.forced_reason if forced else ""
    retry_after = evidence.retry_after_s or 0.0
    if now_s is not None:
        until = {State.OPEN: circuit.open_until_s, State.FORCED_OPEN: circuit.forced_until_s}
        retry_after = max(0.0, until[state] - now_s) if state in until else 0.0
    return Advisory(
        id=circuit_id(key.tenant, key.scope, key.name),
        scope=AdvisoryScope(key.scope.value),
        key=key.name,
        state=state.value,
        tenant=key.tenant,
        server=server,
        tool=tool,
        cause=cause,
        message=circuit_message(
            subject, state, evidence, forced_reason, until_s=expires, at_s=_read_at(circuit, now_s)
        )
        if blocking
        else "",
        retry_after_s=retry_after,
        expires_s=expires,
        evidence=evidence,
        enforced=enforced,
        harness=harness,
    )


def _read_at(circuit: Circuit, now_s: float | None) -> float:
    """From when a message counts its "for about ...": when it is read, else when the
    circuit last moved (so every replica writes the same words for the same circuit)."""
    if now_s is not None:
        return now_s
    changed = circuit.changed_s
    return changed if math.isfinite(changed) else circuit.last_s


def from_block(
    call: ToolCall, block: Block, *, enforced: bool, turn_idle_s: float
) -> Advisory | None:
    """The advisory for a failure that closed a tool (or one exact call) for its turn."""
    server = call.server or ""
    if block.scope is TurnScope.TOOL:
        scope, advisory_id = (
            AdvisoryScope.TURN_TOOL,
            turn_tool_id(call.tenant, call.turn, server, call.tool),
        )
    elif call.fingerprint:
        scope, advisory_id = (
            AdvisoryScope.TURN_CALL,
            turn_call_id(call.tenant, call.turn, call.fingerprint),
        )
    else:
        return None
    at_s = block.at_ns / NS_PER_S
    failure_class = block.failure_class.value if block.failure_class else ""
    return Advisory(
        id=advisory_id,
        scope=scope,
        key=block.key,
        state=TURN_BLOCKED,
        tenant=call.tenant,
        server=server,
        tool=call.tool,
        turn=call.turn,
        fingerprint=call.fingerprint or "" if scope is AdvisoryScope.TURN_CALL else "",
        cause=failure_class,
        message=turn_message(call, block),
        expires_s=at_s + turn_idle_s,  # the breaker forgets an idle turn then
        evidence=Evidence(
            calls=1,
            failures=1,
            since_s=at_s,
            first_failure_trace_id=block.trace_id,
            first_failure_span_id=block.span_id,
            failure_class=failure_class,
            excerpt=block.excerpt,
            retry_after_s=None,
        ),
        enforced=enforced,
        harness=call.harness,
    )


def from_collapse(
    listing: ToolListing, collapse: Collapse, *, turn_idle_s: float, enforced: bool = True
) -> Advisory:
    """The harness's roster fell to no tools mid-turn (or, recovered, no longer has).

    The model is about to answer without the tools it had a round ago, and will say they
    are gone; the harness should list them again before the next model request.
    """
    rounds = (
        f"round {collapse.from_round}"
        if collapse.from_round == collapse.to_round
        else f"rounds {collapse.from_round}-{collapse.to_round}"
    )
    advisory = Advisory(
        id=turn_roster_id(listing.tenant, collapse.turn),
        scope=AdvisoryScope.TURN_ROSTER,
        key=collapse.turn,
        state=ROSTER_COLLAPSED,
        tenant=listing.tenant,
        server=listing.server or "",
        turn=collapse.turn,
        cause="collapse",
        message=messages.roster_collapsed(offered_before=collapse.offered_before, rounds=rounds),
        expires_s=listing.end_ns / NS_PER_S + turn_idle_s,
        enforced=enforced,
        harness=listing.harness,
    )
    if collapse.recovered_round is not None:
        return advisory.closed(f"recovered at round {collapse.recovered_round}")
    return advisory
