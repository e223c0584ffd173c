"""Write the verdicts back onto the spans they were read from, as ``mcp.breaker.*``.

Only spans of the request being processed can be annotated: a call decided later (its
other half came in another request, or never) goes out with the spans unannotated, and
its decision reaches the metrics and the advisories all the same. An attribute the span
already carries is never overwritten.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.engines.breaker import CallDecision
from processor.engines.roster import RosterFinding

PREFIX = "mcp.breaker."
ROSTER_PREFIX = "mcp.roster."


def decision_attributes(decision: CallDecision) -> dict[str, str | bool]:
    call = decision.call
    values: dict[str, str | bool] = {
        "outcome": call.outcome.value,
        "state": decision.state,
        "dead_call": decision.dead_call,
        "enforced": decision.enforced,
    }
    if call.failure_class is not None:
        values["failure_class"] = call.failure_class.value
    if call.verdict.neutral_reason is not None:
        values["neutral_reason"] = call.verdict.neutral_reason.value
    if call.fingerprint:
        values["fingerprint"] = call.fingerprint
    if decision.rule is not None:
        values["rule"] = decision.rule.value
    if decision.repeat_of:
        values["repeat_of"] = decision.repeat_of.hex()
    attributes = {PREFIX + key: value for key, value in values.items()}
    if decision.stale_roster:
        attributes[ROSTER_PREFIX + "stale"] = True
    return attributes


def roster_attributes(finding: RosterFinding) -> dict[str, str | bool]:
    values: dict[str, str | bool] = {"state": finding.state.value}
    if finding.missing_attributes:
        values["missing_attributes"] = ",".join(finding.missing_attributes)
    collapse = finding.collapse
    if collapse is not None:
        values["collapse"] = collapse.recovered_round is None
        values["collapse_rounds"] = f"{collapse.from_round}-{collapse.to_round}"
    health = finding.namespaces
    if health is not None:
        values["attachment"] = health.attachment.value
        if health.missing:
            values["missing_namespaces"] = ",".join(health.missing)
        values["startup_race"] = health.startup_race
    if finding.stale_tools:
        values["stale_tools"] = ",".join(finding.stale_tools)
    return {ROSTER_PREFIX + key: value for key, value in values.items()}


def annotate(spans: Mapping[bytes, Span], decision: CallDecision) -> int:
    """Add the decision's attributes to each of its spans present here; return how many."""
    return _add(spans, decision.call.span_ids, decision_attributes(decision))


def annotate_listing(spans: Mapping[bytes, Span], finding: RosterFinding) -> int:
    return _add(spans, finding.listing.span_ids, roster_attributes(finding))


def _add(
    spans: Mapping[bytes, Span], span_ids: tuple[bytes, ...], attributes: dict[str, str | bool]
) -> int:
    annotated = 0
    for span_id in span_ids:
        span = spans.get(span_id)
        if span is None:
            continue
        present = {kv.key for kv in span.attributes}
        for key, value in attributes.items():
            if key in present:
                continue
            item = span.attributes.add(key=key)
            if isinstance(value, bool):
                item.value.CopyFrom(AnyValue(bool_value=value))
            else:
                item.value.CopyFrom(AnyValue(string_value=value))
        annotated += 1
    return annotated
