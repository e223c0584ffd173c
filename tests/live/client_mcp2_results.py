"""Capture client for the ``mcp2`` stack, as a harness that records results itself.

The official SDK 2.x ``Client`` over stdio makes the calls; the harness writes one client
span per call in the OpenTelemetry MCP semantic conventions (``tools/call {tool}``,
``mcp.method.name``, ``gen_ai.tool.name``) with the opt-in ``gen_ai.tool.call.arguments``
and ``gen_ai.tool.call.result`` — the result envelope exactly as the SDK returned it. The
SDK's own spans are not exported (a harness with its own instrumentation), and the tool
server exports none: only the client side is instrumented, as most harnesses are.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import capture_common as common
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

STACK = "mcp2"
SDK_SCOPE = "mcp-python-sdk"


async def scenario(turn_id: str | None) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    command, args = common.server_command("server_mcp2.py", common.NO_TRACING)
    tracer = trace.get_tracer("live-harness-results")
    async with Client(StdioServerParameters(command=command, args=args)) as client:

        async def list_tools() -> list[str]:
            return [tool.name for tool in (await client.list_tools()).tools]

        async def call(name: str, arguments: dict[str, Any]) -> Any:
            attributes = {
                "mcp.method.name": "tools/call",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.arguments": json.dumps(arguments),
            }
            with tracer.start_as_current_span(
                f"tools/call {name}",
                kind=SpanKind.CLIENT,
                attributes=attributes,
                record_exception=True,
                set_status_on_exception=True,
            ) as span:
                try:
                    result = await client.call_tool(name, arguments)
                except Exception as error:
                    span.set_attribute("error.type", type(error).__qualname__)
                    raise
                envelope = result.model_dump(mode="json", by_alias=True, exclude_none=True)
                span.set_attribute("gen_ai.tool.call.result", json.dumps(envelope))
                if result.is_error:
                    span.set_attribute("error.type", "tool_error")
                    span.set_status(Status(StatusCode.ERROR))
                return result

        return await common.run_turn(call, list_tools, turn_id)


def main() -> None:
    args = common.client_args()
    provider = common.install_tracing(
        f"live-{STACK}-results-client",
        args.endpoint,
        simple=False,
        skip_scopes=frozenset({SDK_SCOPE}),
    )
    result = asyncio.run(scenario(args.turn_id))
    provider.shutdown()
    common.write_result(args.out, STACK, result)


if __name__ == "__main__":
    main()
