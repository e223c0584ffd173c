"""The T3 seed's own hidden failure, through the running service, as a new user meets it.

A harness instrumented with the OpenTelemetry MCP semantic conventions writes a client
span per call (``tools/call t3_queue_list``, ``mcp.method.name``, ``gen_ai.tool.name``)
with the opt-in ``gen_ai.tool.call.result``: here the seed's ``CallToolResult`` envelope
byte for byte (t3code #15566), and its success control from the same seed. The tool name
has no ``server__`` prefix and the span names no server, so each call is held for a
server half that never comes. The real OpenTelemetry SDK exports the spans over OTLP/gRPC
to the running service, which forwards them to a real gRPC next hop.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.sdk import RESOURCE, export_grpc
from tests.support import CaptureCollector, ServiceThread, make_config, wait_until

# The failed t3_queue_list call of the seed ("Actual behavior"), as its client received it.
T3_FAILURE = json.dumps(
    {
        "content": [
            {
                "type": "text",
                "text": '{"_tag":"OrchestratorMcpFailure","code":"orchestration_error",'
                '"message":"The operation could not be completed."}',
            }
        ],
        "structuredContent": {
            "_tag": "OrchestratorMcpFailure",
            "code": "orchestration_error",
            "message": "The operation could not be completed.",
        },
        "isError": False,
    }
)
T3_SUCCESS = json.dumps(
    {
        "content": [{"type": "text", "text": '{"items":[],"nextCursor":null}'}],
        "structuredContent": {"items": [], "nextCursor": None},
        "isError": False,
    }
)
FAILING_CALLS = 3
HIDDEN = "mcp_breaker_hidden_failures_total"
TOOL_CALLS = "mcp_breaker_tool_calls_total"


def semconv_calls(results: list[str]) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t3.harness")
    with tracer.start_as_current_span("agent turn", kind=SpanKind.INTERNAL):
        for index, result in enumerate(results):
            with tracer.start_as_current_span(
                "tools/call t3_queue_list", kind=SpanKind.CLIENT
            ) as span:
                span.set_attributes(
                    {
                        "mcp.method.name": "tools/call",
                        "gen_ai.tool.name": "t3_queue_list",
                        "gen_ai.tool.call.arguments": json.dumps({"limit": 1, "n": index}),
                        "gen_ai.tool.call.result": result,
                    }
                )
    provider.shutdown()
    return [s for s in memory.get_finished_spans() if s.name.startswith("tools/call")]


@pytest.fixture
def running() -> Iterator[tuple[ServiceThread, CaptureCollector]]:
    next_hop = CaptureCollector().start()
    service = ServiceThread(make_config(f"forward.endpoint={next_hop.endpoint}"))
    yield service, next_hop
    service.stop()
    next_hop.stop()


def test_the_seed_envelope_is_forwarded_as_a_hidden_failure_and_counted_once(
    running: tuple[ServiceThread, CaptureCollector],
) -> None:
    service, next_hop = running
    failures = semconv_calls([T3_FAILURE] * FAILING_CALLS)
    control = semconv_calls([T3_SUCCESS])
    assert export_grpc(service.grpc_endpoint, failures + control).name == "SUCCESS"

    wait_until(lambda: next_hop.span_count() >= FAILING_CALLS + 1, what="the spans downstream")
    forwarded = {
        span.span_id: {kv.key: kv.value for kv in span.attributes} for span in next_hop.spans()
    }
    for span in failures:
        attributes = forwarded[span.context.span_id.to_bytes(8, "big")]
        assert attributes["mcp.breaker.outcome"].string_value == "failed"
        assert attributes["mcp.breaker.failure_class"].string_value == "hidden"
        # Held for a server half: forwarded before its decision, and it says so.
        assert attributes["mcp.breaker.pending"].bool_value is True
        assert attributes["gen_ai.tool.call.result"].string_value == T3_FAILURE  # untouched
    (success,) = control
    assert (
        forwarded[success.context.span_id.to_bytes(8, "big")]["mcp.breaker.outcome"].string_value
        == "ok"
    )

    # The pairing wait runs out (2 s): each call is decided alone, and counted once.
    labels = {"server": "", "tool": "t3_queue_list"}

    def decided() -> tuple[float | None, float | None, float | None]:
        return (
            service.metric(HIDDEN, **labels),
            service.metric(TOOL_CALLS, **labels, outcome="failed", failure_class="hidden"),
            service.metric(TOOL_CALLS, **labels, outcome="ok", failure_class=""),
        )

    # The sweep decides them one by one: wait for all, then see that none is counted twice.
    wait_until(lambda: decided() == (FAILING_CALLS, FAILING_CALLS, 1), what="every call decided")
    assert service.metric("mcp_breaker_spans_forwarded_pending_total") == FAILING_CALLS + 1
