"""The span conventions a harness writes and the service reads: attribute names, and how
a tool's name tells its server."""

from __future__ import annotations

# Set by a harness (the client library's adapter) on a call it did not make because an
# advisory said the tool was out; its outcome is neutral (cancelled) either way.
REFUSED_ATTRIBUTE = "mcp.breaker.refused"
# Instead of the arguments: a digest of them (the client library records only this).
ARGS_HASH_ATTRIBUTE = "mcp.tool.args_hash"
SERVER_SEPARATOR = "__"  # "playwright__browser_navigate": the server__tool convention


def server_prefix(tool: str) -> str | None:
    """``playwright`` for ``playwright__browser_navigate``: the server__tool convention."""
    prefix, separator, _ = tool.partition(SERVER_SEPARATOR)
    return prefix if separator and prefix else None
