"""Agent frameworks' own spans, as their real runs wrote them, read as their clients saw them.

Each capture in tests/fixtures/frameworks is one run of the scenario of
tests/live/frameworks_common.py (6 calls: 1 ok, 3 transport failures, 2 hidden ones, 3 of
them dead repeats) through the real framework and its scripted test model, recorded by
``python -m tests.live.record``. Read here three ways: by the classifier, by the turn
breaker after it, and by ``mcp-breaker analyze``; and with the spans of a run cut into
requests of any size, exported in any order.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_breaker_client.shared.verdict import FailureClass, Outcome
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from processor.classify.classifier import Classifier
from processor.classify.events import Dialect, ToolCall
from processor.config import BreakerConfig
from processor.engines.turns import TurnBreaker
from tests.classify_builders import classify_all, make_span, only_call
from tests.live.frameworks_common import DEAD_TOOL, EXPECTED, HIDDEN_TOOL, PLAN
from tests.offline_support import analyze_json

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "frameworks"

# Each capture, and the dialect its calls read as.
CAPTURES = {
    "strands": Dialect.STRANDS,  # execute_tool over the mcp SDK's own MCP send span
    "strands-latest": Dialect.STRANDS,  # the latest GenAI conventions opted into
    "langgraph": Dialect.OPENINFERENCE,  # a failure is a ToolMessage with status "error"
    "langgraph-raise": Dialect.OPENINFERENCE,  # the adapter raises: an exception event
    "langgraph-simple": Dialect.OPENINFERENCE,  # one request per span
    # execute_tool over fastmcp's tools/call over the mcp SDK's MCP send: three layers
    "pydantic_ai": Dialect.PYDANTIC_AI,
    "pydantic_ai-own-provider": Dialect.PYDANTIC_AI,  # its own provider: execute_tool only
    # OpenInference's TOOL span over the mcp SDK's; a failure only as text in output.value
    "openai_agents": Dialect.OPENINFERENCE,
    "openai_agents-simple": Dialect.OPENINFERENCE,
    "openai_agents-genai": Dialect.OPENINFERENCE,  # OPENINFERENCE_ENABLE_GENAI_SEMCONV=true
    # ai.toolCall, no MCP layer; a failure only as isError inside ai.toolCall.result
    "vercel_ai6": Dialect.VERCEL_AI,
    "vercel_ai6-simple": Dialect.VERCEL_AI,
    # the GenAI conventions' execute_tool (scope "gen_ai"), the result whole, with _meta
    "vercel_ai7": Dialect.GENAI,
    "vercel_ai7-simple": Dialect.GENAI,
    "vercel_ai7-legacy": Dialect.VERCEL_AI,  # LegacyOpenTelemetry: the AI SDK 6's spans
}
# The times a run listed its tools, where its spans record it: pydantic-ai lists once
# (fastmcp's tools/list over the SDK's MCP send tools/list: one listing), the OpenAI Agents
# SDK before every model round; LangGraph's adapters and the AI SDK record no listing.
# With its own provider, pydantic-ai's toolset spans go to the global one: none is sent.
LISTINGS = {"pydantic_ai": 1, "pydantic_ai-own-provider": 0, "openai_agents": 7, "strands": 1}
# The server a capture's spans name; the others name none (and none is guessed).
SERVERS = {"vercel_ai7": "billing", "vercel_ai7-simple": "billing"}


def load(name: str) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest.FromString((FIXTURES / f"{name}.otlp.bin").read_bytes())


def spans_of(request: ExportTraceServiceRequest) -> list[tuple[int, int, Span]]:
    """(resource index, scope index, span) of every span, in the order sent."""
    return [
        (r, s, span)
        for r, resource_spans in enumerate(request.resource_spans)
        for s, scope_spans in enumerate(resource_spans.scope_spans)
        for span in scope_spans.spans
    ]


def classified(*requests: ExportTraceServiceRequest) -> list[ToolCall]:
    classifier = Classifier()
    events = []
    for request in requests:
        events += classifier.classify(request, now=0.0)
    events += classifier.expire(now=3600.0)
    return sorted(
        (e for e in events if isinstance(e, ToolCall)), key=lambda c: (c.start_ns, c.span_ids)
    )


def expected_outcomes() -> list[tuple[Outcome, FailureClass | None]]:
    return [
        (Outcome(outcome), FailureClass(failure) if failure else None)
        for outcome, failure, _ in EXPECTED
    ]


@pytest.mark.parametrize("capture", list(CAPTURES))
def test_each_call_reads_once_as_its_client_saw_it(capture: str) -> None:
    calls = classified(load(capture))
    assert [c.tool for c in calls] == [tool for tool, _ in PLAN]
    assert [(c.outcome, c.failure_class) for c in calls] == expected_outcomes()
    assert {c.dialect for c in calls} == {CAPTURES[capture]}
    assert {c.server for c in calls} == {SERVERS.get(capture)}
    assert len({c.trace_id for c in calls}) == 1  # the agent run is the turn
    # Equal arguments, equal fingerprints; different arguments, different ones.
    prints = [c.fingerprint for c in calls]
    assert None not in prints
    assert prints[1] == prints[2] != prints[5] and prints[3] == prints[4]


@pytest.mark.parametrize("capture", list(CAPTURES))
def test_the_turn_breaker_calls_the_repeats_dead(capture: str) -> None:
    breaker = TurnBreaker(replace(BreakerConfig()))
    dead = [breaker.observe(call).dead_call for call in classified(load(capture))]
    assert dead == [repeat for _, _, repeat in EXPECTED]


@pytest.mark.parametrize(
    ("capture", "layers"), [("strands", 2), ("pydantic_ai", 3), ("openai_agents", 2)]
)
def test_the_spans_under_a_framework_span_are_layers_not_calls(capture: str, layers: int) -> None:
    request = load(capture)
    names = [span.name for _, _, span in spans_of(request)]
    assert sum(n.startswith("MCP send tools/call") for n in names) == len(PLAN)
    calls = classified(request)
    assert len(calls) == len(PLAN)
    assert all(len(c.span_ids) == layers for c in calls)


def test_a_failure_keeps_the_tools_words() -> None:
    failed = classified(load("strands"))[1]
    assert "Connection refused" in failed.verdict.error_excerpt
    hidden = classified(load("langgraph"))[3]
    assert "UPSTREAM_TIMEOUT" in hidden.verdict.error_excerpt


@pytest.mark.parametrize("capture", list(CAPTURES))
def test_analyze_reads_the_same(capture: str) -> None:
    report = analyze_json(str(FIXTURES / f"{capture}.otlp.bin"))
    calls = report["calls"]
    assert calls["calls"] == len(PLAN)
    assert calls["outcomes"]["failed"] == 5 and calls["outcomes"]["ok"] == 1
    assert calls["failure_classes"] == {"transport": 3, "hidden": 2}
    assert calls["hidden_failures"]["count"] == 2
    assert calls["dead_calls"]["count"] == sum(repeat for _, _, repeat in EXPECTED)
    assert calls["dialects"] == {CAPTURES[capture].value: len(PLAN)}
    tools = {row["tool"]: row["calls"] for row in calls["tools"]}
    assert tools == {"get_weather": 1, DEAD_TOOL: 3, HIDDEN_TOOL: 2}
    listings = LISTINGS.get(capture, LISTINGS.get(capture.split("-")[0], 0))
    assert report["roster"]["listings"] == listings


def test_no_capture_keeps_a_path_of_the_machine_that_recorded_it() -> None:
    for path in FIXTURES.glob("*.otlp.bin"):
        data = path.read_bytes()
        assert b"site-packages/" not in data.replace(b"<site-packages>/", b""), path.name
        assert str(Path.home()).encode() + b"/" not in data, path.name


@settings(max_examples=60, deadline=None)
@given(
    capture=st.sampled_from(["strands", "langgraph", "pydantic_ai", "openai_agents", "vercel_ai7"]),
    seed=st.integers(0, 2**32 - 1),
    parts=st.integers(1, 12),
)
def test_any_split_and_export_order_counts_each_call_once(
    capture: str, seed: int, parts: int
) -> None:
    """The layers of a call (the framework's span, the SDK's under it) may arrive in any
    request, either first: each call is counted once, and read the same."""
    request = load(capture)
    spans = spans_of(request)
    random.Random(seed).shuffle(spans)
    requests = []
    for part in range(parts):
        piece = ExportTraceServiceRequest()
        for r, s, span in spans[part::parts]:
            resource_spans = piece.resource_spans.add()
            resource_spans.resource.CopyFrom(request.resource_spans[r].resource)
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.CopyFrom(request.resource_spans[r].scope_spans[s].scope)
            scope_spans.spans.append(span)
        requests.append(piece)
    calls = classified(*requests)
    assert [c.tool for c in calls] == [tool for tool, _ in PLAN]
    assert [(c.outcome, c.failure_class) for c in calls] == expected_outcomes()


# -- the GenAI conventions, whoever writes them ------------------------------------------
def execute_tool(attributes: dict[str, object], **kwargs: object) -> Span:
    base = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
    return make_span("execute_tool search", {**base, **attributes}, **kwargs)  # type: ignore[arg-type]


def test_a_genai_tool_span_of_an_unnamed_framework_is_read() -> None:
    envelope = {"content": [{"type": "text", "text": "no such index"}], "isError": True}
    call = only_call(
        classify_all(
            execute_tool(
                {
                    "gen_ai.tool.call.id": "call_1",
                    "gen_ai.tool.type": "extension",
                    "gen_ai.tool.call.arguments": json.dumps({"q": "x"}),
                    "gen_ai.tool.call.result": json.dumps(envelope),
                }
            )
        )
    )
    assert call.dialect is Dialect.GENAI
    assert (call.outcome, call.failure_class) == (Outcome.FAILED, FailureClass.TOOL_ERROR)
    assert call.server is None  # the conventions name no MCP server here: none is guessed


def test_a_genai_tool_span_with_error_type_failed_and_silence_is_ok() -> None:
    failed = only_call(
        classify_all(execute_tool({"error.type": "TimeoutError"}, status=Status.STATUS_CODE_ERROR))
    )
    assert failed.outcome is Outcome.FAILED
    quiet = only_call(classify_all(execute_tool({})))
    assert quiet.outcome is Outcome.OK  # the conventions record failures; none was


def test_an_openinference_tool_span_is_read_whatever_its_name() -> None:
    span = make_span(
        "lookup",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "lookup",
            "input.value": json.dumps({"id": 7}),
            "output.value": "An error occurred while running the tool. Please try again. "
            "Error: Connection refused",
            "session.id": "conversation-1",
        },
        status=Status.STATUS_CODE_OK,
    )
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = "openinference.instrumentation.openai_agents"
    scope_spans.spans.append(span)
    call = only_call(classify_all(request))
    assert call.dialect is Dialect.OPENINFERENCE
    assert (call.outcome, call.failure_class) == (Outcome.FAILED, FailureClass.TRANSPORT)
    # A root tool span: its conversation, not its own trace, is the turn.
    assert call.turn == "conversation-1"


def test_an_openinference_chain_span_is_not_a_call() -> None:
    request = ExportTraceServiceRequest()
    scope_spans = request.resource_spans.add().scope_spans.add()
    scope_spans.scope.name = "openinference.instrumentation.langchain"
    scope_spans.spans.append(make_span("tools", {"openinference.span.kind": "CHAIN"}))
    assert classify_all(request) == []
