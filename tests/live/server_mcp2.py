"""Tool server for the ``mcp2`` stack: the official SDK 2.x ``MCPServer`` over stdio.

Its spans come from the SDK's built-in OpenTelemetry middleware (on by default).
"""

from __future__ import annotations

from typing import Any

import capture_common as common

common.install_tracing("live-mcp2-server", common.server_endpoint(), simple=True)

from mcp import MCPError  # noqa: E402  (after the tracer provider is installed)
from mcp.server.mcpserver import MCPServer  # noqa: E402

server = MCPServer(common.SERVER_NAME)


@server.tool()
def ok_tool(city: str, days: int = 1) -> str:
    """Return a (fake) forecast."""
    return common.forecast(city, days)


@server.tool()
def raising_tool(path: str) -> str:
    """Read a file; always raises."""
    common.explode(path)
    return ""


@server.tool()
def refusing_tool(target: str) -> dict[str, Any]:
    """Modify a target; always refuses with a typed failure in a success envelope."""
    return common.refusal(target)


@server.tool()
def protocol_error_tool(query: str) -> str:
    """Query upstream; always fails with a JSON-RPC error."""
    raise MCPError(code=common.PROTOCOL_ERROR_CODE, message=common.protocol_error_message(query))


if __name__ == "__main__":
    server.run("stdio")
