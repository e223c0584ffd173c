"""OpenAI Agents SDK capture client: the SDK's own test double ``agents.testing.ScriptedModel``
runs PLAN through a ``Runner.run`` whose tools come from ``agents.mcp.MCPServerStdio``,
traced the way OpenInference documents it: ``OpenAIAgentsInstrumentor().instrument(...)``.

``ScriptedModel`` alone traces a bare ``generation`` span; ``ResponsesShapedModel`` traces
each round the way the SDK's ``OpenAIResponsesModel`` does instead: a ``response`` span
holding the input and an OpenAI ``Response`` (whose output carries the function calls).

The instrumentor is exclusive by default: it replaces the SDK's trace processors (among them
the exporter to the OpenAI backend, which has no API key here) with its own, so nothing is
sent to OpenAI. ``set_tracing_disabled(True)`` is not used: it would silence that one too.

``MCP_BREAKER_VARIANT=genai`` opts into OpenInference's OTel GenAI attributes
(``OPENINFERENCE_ENABLE_GENAI_SEMCONV=true``), emitted beside its own.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

if os.environ.get("MCP_BREAKER_VARIANT") == "genai":
    os.environ["OPENINFERENCE_ENABLE_GENAI_SEMCONV"] = "true"

sys.path.insert(0, str(Path(__file__).resolve().parent))
import frameworks_common as common
from agents import Agent, FunctionTool, ModelResponse, Runner, ToolCallOutputItem, Usage
from agents.mcp import MCPServerStdio
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tracing import get_trace_provider, response_span
from openai.types.responses import FunctionTool as ResponsesFunctionTool
from openai.types.responses import Response, ResponseUsage
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

PROMPT = "Check the weather in Paris, invoice INV-1 and order A-1."
SCOPE = "openinference.instrumentation.openai_agents"
USAGE = Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)


class RootRecorder(SpanProcessor):
    """Remembers the trace ids of the root spans that end (the agent runs)."""

    def __init__(self) -> None:
        self.trace_ids: list[str] = []

    def on_end(self, span: ReadableSpan) -> None:
        scope = span.instrumentation_scope
        if span.parent is None and span.context is not None and scope and scope.name == SCOPE:
            self.trace_ids.append(f"{span.context.trace_id:032x}")


class ResponsesShapedModel(ScriptedModel):
    """The scripted steps, traced as ``OpenAIResponsesModel`` traces a non-streamed round."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        tools, tracing = kwargs.get("tools") or args[3], kwargs.get("tracing") or args[6]
        with response_span(disabled=tracing.is_disabled()) as span:
            answer = await super().get_response(*args, **kwargs)
            response = Response(
                id=f"resp_{uuid.uuid4().hex}",
                created_at=time.time(),
                model="scripted-plan",
                object="response",
                status="completed",
                output=answer.output,
                parallel_tool_calls=True,
                tool_choice="auto",
                tools=[
                    ResponsesFunctionTool(
                        type="function",
                        name=tool.name,
                        description=tool.description,
                        parameters=tool.params_json_schema,
                        strict=tool.strict_json_schema,
                    )
                    for tool in tools
                    if isinstance(tool, FunctionTool)
                ],
                usage=ResponseUsage(
                    input_tokens=USAGE.input_tokens,
                    output_tokens=USAGE.output_tokens,
                    total_tokens=USAGE.total_tokens,
                    input_tokens_details={"cached_tokens": 0, "cache_write_tokens": 0},
                    output_tokens_details={"reasoning_tokens": 0},
                ),
            )
            if tracing.include_data():
                span.span_data.response = response
                span.span_data.input = kwargs.get("input") or args[1]
        return answer


def scripted_model() -> ScriptedModel:
    """One function call of PLAN per model round, call ids as the Responses API makes them."""
    steps: list[Any] = []
    for tool, arguments in common.PLAN:
        call_id = f"call_{uuid.uuid4().hex[:24]}"
        steps.append([function_call(tool, arguments, call_id=call_id, item_id=f"fc_{call_id}")])
    steps.append([assistant_message(common.FINAL_TEXT, item_id=f"msg_{uuid.uuid4().hex}")])
    return ResponsesShapedModel(steps, default_usage=USAGE)


def tool_outputs(items: list[Any]) -> list[dict[str, Any]]:
    """What each tool call handed back to the model, in order."""
    calls: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, ToolCallOutputItem):
            raw = item.raw_item
            output = raw["output"] if isinstance(raw, dict) else raw.output
            if isinstance(output, list):  # MCP content, as input_text parts
                output = " ".join(part.get("text", "") for part in output)
            calls.append({"call_id": raw["call_id"], "text": str(output)[:300]})
    return calls


async def run() -> tuple[str, list[dict[str, Any]]]:
    command, command_args = common.server_command()
    params = {"command": command, "args": command_args}
    async with MCPServerStdio(params=params, name=common.SERVER_NAME) as server:
        agent = Agent(name="assistant", model=scripted_model(), mcp_servers=[server])
        result = await Runner.run(agent, PROMPT, max_turns=len(common.PLAN) + 4)
    return str(result.final_output), tool_outputs(result.new_items)


def main() -> None:
    args = common.client_args()
    provider = common.install_tracing("openai-agents-client", args.endpoint, simple=args.simple)
    recorder = RootRecorder()
    provider.add_span_processor(recorder)
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    processors = get_trace_provider()._multi_processor._processors  # type: ignore[attr-defined]
    assert [type(p).__name__ for p in processors] == ["OpenInferenceTracingProcessor"]

    final, calls = asyncio.run(run())
    for (tool, arguments), call in zip(common.PLAN, calls, strict=True):
        call.update(tool=tool, arguments=arguments)

    provider.shutdown()
    common.write_result(
        args.out,
        "openai_agents-genai"
        if os.environ.get("MCP_BREAKER_VARIANT") == "genai"
        else "openai_agents",
        trace_ids=recorder.trace_ids,
        calls=calls,
        final=final.strip(),
        versions=common.versions(
            "openai-agents",
            "openinference-instrumentation-openai-agents",
            "mcp",
            "opentelemetry-sdk",
        ),
    )


if __name__ == "__main__":
    main()
