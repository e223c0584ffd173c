"""Spans out of order, as the operator and the harness see them: the metrics and advisories.

A turn's failure that arrives after its repeats (within ``breaker.reorder_window_s`` of
arrival time) turns them into dead calls late (``docs/breaker.md``, "Spans out of order").
These tests send the same turn in order and with the failure last through the real
``Pipeline`` (classifier, breaker) whose sinks are the real ``FindingMetrics``, read from
a Prometheus registry, and the real ``AdvisoryService`` (its hub), as ``server.py`` wires
them, on fake clocks; and compare: ``mcp_breaker_dead_calls_found_late_total`` counts the
repeats found late, the dead-call counters are the in-order run's, and the hub holds the
turn's block as it does in order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from prometheus_client import CollectorRegistry

from processor.advisories.model import TURN_BLOCKED, TURN_SCOPES, Advisory, AdvisoryScope
from processor.advisories.service import AdvisoryService
from processor.classify.classifier import Classifier
from processor.config import AdvisoriesConfig, BreakerConfig, ClassifyConfig, Rule, TelemetryConfig
from processor.engines.breaker import Breaker
from processor.inflight.pipeline import Pipeline
from processor.telemetry.findings import FindingMetrics
from tests.classify_builders import CLIENT, key_values, make_request

NS_PER_S = 1_000_000_000
TURN_START_NS = 1_787_015_196_000_000_000  # 2026-08-18T01:06:36Z, the seed's turn
TURN = "turn-0106"
SERVER = "playwright"
TOOL = "playwright__browser_navigate"
SESSION_CLOSED = "mcp-beaver: upstream MCP session is closed"
ARRIVAL_STEP_S = 0.5  # arrival time between two requests: well inside the reorder window
CALL_S = 2.0

P = "mcp_breaker_"
FOUND_LATE = P + "dead_calls_found_late_total"
DEAD_CALLS = P + "dead_calls_total"
DEAD_SECONDS = P + "dead_call_seconds_total"
TOOL_CALLS = P + "tool_calls_total"


def call_span(index: int, at_s: float, outcome: str) -> Span:
    """A harness span of the turn: ``transport`` (the session closed, which blocks the
    tool for the turn), or ``tool_error`` (arguments of its own, which block that call)."""
    start = TURN_START_NS + round(at_s * NS_PER_S)
    attributes: dict[str, Any] = {
        "mcp.tool.name": TOOL,
        "mcp.server.name": SERVER,
        "mcp.turn.id": TURN,
        "mcp.tool.arguments": json.dumps({"url": f"https://example.test/{index}"}),
        "mcp.tool.outcome": "failed",
        "mcp.tool.error": SESSION_CLOSED if outcome == "transport" else "selector not found",
    }
    span = Span(
        name="mcp.tool.call",
        trace_id=hashlib.sha256(TURN.encode()).digest()[:16],
        span_id=(0xC0FFEE_0000 + index).to_bytes(8, "big"),
        kind=CLIENT,
        start_time_unix_nano=start,
        end_time_unix_nano=start + round(CALL_S * NS_PER_S),
    )
    span.attributes.extend(key_values(attributes))
    return span


# The turn: the session closes on the first call; the model tries three more URLs, each
# failing on its own. In span time all three repeat the first failure: dead calls.
FAILURE = call_span(0, 0, "transport")
REPEATS = [call_span(i, at_s, "tool_error") for i, at_s in ((1, 12), (2, 20), (3, 21))]


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Rig:
    """The pipeline with the service's two consumers: metrics on a registry, advisories."""

    def __init__(self, breaker: BreakerConfig | None = None) -> None:
        self.arrival = Clock(TURN_START_NS / NS_PER_S)  # wall-clock seconds, as spans arrive
        self.breaker = Breaker(breaker or BreakerConfig(), jitter=lambda: 0.5)
        classifier = Classifier(ClassifyConfig())
        self.metrics = FindingMetrics(
            TelemetryConfig(),
            self.breaker,
            classifier.stats,
            clock=self.arrival,
            wall=self.arrival,
        )
        self.registry = CollectorRegistry()
        self.registry.register(self.metrics)
        self.advisories = AdvisoryService(AdvisoriesConfig(), self.breaker, clock=self.arrival)
        self.pipeline = Pipeline(
            classifier, self.breaker, (self.metrics, self.advisories), clock=self.arrival
        )

    def send(self, batches: Sequence[Sequence[Span]]) -> Rig:
        """Each batch one export request, ARRIVAL_STEP_S apart; then everything decided."""
        for batch in batches:
            self.pipeline(make_request(*batch))
            self.arrival.now += ARRIVAL_STEP_S
        self.pipeline.flush()
        return self

    def counted(self, name: str) -> dict[tuple[str, ...], float]:
        """Every series of a counter, by its labels' values."""
        return {
            tuple(sample.labels.values()): sample.value
            for family in self.registry.collect()
            for sample in family.samples
            if sample.name == name
        }

    def found_late(self, rule: Rule) -> float | None:
        return self.registry.get_sample_value(FOUND_LATE, {"rule": rule.value})

    def turn_advisories(self) -> dict[str, Advisory]:
        return {a.id: a for a in self.advisories.hub.in_force() if a.scope in TURN_SCOPES}

    def circuit_advisories(self) -> dict[str, str]:
        return {a.id: a.state for a in self.advisories.hub.in_force() if a.scope not in TURN_SCOPES}


def turn_block(rig: Rig) -> Advisory:
    (block,) = [a for a in rig.turn_advisories().values() if a.scope is AdvisoryScope.TURN_TOOL]
    return block


def in_order() -> Rig:
    return Rig().send([[FAILURE], *([r] for r in REPEATS)])


@pytest.mark.parametrize(
    "batches",
    [[*([r] for r in REPEATS), [FAILURE]], [REPEATS, [FAILURE]], [REPEATS[::-1], [FAILURE]]],
    ids=["each repeat its own request", "the repeats in one request", "repeats reversed"],
)
def test_a_failure_after_its_repeats_counts_them_found_late(
    batches: list[list[Span]],
) -> None:
    expected = in_order()
    late = Rig().send(batches)

    # In order, nothing is found late; with the failure last, each repeat is, once.
    assert {rule: expected.found_late(rule) for rule in Rule} == {rule: 0 for rule in Rule}
    assert late.found_late(Rule.TURN_TOOL) == len(REPEATS)
    assert sum(late.counted(FOUND_LATE).values()) == len(REPEATS)

    # The dead calls and their seconds are the in-order run's; no call is counted twice.
    dead = {(SERVER, TOOL, Rule.TURN_TOOL.value, "enforced"): float(len(REPEATS))}
    assert expected.counted(DEAD_CALLS) == late.counted(DEAD_CALLS) == dead
    assert expected.counted(DEAD_SECONDS) == late.counted(DEAD_SECONDS)
    assert late.counted(DEAD_SECONDS) == {k: v * CALL_S for k, v in dead.items()}
    assert expected.counted(TOOL_CALLS) == late.counted(TOOL_CALLS)
    assert sum(late.counted(TOOL_CALLS).values()) == 1 + len(REPEATS)

    # The hub holds the turn's blocks as in order: the tool blocked for the turn on the
    # first failure (the same advisory, evidence and all), each failed call's own block.
    assert late.turn_advisories() == expected.turn_advisories()
    block = turn_block(late)
    assert (block.state, block.blocking, block.turn, block.tool) == (TURN_BLOCKED, True, TURN, TOOL)
    assert block.evidence is not None
    assert block.evidence.first_failure_span_id == FAILURE.span_id
    # The circuits weigh evidence in arrival order (docs/breaker.md); what is out is alike.
    assert late.circuit_advisories() == expected.circuit_advisories()


def test_a_failure_later_than_the_reorder_window_finds_nothing_late() -> None:
    """Bounded: repeats that arrived more than reorder_window_s before their failure stay
    as decided; the late counter says nothing was found."""
    rig = Rig().send([REPEATS])
    rig.arrival.now += BreakerConfig().reorder_window_s + 1
    rig.send([[FAILURE]])
    assert sum(rig.counted(FOUND_LATE).values()) == 0
    assert rig.counted(DEAD_CALLS) == {}
    # The failure still blocks the tool for the rest of the turn.
    assert turn_block(rig).evidence is not None


# The seed's turn: every call fails on the closed session, each opening the tool's block.
SEED_TURN = [call_span(i, at_s, "transport") for i, at_s in enumerate((0, 12, 20, 21))]


def test_the_seed_turn_backwards_counts_each_block_it_moves_found_late() -> None:
    """Backwards, one span a request: each earlier failure takes the block's place and turns
    the call that held it dead, late; the counters end as in order."""
    expected = Rig().send([[span] for span in SEED_TURN])
    late = Rig().send([[span] for span in SEED_TURN[::-1]])
    assert late.found_late(Rule.TURN_TOOL) == len(SEED_TURN) - 1
    assert expected.counted(DEAD_CALLS) == late.counted(DEAD_CALLS)
    assert expected.counted(DEAD_SECONDS) == late.counted(DEAD_SECONDS)
    assert expected.counted(TOOL_CALLS) == late.counted(TOOL_CALLS)
    assert late.turn_advisories().keys() == expected.turn_advisories().keys()
    assert turn_block(late).blocking and turn_block(expected).blocking
    assert late.circuit_advisories() == expected.circuit_advisories()


def test_the_seed_turn_backwards_names_the_first_failure_in_its_turn_block() -> None:
    expected = Rig().send([[span] for span in SEED_TURN])
    late = Rig().send([[span] for span in SEED_TURN[::-1]])
    assert turn_block(expected).evidence == turn_block(late).evidence
