"""What a refused call is told: the message the model reads instead of the call's answer.

Built only from the redacted excerpt and the ``Evidence`` (what the circuit had seen, which
every decision carries too), so a harness can tell the model what is out, why, and for how
long. The breaker words each refused call's message with these; an advisory carries the
same words for what it says is out (``advisories/model.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from mcp_breaker_client.shared import messages
from mcp_breaker_client.shared.cheap_dataclasses import slot_init
from mcp_breaker_client.shared.turns import turn_block_message

from processor.classify.events import ToolCall
from processor.engines.circuit import Circuit, Scope, State
from processor.engines.turns import NS_PER_S, Block, TurnScope


# Built for each refusal: ``slot_init`` makes constructing one cheaper, as for the events,
# and keeps every dataclass behaviour.
@slot_init
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


def refusal(
    call: ToolCall, circuit: Circuit, state: State, evidence: Evidence, forced_reason: str
) -> str:
    """What the model reads instead of this call's answer, timed from when it was made."""
    key = circuit.key
    if key.scope is Scope.SERVER:
        subject = messages.server_subject(key.name, call.tool)
    else:
        subject = messages.tool_subject(call.tool, call.server or "")
    return circuit_message(
        subject,
        state,
        evidence,
        forced_reason,
        until_s=refused_until(circuit, state),
        at_s=call.start_ns / NS_PER_S,
    )


def refused_until(circuit: Circuit, state: State) -> float | None:
    """When a circuit in ``state`` stops refusing: its open period's end (a call may then
    test it) or its operator's deadline; None for states that do not refuse."""
    if state is State.OPEN:
        return circuit.open_until_s
    if state is State.FORCED_OPEN:
        return circuit.forced_until_s
    return None


def circuit_message(
    subject: messages.Subject,
    state: State,
    evidence: Evidence,
    forced_reason: str = "",
    *,
    until_s: float | None,
    at_s: float,
) -> str:
    """What a refusing circuit tells the model: how long from ``at_s`` until ``until_s``
    (a refusal that lasts across turns says so, or the model would try again in the next
    one). Built only from redacted text."""
    for_s = None if until_s is None else max(0.0, until_s - at_s)
    if state is State.FORCED_OPEN:
        return messages.circuit_forced_open(subject, reason=forced_reason, for_s=for_s)
    if for_s is None:
        return messages.circuit_failing(subject, why=evidence.excerpt)
    return messages.circuit_open(
        subject,
        why=evidence.excerpt,
        calls=evidence.calls,
        failures=evidence.failures,
        for_s=for_s,
    )


def turn_message(call: ToolCall, block: Block) -> str:
    return turn_block_message(
        call.tool,
        call.server or "",
        tool_wide=block.scope is TurnScope.TOOL,
        excerpt=block.excerpt,
    )
