"""The framework scenario's MCP tool server, over stdio: the official SDK's FastMCP.

One healthy tool, one whose backend refuses connections, and one that answers
``isError: false`` around a typed failure body. It exports no spans: a framework's users
run third-party servers, and what mcp-breaker must read is the agent's own telemetry.
Works with the ``mcp`` SDK 1.x (``mcp.server.fastmcp``) and 2.x (``mcp.server.mcpserver``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import frameworks_common as common

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server  # type: ignore[no-redef]
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]

server = Server(common.SERVER_NAME)


@server.tool()
def get_weather(city: str) -> str:
    """The weather in a city."""
    return common.weather(city)


@server.tool()
def fetch_invoice(invoice_id: str) -> str:
    """Fetch an invoice from the billing backend."""
    raise ToolError(common.REFUSED_MESSAGE)


@server.tool()
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    body: dict[str, Any] = dict(common.HIDDEN_BODY)
    return json.dumps(body)


if __name__ == "__main__":
    server.run("stdio")
