"""Advisories to and from their wire form (mcp_breaker.v1); nothing else."""

from __future__ import annotations

from processor.advisories.model import ROSTER_COLLAPSED, TURN_BLOCKED, Advisory, AdvisoryScope
from processor.advisories.v1 import advisories_pb2 as pb
from processor.engines.circuit import State

NS = 1_000_000_000

SCOPE_TO_WIRE = {
    AdvisoryScope.SERVER: pb.SCOPE_SERVER,
    AdvisoryScope.TOOL: pb.SCOPE_TOOL,
    AdvisoryScope.TURN_TOOL: pb.SCOPE_TURN_TOOL,
    AdvisoryScope.TURN_CALL: pb.SCOPE_TURN_CALL,
    AdvisoryScope.TURN_ROSTER: pb.SCOPE_TURN_ROSTER,
}
STATE_TO_WIRE = {
    State.CLOSED.value: pb.STATE_CLOSED,
    State.OPEN.value: pb.STATE_OPEN,
    State.HALF_OPEN.value: pb.STATE_HALF_OPEN,
    State.FORCED_OPEN.value: pb.STATE_FORCED_OPEN,
    State.FORCED_CLOSED.value: pb.STATE_FORCED_CLOSED,
    TURN_BLOCKED: pb.STATE_TURN_BLOCKED,
    ROSTER_COLLAPSED: pb.STATE_ROSTER_COLLAPSED,
}


_COUNTS_DOWN = (State.OPEN.value, State.FORCED_OPEN.value)


def to_wire(advisory: Advisory, now_s: float | None = None) -> pb.Advisory:
    """``now_s``: the advisory is read now (a snapshot, GetState), so how long to wait
    counts from now, not from when it was published."""
    retry_after = advisory.retry_after_s
    if now_s is not None and advisory.state in _COUNTS_DOWN and advisory.expires_s:
        retry_after = max(0.0, advisory.expires_s - now_s)
    message = pb.Advisory(
        id=advisory.id,
        scope=SCOPE_TO_WIRE[advisory.scope],
        key=advisory.key,
        state=STATE_TO_WIRE[advisory.state],
        server=advisory.server,
        tool=advisory.tool,
        turn=advisory.turn,
        fingerprint=advisory.fingerprint,
        cause=advisory.cause,
        message=advisory.message,
        retry_after_seconds=retry_after,
        expires_unix_nano=int(advisory.expires_s * NS),
        enforced=advisory.enforced,
        tenant=advisory.tenant,
        harness=advisory.harness,
    )
    evidence = advisory.evidence
    if evidence is not None:
        message.evidence.CopyFrom(
            pb.Evidence(
                calls=evidence.calls,
                failures=evidence.failures,
                since_unix_nano=int((evidence.since_s or 0) * NS),
                trace_id=evidence.first_failure_trace_id or b"",
                span_id=evidence.first_failure_span_id or b"",
                failure_class=evidence.failure_class,
                excerpt=evidence.excerpt,
            )
        )
    return message
