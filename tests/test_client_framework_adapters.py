"""The framework adapters, each in its real framework with its scripted test model, against
the real MCP tool server of the framework scenario (tests/live/server_frameworks.py) over
stdio: Pydantic AI's ``BreakerToolset`` around an ``MCPToolset``, the OpenAI Agents SDK's
``BreakerMCPServer`` around an ``MCPServerStdio``.

The advisories come from a scripted source, as in tests/test_client_mcp_adapter.py. Each
run is one turn: the agent runs inside a span, whose trace is the turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from agents import Agent, RunConfig, Runner, ToolCallOutputItem
from agents.mcp import MCPServerStdio
from agents.testing import ScriptedModel, assistant_message, function_call
from fastmcp.client.transports import StdioTransport
from mcp.types import CallToolResult
from mcp_breaker_client.mcp_adapter import LOCAL_ID_PREFIX
from mcp_breaker_client.mirror import CheckResult, Decision
from mcp_breaker_client.openai_agents import BreakerMCPServer
from mcp_breaker_client.pydantic_ai import BreakerToolset
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from processor.advisories.v1 import advisories_pb2 as pb
from tests.live import frameworks_common as common

SERVER = common.SERVER_NAME  # "billing"
MESSAGE = "`fetch_invoice` is out: Connection refused since 10:02. Answer without invoices."
OUT = pb.Advisory(id="|tool|billing/fetch_invoice", state=pb.STATE_OPEN, message=MESSAGE)
WEATHER = ("get_weather", {"city": "Paris"})
INVOICE = ("fetch_invoice", {"invoice_id": "INV-1"})
ORDER = ("lookup_order", {"order_id": "A-1"})
Plan = list[tuple[str, dict[str, Any]]]
Outcome = tuple[list[str], list[str]]  # what the model got back per call; calls made


class OutTools:
    """An advisory source in which the tools named are out (``OUT``), the rest allowed."""

    def __init__(self, *out: str) -> None:
        self.out = set(out)

    def check(self, turn: str, server: str | None, tool: str, *_: Any, **__: Any) -> CheckResult:
        assert turn and server == SERVER  # the run's trace, the name given
        if tool in self.out:
            return CheckResult(decision=Decision.DENY, advisory=OUT)
        return CheckResult(decision=Decision.ALLOW)

    def check_remote(self, *_: Any, **__: Any) -> CheckResult:
        return CheckResult(decision=Decision.ALLOW)

    def roster_collapse(self, turn: str) -> pb.Advisory | None:
        return None


def run_pydantic_ai(provider: TracerProvider, advisories: OutTools, plan: Plan) -> Outcome:
    made: list[str] = []

    async def count(ctx: Any, call_tool: Any, name: str, args: dict[str, Any]) -> Any:
        made.append(name)  # the toolset's own hook: only calls it makes get here
        return await call_tool(name, args)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(1 for m in messages if isinstance(m, ModelResponse))
        if done < len(plan):
            return ModelResponse(parts=[ToolCallPart(*plan[done])])
        return ModelResponse(parts=[TextPart("done")])

    toolset = MCPToolset(StdioTransport(*common.server_command()), process_tool_call=count)
    tracer = provider.get_tracer("harness")
    breaker = BreakerToolset(toolset, advisories, tracer, server=SERVER)
    agent = PydanticAgent(FunctionModel(model), toolsets=[breaker], retries=5)

    async def run() -> list[ModelMessage]:
        with tracer.start_as_current_span("turn"):
            async with agent:
                return (await agent.run("Weather, invoice, order?")).all_messages()

    requests = [m for m in anyio.run(run) if isinstance(m, ModelRequest)]
    returned = (ToolReturnPart, RetryPromptPart)
    parts = [p for m in requests for p in m.parts if isinstance(p, returned)]
    return [part.model_response_str() for part in parts], made


class CountingStdio(MCPServerStdio):
    """The SDK's stdio server, noting each call that reaches it."""

    made: list[str]

    async def call_tool(
        self, tool_name: str, arguments: dict[str, Any] | None, meta: Any = None
    ) -> CallToolResult:
        self.made.append(tool_name)
        return await super().call_tool(tool_name, arguments, meta)


def run_openai_agents(provider: TracerProvider, advisories: OutTools, plan: Plan) -> Outcome:
    steps = [[function_call(tool, args, call_id=f"c{n}")] for n, (tool, args) in enumerate(plan)]
    model = ScriptedModel([*steps, [assistant_message("done")]])
    command, args = common.server_command()
    stdio = CountingStdio(params={"command": command, "args": args}, name=SERVER)
    stdio.made = []
    tracer = provider.get_tracer("harness")

    async def run() -> list[Any]:
        async with BreakerMCPServer(stdio, advisories, tracer, server=SERVER) as server:
            agent = Agent(name="assistant", model=model, mcp_servers=[server])
            config = RunConfig(tracing_disabled=True)  # the SDK's own traces: not here
            with tracer.start_as_current_span("turn"):
                result = await Runner.run(agent, "Weather, invoice, order?", run_config=config)
            return list(result.new_items)

    items = [i.raw_item for i in anyio.run(run) if isinstance(i, ToolCallOutputItem)]
    outputs = [i["output"] if isinstance(i, dict) else i.output for i in items]
    texts = [o if isinstance(o, str) else " ".join(p["text"] for p in o) for o in outputs]
    return texts, stdio.made


FRAMEWORKS = pytest.mark.parametrize(
    "run_agent", [run_pydantic_ai, run_openai_agents], ids=["pydantic_ai", "openai_agents"]
)
RunAgent = Callable[[TracerProvider, OutTools, Plan], Outcome]


def tool_spans(memory: InMemorySpanExporter) -> list[dict[str, Any]]:
    found = [s for s in memory.get_finished_spans() if s.name == "mcp.tool.call"]
    return [dict(s.attributes or {}) for s in sorted(found, key=start_time)]


def start_time(span: ReadableSpan) -> int:
    return span.start_time or 0


@FRAMEWORKS
def test_an_out_tool_is_refused_and_the_model_reads_why(
    spans: tuple[TracerProvider, InMemorySpanExporter], run_agent: RunAgent
) -> None:
    provider, memory = spans
    received, made = run_agent(provider, OutTools("fetch_invoice"), [WEATHER, INVOICE])
    assert made == ["get_weather"]  # fetch_invoice never reached the MCP client
    assert received[0] == common.weather("Paris")
    assert MESSAGE in received[1] and "Connection refused: billing" not in received[1]
    assert "try again" not in received[1]  # a failed tool result, not a retry prompt
    weather, invoice = tool_spans(memory)
    assert (weather["mcp.tool.name"], weather["mcp.tool.outcome"]) == ("get_weather", "ok")
    assert weather["mcp.server.name"] == invoice["mcp.server.name"] == SERVER
    assert (invoice["mcp.tool.name"], invoice["mcp.tool.outcome"]) == ("fetch_invoice", "cancelled")
    assert invoice["mcp.breaker.refused"] is True
    assert invoice["mcp.breaker.advisory"] == OUT.id


@FRAMEWORKS
def test_with_nothing_out_every_call_goes_through(
    spans: tuple[TracerProvider, InMemorySpanExporter], run_agent: RunAgent
) -> None:
    provider, memory = spans
    received, made = run_agent(provider, OutTools(), [WEATHER, INVOICE, ORDER])
    assert made == ["get_weather", "fetch_invoice", "lookup_order"]
    assert received[0] == common.weather("Paris")
    assert common.REFUSED_MESSAGE in received[1]  # the tool's own error
    weather, invoice, order = tool_spans(memory)
    assert weather["mcp.tool.outcome"] == "ok"
    assert invoice["mcp.tool.outcome"] == "failed"
    assert invoice["mcp.tool.is_error"] is True
    assert "Connection refused" in invoice["mcp.tool.error"]
    assert "mcp.breaker.refused" not in invoice
    # isError false around {"ok": false, ...}: recorded so the service reads a hidden failure.
    assert order["mcp.tool.outcome"] == "ok" and '"ok": false' in order["mcp.tool.result"]


@FRAMEWORKS
def test_a_repeat_of_a_dead_tool_is_refused_in_the_same_turn(
    spans: tuple[TracerProvider, InMemorySpanExporter], run_agent: RunAgent
) -> None:
    """Before any advisory could come back: the session's own note of the failure."""
    provider, memory = spans
    again = ("fetch_invoice", {"invoice_id": "INV-2"})
    received, made = run_agent(provider, OutTools(), [INVOICE, again])
    assert made == ["fetch_invoice"]
    assert (
        "`fetch_invoice` on MCP server `billing` is unavailable for the rest of this turn, "
        in (received[1])
    )
    _, refused = tool_spans(memory)
    assert refused["mcp.breaker.refused"] is True
    assert str(refused["mcp.breaker.advisory"]).startswith(LOCAL_ID_PREFIX)
