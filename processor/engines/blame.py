"""Who a call's outcome is evidence about: its tool's circuit, its server's, or neither.

The rules are data (``BLAME_RULES``), written once here and shown as a table in
``docs/breaker.md`` (a test keeps the two in step). The principle: a circuit counts only
what is evidence about the thing it stands for.

- The **tool** circuit counts every failure of the tool against it, and a success for it.
  A protocol error (invalid params) is the caller's mistake, not the tool's: not counted.
- The **server** circuit stands for the MCP server and its session, so only a failure
  about the session counts against it: the server never answered (connection refused,
  session closed), or a proxy in front of it said its upstream MCP session is gone.
  Any answer from the server — a success, or a tool that ran and reported failure, even
  a failure whose text says its own backend was unreachable — shows the server is alive
  and counts for it. A timeout is no answer, and no evidence either way about the server.

So a dead tool on a live server opens its tool's circuit and leaves the server closed: its
healthy siblings keep being called. The server opens on its own evidence (session
failures, by the ratio over every tool's calls or the consecutive fast path), or when
most of its tools are open at once (the blast radius, ``Breaker``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from mcp_breaker_client.shared.verdict import FailureClass, FailureOrigin, Outcome

from processor.classify.events import ToolCall


class CallEvidence(enum.StrEnum):
    """What one call's outcome says, for blame."""

    OK = "ok"  # the call succeeded
    SESSION_FAILURE = "session_failure"  # no answer from the server, or its session is gone
    NO_ANSWER = "no_answer"  # timed out waiting for the server's answer
    TOOL_FAILURE = "tool_failure"  # the server answered: the tool reported a failure
    CALLER_ERROR = "caller_error"  # a protocol error: the caller's invalid request
    NO_OUTCOME = "no_outcome"  # neutral (declined, dismissed, cancelled) or unknown


class Count(enum.Enum):
    FAILURE = "failure"  # counts against the circuit
    SUCCESS = "success"  # counts for it
    NOTHING = "nothing"  # not recorded


@dataclass(frozen=True, slots=True)
class BlameRule:
    tool: Count
    server: Count


BLAME_RULES: Mapping[CallEvidence, BlameRule] = {
    CallEvidence.OK: BlameRule(tool=Count.SUCCESS, server=Count.SUCCESS),
    CallEvidence.SESSION_FAILURE: BlameRule(tool=Count.FAILURE, server=Count.FAILURE),
    CallEvidence.NO_ANSWER: BlameRule(tool=Count.FAILURE, server=Count.NOTHING),
    CallEvidence.TOOL_FAILURE: BlameRule(tool=Count.FAILURE, server=Count.SUCCESS),
    CallEvidence.CALLER_ERROR: BlameRule(tool=Count.NOTHING, server=Count.SUCCESS),
    CallEvidence.NO_OUTCOME: BlameRule(tool=Count.NOTHING, server=Count.NOTHING),
}

# A failure whose origin was not recorded (an event built elsewhere) is read by its class.
_ORIGIN_OF_CLASS = {
    FailureClass.TRANSPORT: FailureOrigin.SESSION,
    FailureClass.TIMEOUT: FailureOrigin.NO_ANSWER,
}
_EVIDENCE_OF_ORIGIN = {
    FailureOrigin.SESSION: CallEvidence.SESSION_FAILURE,
    FailureOrigin.NO_ANSWER: CallEvidence.NO_ANSWER,
    FailureOrigin.TOOL: CallEvidence.TOOL_FAILURE,
}


def call_evidence(call: ToolCall) -> CallEvidence:
    if call.outcome is Outcome.OK:
        return CallEvidence.OK
    if call.outcome is not Outcome.FAILED:
        return CallEvidence.NO_OUTCOME
    if call.failure_class is FailureClass.PROTOCOL:
        return CallEvidence.CALLER_ERROR
    origin = call.verdict.origin
    if origin is None:
        origin = _ORIGIN_OF_CLASS.get(call.failure_class or FailureClass.TOOL_ERROR)
    return _EVIDENCE_OF_ORIGIN[origin or FailureOrigin.TOOL]


# The rule of each (outcome, failure class, origin): every call asks, the answer depends
# on these three alone, and they take few values.
_BLAME_OF: dict[tuple[Outcome, FailureClass | None, FailureOrigin | None], BlameRule] = {}


def blame(call: ToolCall) -> BlameRule:
    verdict = call.verdict
    shape = (verdict.outcome, verdict.failure_class, verdict.origin)
    rule = _BLAME_OF.get(shape)
    if rule is None:
        rule = _BLAME_OF[shape] = BLAME_RULES[call_evidence(call)]
    return rule
