"""Tool server for the mcp 1.x stacks (``traceloop``, ``logfire``): ``mcp.server.fastmcp``.

``--instrument traceloop`` turns on OpenLLMetry's ``McpInstrumentor``; ``--instrument
logfire`` configures Logfire (nothing sent to its service) and ``logfire.instrument_mcp()``.
Either way spans are exported over OTLP/gRPC to ``--endpoint`` as each one ends.
"""

from __future__ import annotations

import argparse
from typing import Any

import capture_common as common
import mcp1_common

parser = argparse.ArgumentParser(description="Live mcp 1.x tool server (stdio).")
parser.add_argument("--endpoint", required=True, help="OTLP/gRPC host:port")
parser.add_argument("--instrument", required=True, choices=mcp1_common.INSTRUMENTS)
args = parser.parse_args()
mcp1_common.instrument(args.instrument, "server", args.endpoint)

from mcp import McpError  # noqa: E402  (after instrumenting: OpenLLMetry hooks mcp imports)
from mcp.server.fastmcp import FastMCP  # noqa: E402
from mcp.types import ErrorData  # noqa: E402

server = FastMCP(common.SERVER_NAME)


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
    """Query upstream; raises the SDK's JSON-RPC error (mcp 1.x turns it into isError)."""
    message = common.protocol_error_message(query)
    raise McpError(ErrorData(code=common.PROTOCOL_ERROR_CODE, message=message))


if __name__ == "__main__":
    server.run("stdio")
