"""An MCP tool server with a healthy tool and a dead one, for tests/test_blame_e2e.py.

The official ``mcp`` SDK 2.x ``MCPServer`` over stdio, in its own process. The server is
alive; only one of its tools' backends is down:

- ``get_weather`` works;
- ``fetch_invoice`` tries its billing backend, a port nothing listens on, and raises:
  "billing backend unreachable: [Errno 111] Connection refused" (the SDK answers with an
  ``isError`` result: the server ran the call);
- ``t3_queue_list`` answers as the T3 seed's tool does for a thread that does not exist: a
  typed failure in a success envelope (``isError: false``), unless asked for ``limit``
  alone.

Every call first appends ``tool\\targuments`` to the file named by ``INVOCATIONS_FILE``, so
the test counts the calls that reached each tool; the process writes its pid to
``PID_FILE`` so a test can kill it as a server dies.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

BILLING_HOST = "127.0.0.1"
T3_FAILURE = {
    "_tag": "OrchestratorMcpFailure",
    "code": "orchestration_error",
    "message": "The operation could not be completed.",
}

server = MCPServer("billing")


def invoked(tool: str, arguments: dict[str, Any]) -> None:
    with open(os.environ["INVOCATIONS_FILE"], "a", encoding="utf-8") as invocations:
        invocations.write(f"{tool}\t{json.dumps(arguments, sort_keys=True)}\n")


@server.tool()
def get_weather(city: str) -> str:
    """The weather in a city."""
    invoked("get_weather", {"city": city})
    return f"sunny in {city}"


@server.tool()
def fetch_invoice(invoice_id: str) -> str:
    """An invoice from the billing backend."""
    invoked("fetch_invoice", {"invoice_id": invoice_id})
    port = int(os.environ["BILLING_PORT"])
    try:
        with socket.create_connection((BILLING_HOST, port), timeout=5):
            pass
    except OSError as error:
        message = f"billing backend unreachable: [Errno {error.errno}] {error.strerror}"
        raise RuntimeError(message) from None
    return f"invoice {invoice_id}"


@server.tool()
def t3_queue_list(limit: int, threadId: str = "") -> CallToolResult:
    """The queue of a thread."""
    invoked("t3_queue_list", {"limit": limit, "threadId": threadId})
    if threadId:
        body: dict[str, Any] = T3_FAILURE
    else:
        body = {"items": [], "nextCursor": None}
    text = json.dumps(body, separators=(",", ":"))
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=body, is_error=False
    )


if __name__ == "__main__":
    with open(os.environ["PID_FILE"], "w", encoding="utf-8") as pid:
        pid.write(str(os.getpid()))
    server.run("stdio")
