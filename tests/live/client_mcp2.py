"""Capture client for the ``mcp2`` stack: the official SDK 2.x ``Client`` over stdio."""

from __future__ import annotations

import asyncio
from typing import Any

import capture_common as common

STACK = "mcp2"


async def scenario(endpoint: str, turn_id: str | None) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    command, args = common.server_command("server_mcp2.py", endpoint)
    async with Client(StdioServerParameters(command=command, args=args)) as client:

        async def list_tools() -> list[str]:
            return [tool.name for tool in (await client.list_tools()).tools]

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
