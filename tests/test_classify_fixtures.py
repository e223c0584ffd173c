"""The captures in tests/fixtures/real-spans classify to what the client actually saw.

Where a dialect's spans do not carry a fact, the expectation says what they do carry, and
why (the mcp SDK 2.x and fastmcp record no result body, so a failure hidden in a success
envelope reads as ok there; the mcp SDK 2.x server span records no message, so an unknown
tool reads as a tool error).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp_breaker_client.shared.verdict import FailureClass, Outcome
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from processor.classify.classifier import Classifier
from processor.classify.events import Dialect, ToolCall, ToolListing

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "real-spans"

OK = (Outcome.OK, None)
TOOL_ERROR = (Outcome.FAILED, FailureClass.TOOL_ERROR)
TRANSPORT = (Outcome.FAILED, FailureClass.TRANSPORT)
UNKNOWN_TOOL = (Outcome.FAILED, FailureClass.UNKNOWN_TOOL)
HIDDEN = (Outcome.FAILED, FailureClass.HIDDEN)

EXPECTED = {
    "mcp2-native": {
        "ok_tool": OK,
        "raising_tool": TOOL_ERROR,
        "refusing_tool": OK,  # no result body in the spans: the hidden failure is invisible
        "protocol_error_tool": TRANSPORT,  # -32000 "upstream unavailable for q1"
        "no_such_tool": TOOL_ERROR,  # error.type tool_error, no message to say "unknown"
    },
    "fastmcp3-native": {
        "ok_tool": OK,
        "raising_tool": TOOL_ERROR,
        "refusing_tool": OK,  # as for the mcp SDK: no result body
        "protocol_error_tool": TRANSPORT,
        "no_such_tool": UNKNOWN_TOOL,
    },
    "mcp1-traceloop": {
        "ok_tool": OK,
        "raising_tool": TOOL_ERROR,
        "refusing_tool": HIDDEN,  # the _tag failure body is in traceloop.entity.output
        "protocol_error_tool": TRANSPORT,
        "no_such_tool": UNKNOWN_TOOL,
    },
}
DIALECTS = {
    "mcp2-native": Dialect.MCP_SDK,
    "fastmcp3-native": Dialect.FASTMCP,
    "mcp1-traceloop": Dialect.TRACELOOP,
}


def classify(name: str) -> list[ToolCall | ToolListing]:
    request = ExportTraceServiceRequest.FromString((FIXTURES / f"{name}.otlp.bin").read_bytes())
    classifier = Classifier()
    events = classifier.classify(request, now=0.0)
    return events + classifier.expire(now=3600.0)


def calls_of(name: str) -> dict[str, ToolCall]:
    calls = [e for e in classify(name) if isinstance(e, ToolCall)]
    by_tool = {c.tool: c for c in calls}
    assert len(by_tool) == len(calls), f"a call was reported twice: {[c.tool for c in calls]}"
    return by_tool


@pytest.mark.parametrize(
    ("fixture", "tool"),
    [(fixture, tool) for fixture, table in EXPECTED.items() for tool in table],
    ids=lambda v: v,
)
def test_each_call_classifies_to_what_the_client_saw(fixture: str, tool: str) -> None:
    call = calls_of(fixture)[tool]
    assert (call.outcome, call.failure_class) == EXPECTED[fixture][tool]
    assert call.dialect is DIALECTS[fixture]


@pytest.mark.parametrize("fixture", list(EXPECTED))
def test_every_call_is_there_once_and_nothing_else(fixture: str) -> None:
    assert set(calls_of(fixture)) == set(EXPECTED[fixture])


@pytest.mark.parametrize("fixture", list(EXPECTED))
def test_one_listing_per_list_request(fixture: str) -> None:
    listings = [e for e in classify(fixture) if isinstance(e, ToolListing)]
    assert len(listings) == 1


def test_the_mcp_sdk_client_and_server_spans_are_one_call() -> None:
    calls = calls_of("mcp2-native")
    data = json.loads((FIXTURES / "real-spans.json").read_text())["scenarios"]["mcp2-native"]
    spans = {s["name"]: s for s in data["spans"]}
    raising = calls["raising_tool"]
    assert set(raising.span_ids) == {
        bytes.fromhex(spans["MCP send tools/call raising_tool"]["span_id"]),
        bytes.fromhex(spans["tools/call raising_tool"]["span_id"]),
    }
    # The client's times: the harness waited for the whole round trip.
    assert raising.start_ns == spans["MCP send tools/call raising_tool"]["start_time_unix_nano"]


def test_the_turn_is_the_trace_when_no_turn_id_is_written() -> None:
    calls = calls_of("mcp1-traceloop")
    assert {c.turn for c in calls.values()} == {calls["ok_tool"].trace_id.hex()}


def test_fastmcp_names_the_server() -> None:
    assert {c.server for c in calls_of("fastmcp3-native").values()} == {"capture-tools-server"}


def test_fingerprints_only_where_arguments_were_recorded() -> None:
    assert all(c.fingerprint is None for c in calls_of("mcp2-native").values())
    traceloop = calls_of("mcp1-traceloop")
    assert all(c.fingerprint for c in traceloop.values())
    assert len({c.fingerprint for c in traceloop.values()}) == 5


def test_error_excerpts_are_redacted() -> None:
    excerpt = calls_of("fastmcp3-native")["raising_tool"].verdict.error_excerpt
    assert "disk exploded" in excerpt
    assert "secret/file.txt" not in excerpt


def test_successes_carry_no_excerpt() -> None:
    assert calls_of("mcp1-traceloop")["ok_tool"].verdict.error_excerpt == ""
