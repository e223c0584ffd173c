"""Capture client for the ``fastmcp3`` stack: the fastmcp 3 ``Client`` over stdio.

``call_tool`` keeps its default ``raise_on_error=True``, as the fixture did: an ``isError``
result is observed as a raised ``ToolError``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import capture_common as common

STACK = "fastmcp3"


async def scenario(endpoint: str, turn_id: str | None) -> dict[str, Any]:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    command, args = common.server_command("server_fastmcp3.py", endpoint)
    transport = StdioTransport(command=command, args=args, keep_alive=False)
    async with Client(transport) as client:

        async def list_tools() -> list[str]:
            return [tool.name for tool in await client.list_tools()]

        async def call(name: str, arguments: dict[str, Any]) -> Any:
            return await client.call_tool(name, arguments)

        return await common.run_turn(call, list_tools, turn_id)


def main() -> None:
    args = common.client_args()
    provider = common.install_tracing(f"live-{STACK}-client", args.endpoint, simple=False)
    result = asyncio.run(scenario(args.endpoint, args.turn_id))
    provider.shutdown()
    common.write_result(args.out, STACK, result)


if __name__ == "__main__":
    main()
