"""Identity: the names that say which call a call is, read from the spans that told it.

Its tool as the MCP layer names it, the conversation that stands for its turn where a
framework roots each call in a trace of its own, the fingerprint of its arguments, and
names made encodable before anything keeps them.
"""

from __future__ import annotations

import re

from mcp_breaker_client.shared.fingerprint import fingerprint

from processor.classify.dialects import MCP_DIALECTS
from processor.classify.reading import Reading

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(name: str) -> str:
    """``name`` with each lone surrogate replaced by U+FFFD: valid UTF-8 everywhere."""
    return _LONE_SURROGATE.sub("\ufffd", name)


def call_fingerprint(server: str | None, tool: str, told: tuple[Reading, ...]) -> str | None:
    """From the arguments a span of the call recorded, the client's first; else from a
    digest of them; None when none recorded any."""
    for reading in told:
        if reading.has_arguments:
            return fingerprint(server, tool, reading.arguments)
    for reading in told:
        if reading.arguments_digest:
            return fingerprint(server, tool, {"args_hash": reading.arguments_digest})
    return None


def root_session(told: tuple[Reading, ...]) -> str | None:
    """Where a framework exports each tool call as the root of a trace of its own, the
    conversation it names (``gen_ai.conversation.id``, OpenInference's ``session.id``)
    stands for the turn; an MCP session id does not, as one session outlives many turns."""
    for reading in told:
        if (
            reading.session_id
            and reading.dialect not in MCP_DIALECTS
            and not reading.span.parent_span_id
        ):
            return reading.session_id
    return None


def call_tool(told: tuple[Reading, ...]) -> str:
    """The call's tool as the MCP layer names it (a framework may prefix it with its
    toolset's name), else as the first span that names one does."""
    for reading in told:
        if reading.tool and reading.dialect in MCP_DIALECTS:
            return reading.tool
    for reading in told:
        if reading.tool:
            return reading.tool
    return ""
