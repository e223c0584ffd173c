"""Property tests: whatever a span holds, classification never raises, and a call that
carries a failure signal is never ok.

Spans are drawn per dialect: its span names, and the attributes it reads with values of any
type (strings up to ~100 KB, ints, floats, bools, bytes, arrays, nested maps, JSON text
that is deep, huge, truncated or well-formed), any of them missing. Runs are derandomized,
so a failure is the same on every machine and every run.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from mcp_breaker_client.shared.redact import DEFAULT_MAX_CHARS
from mcp_breaker_client.shared.verdict import Outcome
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.classify.events import Event, ToolCall, ToolListing
from tests.classify_builders import (
    CLIENT,
    ERROR,
    SERVER,
    as_json,
    calls_in,
    classify_all,
    key_values,
    make_span,
)

PROPERTY_SETTINGS = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)

# --- values -------------------------------------------------------------------------------


def huge(max_chars: int = 100_000) -> st.SearchStrategy[str]:
    """A long string: a short piece repeated up to max_chars."""
    return st.tuples(st.text(min_size=1, max_size=8), st.integers(1_000, max_chars)).map(
        lambda t: (t[0] * (t[1] // len(t[0]) + 1))[: t[1]]
    )


SHORT_TEXT = st.text(max_size=40)
TEXT = st.one_of(SHORT_TEXT, SHORT_TEXT, SHORT_TEXT, huge())  # one draw in four is huge
SCALARS = st.one_of(
    st.none(), st.text(max_size=40), INT64, st.floats(), st.booleans(), st.binary(max_size=16)
)
ATTRIBUTE_VALUES = st.recursive(
    st.one_of(SCALARS, SCALARS, SCALARS, huge(20_000)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=4,
)

JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)


def deep(n: int, shape: str) -> str:
    """JSON nested n levels deep: arrays, objects, or a failure tag at the bottom."""
    if shape == "array":
        return "[" * n + "]" * n
    if shape == "object":
        return '{"a":' * n + "1" + "}" * n
    return '{"error":' * n + '{"_tag":"DeepFailure"}' + "}" * n


DEEP_JSON = st.builds(deep, st.integers(1, 3_000), st.sampled_from(["array", "object", "tagged"]))
ODD_JSON = st.sampled_from(
    [
        "",
        "{",
        "null",
        "NaN",
        "-Infinity",
        "1e999",
        "1" * 5_000,  # past Python's int-from-string digit limit
        '"\\ud800"',  # a lone surrogate, escaped
        '{"a": 1, "a": 2}',
        "[" * 100_000,
    ]
)
JSON_TEXT = st.one_of(
    JSON_VALUES.map(json.dumps), JSON_VALUES.map(json.dumps), DEEP_JSON, ODD_JSON, huge()
)


def json_of(value: st.SearchStrategy[Any]) -> st.SearchStrategy[str]:
    return value.map(lambda v: json.dumps(v, allow_nan=True))


def embed(prefix: str, suffix: str) -> st.SearchStrategy[str]:
    """JSON text that holds a deep, huge or odd JSON value at a given place."""
    return st.one_of(DEEP_JSON, huge(70_000).map(json.dumps)).map(lambda v: prefix + v + suffix)


def maybe_json(*shaped: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """The value of a JSON attribute: JSON text of any shape, or any attribute value."""
    return st.one_of(*shaped, JSON_TEXT, ATTRIBUTE_VALUES)


CODES = st.one_of(
    st.sampled_from(["-32602", "-32601", "-32001", "-32000", "0", "tool_error", ""]),
    st.from_regex(r"\A[-+ ]{0,2}[0-9\u00b2\u0663]{1,12}\Z"),
    st.text(max_size=12),
)
CODE_VALUES = st.one_of(CODES, INT64, ATTRIBUTE_VALUES)
# Codes that are numbers or words, for the properties about outcomes: the malformed ones
# above belong to the never-raise properties, so that here a failure means a wrong verdict.
WELL_FORMED_CODE_VALUES = st.one_of(
    st.sampled_from(["-32602", "-32601", "-32001", "-32000", "tool_error"]),
    st.integers(-99_999, 99_999).map(str),
    INT64,
    st.text(alphabet=string.ascii_letters + "_ ", max_size=12),
)
CODE_KEYS = ("error.type", "rpc.response.status_code", "rpc.jsonrpc.error_code")
ANY_TEXT_VALUE = st.one_of(TEXT, ATTRIBUTE_VALUES)

# --- spans, per dialect -------------------------------------------------------------------

TOOL_NAMES = st.one_of(st.sampled_from(["x", "a__b", "__", ""]), st.text(max_size=20))

HARNESS_ATTRIBUTES = {
    "mcp.tool.name": st.one_of(TOOL_NAMES, ATTRIBUTE_VALUES),
    "mcp.server.name": ANY_TEXT_VALUE,
    "mcp.tool.outcome": st.one_of(
        st.sampled_from(["ok", "failed", "declined", "dismissed", "cancelled", " OK "]),
        ANY_TEXT_VALUE,
    ),
    "mcp.tool.error": ANY_TEXT_VALUE,
    "mcp.tool.failure_class": st.one_of(
        st.sampled_from(["transport", "protocol", "nonsense"]), ANY_TEXT_VALUE
    ),
    "mcp.tool.arguments": maybe_json(),
    "mcp.tool.args_hash": ANY_TEXT_VALUE,
    "mcp.tool.result": maybe_json(json_of(st.fixed_dictionaries({"_tag": st.text()}))),
    "mcp.tool.is_error": st.one_of(st.booleans(), ATTRIBUTE_VALUES),
    "mcp.turn.id": ANY_TEXT_VALUE,
    "mcp.turn.round": st.one_of(INT64, ATTRIBUTE_VALUES),
    "mcp.session.id": ANY_TEXT_VALUE,
    "jsonrpc.request.id": ANY_TEXT_VALUE,
    "error.type": CODE_VALUES,
    "mcp.tools.configured": st.one_of(INT64, ATTRIBUTE_VALUES),
    "mcp.tools.listed": st.one_of(INT64, ATTRIBUTE_VALUES),
    "mcp.tools.reached": st.one_of(INT64, ATTRIBUTE_VALUES),
    "mcp.tools.cached": ATTRIBUTE_VALUES,
    "mcp.tools.offered": st.one_of(INT64, ATTRIBUTE_VALUES),
    "mcp.namespaces.connected": st.one_of(st.lists(TEXT, max_size=300), ATTRIBUTE_VALUES),
    "mcp.namespaces.attached": ATTRIBUTE_VALUES,
}
SEMCONV_ATTRIBUTES = {
    "mcp.method.name": st.one_of(st.sampled_from(["tools/call", "tools/list"]), ANY_TEXT_VALUE),
    "gen_ai.tool.name": st.one_of(TOOL_NAMES, ATTRIBUTE_VALUES),
    "mcp.server.name": ANY_TEXT_VALUE,
    "fastmcp.server.name": ANY_TEXT_VALUE,
    "fastmcp.component.key": ANY_TEXT_VALUE,
    "gen_ai.tool.call.arguments": maybe_json(),
    "gen_ai.tool.call.result": maybe_json(
        json_of(st.fixed_dictionaries({"ok": st.booleans(), "error": JSON_VALUES}))
    ),
    "rpc.response.status_code": CODE_VALUES,
    "rpc.jsonrpc.error_code": CODE_VALUES,
    "error.type": CODE_VALUES,
    "jsonrpc.request.id": ANY_TEXT_VALUE,
    "mcp.session.id": ANY_TEXT_VALUE,
    "mcp.turn.id": ANY_TEXT_VALUE,
}
TRACELOOP_ATTRIBUTES = {
    "traceloop.span.kind": st.one_of(st.just("tool"), ANY_TEXT_VALUE),
    "traceloop.entity.name": st.one_of(TOOL_NAMES, ATTRIBUTE_VALUES),
    "traceloop.entity.input": maybe_json(
        json_of(st.fixed_dictionaries({"tool_name": JSON_VALUES, "arguments": JSON_VALUES})),
        embed('{"tool_name": "x", "arguments": ', "}"),
        embed('{"tool_name": ', "}"),
    ),
    "traceloop.entity.output": maybe_json(
        json_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "result": st.one_of(JSON_VALUES, JSON_TEXT),
                    "is_error": JSON_VALUES,
                    "tools": JSON_VALUES,
                },
            )
        ),
        embed('{"result": ', ', "is_error": false}'),
        embed('{"tools": ', "}"),
    ),
    "error.type": CODE_VALUES,
}
LOGFIRE_ATTRIBUTES = {
    "rpc.system": st.one_of(st.just("jsonrpc"), ANY_TEXT_VALUE),
    "request": maybe_json(
        json_of(
            st.fixed_dictionaries(
                {"method": st.one_of(st.sampled_from(["tools/call", "tools/list"]), JSON_VALUES)},
                optional={
                    "params": st.one_of(
                        st.fixed_dictionaries(
                            {}, optional={"name": JSON_VALUES, "arguments": JSON_VALUES}
                        ),
                        JSON_VALUES,
                    ),
                    "id": JSON_VALUES,
                },
            )
        ),
        embed('{"method": "tools/call", "params": {"name": "x", "arguments": ', "}}"),
    ),
    "response": maybe_json(
        json_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "content": st.one_of(
                        st.lists(
                            st.fixed_dictionaries(
                                {"type": st.just("text"), "text": st.one_of(TEXT, JSON_TEXT)}
                            ),
                            max_size=3,
                        ),
                        JSON_VALUES,
                    ),
                    "isError": JSON_VALUES,
                    "structuredContent": JSON_VALUES,
                },
            )
        ),
        embed('{"isError": false, "structuredContent": ', "}"),
        embed('{"isError": false, "content": [{"type": "text", "text": ', "}]}"),
    ),
    "error.type": CODE_VALUES,
}

DIALECTS: dict[str, tuple[st.SearchStrategy[str], dict[str, st.SearchStrategy[Any]]]] = {
    "harness": (st.sampled_from(["mcp.tool.call", "mcp.tools.list"]), HARNESS_ATTRIBUTES),
    "semconv": (
        st.one_of(
            st.sampled_from(["tools/call x", "tools/call", "tools/list", "tools/call a__b"]),
            st.text(max_size=20).map(lambda s: "tools/call " + s),
        ),
        SEMCONV_ATTRIBUTES,
    ),
    "mcp_sdk": (
        st.one_of(
            st.sampled_from(["MCP send tools/call x", "MCP send tools/list"]),
            st.text(max_size=20).map(lambda s: "MCP send tools/call " + s),
        ),
        SEMCONV_ATTRIBUTES,
    ),
    "fastmcp": (
        st.sampled_from(["tools/call x", "tools/list"]),
        {
            **SEMCONV_ATTRIBUTES,
            "fastmcp.server.name": st.one_of(st.just("srv"), ANY_TEXT_VALUE),
        },
    ),
    "traceloop": (
        st.one_of(
            st.sampled_from(["x.tool", "tools/list.mcp", ".tool", "a__b.tool"]),
            st.text(max_size=20).map(lambda s: s + ".tool"),
        ),
        TRACELOOP_ATTRIBUTES,
    ),
    "logfire": (
        st.one_of(
            st.sampled_from(["MCP request: tools/call x", "MCP request: tools/list", "MCP "]),
            st.text(max_size=20).map(lambda s: "MCP request: " + s),
        ),
        LOGFIRE_ATTRIBUTES,
    ),
}

EXCEPTION_EVENTS = st.lists(
    st.fixed_dictionaries(
        {}, optional={"exception.type": ANY_TEXT_VALUE, "exception.message": ANY_TEXT_VALUE}
    ),
    max_size=3,
)


@st.composite
def spans(
    draw: st.DrawFn,
    dialect: str,
    extra: dict[str, Any] | None = None,
    codes: st.SearchStrategy[Any] = CODE_VALUES,
) -> Span:
    """A span of the dialect with arbitrary attributes; ``extra`` overrides some of them."""
    names, readers = DIALECTS[dialect]
    readers = readers | {key: codes for key in CODE_KEYS if key in readers}
    attributes = draw(st.fixed_dictionaries({}, optional=readers))
    attributes.update(extra or {})
    span = make_span(
        draw(names),
        attributes,
        kind=draw(st.integers(0, 5)),
        status=draw(st.integers(0, 2)),
        message=draw(TEXT),
        span=draw(st.integers(1, 2**32)),
        parent=draw(st.one_of(st.none(), st.integers(1, 2**32))),
    )
    for exception in draw(EXCEPTION_EVENTS):
        span.events.add(name="exception").attributes.extend(key_values(exception))
    return span


def assert_well_formed(events: list[Event]) -> None:
    """Each event says what it is consistently: a class only on a failure, and so on."""
    for event in events:
        assert len(event.trace_id) == 16 and all(len(s) == 8 for s in event.span_ids)
        if isinstance(event, ToolCall):
            verdict = event.verdict
            assert (verdict.failure_class is not None) == (verdict.outcome is Outcome.FAILED)
            assert (verdict.neutral_reason is not None) == (verdict.outcome is Outcome.NEUTRAL)
            assert len(verdict.error_excerpt) <= DEFAULT_MAX_CHARS
            assert event.fingerprint is None or all(
                c in string.hexdigits for c in event.fingerprint
            )
        else:
            assert isinstance(event, ToolListing)
            for name in ("configured", "listed", "reached", "unavailable", "registered"):
                value = getattr(event, name)
                assert value is None or (type(value) is int and value >= 0)


# --- never raises -------------------------------------------------------------------------


@st.composite
def any_dialect_spans(draw: st.DrawFn) -> Span:
    return draw(spans(draw(st.sampled_from(list(DIALECTS)))))


def distinct(first: Span, second: Span) -> None:
    """Make second a child of first in the same trace, with its own span id."""
    second.trace_id = first.trace_id
    second.parent_span_id = first.span_id
    if second.span_id == first.span_id:
        second.span_id = bytes(b ^ 0xFF for b in first.span_id)


@st.composite
def pairs(draw: st.DrawFn) -> tuple[Span, Span]:
    """Two spans of one dialect, the second a child of the first."""
    dialect = draw(st.sampled_from(list(DIALECTS)))
    first, second = draw(spans(dialect)), draw(spans(dialect))
    distinct(first, second)
    return first, second


# Inputs that once raised, run first on every run (see the malformed-code tests in
# test_classify_dialects): "--0" and "\u00b2" pass str.isdigit() but not int().
MALFORMED_CODE_SERVER = make_span(
    "tools/call x", {"mcp.method.name": "tools/call", "error.type": "--0"}, kind=SERVER
)
MALFORMED_CODE_CLIENT = make_span(
    "MCP send tools/call x",
    {"mcp.method.name": "tools/call", "rpc.response.status_code": "\u00b2"},
    kind=CLIENT,
    span=2,
)


@PROPERTY_SETTINGS
@example(span=MALFORMED_CODE_SERVER)
@given(span=any_dialect_spans())
def test_any_span_of_any_dialect_classifies_without_raising(span: Span) -> None:
    """Whatever the attributes hold, classify and expire return well-formed events."""
    assert_well_formed(classify_all(span))


@PROPERTY_SETTINGS
@example(pair=(MALFORMED_CODE_CLIENT, MALFORMED_CODE_SERVER))
@given(pair=pairs())
def test_a_pair_of_spans_of_any_content_classifies_without_raising(
    pair: tuple[Span, Span],
) -> None:
    """Two spans of one call (parent and child), whatever they hold, never raise."""
    assert_well_formed(classify_all(list(pair)))


def deepest_json_here() -> int:
    """The deepest JSON array json.loads accepts at the caller's stack depth."""
    low, high = 1, 100_000
    while low < high:
        middle = (low + high + 1) // 2
        try:
            json.loads("[" * middle + "]" * middle)
        except RecursionError:
            high = middle - 1
        else:
            low = middle
    return low


DEEP_ARGUMENT_SPANS: dict[str, Callable[[str], Span]] = {
    "harness": lambda arguments: make_span(
        "mcp.tool.call",
        {"mcp.tool.name": "x", "mcp.tool.outcome": "ok", "mcp.tool.arguments": arguments},
    ),
    "semconv": lambda arguments: make_span(
        "tools/call x",
        {"mcp.method.name": "tools/call", "gen_ai.tool.call.arguments": arguments},
        kind=SERVER,
    ),
    "traceloop": lambda arguments: make_span(
        "x.tool",
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.input": '{"tool_name": "x", "arguments": ' + arguments + "}",
            "traceloop.entity.output": as_json({"result": "ok"}),
        },
    ),
    "logfire": lambda arguments: make_span(
        "MCP request: tools/call x",
        {
            "request": '{"method": "tools/call", "params": {"arguments": ' + arguments + "}}",
            "response": as_json({"content": [], "isError": False}),
        },
    ),
}


@pytest.mark.parametrize("dialect", list(DEEP_ARGUMENT_SPANS))
def test_arguments_nested_as_deep_as_json_allows_never_raise(dialect: str) -> None:
    """Arguments json.loads can still decode are fingerprinted without a RecursionError."""
    # Every depth near the decoder's own limit: the ones just below it decode, and then
    # must be fingerprinted (or refused) without blowing the stack.
    limit = deepest_json_here()
    for depth in range(max(1, limit - 120), limit + 5):
        classify_all(DEEP_ARGUMENT_SPANS[dialect]("[" * depth + "]" * depth))


# --- a failure signal is never ok ---------------------------------------------------------

SAYS_OK = {"ok", "success"}


def says_ok(value: Any) -> bool:
    """Whether an outcome attribute value reads as an explicit ok."""
    return isinstance(value, (str, int, float)) and str(value).strip().lower() in SAYS_OK


ERROR_TYPES = st.one_of(st.sampled_from(["tool_error", "-32602", "_OTHER"]), st.text(min_size=1))
IS_ERROR_OUTPUT = st.fixed_dictionaries(
    {"is_error": st.sampled_from([True, "true", "True"])},
    optional={"result": st.one_of(st.text(max_size=200), JSON_VALUES.map(json.dumps))},
)
IS_ERROR_RESPONSE = st.fixed_dictionaries(
    {"isError": st.sampled_from([True, "true"])},
    optional={
        "content": st.lists(
            st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=200)}),
            max_size=2,
        ),
        "structuredContent": JSON_VALUES,
    },
)

# Per dialect: the failure signals it records, as attributes to set on a span; None stands
# for status ERROR.
FAILURE_SIGNALS: dict[str, list[st.SearchStrategy[dict[str, Any] | None]]] = {
    "harness": [
        st.none(),
        ERROR_TYPES.map(lambda t: {"error.type": t}),
        st.just({"mcp.tool.is_error": True}),
        st.sampled_from(["failed", "FAILED", " failure ", "error"]).map(
            lambda o: {"mcp.tool.outcome": o}
        ),
    ],
    "semconv": [st.none(), ERROR_TYPES.map(lambda t: {"error.type": t})],
    "mcp_sdk": [st.none(), ERROR_TYPES.map(lambda t: {"error.type": t})],
    "fastmcp": [st.none(), ERROR_TYPES.map(lambda t: {"error.type": t})],
    "traceloop": [
        st.none(),
        ERROR_TYPES.map(lambda t: {"error.type": t}),
        IS_ERROR_OUTPUT.map(lambda o: {"traceloop.entity.output": json.dumps(o)}),
    ],
    "logfire": [
        st.none(),
        ERROR_TYPES.map(lambda t: {"error.type": t}),
        IS_ERROR_RESPONSE.map(lambda r: {"response": json.dumps(r)}),
    ],
}


@st.composite
def failing_spans(draw: st.DrawFn, dialect: str) -> Span:
    """A span of the dialect carrying at least one failure signal, and no explicit ok."""
    signal = draw(st.one_of(*FAILURE_SIGNALS[dialect]))
    span = draw(spans(dialect, signal, WELL_FORMED_CODE_VALUES))
    if signal is None:
        span.status.code = ERROR
    # An explicit outcome ok is not drawn: it is the harness's own word on the call (see
    # test_classify_dialects for the status-ERROR-under-outcome-ok case).
    kept = [kv for kv in span.attributes if not (kv.key == "mcp.tool.outcome" and _ok(kv))]
    del span.attributes[:]
    span.attributes.extend(kept)
    return span


def _ok(kv: Any) -> bool:
    which = kv.value.WhichOneof("value")
    return which is not None and says_ok(getattr(kv.value, which))


@PROPERTY_SETTINGS
@given(dialect=st.sampled_from(list(FAILURE_SIGNALS)), data=st.data())
def test_a_call_with_a_failure_signal_is_never_ok(dialect: str, data: st.DataObject) -> None:
    """Status ERROR, error.type, is_error true or outcome failed: never classified ok."""
    for call in calls_in(classify_all(data.draw(failing_spans(dialect)))):
        assert call.outcome is not Outcome.OK, call


@PROPERTY_SETTINGS
@given(dialect=st.sampled_from(list(FAILURE_SIGNALS)), data=st.data())
def test_a_failure_signal_on_either_half_of_a_pair_is_never_ok(
    dialect: str, data: st.DataObject
) -> None:
    """Paired with any other half, in either order, a failed half never reads ok."""
    failing = data.draw(failing_spans(dialect))
    other = data.draw(spans(dialect, codes=WELL_FORMED_CODE_VALUES))
    distinct(failing, other)
    ordered = [failing, other] if data.draw(st.booleans()) else [other, failing]
    for call in calls_in(classify_all(ordered)):
        if failing.span_id in call.span_ids:
            assert call.outcome is not Outcome.OK, call
