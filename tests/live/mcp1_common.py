"""The mcp 1.x stacks share a server and a client; only their instrumentation differs."""

from __future__ import annotations

import asyncio
from typing import Any

import capture_common as common

INSTRUMENTS = ("traceloop", "logfire")


def instrument(kind: str, role: str, endpoint: str) -> None:
    """Install tracing for ``live-<kind>-<role>`` and the stack's MCP instrumentation.

    Must run before ``mcp`` is imported. Servers export each span as it ends.
    """
    service = f"live-{kind}-{role}"
    simple = role == "server"
    if kind == "traceloop":
        from opentelemetry.instrumentation.mcp import McpInstrumentor

        common.install_tracing(service, endpoint, simple=simple)
        McpInstrumentor().instrument()
    elif kind == "logfire":
        import logfire

        logfire.configure(
            send_to_logfire=False,
            service_name=service,
            console=False,
            additional_span_processors=[common.span_processor(endpoint, simple=simple)],
        )
        logfire.instrument_mcp()
    else:
        raise ValueError(f"unknown instrumentation {kind!r}")


def shutdown(kind: str) -> None:
    """Flush and stop the tracer provider before the client writes its result."""
    if kind == "logfire":
        import logfire

        logfire.shutdown()
    else:
        from opentelemetry import trace

        trace.get_tracer_provider().shutdown()  # type: ignore[attr-defined]


async def scenario(kind: str, endpoint: str, turn_id: str | None) -> dict[str, Any]:
    """Launch ``server_mcp1.py`` over stdio with a ``ClientSession`` and run the turn."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    command, args = common.server_command("server_mcp1.py", endpoint)
    params = StdioServerParameters(command=command, args=[*args, "--instrument", kind])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def list_tools() -> list[str]:
            return [tool.name for tool in (await session.list_tools()).tools]

        async def call(name: str, arguments: dict[str, Any]) -> Any:
            return await session.call_tool(name, arguments)

        return await common.run_turn(call, list_tools, turn_id)


def main(kind: str) -> None:
    args = common.client_args()
    instrument(kind, "client", args.endpoint)
    result = asyncio.run(scenario(kind, args.endpoint, args.turn_id))
    shutdown(kind)
    common.write_result(args.out, kind, result)
