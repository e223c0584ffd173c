"""An MCP tool server whose upstream is dead, for tests/test_advisories_e2e.py.

The official ``mcp`` SDK 2.x ``MCPServer`` over stdio, run as its own process. Its one
tool, ``browser_navigate``, stands for a proxy in front of a browser MCP server (the
seed's mcp-beaver in front of Playwright): every call first appends its URL to the file
named by ``INVOCATIONS_FILE`` (so the test can count the calls that reached the tool),
then tries the upstream at ``127.0.0.1:UPSTREAM_PORT``, a port nothing listens on, and
returns the failure as the seed recorded it: an ``isError`` result, not an exception.
"""

from __future__ import annotations

import os
import socket

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

UPSTREAM_HOST = "127.0.0.1"

server = MCPServer("dead-upstream")


@server.tool()
def browser_navigate(url: str) -> CallToolResult:
    """Open a URL in the browser."""
    with open(os.environ["INVOCATIONS_FILE"], "a", encoding="utf-8") as invocations:
        invocations.write(url + "\n")
    port = int(os.environ["UPSTREAM_PORT"])
    try:
        with socket.create_connection((UPSTREAM_HOST, port), timeout=5):
            pass
    except OSError as error:
        reason = (error.strerror or str(error)).lower()
        text = (
            f"mcp-beaver: upstream MCP session is closed (reconnect also failed: reconnect "
            f'upstream MCP "http://{UPSTREAM_HOST}:{port}/mcp": {reason})'
        )
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
    return CallToolResult(content=[TextContent(type="text", text=f"navigated to {url}")])


if __name__ == "__main__":
    server.run("stdio")
