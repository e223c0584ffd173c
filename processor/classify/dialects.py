"""Dialect readers: one span, as some instrumentation wrote it, to a Reading.

A Reading is what one span says about one call or one listing, before pairing and
identity resolution. Each reader knows where its dialect keeps the tool name, the
arguments, the result and the outcome signals (see docs/conventions.md for the table).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import repeat
from typing import Any

from mcp_breaker_client.shared.conventions import ARGS_HASH_ATTRIBUTE, REFUSED_ATTRIBUTE
from mcp_breaker_client.shared.outcome import as_int, build_signals, judge
from mcp_breaker_client.shared.result import as_bool, loads, read_result

from processor.classify import frameworks
from processor.classify.events import Dialect, Side
from processor.classify.frameworks import (
    CONVERSATION_KEY,
    EXECUTE_TOOL_PREFIX,
    OPENINFERENCE_KIND_KEY,
    OPENINFERENCE_SESSION_KEY,
    OPENINFERENCE_TOOL,
    OPERATION_KEY,
    VERCEL_TOOL_CALL,
    is_genai_tool,
)
from processor.classify.reading import Kind, Reading, build_reading, span_verdict
from processor.classify.spanview import (
    SPAN_KIND_CLIENT,
    SPAN_KIND_SERVER,
    STATUS_CODE_ERROR,
    AttributeValue,
    SpanView,
)

CALL_METHOD = "tools/call"
LIST_METHOD = "tools/list"
HARNESS_CALL = "mcp.tool.call"
HARNESS_LIST = "mcp.tools.list"
SDK_CLIENT_PREFIX = "MCP send "  # the official mcp SDK 2.x client span names
MCP_SDK_SCOPE = "mcp-python-sdk"  # instrumentation scope names
FASTMCP_SCOPE = "fastmcp"
LOGFIRE_PREFIX = "MCP request: "
TRACELOOP_TOOL_SUFFIX = ".tool"
TRACELOOP_MCP_SUFFIX = ".mcp"
TRACELOOP_LISTING = LIST_METHOD + TRACELOOP_MCP_SUFFIX  # "tools/list.mcp"

# The dialects that write an MCP layer of a call (as opposed to a framework's own span
# around it): their tool names are the server's, so they win when layers disagree.
MCP_DIALECTS = frozenset(
    {
        Dialect.HARNESS,
        Dialect.SEMCONV,
        Dialect.MCP_SDK,
        Dialect.FASTMCP,
        Dialect.TRACELOOP,
        Dialect.LOGFIRE,
    }
)
# How many spans of one trace can be layers of one call (framework, client library, SDK,
# ...): a deeper chain is judged as separate calls rather than followed without bound.
MAX_LAYERS = 8

# Span names that can belong to an MCP call or listing in some dialect. Only spans whose
# name matches are read further; every other span costs one string test.
# An OpenInference tool span is named after its tool, so its scope admits it instead.
NAME_PREFIXES = (
    "mcp.tool",
    "tools/",
    "MCP ",
    EXECUTE_TOOL_PREFIX,
    VERCEL_TOOL_CALL,
)
NAME_SUFFIXES = (TRACELOOP_TOOL_SUFFIX, TRACELOOP_MCP_SUFFIX)
OPENINFERENCE_SCOPE = "openinference"  # its instrumentations' scope names begin so

# Read off the enums once, for the tests every MCP span meets: on Python 3.11 an enum
# member read off its class costs some 60 ns, a module name 10.
_CLIENT, _SERVER, _UNSPECIFIED = Side.CLIENT, Side.SERVER, Side.UNSPECIFIED
_CALL, _LISTING = Kind.CALL, Kind.LISTING
_FASTMCP = Dialect.FASTMCP


# Every attribute a reader below looks at; classifier.py adds the configured turn keys.
READ_KEYS = frozenset(
    {
        "error.type",
        "jsonrpc.request.id",
        "rpc.response.status_code",
        "rpc.jsonrpc.error_code",
        "request",
        "response",
        OPERATION_KEY,
        CONVERSATION_KEY,
        OPENINFERENCE_KIND_KEY,
        OPENINFERENCE_SESSION_KEY,
        "input.value",
        "output.value",
        "tool.name",
    }
)
READ_PREFIXES = ("mcp.", "gen_ai.tool.", "fastmcp.", "traceloop.", VERCEL_TOOL_CALL + ".")


def may_be_mcp(name: str, scope: str = "") -> bool:
    """Whether a span can be a tool call or listing in some dialect: the one test every
    span of a request meets before anything of it is read."""
    return (
        name.startswith(NAME_PREFIXES)
        or name.endswith(NAME_SUFFIXES)
        or scope.startswith(OPENINFERENCE_SCOPE)
    )


def read(span: SpanView, hidden_patterns: Sequence[re.Pattern[str]] = ()) -> Reading | None:
    """The Reading of an MCP span, or None for a span that is not a call or a listing."""
    name = span.name
    if name in (HARNESS_CALL, HARNESS_LIST):
        return _harness(span, hidden_patterns)
    if span.attributes.get("traceloop.span.kind") == "tool" and name.endswith(
        TRACELOOP_TOOL_SUFFIX
    ):
        return _traceloop_call(span, hidden_patterns)
    if name == TRACELOOP_LISTING:
        return _traceloop_listing(span)
    if name.startswith(LOGFIRE_PREFIX):
        return _logfire(span, hidden_patterns)
    attributes = span.attributes
    method = attributes.get("mcp.method.name")
    if isinstance(method, str) and method in (CALL_METHOD, LIST_METHOD):
        return _semconv(span, method, hidden_patterns)
    # OpenInference first: where it also writes the GenAI keys, its own are the ones it
    # fills right (2.6.0 writes the tool's schema as gen_ai.tool.call.arguments).
    if attributes.get(OPENINFERENCE_KIND_KEY) == OPENINFERENCE_TOOL:
        return frameworks.openinference(span, hidden_patterns)
    if is_genai_tool(name, attributes):
        return frameworks.genai(span, hidden_patterns)
    if name == VERCEL_TOOL_CALL:
        return frameworks.vercel(span, hidden_patterns)
    return None


def _harness(span: SpanView, patterns: Sequence[re.Pattern[str]]) -> Reading:
    attrs = span.attributes
    text = span.texts.get
    if span.name == HARNESS_LIST:
        counts = {
            k.removeprefix("mcp.tools."): v
            for k, v in attrs.items()
            if k.startswith(("mcp.tools.", "mcp.namespaces.", "mcp.session.tool_snapshot"))
        }
        return build_reading(
            kind=_LISTING,
            dialect=Dialect.HARNESS,
            side=_UNSPECIFIED,
            span=span,
            server=text("mcp.server.name"),
            counts=counts,
            session_id=text("mcp.session.id"),
        )
    result = read_result(
        attrs.get("mcp.tool.result"), is_error=as_bool(attrs.get("mcp.tool.is_error"))
    )
    raw_arguments = attrs.get("mcp.tool.arguments")
    arguments = loads(raw_arguments)
    return build_reading(
        kind=_CALL,
        dialect=Dialect.HARNESS,
        side=_UNSPECIFIED,
        span=span,
        tool=text("mcp.tool.name") or "",
        server=text("mcp.server.name"),
        arguments=arguments,
        has_arguments=raw_arguments is not None and arguments is not None,
        arguments_digest=text(ARGS_HASH_ATTRIBUTE),
        verdict=judge(
            build_signals(
                outcome_attribute=text("mcp.tool.outcome"),
                failure_class_attribute=text("mcp.tool.failure_class"),
                error_type=text("error.type"),
                status_error=span.status_code == STATUS_CODE_ERROR,
                status_message=text("mcp.tool.error") or span.status_message,
                exceptions=span.exceptions,
                hidden_patterns=patterns,
                refused_by_advisory=attrs.get(REFUSED_ATTRIBUTE) is True,
                is_error=result.is_error,
                typed_failure=result.typed_failure,
                result_text=result.text,
            )
        ),
        request_id=text("jsonrpc.request.id"),
        session_id=text("mcp.session.id"),
    )


# What a semconv span's name, kind, scope and method alone say: (dialect, unless its
# attributes say fastmcp; side; whether the mcp SDK client named it; tool from the name).
# The same few names come again and again, and working this out costs more than a lookup.
_Shape = tuple[Dialect, Side, bool, str]
_SHAPES: dict[tuple[str, int, str, str], _Shape] = {}
MAX_SHAPES = 4096  # then forgotten all at once: a sender of unique names only fills it
MAX_SHAPE_NAME_CHARS = 256  # longer names are worked out each time, never kept


def _semconv_shape(name: str, kind: int, scope: str, method: str) -> _Shape:
    sdk_client = name.startswith(SDK_CLIENT_PREFIX)
    if scope == FASTMCP_SCOPE:
        dialect = _FASTMCP
    elif sdk_client or scope == MCP_SDK_SCOPE:
        dialect = Dialect.MCP_SDK
    else:
        dialect = Dialect.SEMCONV
    if kind == SPAN_KIND_CLIENT or sdk_client:
        side = _CLIENT
    elif kind == SPAN_KIND_SERVER:
        side = _SERVER
    else:
        side = _UNSPECIFIED
    return dialect, side, sdk_client, _tool_from_name(name, method)


def _semconv(span: SpanView, method: str, patterns: Sequence[re.Pattern[str]]) -> Reading:
    attrs = span.attributes
    text = span.texts.get
    name = span.name
    key = (name, span.kind, span.scope, method)
    shape = _SHAPES.get(key)
    if shape is None:
        shape = _semconv_shape(*key)
        if len(name) <= MAX_SHAPE_NAME_CHARS:
            if len(_SHAPES) >= MAX_SHAPES:
                _SHAPES.clear()
            _SHAPES[key] = shape
    dialect, side, sdk_client, named_tool = shape
    # Any fastmcp attribute makes it fastmcp's, whatever its scope (map: no Python frame
    # per key, as a generator would make).
    if dialect is not _FASTMCP and any(map(str.startswith, attrs, repeat("fastmcp."))):
        dialect = _FASTMCP
    tool = text("gen_ai.tool.name") or named_tool
    server = text("mcp.server.name") or text("fastmcp.server.name")
    if method == LIST_METHOD:
        return build_reading(
            kind=_LISTING,
            dialect=dialect,
            side=side,
            span=span,
            server=server,
            session_id=text("mcp.session.id"),
        )
    raw_arguments = attrs.get("gen_ai.tool.call.arguments")
    arguments = loads(raw_arguments)
    result = read_result(attrs.get("gen_ai.tool.call.result"))
    rpc_code = text("rpc.response.status_code") or text("rpc.jsonrpc.error_code")
    return build_reading(
        kind=_CALL,
        dialect=dialect,
        side=side,
        span=span,
        tool=tool,
        server=server,
        arguments=arguments,
        has_arguments=raw_arguments is not None and arguments is not None,
        verdict=span_verdict(
            span,
            result,
            rpc_code=as_int(rpc_code),
            # The mcp SDK 2.x leaves its client span UNSET even when the tool failed; the
            # server span, and every other dialect's spans, set error.type on failure.
            silence_means_ok=not sdk_client,
            answered=side is _SERVER,
            hidden_patterns=patterns,
        ),
        request_id=text("jsonrpc.request.id"),
        session_id=text("mcp.session.id"),
    )


def _traceloop_call(span: SpanView, patterns: Sequence[re.Pattern[str]]) -> Reading:
    attrs = span.attributes
    given = loads(attrs.get("traceloop.entity.input"))
    given = given if isinstance(given, dict) else {}
    output = loads(attrs.get("traceloop.entity.output"))
    output = output if isinstance(output, dict) else {}
    has_arguments = "arguments" in given
    return build_reading(
        kind=_CALL,
        dialect=Dialect.TRACELOOP,
        side=_CLIENT,
        span=span,
        tool=span.texts.get("traceloop.entity.name")
        or str(given.get("tool_name") or "")
        or span.name.removesuffix(TRACELOOP_TOOL_SUFFIX),
        arguments=given.get("arguments"),
        has_arguments=has_arguments,
        verdict=span_verdict(
            span,
            read_result(output) if output else read_result(None),
            silence_means_ok=bool(output),
            hidden_patterns=patterns,
        ),
    )


def _traceloop_listing(span: SpanView) -> Reading:
    output = loads(span.attributes.get("traceloop.entity.output"))
    tools = output.get("tools") if isinstance(output, dict) else None
    counts: dict[str, AttributeValue] = {}
    if isinstance(tools, list):
        counts["listed"] = len(tools)
    return build_reading(
        kind=_LISTING, dialect=Dialect.TRACELOOP, side=_CLIENT, span=span, counts=counts
    )


def _logfire(span: SpanView, patterns: Sequence[re.Pattern[str]]) -> Reading | None:
    attrs = span.attributes
    request = loads(attrs.get("request"))
    request = request if isinstance(request, dict) else {}
    method = str(request.get("method") or span.name.removeprefix(LOGFIRE_PREFIX).split(" ")[0])
    if method not in (CALL_METHOD, LIST_METHOD):
        return None
    if method == LIST_METHOD:
        return build_reading(kind=_LISTING, dialect=Dialect.LOGFIRE, side=_CLIENT, span=span)
    params = request.get("params")
    params = params if isinstance(params, dict) else {}
    response = loads(attrs.get("response"))
    response = response if isinstance(response, dict) else {}
    side = _SERVER if span.is_server else _CLIENT
    return build_reading(
        kind=_CALL,
        dialect=Dialect.LOGFIRE,
        side=side,
        span=span,
        tool=str(params.get("name") or _tool_from_name(span.name, method)),
        arguments=params.get("arguments"),
        has_arguments="arguments" in params,
        verdict=span_verdict(
            span,
            read_result(response) if response else read_result(None),
            silence_means_ok=bool(response),
            answered=side is _SERVER,
            hidden_patterns=patterns,
        ),
        request_id=_str(request.get("id")),
    )


def _tool_from_name(name: str, method: str) -> str:
    """'tools/call x', 'MCP send tools/call x', 'MCP request: tools/call x' -> 'x'."""
    _, found, rest = name.partition(method)
    return rest.strip() if found else ""


def _str(value: Any) -> str | None:
    return None if value is None or isinstance(value, (dict, list)) else str(value)
