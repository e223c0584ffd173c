"""The in-flight pipeline: spans in any order and any batching come out judged the same.

Spans of one turn arrive in several export requests and not in span-time order (batching
span processors, several processes, a collector tier in front). These tests send the
same turn in order, in reverse, and split and shuffled at random, through the real
``Pipeline`` (classifier, breaker, annotation) on a fake arrival clock that moves less
than ``breaker.reorder_window_s`` between requests, and compare what an SRE would read:
the dead calls and the seconds they cost, counted from every decision the pipeline hands
its sinks (late revisions included). And every call span that leaves carries at least
its own outcome, decided or not.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.classify.classifier import Classifier
from processor.config import BreakerConfig, ClassifyConfig
from processor.engines.breaker import Breaker, CallDecision
from processor.inflight.pipeline import Pipeline
from tests.classify_builders import CLIENT, SERVER, key_values, make_request

NS_PER_S = 1_000_000_000
TURN_START_NS = 1_787_015_196_000_000_000  # 2026-08-18T01:06:36Z, the seed's turn
SESSION_CLOSED = "mcp-beaver: upstream MCP session is closed"
ARRIVAL_STEP_S = 0.5  # arrival time between two requests: well inside the reorder window


@dataclass(frozen=True)
class CallSpec:
    """One call of a turn: when it starts (seconds into the turn), how long, what."""

    at_s: float
    tool: str
    outcome: str  # ok, transport (the session), tool_error (with arguments)
    args: int = 0
    duration_s: float = 2.0


class Sink:
    def __init__(self) -> None:
        self.decisions: list[CallDecision] = []

    def __call__(self, finding: object) -> None:
        if isinstance(finding, CallDecision):
            self.decisions.append(finding)

    def dead(self) -> list[CallDecision]:
        return [d for d in self.decisions if d.dead_call]

    def dead_span_ids(self) -> set[bytes]:
        return {d.call.span_ids[0] for d in self.dead()}

    def dead_seconds(self) -> float:
        return round(sum((d.call.end_ns - d.call.start_ns) / NS_PER_S for d in self.dead()), 6)


def span_id_of(index: int) -> bytes:
    return (0xC0FFEE_0000 + index).to_bytes(8, "big")


def call_span(index: int, spec: CallSpec, turn: str = "turn-0106") -> Span:
    start = TURN_START_NS + round(spec.at_s * NS_PER_S)
    attributes: dict[str, Any] = {
        "mcp.tool.name": spec.tool,
        "mcp.server.name": "playwright",
        "mcp.turn.id": turn,
        "mcp.tool.arguments": json.dumps({"url": f"https://example.test/{spec.args}"}),
    }
    if spec.outcome == "ok":
        attributes["mcp.tool.outcome"] = "ok"
    elif spec.outcome == "transport":
        attributes |= {"mcp.tool.outcome": "failed", "mcp.tool.error": SESSION_CLOSED}
    else:
        attributes |= {"mcp.tool.outcome": "failed", "mcp.tool.error": "selector not found"}
    span = Span(
        name="mcp.tool.call",
        trace_id=hashlib.sha256(turn.encode()).digest()[:16],
        span_id=span_id_of(index),
        kind=CLIENT,
        start_time_unix_nano=start,
        end_time_unix_nano=start + round(spec.duration_s * NS_PER_S),
    )
    span.attributes.extend(key_values(attributes))
    return span


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pipeline(breaker: BreakerConfig | None = None) -> tuple[Pipeline, Sink, Clock]:
    sink, clock = Sink(), Clock()
    engine = Breaker(breaker or BreakerConfig(), jitter=lambda: 0.5)
    return Pipeline(Classifier(ClassifyConfig()), engine, (sink,), clock=clock), sink, clock


def send(batches: Sequence[Sequence[Span]], breaker: BreakerConfig | None = None) -> Sink:
    """Each batch one export request, ARRIVAL_STEP_S apart; then everything decided."""
    run, sink, clock = pipeline(breaker)
    for batch in batches:
        run(make_request(*batch))
        clock.now += ARRIVAL_STEP_S
    run.flush()
    return sink


# The seed's 01:06 turn: eight calls to the dead Playwright tool, rounds 1 to 11.
SEED_TURN = [
    CallSpec(at_s, "playwright__browser_navigate", "transport")
    for at_s in (0, 12, 20, 21, 30, 31, 40, 41)
]


def test_the_seed_turn_in_reverse_counts_the_same_dead_calls_and_seconds() -> None:
    spans = [call_span(i, spec) for i, spec in enumerate(SEED_TURN)]
    in_order = send([spans[:3], spans[3:6], spans[6:]])
    backwards = send([spans[6:][::-1], spans[3:6][::-1], spans[:3][::-1]])
    assert len(in_order.dead()) == 7  # every repeat of the first call
    assert in_order.dead_span_ids() == backwards.dead_span_ids()
    assert in_order.dead_seconds() == backwards.dead_seconds() == 14.0
    # Revised as each earlier failure arrived: each names a failure that ended before it
    # began (the earliest known then), which the first call's arrival may have bettered.
    late = [d for d in backwards.decisions if d.late]
    ends = {span.span_id: span.end_time_unix_nano for span in spans}
    assert late and all(ends[d.repeat_of] <= d.call.start_ns for d in late if d.repeat_of)


def test_a_repeat_that_arrives_first_is_revised_when_its_failure_comes() -> None:
    first, repeat = (call_span(i, spec) for i, spec in enumerate(SEED_TURN[:2]))
    sink = send([[repeat], [first]])
    on_arrival, revised = [d for d in sink.decisions if d.call.span_ids == (repeat.span_id,)]
    assert (on_arrival.dead_call, on_arrival.late) == (False, False)
    assert (revised.dead_call, revised.late, revised.repeat_of) == (True, True, first.span_id)
    failure = next(d for d in sink.decisions if d.call.span_ids == (first.span_id,))
    assert failure.revised == (revised,)


def test_a_failure_later_than_the_reorder_window_revises_nothing() -> None:
    """Bounded: a call that arrived more than reorder_window_s before the failure it
    repeats is no longer held, and stays as decided."""
    first, repeat = (call_span(i, spec) for i, spec in enumerate(SEED_TURN[:2]))
    run, sink, clock = pipeline()
    run(make_request(repeat))
    clock.now += BreakerConfig().reorder_window_s + 1
    run(make_request(first))
    assert sink.dead() == []


def test_the_late_failure_span_says_how_many_calls_it_turned_dead() -> None:
    first, *repeats = (call_span(i, spec) for i, spec in enumerate(SEED_TURN[:4]))
    run, _, clock = pipeline()
    run(make_request(*repeats))
    clock.now += 1
    request = make_request(first)
    run(request)
    (forwarded,) = request.resource_spans[0].scope_spans[0].spans
    attributes = {kv.key: kv.value for kv in forwarded.attributes}
    # The repeats' own request made the first of them the block and the other two dead
    # calls; the late first call turns that one dead too.
    assert attributes["mcp.breaker.late_repeats"].int_value == 1
    assert attributes["mcp.breaker.dead_call"].bool_value is False


# -- any order, any batching ------------------------------------------------------------

TOOLS = ("playwright__browser_navigate", "playwright__browser_snapshot")
CALL = st.builds(
    CallSpec,
    at_s=st.floats(0, 120, allow_nan=False).map(lambda s: round(s, 3)),
    tool=st.sampled_from(TOOLS),
    outcome=st.sampled_from(["ok", "transport", "tool_error"]),
    args=st.integers(0, 2),
    duration_s=st.sampled_from([0.2, 1.0, 2.0]),
)


@st.composite
def batchings(draw: st.DrawFn) -> tuple[list[Span], list[list[Span]]]:
    """A turn, and the same spans cut into requests and shuffled, within and across."""
    specs = draw(st.lists(CALL, min_size=1, max_size=12))
    spans = [call_span(i, spec) for i, spec in enumerate(sorted(specs, key=lambda s: s.at_s))]
    order = draw(st.permutations(spans))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(order) - 1)), max_size=3)))
    batches = [list(order[a:b]) for a, b in zip([0, *cuts], [*cuts, len(order)], strict=True)]
    return spans, [b for b in batches if b]


# The within-turn rules only: the across-turn circuits weigh evidence in arrival order
# (docs/breaker.md, "Spans out of order"), so they stay out of this property.
WITHIN_TURN = replace(BreakerConfig(), consecutive_failures=0, min_calls=1_000_000)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(case=batchings())
def test_any_order_and_batching_gives_the_dead_calls_and_seconds_of_span_time(
    case: tuple[list[Span], list[list[Span]]],
) -> None:
    in_span_order, shuffled = case
    expected = send([[span] for span in in_span_order], WITHIN_TURN)
    got = send(shuffled, WITHIN_TURN)
    assert got.dead_span_ids() == expected.dead_span_ids()
    assert got.dead_seconds() == expected.dead_seconds()
    assert len(got.dead()) == len(expected.dead())  # each dead call counted once


# -- every span leaves judged -------------------------------------------------------------


def semconv_client(index: int, result: dict[str, Any], tool: str = "t3_queue_list") -> Span:
    """A semconv client span that names no server: held for its server half."""
    span = Span(
        name=f"tools/call {tool}",
        trace_id=b"\x7e" * 16,
        span_id=span_id_of(100 + index),
        kind=CLIENT,
        start_time_unix_nano=TURN_START_NS,
        end_time_unix_nano=TURN_START_NS + NS_PER_S,
    )
    span.attributes.extend(
        key_values(
            {
                "mcp.method.name": "tools/call",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.result": json.dumps(result),
            }
        )
    )
    return span


def attributes_of(request: ExportTraceServiceRequest) -> list[dict[str, Any]]:
    return [
        {kv.key: kv.value for kv in span.attributes}
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def test_a_half_held_for_its_other_half_leaves_with_its_own_verdict() -> None:
    failure = {
        "content": [{"type": "text", "text": '{"_tag":"OrchestratorMcpFailure"}'}],
        "structuredContent": {"_tag": "OrchestratorMcpFailure", "code": "orchestration_error"},
        "isError": False,
    }
    run, sink, _ = pipeline()
    request = make_request(semconv_client(1, failure))
    run(request)
    (attributes,) = attributes_of(request)
    assert attributes["mcp.breaker.outcome"].string_value == "failed"
    assert attributes["mcp.breaker.failure_class"].string_value == "hidden"
    assert attributes["mcp.breaker.pending"].bool_value is True
    assert "mcp.breaker.dead_call" not in attributes  # not decided: not claimed
    assert sink.decisions == []
    assert run.classifier.stats.forwarded_pending == 1
    run.flush()  # the wait ran out: decided alone, for the metrics and advisories
    (decision,) = sink.decisions
    assert decision.call.failure_class is not None and decision.call.failure_class.value == "hidden"


def test_a_pair_in_one_request_is_decided_and_not_pending() -> None:
    client = semconv_client(2, {"content": [], "isError": False})
    server = Span(
        name="tools/call t3_queue_list",
        trace_id=client.trace_id,
        span_id=span_id_of(200),
        parent_span_id=client.span_id,
        kind=SERVER,
        start_time_unix_nano=client.start_time_unix_nano,
        end_time_unix_nano=client.end_time_unix_nano,
    )
    server.attributes.extend(
        key_values(
            {
                "mcp.method.name": "tools/call",
                "gen_ai.tool.name": "t3_queue_list",
                "mcp.server.name": "t3-code",
            }
        )
    )
    run, sink, _ = pipeline()
    request = make_request(client, server)
    run(request)
    for attributes in attributes_of(request):
        assert attributes["mcp.breaker.outcome"].string_value == "ok"
        assert "mcp.breaker.pending" not in attributes
        assert attributes["mcp.breaker.state"].string_value == "closed"
    assert len(sink.decisions) == 1
    assert run.classifier.stats.forwarded_pending == 0
