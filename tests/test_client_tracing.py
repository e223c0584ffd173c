"""Tool-call spans: sent at once (not after the batch delay), and written so mcp-breaker
reads them as meant — including a refused call, which must count for nothing.

The spans are made by the real OpenTelemetry SDK; the classifier and the breaker that read
them are the service's own.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager

import pytest
from mcp_breaker_client.calls import ARGS_HASH_ATTRIBUTE, call_fingerprint
from mcp_breaker_client.shared.verdict import FailureClass, NeutralReason, Outcome
from mcp_breaker_client.tracing import (
    PromptExportConfig,
    PromptToolSpanProcessor,
    ToolCallRecord,
    is_tool_span,
    record_tool_call,
)
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from processor.advisories.v1 import advisories_pb2 as pb
from processor.classify.classifier import Classifier
from processor.classify.events import ToolCall
from processor.config import BreakerConfig
from processor.engines.breaker import Breaker
from processor.engines.circuit import CircuitKey, Scope
from tests.support import wait_until

RESOURCE = Resource.create({"service.name": "client-tracing-tests"})
SERVER, TOOL = "playwright", "browser_navigate"
ARGUMENTS = {"url": "https://artifacts.example.test/run/1"}
CLOSED_UPSTREAM = "upstream MCP session is closed (connect 127.0.0.1:9: connection refused)"


class RecordingExporter(SpanExporter):
    """Records each export call: its span names and when (monotonic) it happened; can hold
    exports until released."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, list[str]]] = []
        self.shutdowns = 0
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.gate.wait(30)
        with self._lock:
            self.calls.append((time.monotonic(), [s.name for s in spans]))
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.shutdowns += 1

    def names(self) -> list[list[str]]:
        with self._lock:
            return [names for _, names in self.calls]

    def exported(self) -> int:
        return sum(len(n) for n in self.names())


@pytest.fixture
def exporter() -> RecordingExporter:
    return RecordingExporter()


@pytest.fixture
def recorded() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield provider, memory
    provider.shutdown()


def provider_with(processor: PromptToolSpanProcessor) -> TracerProvider:
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(processor)
    return provider


def test_a_tool_span_leaves_at_once_while_other_spans_wait_for_the_batch(
    exporter: RecordingExporter,
) -> None:
    batch = BatchSpanProcessor(exporter, schedule_delay_millis=600_000)  # only force_flush
    processor = PromptToolSpanProcessor(exporter, batch=batch)
    provider = provider_with(processor)
    tracer = provider.get_tracer("harness")
    ended_at = time.monotonic()
    with tracer.start_as_current_span("plan the turn"):
        pass
    with record_tool_call(tracer, tool=TOOL, server=SERVER, turn_id="t1", round_number=1) as call:
        call.failed(CLOSED_UPSTREAM, is_error=True)

    wait_until(lambda: exporter.exported() >= 1, what="the tool span")
    # The tool span went out alone, in its own export, while "plan the turn" (ended first)
    # still waits in the batch processor: no flush, no batch delay was needed.
    assert exporter.names() == [["mcp.tool.call"]]
    processor.force_flush()
    assert exporter.names() == [["mcp.tool.call"], ["plan the turn"]]
    print(f"tool span exported {exporter.calls[0][0] - ended_at:.4f}s after the spans ended")
    provider.shutdown()
    assert exporter.shutdowns == 1  # the batch processor shares the exporter and shuts it


@pytest.mark.parametrize(
    ("name", "attributes", "prompt"),
    [
        ("mcp.tool.call", {}, True),
        ("tools/call browser_navigate", {}, True),
        ("MCP send tools/call browser_navigate", {}, True),
        ("call a tool", {"mcp.tool.name": TOOL}, True),
        ("rpc", {"mcp.method.name": "tools/call"}, True),
        ("tools/list", {"mcp.method.name": "tools/list"}, False),
        ("llm.chat", {"gen_ai.system": "x"}, False),
    ],
)
def test_which_spans_are_tool_calls(
    recorded: tuple[TracerProvider, InMemorySpanExporter],
    name: str,
    attributes: dict[str, str],
    prompt: bool,
) -> None:
    provider, memory = recorded
    with provider.get_tracer("t").start_as_current_span(name, attributes=attributes):
        pass
    (span,) = memory.get_finished_spans()
    assert is_tool_span(span) is prompt


def test_a_full_queue_drops_and_counts_and_never_blocks_the_harness(
    exporter: RecordingExporter,
) -> None:
    exporter.gate.clear()  # the exporter hangs: the first span is stuck in flight
    processor = PromptToolSpanProcessor(exporter, config=PromptExportConfig(max_queue=2))
    tracer = provider_with(processor).get_tracer("harness")

    def tool_span(n: int) -> None:
        with tracer.start_as_current_span("mcp.tool.call", attributes={"n": n}):
            pass

    tool_span(0)
    assert exporter.entered.wait(30)
    for n in range(1, 5):
        tool_span(n)  # returns at once although nothing can be exported
    assert processor.stats.dropped == 2

    exporter.gate.set()
    assert processor.force_flush(30_000)
    assert exporter.exported() == 3
    assert (processor.stats.exported, processor.stats.dropped) == (3, 2)
    processor.shutdown()


def test_shutdown_sends_what_is_queued_and_shuts_the_exporter_once(
    exporter: RecordingExporter,
) -> None:
    memory = InMemorySpanExporter()
    processor = PromptToolSpanProcessor(exporter, batch=SimpleSpanProcessor(memory))
    provider = provider_with(processor)
    tracer = provider.get_tracer("harness")
    for round_number in range(1, 6):
        with record_tool_call(tracer, tool=TOOL, round_number=round_number) as call:
            call.ok()
    with tracer.start_as_current_span("not a tool"):
        pass
    provider.shutdown()
    assert exporter.exported() == 5
    assert [s.name for s in memory.get_finished_spans()] == ["not a tool"]
    assert exporter.shutdowns == 1  # its own exporter: shut by the prompt processor
    with tracer.start_as_current_span("mcp.tool.call"):
        pass  # after shutdown: ignored, not an error
    assert exporter.exported() == 5


# -- what mcp-breaker reads from the spans -------------------------------------------------------
def classified(spans: Sequence[ReadableSpan]) -> list[ToolCall]:
    classifier = Classifier()
    events = classifier.classify(encode_spans(spans), now=time.time())
    events += classifier.flush()
    return sorted((e for e in events if isinstance(e, ToolCall)), key=lambda call: call.start_ns)


class JsonRpcError(Exception):
    """An error carrying a JSON-RPC code, as the mcp SDK's MCPError does."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def test_each_outcome_is_read_as_written(
    recorded: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = recorded
    tracer = provider.get_tracer("harness")

    def call(turn: str) -> AbstractContextManager[ToolCallRecord]:
        return record_tool_call(
            tracer, tool=TOOL, server=SERVER, turn_id=turn, round_number=1, arguments=ARGUMENTS
        )

    with call("ok") as record:
        record.ok()
    with call("failed") as record:
        record.failed(CLOSED_UPSTREAM, is_error=True)
    with call("refused") as record:
        record.refused(pb.Advisory(id="tenant|turn_tool|t|playwright/browser_navigate"))
    with pytest.raises(JsonRpcError), call("raised"):
        raise JsonRpcError(-32602, "Invalid params: url must be a string")
    with pytest.raises(ConnectionResetError), call("reset"):
        raise ConnectionResetError("connection reset by peer")
    with pytest.raises(asyncio.CancelledError), call("cancelled"):
        raise asyncio.CancelledError()

    calls = {c.turn: c for c in classified(memory.get_finished_spans())}
    facts = {
        turn: (c.outcome, c.failure_class, c.verdict.neutral_reason) for turn, c in calls.items()
    }
    assert facts == {
        "ok": (Outcome.OK, None, None),
        "failed": (Outcome.FAILED, FailureClass.TRANSPORT, None),
        "refused": (Outcome.NEUTRAL, None, NeutralReason.REFUSED_BY_ADVISORY),
        "raised": (Outcome.FAILED, FailureClass.PROTOCOL, None),
        "reset": (Outcome.FAILED, FailureClass.TRANSPORT, None),
        "cancelled": (Outcome.NEUTRAL, None, NeutralReason.CANCELLED),
    }
    expected_print = call_fingerprint(SERVER, TOOL, ARGUMENTS)
    assert {c.fingerprint for c in calls.values()} == {expected_print}
    assert all((c.server, c.tool, c.round) == (SERVER, TOOL, 1) for c in calls.values())
    refused = next(
        s for s in memory.get_finished_spans() if s.attributes["mcp.turn.id"] == "refused"
    )
    assert refused.attributes["mcp.breaker.refused"] is True


def test_arguments_of_any_size_are_recorded_only_by_their_digest(
    recorded: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = recorded
    tracer = provider.get_tracer("harness")
    large = {"html": "<p>" + "x" * 70_000 + "</p>"}
    for arguments in (large, ARGUMENTS):
        with record_tool_call(tracer, tool=TOOL, server=SERVER, arguments=arguments) as record:
            record.ok()
    big, small = memory.get_finished_spans()
    for span in (big, small):  # spans go on to tracing backends: never the arguments
        assert ARGS_HASH_ATTRIBUTE in span.attributes
        assert "mcp.tool.arguments" not in span.attributes
    calls = classified([big, small])
    assert [c.fingerprint for c in calls] == [
        call_fingerprint(SERVER, TOOL, large),
        call_fingerprint(SERVER, TOOL, ARGUMENTS),
    ]
    assert calls[0].fingerprint != calls[1].fingerprint


def test_a_refused_call_counts_neither_as_a_failure_nor_as_a_success(
    recorded: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """The choice of outcome for a refused call, through the service's own breaker: the
    failure opens a turn block and counts once; the refusals after it change nothing."""
    provider, memory = recorded
    tracer = provider.get_tracer("harness")
    spans = []
    for round_number in (1, 5, 7):
        with record_tool_call(
            tracer,
            tool=TOOL,
            server=SERVER,
            turn_id="t",
            round_number=round_number,
            arguments=ARGUMENTS,
        ) as record:
            if round_number == 1:
                record.failed(CLOSED_UPSTREAM, is_error=True)
            else:
                record.refused(None)
        spans.append(memory.get_finished_spans()[-1])
    breaker = Breaker(BreakerConfig())
    first, *refused = (breaker.observe(call) for call in classified(spans))
    assert first.opened_block is not None and first.call.outcome is Outcome.FAILED
    for decision in refused:
        assert decision.call.outcome is Outcome.NEUTRAL
        assert not decision.dead_call and decision.transitions == ()
        assert decision.opened_block is None
    server = breaker.circuits.peek(CircuitKey(Scope.SERVER, SERVER))
    assert server is not None and server.calls_and_failures() == (1, 1)
    assert all(span.kind is SpanKind.CLIENT for span in spans)


def test_error_texts_are_redacted_before_the_span_leaves_the_harness(
    recorded: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = recorded
    tracer = provider.get_tracer("harness")
    secret = (
        "upstream refused: https://bot:hunter2@git.example.test/api?token=sk-live-abcdef0123456789"
    )
    with record_tool_call(tracer, tool=TOOL, server=SERVER) as record:
        record.failed(secret, is_error=True)
    with pytest.raises(ConnectionError), record_tool_call(tracer, tool=TOOL, server=SERVER):
        raise ConnectionError(secret)
    for span in memory.get_finished_spans():
        texts = [str(v) for v in span.attributes.values()]
        texts += [str(v) for event in span.events for v in (event.attributes or {}).values()]
        texts.append(span.status.description or "")
        assert not any("hunter2" in t or "sk-live" in t for t in texts), texts
        assert "git.example.test" in str(span.attributes["mcp.tool.error"])  # the host stays


def test_arguments_nested_deeper_than_json_can_walk_are_still_identified() -> None:
    """Found by the TypeScript client's randomized vectors: 5,000 levels of nesting made
    json.dumps raise RecursionError out of the harness's call; the canonical form bounds
    the depth, so the call gets a digest and a fingerprint like any other."""
    from mcp_breaker_client.calls import call_fingerprints, recorded_arguments

    deep: object = "leaf"
    for _ in range(5_000):
        deep = [deep]
    arguments = {"q": deep}
    assert set(recorded_arguments(arguments)) == {"mcp.tool.args_hash"}
    assert len(call_fingerprints("web", "search", arguments)) == 2
