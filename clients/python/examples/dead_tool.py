"""A harness whose MCP tool has died, with mcp-breaker and without it.

    dead_tool.py [OTLP HOST:PORT] [ADVISORY HOST:PORT]

An in-process MCP server offers ``navigate``, whose upstream session is gone: every call
fails. The model asks for it twice in each of five turns. Each call goes through a
``BreakerSession``, which sends its span to mcp-breaker at once (OTLP, default
localhost:4317) and heeds the advisories it pushes (default localhost:4320): the repeat in
a turn is refused at once, and from the fourth turn the tool is out before it is called.
Needs ``mcp-breaker-client[mcp]`` and a running ``mcp-breaker serve``.
"""

from __future__ import annotations

import sys
import time

import anyio
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent
from mcp_breaker_client import AdvisoryClient
from mcp_breaker_client.mcp_adapter import BreakerSession
from mcp_breaker_client.tracing import PromptToolSpanProcessor
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

HARNESS = "example-harness"
SERVER = "browser"
TURNS = 5
ATTEMPTS = 2  # per turn: the model asks again after the failure
ARGUMENTS = {"url": "https://example.test"}
ADVISORY_WAIT_S = 10.0  # for the circuit to reach this harness once it opens

otlp = sys.argv[1] if len(sys.argv) > 1 else "localhost:4317"
target = sys.argv[2] if len(sys.argv) > 2 else "localhost:4320"
reached: list[str] = []
server = MCPServer(SERVER)


@server.tool()
def navigate(url: str) -> CallToolResult:
    """Open a URL in the browser."""
    reached.append(url)
    dead = TextContent(type="text", text="upstream MCP session is closed")
    return CallToolResult(content=[dead], is_error=True)


def text_of(result: CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, TextContent))


async def main(advisories: AdvisoryClient, provider: TracerProvider) -> None:
    async with Client(server) as mcp_client:
        session = BreakerSession(mcp_client, advisories, provider.get_tracer(HARNESS), SERVER)
        for turn in range(1, TURNS + 1):
            turn_id = f"turn-{turn}"
            if turn > 3:  # three turns failed: the circuit is open at mcp-breaker
                deadline = time.monotonic() + ADVISORY_WAIT_S
                while not advisories.check(turn_id, SERVER, "navigate", ARGUMENTS).refused:
                    if time.monotonic() > deadline:
                        sys.exit("the circuit never reached this harness")
                    await anyio.sleep(0.01)
            for attempt in range(1, ATTEMPTS + 1):
                session.set_turn(turn_id, attempt)
                before = len(reached)
                result = await session.call_tool("navigate", dict(ARGUMENTS))
                what = "called, failed" if len(reached) > before else "refused"
                print(f"turn {turn}, call {attempt}: {what}: {text_of(result)}")


provider = TracerProvider(resource=Resource.create({"service.name": HARNESS}))
provider.add_span_processor(PromptToolSpanProcessor(OTLPSpanExporter(endpoint=otlp, insecure=True)))
advisories = AdvisoryClient(target, harness=HARNESS)
try:
    if not advisories.wait_until_synced(10):
        sys.exit(f"no answer from {target}: {advisories.failure or 'is mcp-breaker serving?'}")
    anyio.run(main, advisories, provider)
finally:
    provider.shutdown()
    advisories.close()
calls = TURNS * ATTEMPTS
print(f"the dead tool was called {len(reached)} times for {calls} calls the model asked for")
