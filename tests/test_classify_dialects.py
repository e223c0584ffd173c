"""Each dialect's spans, built by hand, classify to the call they record.

One table per dialect: a row is the spans of one call and the facts of the ToolCall they
must give (tool, server, outcome, failure class or neutral reason, dialect, and whether a
fingerprint was made). Every table runs the spans through ``Classifier().classify`` at a
fake time 0 and then ``expire`` far later, so a half held for pairing is decided too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from mcp_breaker_client.shared.verdict import FailureClass, NeutralReason, Outcome
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.classify.events import Dialect
from tests.classify_builders import (
    CLIENT,
    ERROR,
    INTERNAL,
    OK_STATUS,
    SERVER,
    CallFacts,
    as_json,
    calls_in,
    classify_all,
    listings_in,
    make_span,
    only_call,
    only_listing,
    span_id,
    trace_id,
)

OK = Outcome.OK
FAILED = Outcome.FAILED
NEUTRAL = Outcome.NEUTRAL
UNKNOWN = Outcome.UNKNOWN

# The verbatim error of the dead Playwright session in the sirens-echo seed.
SEED_SESSION_CLOSED = (
    "mcp-beaver: upstream MCP session is closed (reconnect also failed: reconnect upstream MCP "
    '"http://127.0.0.1:8931/mcp": sending "notifications/initialized": Bad Request)'
)
ORCHESTRATOR_FAILURE = {
    "_tag": "OrchestratorMcpFailure",
    "code": "orchestration_error",
    "message": "The operation could not be completed.",
}


def check(spans: Sequence[Span], expected: CallFacts) -> None:
    assert CallFacts.of(only_call(classify_all(spans))) == expected


# --- the harness convention ---------------------------------------------------------------


def harness_call(attributes: Mapping[str, Any] | None = None, **span_fields: Any) -> Span:
    """An ``mcp.tool.call`` span for playwright's browser_navigate; None drops a key."""
    merged = {
        "mcp.tool.name": "browser_navigate",
        "mcp.server.name": "playwright",
        **(attributes or {}),
    }
    present = {k: v for k, v in merged.items() if v is not None}
    return make_span("mcp.tool.call", present, **span_fields)


def harness(
    outcome: Outcome,
    failure_class: FailureClass | None = None,
    neutral_reason: NeutralReason | None = None,
    *,
    tool: str = "browser_navigate",
    server: str | None = "playwright",
    fingerprinted: bool = False,
) -> CallFacts:
    return CallFacts(
        tool=tool,
        server=server,
        outcome=outcome,
        failure_class=failure_class,
        neutral_reason=neutral_reason,
        dialect=Dialect.HARNESS,
        fingerprinted=fingerprinted,
    )


HARNESS_TABLE = [
    pytest.param(
        harness_call({"mcp.tool.outcome": "ok"}),
        harness(OK),
        id="outcome ok is ok",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "failed", "mcp.tool.error": SEED_SESSION_CLOSED}),
        harness(FAILED, FailureClass.TRANSPORT),
        id="a closed upstream session is a transport failure",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "failed", "mcp.tool.error": "timed out after 30s"}),
        harness(FAILED, FailureClass.TIMEOUT),
        id="a call that timed out is a timeout",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "failed", "mcp.tool.failure_class": "protocol"}),
        harness(FAILED, FailureClass.PROTOCOL),
        id="a declared failure class is taken as is",
    ),
    pytest.param(
        harness_call(
            {
                "mcp.tool.outcome": "failed",
                "mcp.tool.error": "timed out after 30s",
                "mcp.tool.failure_class": "transport",
            }
        ),
        harness(FAILED, FailureClass.TRANSPORT),
        id="a declared failure class wins over the words of the error",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "failed"}),
        harness(FAILED, FailureClass.TOOL_ERROR),
        id="a failure with nothing to say why is a tool error",
    ),
    pytest.param(
        harness_call(
            {"mcp.tool.outcome": "failed", "mcp.tool.error": "tool browser_navigate not found"}
        ),
        harness(FAILED, FailureClass.UNKNOWN_TOOL),
        id="a tool the server does not know is an unknown tool",
    ),
    pytest.param(
        harness_call(
            {"mcp.tool.outcome": "failed", "mcp.tool.error": "The user declined this tool call"}
        ),
        harness(NEUTRAL, neutral_reason=NeutralReason.DECLINED),
        id="a user's no under outcome failed is declined, not a broken tool",
    ),
    pytest.param(
        harness_call(
            {"mcp.tool.outcome": "failed", "mcp.tool.error": "The user dismissed this question"}
        ),
        harness(NEUTRAL, neutral_reason=NeutralReason.DISMISSED),
        id="a dismissed question under outcome failed is dismissed",
    ),
    pytest.param(
        harness_call(
            {"mcp.tool.outcome": "failed", "mcp.tool.error": "Tool execution interrupted"}
        ),
        harness(NEUTRAL, neutral_reason=NeutralReason.CANCELLED),
        id="an interrupted call under outcome failed is cancelled",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "declined"}),
        harness(NEUTRAL, neutral_reason=NeutralReason.DECLINED),
        id="outcome declined is declined",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "dismissed"}),
        harness(NEUTRAL, neutral_reason=NeutralReason.DISMISSED),
        id="outcome dismissed is dismissed",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "cancelled"}),
        harness(NEUTRAL, neutral_reason=NeutralReason.CANCELLED),
        id="outcome cancelled is cancelled",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "cancelled", "mcp.breaker.refused": True}),
        harness(NEUTRAL, neutral_reason=NeutralReason.REFUSED_BY_ADVISORY),
        id="a call the harness refused on an advisory is a dead call spared",
    ),
    pytest.param(
        harness_call({"mcp.breaker.refused": True}),
        harness(NEUTRAL, neutral_reason=NeutralReason.REFUSED_BY_ADVISORY),
        id="refused on an advisory without an outcome is still neutral",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "ok", "mcp.breaker.refused": True}),
        harness(NEUTRAL, neutral_reason=NeutralReason.REFUSED_BY_ADVISORY),
        id="a refused call is never a success: it must not close a half-open circuit",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "failed", "mcp.breaker.refused": True}),
        harness(FAILED, FailureClass.TOOL_ERROR),
        id="an explicit failure beats the refused flag: a failure is never hidden",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "cancelled", "mcp.breaker.refused": "true"}),
        harness(NEUTRAL, neutral_reason=NeutralReason.CANCELLED),
        id="refused must be a boolean: a string is not read",
    ),
    pytest.param(
        harness_call({}),
        harness(UNKNOWN),
        id="no outcome and no other signal is unknown, never guessed",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "ok", "mcp.tool.result": as_json(ORCHESTRATOR_FAILURE)}),
        harness(FAILED, FailureClass.HIDDEN),
        id="a typed failure under outcome ok is a hidden failure",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "ok", "mcp.tool.result": as_json({"rows": 3})}),
        harness(OK),
        id="a plain result under outcome ok is ok",
    ),
    pytest.param(
        harness_call({}, status=ERROR, message="Bad Request"),
        harness(FAILED, FailureClass.TOOL_ERROR),
        id="status ERROR without an outcome is a failure",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "ok"}, status=ERROR, message="Bad Request"),
        harness(FAILED, FailureClass.TOOL_ERROR),
        id="status ERROR under outcome ok is still a failure",
    ),
    pytest.param(
        harness_call({"mcp.tool.is_error": True, "mcp.tool.error": "quota exhausted"}),
        harness(FAILED, FailureClass.TOOL_ERROR),
        id="is_error true without an outcome is a tool error",
    ),
    pytest.param(
        harness_call({"mcp.tool.name": "playwright__browser_navigate", "mcp.server.name": None}),
        harness(UNKNOWN, tool="playwright__browser_navigate", server="playwright"),
        id="without a server name the server comes from the server__tool name",
    ),
    pytest.param(
        harness_call({"mcp.server.name": None, "mcp.tool.outcome": "ok"}),
        harness(OK, server=None),
        id="without any way to name the server it stays unnamed",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "ok", "mcp.tool.arguments": as_json({"url": "x"})}),
        harness(OK, fingerprinted=True),
        id="recorded arguments give a fingerprint",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "ok", "mcp.tool.args_hash": "9f2c41d0"}),
        harness(OK, fingerprinted=True),
        id="the harness's own hash of the arguments gives a fingerprint",
    ),
    pytest.param(
        harness_call({"mcp.tool.outcome": "ok", "mcp.tool.arguments": "{not json"}),
        harness(OK),
        id="arguments that are not JSON give no made-up fingerprint",
    ),
]


@pytest.mark.parametrize(("span", "expected"), HARNESS_TABLE)
def test_harness_convention(span: Span, expected: CallFacts) -> None:
    """A harness ``mcp.tool.call`` span classifies to the call it records."""
    check([span], expected)


def test_harness_turn_and_round_come_from_their_attributes() -> None:
    """mcp.turn.id names the turn and mcp.turn.round gives the round."""
    span = harness_call({"mcp.turn.id": "1539078028959944794", "mcp.turn.round": 7})
    call = only_call(classify_all(span))
    assert (call.turn, call.round) == ("1539078028959944794", 7)


def test_harness_turn_is_the_trace_without_a_turn_id() -> None:
    """Without mcp.turn.id the turn is the trace id in hex, and a round that is no int is none."""
    call = only_call(classify_all(harness_call({"mcp.turn.round": "7"}, trace=9)))
    assert (call.turn, call.round) == (trace_id(9).hex(), None)


def harness_fingerprint(arguments: str | None, server: str = "playwright") -> str | None:
    span = harness_call({"mcp.tool.outcome": "ok", "mcp.server.name": server})
    if arguments is not None:
        span = harness_call(
            {"mcp.tool.outcome": "ok", "mcp.server.name": server, "mcp.tool.arguments": arguments}
        )
    return only_call(classify_all(span)).fingerprint


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param('{"url": "a", "wait": 2}', '{"wait": 2, "url": "a"}', id="key order"),
        pytest.param('{"wait": 2}', '{"wait": 2.0}', id="2 and 2.0"),
        pytest.param('{"a": [1, {"b": 2}]}', '{ "a" : [ 1 , { "b" : 2 } ] }', id="whitespace"),
    ],
)
def test_fingerprint_is_the_same_for_the_same_arguments(first: str, second: str) -> None:
    """Arguments that differ only in form give the same fingerprint."""
    assert harness_fingerprint(first) == harness_fingerprint(second) is not None


@pytest.mark.parametrize(
    ("first", "second", "servers"),
    [
        pytest.param('{"url": "a"}', '{"url": "b"}', ("p", "p"), id="a different value"),
        pytest.param('{"url": "a"}', '{"uri": "a"}', ("p", "p"), id="a different key"),
        pytest.param('{"n": 2}', '{"n": "2"}', ("p", "p"), id="a number and its string"),
        pytest.param('{"url": "a"}', '{"url": "a"}', ("p", "q"), id="another server"),
    ],
)
def test_fingerprint_differs_for_different_calls(
    first: str, second: str, servers: tuple[str, str]
) -> None:
    """Different arguments, or another server, give another fingerprint."""
    assert harness_fingerprint(first, servers[0]) != harness_fingerprint(second, servers[1])


def test_no_fingerprint_without_arguments() -> None:
    """A call that recorded no arguments has no fingerprint, never a made-up one."""
    assert harness_fingerprint(None) is None


def test_harness_error_excerpt_keeps_what_failed() -> None:
    """The excerpt of the seed error still says the upstream session is closed."""
    span = harness_call({"mcp.tool.outcome": "failed", "mcp.tool.error": SEED_SESSION_CLOSED})
    excerpt = only_call(classify_all(span)).verdict.error_excerpt
    assert "upstream MCP session is closed" in excerpt


# --- OpenTelemetry MCP semantic conventions -----------------------------------------------


def semconv_call(
    attributes: Mapping[str, Any] | None = None, *, tool: str = "get_weather", **span_fields: Any
) -> dict[str, Any]:
    """The name, attributes and span fields of a semconv ``tools/call`` span (kind added later)."""
    base = {"mcp.method.name": "tools/call", "gen_ai.tool.name": tool}
    return {"name": f"tools/call {tool}", "attributes": {**base, **(attributes or {})}} | (
        span_fields
    )


def semconv(
    outcome: Outcome,
    failure_class: FailureClass | None = None,
    *,
    server: str | None = None,
    fingerprinted: bool = False,
) -> CallFacts:
    return CallFacts(
        tool="get_weather",
        server=server,
        outcome=outcome,
        failure_class=failure_class,
        dialect=Dialect.SEMCONV,
        fingerprinted=fingerprinted,
    )


SEMCONV_TABLE = [
    pytest.param(
        semconv_call({"error.type": "tool_error"}, status=ERROR),
        semconv(FAILED, FailureClass.TOOL_ERROR),
        id="error.type tool_error is a tool error",
    ),
    pytest.param(
        semconv_call({"error.type": "tool_error"}),
        semconv(FAILED, FailureClass.TOOL_ERROR),
        id="error.type alone, status unset, is a failure",
    ),
    pytest.param(
        semconv_call({"rpc.response.status_code": "-32602"}),
        semconv(FAILED, FailureClass.PROTOCOL),
        id="JSON-RPC -32602 invalid params is a protocol failure",
    ),
    pytest.param(
        semconv_call({"rpc.response.status_code": -32602}),
        semconv(FAILED, FailureClass.PROTOCOL),
        id="a JSON-RPC code written as an int is read too",
    ),
    pytest.param(
        semconv_call({"rpc.response.status_code": "-32601"}),
        semconv(FAILED, FailureClass.UNKNOWN_TOOL),
        id="JSON-RPC -32601 method not found is an unknown tool",
    ),
    pytest.param(
        semconv_call({"error.type": "-32001"}),
        semconv(FAILED, FailureClass.TIMEOUT),
        id="error.type -32001 is a request timeout",
    ),
    pytest.param(
        semconv_call(
            {"error.type": "-32000", "rpc.response.status_code": "-32000"},
            status=ERROR,
            message="upstream unavailable for q1",
        ),
        semconv(FAILED, FailureClass.TRANSPORT),
        id="another JSON-RPC code is classed by its message",
    ),
    pytest.param(
        semconv_call({}, status=ERROR, message="connection refused"),
        semconv(FAILED, FailureClass.TRANSPORT),
        id="status ERROR connection refused is a transport failure",
    ),
    pytest.param(
        semconv_call({}, status=ERROR, message="Request timed out"),
        semconv(FAILED, FailureClass.TIMEOUT),
        id="status ERROR timed out is a timeout",
    ),
    pytest.param(
        semconv_call(
            {}, exceptions=[("ConnectionResetError", "[Errno 104] Connection reset by peer")]
        ),
        semconv(FAILED, FailureClass.TRANSPORT),
        id="a ConnectionResetError exception event is a transport failure",
    ),
    pytest.param(
        semconv_call({}, exceptions=[("ValueError", "city must not be empty")]),
        semconv(FAILED, FailureClass.TOOL_ERROR),
        id="any other exception event is a tool error",
    ),
    pytest.param(
        semconv_call({}),
        semconv(OK),
        id="no error at all is ok, as semconv sets error.type on failure",
    ),
    pytest.param(
        semconv_call({}, status=OK_STATUS),
        semconv(OK),
        id="status OK is ok",
    ),
    pytest.param(
        semconv_call({"gen_ai.tool.call.result": as_json({"ok": False, "reason": "quota"})}),
        semconv(FAILED, FailureClass.HIDDEN),
        id="a result with ok false is a hidden failure",
    ),
    pytest.param(
        semconv_call({"gen_ai.tool.call.result": as_json({"error": {"code": 7, "msg": "no"}})}),
        semconv(FAILED, FailureClass.HIDDEN),
        id="a result with an error object is a hidden failure",
    ),
    pytest.param(
        semconv_call({"gen_ai.tool.call.result": as_json({"temperature": 21})}),
        semconv(OK),
        id="a plain result is ok",
    ),
    pytest.param(
        semconv_call({"gen_ai.tool.call.arguments": as_json({"city": "Paris"})}),
        semconv(OK, fingerprinted=True),
        id="recorded arguments give a fingerprint",
    ),
    pytest.param(
        semconv_call({"mcp.server.name": "weather"}),
        semconv(OK, server="weather"),
        id="mcp.server.name names the server",
    ),
]


@pytest.mark.parametrize("kind", [CLIENT, SERVER], ids=["on a client span", "on a server span"])
@pytest.mark.parametrize(("fields", "expected"), SEMCONV_TABLE)
def test_semconv(fields: dict[str, Any], expected: CallFacts, kind: int) -> None:
    """A semconv ``tools/call`` span, client or server side, classifies to its call."""
    check([make_span(kind=kind, **fields)], expected)


@pytest.mark.parametrize(
    "attributes",
    [
        pytest.param({"error.type": "--32602"}, id="error.type with two minus signs"),
        pytest.param({"error.type": "\u00b2"}, id="error.type a superscript two"),
        pytest.param(
            {"rpc.response.status_code": "--32602"}, id="a status code with two minus signs"
        ),
        pytest.param(
            {"rpc.response.status_code": "3\u00b2"}, id="a status code with a superscript"
        ),
    ],
)
def test_a_malformed_json_rpc_code_is_still_a_failure(attributes: dict[str, str]) -> None:
    """A code that only looks numeric (str.isdigit accepts '\u00b2') is read, never raised on."""
    span = make_span(**semconv_call(attributes, status=ERROR), kind=SERVER)
    assert only_call(classify_all(span)).outcome is FAILED


def test_semconv_tool_comes_from_the_span_name_without_gen_ai_tool_name() -> None:
    """'tools/call get_weather' names the tool when gen_ai.tool.name is absent."""
    span = make_span("tools/call get_weather", {"mcp.method.name": "tools/call"}, kind=SERVER)
    assert only_call(classify_all(span)).tool == "get_weather"


def test_semconv_client_listing_is_a_listing_and_the_server_side_is_not() -> None:
    """A client ``tools/list`` span is one listing; its server half is not counted again."""
    client = make_span("tools/list", {"mcp.method.name": "tools/list"}, kind=CLIENT, span=1)
    server = make_span(
        "tools/list", {"mcp.method.name": "tools/list"}, kind=SERVER, span=2, parent=1
    )
    listing = only_listing(classify_all([client, server]))
    assert (listing.dialect, listing.span_ids) == (Dialect.SEMCONV, (span_id(1),))


# --- the official mcp Python SDK 2.x ------------------------------------------------------


def sdk_client(
    attributes: Mapping[str, Any] | None = None,
    tool: str = "search_docs",
    request_id: str = "4",
    **span_fields: Any,
) -> Span:
    """The client span of the mcp SDK 2.x: the tool only in its name, status UNSET."""
    fields = {"kind": CLIENT, "span": 1} | span_fields
    base = {"mcp.method.name": "tools/call", "jsonrpc.request.id": request_id}
    return make_span(f"MCP send tools/call {tool}", {**base, **(attributes or {})}, **fields)


def sdk_server(
    attributes: Mapping[str, Any] | None = None,
    tool: str = "search_docs",
    request_id: str = "4",
    **span_fields: Any,
) -> Span:
    """The server span of the mcp SDK 2.x, a child of the client span by default."""
    fields = {"kind": SERVER, "span": 2, "parent": 1} | span_fields
    base = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": tool,
        "gen_ai.operation.name": "execute_tool",
        "jsonrpc.request.id": request_id,
        "mcp.protocol.version": "2026-07-28",
    }
    return make_span(f"tools/call {tool}", {**base, **(attributes or {})}, **fields)


def sdk(
    outcome: Outcome,
    failure_class: FailureClass | None = None,
    dialect: Dialect = Dialect.MCP_SDK,
) -> CallFacts:
    return CallFacts(
        tool="search_docs",
        server=None,
        outcome=outcome,
        failure_class=failure_class,
        dialect=dialect,
    )


MCP_SDK_TABLE = [
    pytest.param(
        [sdk_client()],
        sdk(UNKNOWN),
        (1,),
        id="the client span alone says nothing and is unknown",
    ),
    pytest.param(
        [sdk_client(), sdk_server({"error.type": "tool_error"}, status=ERROR)],
        sdk(FAILED, FailureClass.TOOL_ERROR),
        (1, 2),
        id="the client span and its failing server span are one tool error",
    ),
    pytest.param(
        [sdk_client(), sdk_server()],
        sdk(OK),
        (1, 2),
        id="the client span and its silent server span are one ok call",
    ),
    pytest.param(
        [sdk_server({"error.type": "tool_error"}, status=ERROR), sdk_client()],
        sdk(FAILED, FailureClass.TOOL_ERROR),
        (1, 2),
        id="a server span before its client span in one request: the same one call",
    ),
    pytest.param(
        [
            sdk_client(
                {"error.type": "-32000", "rpc.response.status_code": "-32000"},
                status=ERROR,
                message="upstream unavailable for q1",
            )
        ],
        sdk(FAILED, FailureClass.TRANSPORT),
        (1,),
        id="a client span with a JSON-RPC error is decided by its message",
    ),
]


@pytest.mark.parametrize(("spans", "expected", "span_numbers"), MCP_SDK_TABLE)
def test_mcp_sdk(spans: list[Span], expected: CallFacts, span_numbers: tuple[int, ...]) -> None:
    """The mcp SDK 2.x client and server spans of one call are read as one call."""
    call = only_call(classify_all(spans))
    assert CallFacts.of(call) == expected
    assert set(call.span_ids) == {span_id(n) for n in span_numbers}


def test_mcp_sdk_pair_keeps_the_client_times() -> None:
    """The paired call keeps the client's times: the harness waited the whole round trip."""
    client = sdk_client()
    call = only_call(classify_all([client, sdk_server({"error.type": "tool_error"})]))
    assert (call.start_ns, call.end_ns) == (client.start_time_unix_nano, client.end_time_unix_nano)


# --- fastmcp 3 ----------------------------------------------------------------------------

FASTMCP_SERVER = "capture-tools-server"
SESSION = "50ca6436-5f35-402a-9f2d-5a53fd08019d"


def fastmcp_client(tool: str, attributes: Mapping[str, Any] | None = None, **fields: Any) -> Span:
    base = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": tool,
        "fastmcp.component.key": tool,
    }
    return make_span(
        f"tools/call {tool}", {**base, **(attributes or {})}, **({"kind": CLIENT} | fields)
    )


def fastmcp_server(tool: str, attributes: Mapping[str, Any] | None = None, **fields: Any) -> Span:
    base = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": tool,
        "fastmcp.component.key": f"tool:{tool}@",
        "fastmcp.component.type": "tool",
        "fastmcp.server.name": FASTMCP_SERVER,
        "mcp.session.id": SESSION,
    }
    return make_span(
        f"tools/call {tool}",
        {**base, **(attributes or {})},
        **({"kind": SERVER, "span": 2, "parent": 1} | fields),
    )


def fastmcp(
    tool: str,
    outcome: Outcome,
    failure_class: FailureClass | None = None,
    *,
    server: str | None = FASTMCP_SERVER,
) -> CallFacts:
    return CallFacts(
        tool=tool,
        server=server,
        outcome=outcome,
        failure_class=failure_class,
        dialect=Dialect.FASTMCP,
    )


FASTMCP_TABLE = [
    pytest.param(
        [fastmcp_server("ok_tool")],
        fastmcp("ok_tool", OK),
        id="the server span names its server",
    ),
    pytest.param(
        [fastmcp_client("ok_tool", span=1), fastmcp_server("ok_tool")],
        fastmcp("ok_tool", OK),
        id="a client span is named by its server span",
    ),
    pytest.param(
        [
            fastmcp_client(
                "no_such_tool",
                {"error.type": "tool_error"},
                status=ERROR,
                message="Unknown tool: 'no_such_tool'",
            )
        ],
        fastmcp("no_such_tool", FAILED, FailureClass.UNKNOWN_TOOL, server=None),
        id="an Unknown tool message is an unknown tool",
    ),
    pytest.param(
        [fastmcp_server("no_such_tool", {"error.type": "NotFoundError"}, status=ERROR)],
        fastmcp("no_such_tool", FAILED, FailureClass.UNKNOWN_TOOL),
        id="error.type NotFoundError is an unknown tool",
    ),
    pytest.param(
        [
            fastmcp_client(
                "raising_tool",
                {"error.type": "tool_error"},
                span=1,
                status=ERROR,
                message="Error calling tool 'raising_tool': disk exploded",
            ),
            fastmcp_server(
                "raising_tool",
                {"error.type": "tool_error"},
                status=ERROR,
                message="ToolError: Error calling tool 'raising_tool': disk exploded",
            ),
        ],
        fastmcp("raising_tool", FAILED, FailureClass.TOOL_ERROR),
        id="a raising tool seen from both sides is one tool error",
    ),
]


@pytest.mark.parametrize(("spans", "expected"), FASTMCP_TABLE)
def test_fastmcp(spans: list[Span], expected: CallFacts) -> None:
    """fastmcp spans name their server and say Unknown tool for a tool it lacks."""
    check(spans, expected)


# --- OpenLLMetry (traceloop) --------------------------------------------------------------


def traceloop_call(
    output: Mapping[str, Any] | None,
    *,
    tool: str = "get_forecast",
    arguments: Any = None,
    with_arguments: bool = True,
    **fields: Any,
) -> Span:
    """A ``{tool}.tool`` span; output None leaves traceloop.entity.output out."""
    given: dict[str, Any] = {"tool_name": tool}
    if with_arguments:
        given["arguments"] = {"city": "Paris", "days": 2} if arguments is None else arguments
    attributes: dict[str, Any] = {
        "traceloop.span.kind": "tool",
        "traceloop.entity.name": tool,
        "traceloop.entity.input": as_json(given),
    }
    if output is not None:
        attributes["traceloop.entity.output"] = as_json(output)
    return make_span(f"{tool}.tool", attributes, **fields)


def traceloop(
    outcome: Outcome,
    failure_class: FailureClass | None = None,
    neutral_reason: NeutralReason | None = None,
    *,
    tool: str = "get_forecast",
    server: str | None = None,
    fingerprinted: bool = True,
) -> CallFacts:
    return CallFacts(
        tool=tool,
        server=server,
        outcome=outcome,
        failure_class=failure_class,
        neutral_reason=neutral_reason,
        dialect=Dialect.TRACELOOP,
        fingerprinted=fingerprinted,
    )


TRACELOOP_TABLE = [
    pytest.param(
        traceloop_call({"result": "Error executing tool: quota exhausted", "is_error": True}),
        traceloop(FAILED, FailureClass.TOOL_ERROR),
        id="is_error true is a tool error",
    ),
    pytest.param(
        traceloop_call(
            {"result": "Error executing tool get_forecast: disk exploded", "is_error": True},
            status=ERROR,
            message="Error executing tool get_forecast: disk exploded",
        ),
        traceloop(FAILED, FailureClass.TOOL_ERROR),
        id="is_error true with status ERROR, as captured, is a tool error",
    ),
    pytest.param(
        traceloop_call(
            {
                "result": as_json({"_tag": "PolicyRefusalFailure", "code": "policy_refusal"}),
                "is_error": False,
            }
        ),
        traceloop(FAILED, FailureClass.HIDDEN),
        id="a typed failure inside the result string is a hidden failure",
    ),
    pytest.param(
        traceloop_call({"result": "forecast for Paris: sunny for 2 day(s)"}),
        traceloop(OK),
        id="a plain result is ok",
    ),
    pytest.param(
        traceloop_call({"result": "forecast for Paris: sunny", "is_error": False}),
        traceloop(OK),
        id="is_error false is ok",
    ),
    pytest.param(
        traceloop_call({"result": "Unknown tool: get_forecast", "is_error": True}),
        traceloop(FAILED, FailureClass.UNKNOWN_TOOL),
        id="an Unknown tool result is an unknown tool",
    ),
    pytest.param(
        traceloop_call(None),
        traceloop(UNKNOWN),
        id="no output at all is unknown",
    ),
    pytest.param(
        traceloop_call(
            {"result": "Your booking for Friday was cancelled as requested.", "is_error": False}
        ),
        traceloop(OK),
        id="a successful result that mentions a cancellation is ok",
    ),
    pytest.param(
        traceloop_call({"result": "done"}, with_arguments=False),
        traceloop(OK, fingerprinted=False),
        id="no arguments in the input give no fingerprint",
    ),
    pytest.param(
        traceloop_call({"result": "done"}, tool="playwright__browser_navigate"),
        traceloop(OK, tool="playwright__browser_navigate", server="playwright"),
        id="the server comes from the server__tool name",
    ),
]


@pytest.mark.parametrize(("span", "expected"), TRACELOOP_TABLE)
def test_traceloop(span: Span, expected: CallFacts) -> None:
    """An OpenLLMetry ``{tool}.tool`` span classifies from its entity input and output."""
    check([span], expected)


def test_traceloop_listing_counts_the_tools_it_lists() -> None:
    """A ``tools/list.mcp`` span whose output lists 3 tools is a listing of 3."""
    tools = [{"name": name, "inputSchema": {}} for name in ("ok_tool", "raising_tool", "x")]
    span = make_span(
        "tools/list.mcp",
        {
            "traceloop.entity.input": as_json({"method": "tools/list", "params": None}),
            "traceloop.entity.output": as_json({"nextCursor": None, "tools": tools}),
        },
        status=OK_STATUS,
    )
    listing = only_listing(classify_all(span))
    assert (listing.dialect, listing.listed, listing.problems) == (Dialect.TRACELOOP, 3, ())


# --- Logfire ------------------------------------------------------------------------------


def logfire_call(
    response: Mapping[str, Any] | None,
    *,
    tool: str = "search_index",
    arguments: Any = None,
    request_id: int = 3,
    **fields: Any,
) -> Span:
    """An ``MCP request: tools/call {tool}`` span; response None leaves it out."""
    request = {
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments or {"query": "breaker", "limit": 5}},
        "id": request_id,
    }
    attributes: dict[str, Any] = {"rpc.system": "jsonrpc", "request": as_json(request)}
    if response is not None:
        attributes["response"] = as_json(response)
    return make_span(f"MCP request: tools/call {tool}", attributes, **fields)


def text_content(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


def logfire(
    outcome: Outcome,
    failure_class: FailureClass | None = None,
    *,
    tool: str = "search_index",
) -> CallFacts:
    return CallFacts(
        tool=tool,
        server=None,
        outcome=outcome,
        failure_class=failure_class,
        dialect=Dialect.LOGFIRE,
        fingerprinted=True,
    )


LOGFIRE_TABLE = [
    pytest.param(
        logfire_call({"content": text_content("the index rejected the query"), "isError": True}),
        logfire(FAILED, FailureClass.TOOL_ERROR),
        id="isError true is a tool error",
    ),
    pytest.param(
        logfire_call(
            {
                "content": text_content(as_json({"_tag": "SomethingFailure"})),
                "structuredContent": {"_tag": "SomethingFailure"},
                "isError": False,
            }
        ),
        logfire(FAILED, FailureClass.HIDDEN),
        id="isError false around a typed failure in structuredContent is hidden",
    ),
    pytest.param(
        logfire_call({"content": text_content(as_json(ORCHESTRATOR_FAILURE)), "isError": False}),
        logfire(FAILED, FailureClass.HIDDEN),
        id="isError false around a typed failure in the text is hidden",
    ),
    pytest.param(
        logfire_call({"content": text_content("3 results"), "isError": False}),
        logfire(OK),
        id="isError false with a plain result is ok",
    ),
    pytest.param(
        logfire_call({"content": text_content("Unknown tool: search_index"), "isError": True}),
        logfire(FAILED, FailureClass.UNKNOWN_TOOL),
        id="isError true saying Unknown tool is an unknown tool",
    ),
    pytest.param(
        logfire_call(None),
        logfire(UNKNOWN),
        id="no response is unknown",
    ),
    pytest.param(
        logfire_call(None, status=ERROR, message="connection reset by peer"),
        logfire(FAILED, FailureClass.TRANSPORT),
        id="no response and status ERROR connection reset is a transport failure",
    ),
    pytest.param(
        logfire_call({"content": text_content("Meeting on Friday cancelled."), "isError": False}),
        logfire(OK),
        id="a successful result that mentions a cancellation is ok",
    ),
]


@pytest.mark.parametrize(("span", "expected"), LOGFIRE_TABLE)
def test_logfire(span: Span, expected: CallFacts) -> None:
    """A Logfire ``MCP request`` span classifies from its request and response JSON."""
    check([span], expected)


def test_logfire_tool_comes_from_the_name_without_params() -> None:
    """Without a request attribute, the span name names the tool."""
    span = make_span(
        "MCP request: tools/call search_index",
        {"response": as_json({"content": text_content("ok"), "isError": False})},
    )
    call = only_call(classify_all(span))
    assert (call.tool, call.outcome, call.fingerprint) == ("search_index", OK, None)


# --- spans that are not MCP calls or listings ---------------------------------------------

NOT_MCP = [
    pytest.param(make_span("GET /api", {"http.request.method": "GET"}, kind=SERVER), id="GET"),
    pytest.param(make_span("SELECT", {"db.system": "postgresql"}, kind=CLIENT), id="SELECT"),
    pytest.param(make_span("tools"), id="a span named tools"),
    pytest.param(make_span("mcp"), id="a span named mcp"),
    pytest.param(make_span("tools/call get_weather"), id="tools/call without mcp.method.name"),
    pytest.param(
        make_span("MCP send initialize", {"mcp.method.name": "initialize"}, kind=CLIENT),
        id="an initialize request",
    ),
    pytest.param(
        make_span("initialize.mcp", {"traceloop.entity.input": as_json({"method": "initialize"})}),
        id="a traceloop initialize",
    ),
    pytest.param(make_span("summarize.tool"), id="a .tool span without traceloop.span.kind"),
    pytest.param(
        make_span("MCP request: initialize", {"request": as_json({"method": "initialize"})}),
        id="a Logfire initialize",
    ),
    pytest.param(make_span("ResponseStreamWriter", {"mcp.request.id": "1"}), id="a stream writer"),
    pytest.param(make_span("mcp.tool.calls"), id="a name close to mcp.tool.call"),
]


@pytest.mark.parametrize("span", NOT_MCP)
def test_spans_that_are_not_mcp_give_no_event(span: Span) -> None:
    """A span that is not an MCP call or listing gives no event at all."""
    assert classify_all(span) == []


def test_a_request_mixing_mcp_and_other_spans_gives_only_the_mcp_events() -> None:
    """The other spans of a request neither add events nor hide the MCP ones."""
    spans = [
        make_span("GET /api", span=1),
        harness_call({"mcp.tool.outcome": "ok"}, span=2),
        make_span("SELECT", span=3),
        make_span("mcp.tools.list", {"mcp.tools.listed": 4}, span=4),
    ]
    events = classify_all(spans)
    assert ([c.span_ids for c in calls_in(events)], len(listings_in(events))) == (
        [(span_id(2),)],
        1,
    )


def test_a_harness_span_is_read_whatever_its_kind() -> None:
    """The harness convention is recognised by its name, whatever kind the span has."""
    for kind in (INTERNAL, CLIENT, SERVER):
        span = harness_call({"mcp.tool.outcome": "ok"}, kind=kind)
        assert only_call(classify_all(span)).outcome is OK
