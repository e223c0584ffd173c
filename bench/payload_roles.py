"""What a payload's spans are to the hops: the naive hop's span-name test and its mark, and
the role mcp-breaker gives a span (a call, a listing, or none), for the receiving end's
checks and the payload's own counts.
"""

from __future__ import annotations

from opentelemetry.proto.trace.v1.trace_pb2 import Span

# What the naive hop (bench/naive_hop.py) writes on each MCP span it finds, and how it finds
# them: the span-name test mcp-breaker makes first (processor.classify.dialects.may_be_mcp),
# copied so that the benchmark does not import the code under test.
NAIVE_ATTRIBUTE = "bench.naive_hop.seen"
_MCP_NAME_PREFIXES = ("mcp.tool", "tools/", "MCP ", "execute_tool ", "ai.toolCall")
_MCP_NAME_SUFFIXES = (".tool", ".mcp")


def may_be_mcp(name: str, scope: str = "") -> bool:
    return (
        name.startswith(_MCP_NAME_PREFIXES)
        or name.endswith(_MCP_NAME_SUFFIXES)
        or scope.startswith("openinference")  # its tool spans are named after their tool
    )


def span_role(name: str, kind: int = Span.SPAN_KIND_SERVER, tool_kind: bool = False) -> str | None:
    """What a span of these payloads is to mcp-breaker: ``call`` (every span of a tool call
    is annotated with ``mcp.breaker.*``), ``listing`` (a client-side listing, annotated with
    ``mcp.roster.*``), ``server-listing`` (a server's listing span: read, not annotated), or
    None (not MCP). ``tool_kind``: the span says ``openinference.span.kind = TOOL`` (it is
    named after its tool); ``kind``: a ``tools/list`` span is fastmcp's client's or a
    server's."""
    if (
        tool_kind
        or name in ("mcp.tool.call", "ai.toolCall")
        or name.startswith(("MCP send tools/call", "tools/call", "execute_tool "))
    ):
        return "call"
    if name in ("mcp.tools.list", "MCP send tools/list"):
        return "listing"
    if name == "tools/list":
        return "listing" if kind == Span.SPAN_KIND_CLIENT else "server-listing"
    return None


def is_tool_kind(span: Span) -> bool:
    return any(
        kv.key == "openinference.span.kind" and kv.value.string_value == "TOOL"
        for kv in span.attributes
    )
