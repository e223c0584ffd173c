"""Conformance: every real shape of tool result, over every dialect that can carry it.

A row is one result body as some stack records it — the T3 seed's envelope byte for byte,
its variants, the success control from the same seed, the captures' bodies — and the
verdict it must get. Each row runs through every dialect whose spans can carry a result
(our harness convention's ``mcp.tool.result``, the OpenTelemetry MCP conventions'
``gen_ai.tool.call.result``, OpenLLMetry's ``traceloop.entity.output`` and Logfire's
``response``), each wrapping the body as that stack would, and through ``read_result``
itself. The mcp SDK 2.x and fastmcp record no result at all: what they cannot tell is in
``docs/conventions.md`` and tests/live/test_classify_live.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from mcp_breaker_client.shared.outcome import Signals, judge
from mcp_breaker_client.shared.result import MAX_CONTENT_ITEMS, MAX_JSON_CHARS, read_result
from mcp_breaker_client.shared.verdict import FailureClass, FailureOrigin, Outcome
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.config import ClassifyConfig
from tests.classify_builders import CLIENT, SERVER, classify_all, make_span, only_call

# The T3 seed (t3code #15566), "Actual behavior": the failed t3_queue_list call, verbatim.
T3_FAILURE = {
    "_tag": "OrchestratorMcpFailure",
    "code": "orchestration_error",
    "message": "The operation could not be completed.",
}
T3_ENVELOPE = {
    "content": [
        {
            "type": "text",
            "text": '{"_tag":"OrchestratorMcpFailure","code":"orchestration_error",'
            '"message":"The operation could not be completed."}',
        }
    ],
    "structuredContent": T3_FAILURE,
    "isError": False,
}
# The seed's success control: the same tool, in the current thread.
T3_SUCCESS = {
    "content": [{"type": "text", "text": '{"items":[],"nextCursor":null}'}],
    "structuredContent": {"items": [], "nextCursor": None},
    "isError": False,
}
# The captures' refusing_tool (tests/fixtures/real-spans): another typed failure.
POLICY_REFUSAL = {"_tag": "PolicyRefusalFailure", "code": "policy_denied", "message": "no"}


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


OK = (Outcome.OK, None)
HIDDEN = (Outcome.FAILED, FailureClass.HIDDEN)
TOOL_ERROR = (Outcome.FAILED, FailureClass.TOOL_ERROR)
UNKNOWN_TOOL = (Outcome.FAILED, FailureClass.UNKNOWN_TOOL)

# (id, the result as a stack records it: a structure, or text, and the verdict)
SHAPES: list[tuple[str, Any, tuple[Outcome, FailureClass | None]]] = [
    ("the T3 seed's envelope", T3_ENVELOPE, HIDDEN),
    ("the T3 seed's success control", T3_SUCCESS, OK),
    ("the envelope without structuredContent", {**T3_ENVELOPE, "structuredContent": None}, HIDDEN),
    (
        "the envelope's structuredContent alone",
        {"structuredContent": T3_FAILURE, "isError": False},
        HIDDEN,
    ),
    (
        "the envelope with no isError key",
        {"content": T3_ENVELOPE["content"], "structuredContent": T3_FAILURE},
        HIDDEN,
    ),
    ("a bare typed failure body", T3_FAILURE, HIDDEN),
    (
        "the captures' refusal, pretty-printed JSON text",
        json.dumps(POLICY_REFUSAL, indent=2),
        HIDDEN,
    ),
    ("a bare success body", {"items": [], "nextCursor": None}, OK),
    ("an error object", {"error": {"code": 404, "message": "no such thread"}}, HIDDEN),
    ("ok false", {"ok": False, "reason": "quota"}, HIDDEN),
    (
        "a typed failure in the second content item",
        {"content": [text("partial results:"), text(json.dumps(T3_FAILURE))], "isError": False},
        HIDDEN,
    ),
    ("a plain text result", "3 results for 'breaker'", OK),
    ("a content list of plain text", [text("forecast for Paris: sunny")], OK),
    (
        "isError true around an error text",
        {"content": [text("Error executing tool: disk exploded")], "isError": True},
        TOOL_ERROR,
    ),
    (
        "isError true saying Unknown tool",
        {"content": [text("Unknown tool: t3_queue_lst")], "isError": True},
        UNKNOWN_TOOL,
    ),
    (
        "a success whose text mentions failure",
        {"content": [text("0 failures, 12 passed")], "isError": False},
        OK,
    ),
    ("a _tag that is not a failure", {"_tag": "QueueSnapshot", "items": []}, OK),
]


def harness_span(result: Any) -> Span:
    body = result if isinstance(result, str) else json.dumps(result)
    attributes = {
        "mcp.tool.name": "t3_queue_list",
        "mcp.server.name": "t3-code",
        "mcp.tool.outcome": "ok",
        "mcp.tool.result": body,
    }
    if isinstance(result, dict) and "isError" in result:
        attributes["mcp.tool.is_error"] = result["isError"]
        if result["isError"]:
            attributes["mcp.tool.outcome"] = "failed"
    return make_span("mcp.tool.call", attributes)


def semconv_span(result: Any) -> Span:
    """A client span, as the OpenTelemetry MCP conventions write it, with the opt-in
    result; error.type tool_error when the envelope says isError, as they prescribe."""
    attributes = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "t3_queue_list",
        "gen_ai.tool.call.result": result if isinstance(result, str) else json.dumps(result),
    }
    if isinstance(result, dict) and result.get("isError") is True:
        attributes["error.type"] = "tool_error"
    return make_span("tools/call t3_queue_list", attributes, kind=CLIENT)


def traceloop_span(result: Any) -> Span:
    """OpenLLMetry writes the result's text (content list or string) and is_error."""
    output: dict[str, Any] = {"result": result}
    if isinstance(result, dict) and "isError" in result:
        output = {"result": result.get("content"), "is_error": result["isError"]}
        if result.get("structuredContent") is not None:
            output["result"] = json.dumps(result["structuredContent"])
    elif not isinstance(result, str):
        output = {"result": json.dumps(result)}
    attributes = {
        "traceloop.span.kind": "tool",
        "traceloop.entity.name": "t3_queue_list",
        "traceloop.entity.input": json.dumps({"tool_name": "t3_queue_list", "arguments": {}}),
        "traceloop.entity.output": json.dumps(output),
    }
    return make_span("t3_queue_list.tool", attributes, kind=CLIENT)


def logfire_span(result: Any) -> Span:
    """Logfire records the JSON-RPC request and the result object as the server sent it."""
    if isinstance(result, str):
        response: Any = {"content": [text(result)], "isError": False}
    elif isinstance(result, list):
        response = {"content": result, "isError": False}
    elif "isError" in result or "content" in result or "structuredContent" in result:
        response = result
    else:
        response = {"content": [text(json.dumps(result))], "structuredContent": result}
    request = {"method": "tools/call", "params": {"name": "t3_queue_list", "arguments": {}}}
    attributes = {
        "rpc.system": "jsonrpc",
        "request": json.dumps({**request, "id": 7}),
        "response": json.dumps(response),
    }
    return make_span("MCP request: tools/call t3_queue_list", attributes, kind=SERVER)


DIALECTS: dict[str, Callable[[Any], Span]] = {
    "harness": harness_span,
    "semconv": semconv_span,
    "traceloop": traceloop_span,
    "logfire": logfire_span,
}


@pytest.mark.parametrize("dialect", list(DIALECTS))
@pytest.mark.parametrize(("result", "verdict"), [p[1:] for p in SHAPES], ids=[p[0] for p in SHAPES])
def test_every_shape_gets_its_verdict_in_every_dialect(
    dialect: str, result: Any, verdict: tuple[Outcome, FailureClass | None]
) -> None:
    call = only_call(classify_all(DIALECTS[dialect](result)))
    assert (call.outcome, call.failure_class) == verdict


def test_the_seed_envelope_reads_its_own_is_error_and_the_typed_failure() -> None:
    reading = read_result(json.dumps(T3_ENVELOPE))
    assert reading.is_error is False
    assert reading.typed_failure == T3_FAILURE
    assert reading.text.startswith('{"_tag":"OrchestratorMcpFailure"')


def test_the_hidden_failure_says_what_failed_in_its_excerpt() -> None:
    """The model and the operator read the failure's own words, not a JSON dump."""
    call = only_call(classify_all(semconv_span(T3_ENVELOPE)))
    assert call.verdict.error_excerpt == (
        "OrchestratorMcpFailure (orchestration_error): The operation could not be completed."
    )


def test_a_flag_beside_the_result_wins_over_the_envelopes_own() -> None:
    assert read_result({"isError": False, "content": []}, is_error=True).is_error is True


def test_content_items_past_the_bound_are_not_read() -> None:
    """Bounded work: a typed failure after MAX_CONTENT_ITEMS items is not looked for."""
    padding = [text(f"line {i}") for i in range(MAX_CONTENT_ITEMS)]
    late = {"content": [*padding, text(json.dumps(T3_FAILURE))], "isError": False}
    early = {"content": [*padding[:-1], text(json.dumps(T3_FAILURE))], "isError": False}
    assert read_result(late).typed_failure is None
    assert read_result(early).typed_failure == T3_FAILURE


def test_a_result_too_long_to_decode_is_not_decoded() -> None:
    """A body longer than MAX_JSON_CHARS is text, not parsed: its typed failure is not seen
    (documented), and nothing is spent on it."""
    huge = json.dumps({**T3_FAILURE, "padding": "x" * MAX_JSON_CHARS})
    reading = read_result(huge)
    assert reading.typed_failure is None and reading.text == huge


def test_deep_nesting_and_wrappers_inside_wrappers_are_bounded() -> None:
    nested: Any = T3_FAILURE
    for _ in range(500):
        nested = {"result": nested}
    assert read_result(nested).typed_failure is None  # one wrapper deep, no more
    deep = "[" * 10_000 + "]" * 10_000
    assert read_result(deep).typed_failure is None  # the decoder's own limit, no crash


# --- classify.hidden_failure_patterns: the operator's own words for a failure ---------------

QUOTA = "QUOTA_EXCEEDED: the daily limit of 100 calls is spent"
PATTERNS = (r"^QUOTA_EXCEEDED\b", r"rate limit(ed)? reached")

# (id, the result as a stack records it, the patterns configured, the verdict)
PATTERN_SHAPES: list[tuple[str, Any, tuple[str, ...], tuple[Outcome, FailureClass | None]]] = [
    ("a pattern matches a plain text result", QUOTA, PATTERNS, HIDDEN),
    ("a pattern matches a content list's text", [text(QUOTA)], PATTERNS, HIDDEN),
    (
        "a pattern matches the text of an envelope saying isError false",
        {"content": [text("sorry: rate limit reached, retry in 60s")], "isError": False},
        PATTERNS,
        HIDDEN,
    ),
    ("no pattern matches the text", "forecast for Paris: sunny", PATTERNS, OK),
    (
        "no pattern matches an envelope saying isError false",
        {"content": [text("3 invoices found")], "isError": False},
        PATTERNS,
        OK,
    ),
    ("an anchored pattern does not match mid-text", "quota? " + QUOTA, PATTERNS, OK),
    ("the same text with no pattern configured", QUOTA, (), OK),
    (
        "isError true: a tool error, whatever the patterns say",
        {"content": [text(QUOTA)], "isError": True},
        PATTERNS,
        TOOL_ERROR,
    ),
]


@pytest.mark.parametrize("dialect", list(DIALECTS))
@pytest.mark.parametrize(
    ("result", "patterns", "verdict"),
    [p[1:] for p in PATTERN_SHAPES],
    ids=[p[0] for p in PATTERN_SHAPES],
)
def test_configured_hidden_failure_patterns_in_every_dialect(
    dialect: str,
    result: Any,
    patterns: tuple[str, ...],
    verdict: tuple[Outcome, FailureClass | None],
) -> None:
    config = ClassifyConfig(hidden_failure_patterns=patterns)
    call = only_call(classify_all(DIALECTS[dialect](result), config=config))
    assert (call.outcome, call.failure_class) == verdict
    if verdict == HIDDEN:
        # The failure is the tool's, told in the result's own words.
        assert call.verdict.origin is FailureOrigin.TOOL
        assert "QUOTA_EXCEEDED" in call.verdict.error_excerpt or (
            "rate limit reached" in call.verdict.error_excerpt
        )


@pytest.mark.parametrize("dialect", list(DIALECTS))
@pytest.mark.parametrize(
    ("said", "origin"),
    [
        # A tool's backend speaks of its own sessions and connections: the tool's failure,
        # and its siblings on the same (live) server are not blamed.
        ("Jira API returned 401: login session expired", FailureOrigin.TOOL),
        ("database connection closed unexpectedly", FailureOrigin.TOOL),
        ("worker not connected to the queue", FailureOrigin.TOOL),
        # A proxy answering that its upstream MCP session is gone (the seed): the session.
        ("mcp-beaver: upstream MCP session is closed", FailureOrigin.SESSION),
    ],
)
def test_session_words_in_a_result_blame_the_session_only_when_they_name_the_mcp_session(
    dialect: str, said: str, origin: FailureOrigin
) -> None:
    call = only_call(classify_all(DIALECTS[dialect]({"content": [text(said)], "isError": True})))
    assert call.outcome is Outcome.FAILED
    assert call.verdict.origin is origin


def test_an_error_the_sdk_writes_three_times_is_said_once() -> None:
    """The mcp SDK's closed session: the status, the error type and the exception event
    all say it, the event's message already prefixed with its type."""
    said = "MCPError: Connection closed"
    signals = Signals(
        status_error=True,
        status_message=said,
        error_type="-32000",
        exceptions=[("MCPError", said)],
    )
    verdict = judge(signals)
    assert verdict.error_excerpt == "MCPError: Connection closed | -32000"
    assert verdict.origin is FailureOrigin.SESSION
