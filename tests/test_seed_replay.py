"""The sirens-echo incident, replayed through the running service from real OTLP spans.

Earlier turns at 00:20, 00:30, 00:40 and 01:00 call ``playwright__browser_navigate`` nine
times, every call failing with the recorded "upstream MCP session is closed" error; then
the 01:06 turn calls it in rounds 1, 5, 7, 7, 9, 9, 11, 11 with the same arguments, all
failing. The spans are made by the OpenTelemetry SDK in our harness convention and sent
through its OTLP/gRPC exporter; the forwarded spans are read back from the next hop.
"""

from __future__ import annotations

import calendar
import json
import threading
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from processor.engines.breaker import CallDecision
from processor.engines.circuit import CircuitKey, Scope, State
from tests.sdk import RESOURCE, export_grpc
from tests.support import CaptureCollector, ServiceThread, make_config, wait_until

TOOL = "playwright__browser_navigate"
ERROR = (
    "mcp-beaver: upstream MCP session is closed (reconnect also failed: reconnect upstream MCP "
    '"http://127.0.0.1:8931/mcp": sending "notifications/initialized": Bad Request)'
)
ARGUMENTS = json.dumps({"url": "https://artifacts.example.test/run/1539078028959944794"})
DAY = calendar.timegm((2026, 8, 18, 0, 0, 0))  # the incident's date, UTC
EARLIER_TURNS = (
    ("turn-0020", 20, 2),
    ("turn-0030", 30, 2),
    ("turn-0040", 40, 2),
    ("turn-0100", 60, 3),
)
ROUNDS = (1, 5, 7, 7, 9, 9, 11, 11)
CALL_SECONDS = 3


def at_ns(minute: float, second: float = 0) -> int:
    return int((DAY + minute * 60 + second) * 1e9)


def harness_calls(
    turn: str, starts_ns: list[tuple[int, int]], *, outcome: str = "failed", preset: bool = False
) -> list[ReadableSpan]:
    """mcp.tool.call spans as the harness writes them: (round, start) per call."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("sirens-echo.harness", "943")
    for round_, start in starts_ns:
        span = tracer.start_span("mcp.tool.call", kind=SpanKind.CLIENT, start_time=start)
        span.set_attributes(
            {
                "mcp.tool.name": TOOL,
                "mcp.server.name": "playwright",
                "mcp.tool.outcome": outcome,
                "mcp.tool.arguments": ARGUMENTS,
                "mcp.turn.id": turn,
                "mcp.turn.round": round_,
            }
        )
        if outcome == "failed":
            span.set_attribute("mcp.tool.error", ERROR)
        if preset:
            span.set_attribute("mcp.breaker.state", "preset-by-the-harness")
        span.end(end_time=start + CALL_SECONDS * 10**9)
    provider.shutdown()
    return list(memory.get_finished_spans())


class Decisions:
    def __init__(self) -> None:
        self.items: list[CallDecision] = []
        self._lock = threading.Lock()

    def __call__(self, finding: object) -> None:
        if isinstance(finding, CallDecision):
            with self._lock:
                self.items.append(finding)

    def of_turn(self, turn: str) -> list[CallDecision]:
        with self._lock:
            found = [d for d in self.items if d.call.turn == turn]
        return sorted(found, key=lambda d: d.call.start_ns)


@pytest.fixture
def running(next_hop: CaptureCollector) -> Iterator[tuple[ServiceThread, Decisions]]:
    decisions = Decisions()
    service = ServiceThread(
        make_config(f"forward.endpoint={next_hop.endpoint}"), event_sinks=[decisions]
    )
    yield service, decisions
    service.stop()


def test_the_seed_incident(
    running: tuple[ServiceThread, Decisions], next_hop: CaptureCollector
) -> None:
    service, decisions = running
    breaker = service.service.breaker
    server = CircuitKey(Scope.SERVER, "playwright")

    for turn, minute, calls in EARLIER_TURNS:
        spans = harness_calls(turn, [(1 + i, at_ns(minute, 40 * i)) for i in range(calls)])
        export_grpc(service.grpc_endpoint, spans)
    wait_until(lambda: sum(len(decisions.of_turn(t)) for t, _, _ in EARLIER_TURNS) == 9)
    assert breaker.circuits[server].state is State.OPEN  # before the 01:06 turn starts

    spans = harness_calls(
        "turn-0106",
        [(r, at_ns(66, 36.875 + 10 * i)) for i, r in enumerate(ROUNDS)],
        preset=True,
    )
    export_grpc(service.grpc_endpoint, spans)
    wait_until(lambda: len(decisions.of_turn("turn-0106")) == len(ROUNDS))
    first, *later = decisions.of_turn("turn-0106")

    # The first call of the turn: the failure itself, refused across turns by the open
    # server, with the evidence the seed measured by hand.
    assert first.call.outcome.value == "failed" and first.call.failure_class.value == "transport"
    assert (first.state, first.rule.value, first.dead_call) == ("open", "server", True)
    assert first.evidence is not None
    assert (first.evidence.calls, first.evidence.failures) == (9, 9)
    assert "(its last 9 calls failed: " in first.message
    assert f"`{TOOL}`" in first.message and "upstream MCP session is closed" in first.message
    assert "127.0.0.1:8931" in first.message  # which upstream stays; secrets would not

    # Every later call repeats it, within the turn.
    for decision in later:
        assert decision.dead_call and decision.state == "turn_blocked"
        assert decision.repeat_of == first.call.span_ids[0]
        assert decision.rule.value == "turn_tool"

    # The forwarded spans carry the verdicts; an attribute the harness set stays as it was.
    def forwarded() -> dict[bytes, dict[str, object]]:
        return {
            s.span_id: {kv.key: kv.value for kv in s.attributes}
            for s in next_hop.spans()
            if any(
                kv.key == "mcp.turn.id" and kv.value.string_value == "turn-0106"
                for kv in s.attributes
            )
        }

    wait_until(lambda: len(forwarded()) == len(ROUNDS), what="the 01:06 spans downstream")
    spans_out = forwarded()
    for decision in later:
        attributes = spans_out[decision.call.span_ids[0]]
        assert attributes["mcp.breaker.dead_call"].bool_value is True
        assert attributes["mcp.breaker.repeat_of"].string_value == first.call.span_ids[0].hex()
        assert attributes["mcp.breaker.outcome"].string_value == "failed"
        assert attributes["mcp.breaker.failure_class"].string_value == "transport"
        assert attributes["mcp.breaker.enforced"].bool_value is True
        assert attributes["mcp.breaker.fingerprint"].string_value == first.call.fingerprint
        assert attributes["mcp.breaker.state"].string_value == "preset-by-the-harness"

    # After the open period, a success closes the server, and the tool (which every one
    # of those failures counted against too).
    success = harness_calls("turn-0230", [(1, at_ns(150))], outcome="ok")
    export_grpc(service.grpc_endpoint, success)
    wait_until(lambda: len(decisions.of_turn("turn-0230")) == 1)
    assert breaker.circuits[server].state is State.CLOSED
    closing = decisions.of_turn("turn-0230")[0]
    for key in (server, CircuitKey(Scope.TOOL, f"playwright/{closing.call.tool}")):
        assert breaker.circuits[key].state is State.CLOSED
        assert [(t.source.value, t.target.value) for t in closing.transitions if t.key == key] == [
            ("open", "half_open"),
            ("half_open", "closed"),
        ]
