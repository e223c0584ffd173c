"""Strands Agents capture client: a scripted ``strands.models.Model`` runs PLAN through an
``Agent`` whose tools come from ``strands.tools.mcp.MCPClient`` over stdio, with Strands'
own OpenTelemetry tracing (the global tracer provider, handed to ``StrandsTelemetry``).

``MCP_BREAKER_VARIANT=latest`` opts into the latest GenAI semantic conventions
(``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``), set here because the
harness drops the caller's ``OTEL_*`` variables.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

if os.environ.get("MCP_BREAKER_VARIANT") == "latest":
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"

sys.path.insert(0, str(Path(__file__).resolve().parent))
import frameworks_common as common
from mcp.client.stdio import StdioServerParameters, stdio_client
from strands import Agent
from strands.models import Model
from strands.telemetry import StrandsTelemetry
from strands.tools.mcp import MCPClient

USAGE = {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}


class ScriptedModel(Model):
    """Answers round N of the run with PLAN[N] as a tool use, then with FINAL_TEXT."""

    def __init__(self) -> None:
        self.config: dict[str, Any] = {"model_id": "scripted-plan"}

    def update_config(self, **model_config: Any) -> None:
        self.config.update(model_config)

    def get_config(self) -> dict[str, Any]:
        return self.config

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncGenerator[dict[str, Any], None]:
        done = sum(1 for m in messages if m["role"] == "assistant")
        yield {"messageStart": {"role": "assistant"}}
        if done < len(common.PLAN):
            tool, arguments = common.PLAN[done]
            tool_use_id = f"tooluse_{uuid.uuid4().hex[:24]}"  # Bedrock-style, as Strands makes
            start = {"toolUse": {"name": tool, "toolUseId": tool_use_id}}
            yield {"contentBlockStart": {"start": start}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(arguments)}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
        else:
            yield {"contentBlockDelta": {"delta": {"text": common.FINAL_TEXT}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
        yield {"metadata": {"usage": USAGE, "metrics": {"latencyMs": 1}}}


def tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What each tool call handed back to the model, in order."""
    calls: list[dict[str, Any]] = []
    for message in messages:
        for block in message["content"]:
            if "toolResult" in block:
                result = block["toolResult"]
                text = " ".join(c.get("text", "") for c in result["content"])
                calls.append({"status": result["status"], "text": text[:300]})
    return calls


def main() -> None:
    args = common.client_args()
    provider = common.install_tracing("strands-client", args.endpoint, simple=args.simple)
    StrandsTelemetry(tracer_provider=provider)  # the docs' "custom tracer provider" set-up

    command, command_args = common.server_command()
    server = StdioServerParameters(command=command, args=command_args)
    trace_ids: list[str] = []
    with MCPClient(lambda: stdio_client(server)) as mcp_client:
        agent = Agent(
            model=ScriptedModel(), tools=mcp_client.list_tools_sync(), callback_handler=None
        )
        result = agent("Check the weather in Paris, invoice INV-1 and order A-1.")
        trace_ids.append(f"{agent.trace_span.get_span_context().trace_id:032x}")
    calls = tool_results(agent.messages)  # type: ignore[arg-type]
    for (tool, arguments), call in zip(common.PLAN, calls, strict=True):
        call.update(tool=tool, arguments=arguments)

    provider.shutdown()
    common.write_result(
        args.out,
        "strands-latest" if os.environ.get("MCP_BREAKER_VARIANT") == "latest" else "strands",
        trace_ids=trace_ids,
        calls=calls,
        final=str(result).strip(),
        versions=common.versions("strands-agents", "mcp", "opentelemetry-sdk"),
    )


if __name__ == "__main__":
    main()
