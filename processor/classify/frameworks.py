"""Tool spans as agent frameworks write them: the GenAI conventions and the shapes on top.

Most tool calls are made by agent frameworks, which write a span of their own around each
tool they run, MCP or not, whatever MCP instrumentation (if any) runs beneath them:

- the OpenTelemetry GenAI conventions' ``execute_tool {tool}`` span
  (``gen_ai.operation.name = execute_tool``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``, ``error.type``, status), which
  pydantic-ai, Strands and the Vercel AI SDK 7 write, and any framework that follows the
  conventions, named here or not;
- OpenInference's TOOL span (``openinference.span.kind = TOOL``, named after the tool,
  ``tool.name``, ``input.value``, ``output.value``), which its instrumentations of the
  OpenAI Agents SDK, LangChain/LangGraph and others write;
- the Vercel AI SDK 6's ``ai.toolCall`` span (``ai.toolCall.name``, ``.id``, ``.args``,
  ``.result``).

Each reads as one span telling a whole call (``Side.UNSPECIFIED``), as a harness's own span
does; an MCP client span nested in it is a layer of the same call (classifier._layered).
Outcomes are read with the same rules as the MCP dialects (outcome.judge); what differs is
where each framework keeps the result, and the words it wraps a tool's failure in when it
hands it to the model as an ordinary output (``FAILURE_WRAPPERS``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from mcp_breaker_client.shared.result import ResultReading, loads, read_result
from mcp_breaker_client.shared.verdict import Verdict

from processor.classify.events import Dialect, Side
from processor.classify.reading import Kind, Reading, build_reading, span_verdict
from processor.classify.spanview import AttributeValue, SpanView, event_attribute

EXECUTE_TOOL = "execute_tool"  # gen_ai.operation.name, and the span name's first word
EXECUTE_TOOL_PREFIX = EXECUTE_TOOL + " "
OPERATION_KEY = "gen_ai.operation.name"
TOOL_NAME_KEY = "gen_ai.tool.name"
TOOL_TYPE_KEY = "gen_ai.tool.type"
CALL_ID_KEY = "gen_ai.tool.call.id"
ARGUMENTS_KEY = "gen_ai.tool.call.arguments"
RESULT_KEY = "gen_ai.tool.call.result"
CONVERSATION_KEY = "gen_ai.conversation.id"
TOOL_STATUS_KEY = "gen_ai.tool.status"  # Strands' own, beside the conventions' keys
DETAILS_EVENT = "gen_ai.client.inference.operation.details"

OPENINFERENCE_KIND_KEY = "openinference.span.kind"
OPENINFERENCE_TOOL = "TOOL"
OPENINFERENCE_SESSION_KEY = "session.id"

VERCEL_TOOL_CALL = "ai.toolCall"  # the AI SDK 6's span name and attribute prefix
# Read off the enums once, for the tests every MCP span meets: on Python 3.11 an enum
# member read off its class costs some 60 ns, a module name 10.
_CALL, _UNSPECIFIED = Kind.CALL, Side.UNSPECIFIED

# Instrumentation scopes that tell which framework wrote a GenAI span.
_SCOPE_DIALECTS: tuple[tuple[str, Dialect], ...] = (
    ("pydantic-ai", Dialect.PYDANTIC_AI),
    ("pydantic_ai", Dialect.PYDANTIC_AI),
    ("strands", Dialect.STRANDS),
)

# What a framework writes into a tool's output when the tool failed and it hands the
# failure to the model as text, with the span's status left OK: the OpenAI Agents SDK's
# default tool error text, LangChain's ToolNode's, the mcp SDK's own "Error executing
# tool", and an output that is the text of an exception (``ToolException('...')``).
FAILURE_WRAPPERS = re.compile(
    r"^\s*(an error occurred while running the tool|error executing tool\b|"
    r"error: \w*(exception|error)\(|\w*(exception|error): )",
    re.I,
)


def is_genai_tool(name: str, attributes: Any) -> bool:
    """A GenAI execute_tool span: by its operation, else by its name."""
    operation = attributes.get(OPERATION_KEY)
    if operation is not None:
        return bool(operation == EXECUTE_TOOL)
    return name.startswith(EXECUTE_TOOL_PREFIX)


def genai(span: SpanView, patterns: Sequence[re.Pattern[str]]) -> Reading:

    attrs = span.attributes
    text = span.texts.get
    raw_arguments = attrs.get(ARGUMENTS_KEY)
    raw_result = attrs.get(RESULT_KEY)
    if span.events and (raw_arguments is None or raw_result is None):
        raw_arguments, raw_result = _from_events(span.events, raw_arguments, raw_result)
    arguments = loads(raw_arguments) if isinstance(raw_arguments, str) else raw_arguments
    status = text(TOOL_STATUS_KEY)  # Strands: "success" or "error"
    result = read_result(raw_result, is_error=None if status is None else status == "error")
    tool = text(TOOL_NAME_KEY) or span.name.removeprefix(EXECUTE_TOOL_PREFIX).strip()
    return build_reading(
        kind=_CALL,
        dialect=_dialect(span.scope, Dialect.GENAI),
        side=_UNSPECIFIED,
        span=span,
        tool=tool,
        server=text("mcp.server.name") or result.server,
        arguments=arguments,
        has_arguments=raw_arguments is not None and arguments is not None,
        verdict=_verdict(span, result, patterns, wrapped_text=True),
        request_id=None,
        # Strands writes a conversation as OpenInference does, from trace_attributes.
        session_id=text(CONVERSATION_KEY) or text(OPENINFERENCE_SESSION_KEY),
    )


def openinference(span: SpanView, patterns: Sequence[re.Pattern[str]]) -> Reading:

    attrs = span.attributes
    raw_input = attrs.get("input.value")
    given = loads(raw_input) if _looks_like_json(raw_input) else raw_input
    output = attrs.get("output.value")
    result = _openinference_result(loads(output) if _looks_like_json(output) else output)
    return build_reading(
        kind=_CALL,
        dialect=Dialect.OPENINFERENCE,
        side=_UNSPECIFIED,
        span=span,
        tool=span.texts.get("tool.name") or span.name,
        server=span.texts.get("mcp.server.name"),
        arguments=given,
        has_arguments=given is not None,
        verdict=_verdict(span, result, patterns, wrapped_text=True),
        session_id=span.texts.get(OPENINFERENCE_SESSION_KEY),
    )


def vercel(span: SpanView, patterns: Sequence[re.Pattern[str]]) -> Reading:

    attrs = span.attributes
    raw_arguments = attrs.get("ai.toolCall.args")
    arguments = loads(raw_arguments)
    result = read_result(attrs.get("ai.toolCall.result"))
    return build_reading(
        kind=_CALL,
        dialect=Dialect.VERCEL_AI,
        side=_UNSPECIFIED,
        span=span,
        tool=span.texts.get("ai.toolCall.name") or "",
        server=span.texts.get("mcp.server.name"),
        arguments=arguments,
        has_arguments=raw_arguments is not None and arguments is not None,
        verdict=_verdict(span, result, patterns),
    )


def _from_events(
    events: Any, arguments: AttributeValue, result: AttributeValue
) -> tuple[AttributeValue, AttributeValue]:
    """The arguments and result a framework wrote into span events instead of attributes:
    Strands' default ``gen_ai.tool.message`` (``content``) and ``gen_ai.choice``
    (``message``), or, with the latest conventions opted into, the messages of
    ``gen_ai.client.inference.operation.details`` (a failed call's result is only there)."""
    if arguments is None:
        arguments = event_attribute(events, "gen_ai.tool.message", "content")
    if arguments is None:
        part = _first_part(event_attribute(events, DETAILS_EVENT, "gen_ai.input.messages"))
        arguments = part.get("arguments") if part else None
    if result is None:
        result = event_attribute(events, "gen_ai.choice", "message")
    if result is None:
        part = _first_part(event_attribute(events, DETAILS_EVENT, "gen_ai.output.messages"))
        result = part.get("response") if part else None
    return arguments, result


def _first_part(messages: AttributeValue) -> dict[str, Any] | None:
    """The first part of the first message of a GenAI messages attribute (JSON text)."""
    decoded = loads(messages) if isinstance(messages, str) else messages
    if not (isinstance(decoded, list) and decoded and isinstance(decoded[0], dict)):
        return None
    parts = decoded[0].get("parts")
    if isinstance(parts, list) and parts and isinstance(parts[0], dict):
        return parts[0]
    return None


def _openinference_result(output: AttributeValue) -> ResultReading:
    """OpenInference writes the tool's output as its framework returned it: text, an MCP
    result, or (LangChain) a serialized ``ToolMessage``, whose ``status`` says ``error``
    where the tool failed and the span's status still says OK."""
    if isinstance(output, dict) and output.get("type") == "tool":
        message = output.get("data")
        if isinstance(message, dict):
            status = message.get("status")
            content = message.get("content")
            flag = None if not isinstance(status, str) else status == "error"
            return read_result(content, is_error=flag)
    return read_result(output)


def _verdict(
    span: SpanView,
    result: ResultReading,
    patterns: Sequence[re.Pattern[str]],
    *,
    wrapped_text: bool = False,
) -> Verdict:

    if (
        wrapped_text
        and result.is_error is None
        and result.text
        and FAILURE_WRAPPERS.match(result.text)
    ):
        # The framework handed the tool's failure to the model as text.
        result = ResultReading(True, result.text, result.typed_failure, result.server)
    # The conventions record failures (error.type, an ERROR status): a span that records
    # none ran its tool to an answer, which is then read for a hidden failure.
    return span_verdict(span, result, silence_means_ok=True, hidden_patterns=patterns)


def _dialect(scope: str, default: Dialect) -> Dialect:
    lowered = scope.lower()
    for prefix, dialect in _SCOPE_DIALECTS:
        if lowered == prefix or lowered.startswith((prefix + ".", prefix + "-", prefix + "_")):
            return dialect
    return default


def _looks_like_json(value: AttributeValue) -> bool:
    return isinstance(value, str) and value.lstrip()[:1] in ("{", "[")
