"""Pydantic AI capture client: a ``FunctionModel`` runs PLAN through an ``Agent`` whose tools
come from ``pydantic_ai.mcp.MCPToolset`` (fastmcp's client) over stdio, with Pydantic AI's
own OpenTelemetry instrumentation switched on by ``Agent.instrument_all()`` (the global tracer
provider; Pydantic AI 2 dropped the ``Agent(instrument=...)`` argument).

The server's ``ToolError`` (``isError: true``) becomes a ``ModelRetry`` (the toolset's default
``tool_error_behavior='retry'``): the model gets a tool return with ``outcome='retried'``, and
a tool failing more than its retry budget (default 1) ends the run, so the agent gets
``retries=10``.

``MCP_BREAKER_VARIANT=own-provider`` hands the agent its exporting provider instead, as
``capabilities=[Instrumentation(settings=InstrumentationSettings(tracer_provider=...))]``,
with a plain non-exporting provider as the global one (so the spans of the libraries that use
the global provider, fastmcp's and the MCP SDK's, are not sent).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import frameworks_common as common
from fastmcp.client.transports import StdioTransport
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from pydantic_ai import Agent
from pydantic_ai.capabilities import Instrumentation
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
from pydantic_ai.models.instrumented import InstrumentationSettings

OWN_PROVIDER = os.environ.get("MCP_BREAKER_VARIANT") == "own-provider"


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Answers round N of the run with PLAN[N] as a tool call, then with FINAL_TEXT."""
    done = sum(1 for m in messages if isinstance(m, ModelResponse))
    if done < len(common.PLAN):
        tool, arguments = common.PLAN[done]
        return ModelResponse(parts=[ToolCallPart(tool, arguments)])  # the id is pydantic-ai's
    return ModelResponse(parts=[TextPart(common.FINAL_TEXT)])


class RootTraces(SpanProcessor):
    """Collects the trace id of each root span of Pydantic AI's own (the agent runs)."""

    def __init__(self) -> None:
        self.trace_ids: list[str] = []

    def on_end(self, span: ReadableSpan) -> None:
        ours = span.instrumentation_scope is not None and (
            span.instrumentation_scope.name == "pydantic-ai"
        )
        if ours and span.parent is None and span.context is not None:
            trace_id = f"{span.context.trace_id:032x}"
            if trace_id not in self.trace_ids:
                self.trace_ids.append(trace_id)


def tool_results(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """What each tool call handed back to the model, in order."""
    calls: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart):  # outcome "retried" for a ModelRetry
                kind, outcome, text = "tool-return", part.outcome, part.model_response_str()
            elif isinstance(part, RetryPromptPart):
                kind, outcome, text = "retry-prompt", "retried", part.model_response()
            else:
                continue
            call = {"part": kind, "outcome": outcome, "tool_call_id": part.tool_call_id}
            calls.append({**call, "text": text[:300]})
    return calls


async def run(capabilities: list[Any]) -> Any:
    command, command_args = common.server_command()
    toolset: MCPToolset[None] = MCPToolset(StdioTransport(command, command_args))
    agent = Agent(
        FunctionModel(scripted), toolsets=[toolset], retries=10, capabilities=capabilities
    )
    async with agent:
        return await agent.run("Check the weather in Paris, invoice INV-1 and order A-1.")


def main() -> None:
    args = common.client_args()
    if OWN_PROVIDER:
        trace.set_tracer_provider(TracerProvider())  # the global one, which exports nothing
    provider = common.install_tracing("pydantic-ai-client", args.endpoint, simple=args.simple)
    roots = RootTraces()
    provider.add_span_processor(roots)
    capabilities: list[Any] = []
    if OWN_PROVIDER:
        settings = InstrumentationSettings(tracer_provider=provider)
        capabilities.append(Instrumentation(settings=settings))
    else:
        Agent.instrument_all()  # the docs' switch: every agent, the global tracer provider

    result = asyncio.run(run(capabilities))
    calls = tool_results(result.all_messages())
    for (tool, arguments), call in zip(common.PLAN, calls, strict=True):
        call.update(tool=tool, arguments=arguments)

    provider.shutdown()
    common.write_result(
        args.out,
        "pydantic_ai-own-provider" if OWN_PROVIDER else "pydantic_ai",
        trace_ids=roots.trace_ids,
        calls=calls,
        final=str(result.output).strip(),
        versions=common.versions("pydantic-ai-slim", "fastmcp-slim", "mcp", "opentelemetry-sdk"),
    )


if __name__ == "__main__":
    main()
