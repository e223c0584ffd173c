"""Tool server for the ``fastmcp3`` stack: a fastmcp 3 ``FastMCP`` server over stdio.

Its spans come from fastmcp's built-in OpenTelemetry support only.
"""

from __future__ import annotations

from typing import Any

import capture_common as common

common.install_tracing("live-fastmcp3-server", common.server_endpoint(), simple=True)

from fastmcp import FastMCP  # noqa: E402  (after the tracer provider is installed)
from mcp import McpError  # noqa: E402
from mcp.types import ErrorData  # noqa: E402

server = FastMCP(common.SERVER_NAME)


@server.tool
def ok_tool(city: str, days: int = 1) -> str:
    """Return a (fake) forecast."""
    return common.forecast(city, days)


@server.tool
def raising_tool(path: str) -> str:
    """Read a file; always raises."""
    common.explode(path)
    return ""


@server.tool
def refusing_tool(target: str) -> dict[str, Any]:
    """Modify a target; always refuses with a typed failure in a success envelope."""
    return common.refusal(target)


@server.tool
def protocol_error_tool(query: str) -> str:
    """Query upstream; raises the SDK's JSON-RPC error (fastmcp turns it into a tool error)."""
    message = common.protocol_error_message(query)
    raise McpError(ErrorData(code=common.PROTOCOL_ERROR_CODE, message=message))


if __name__ == "__main__":
    server.run("stdio", show_banner=False)
