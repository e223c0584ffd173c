"""LangGraph capture client: a scripted ``BaseChatModel`` runs PLAN through LangChain's
``create_agent`` (the LangGraph ReAct agent that supersedes ``langgraph.prebuilt``'s
``create_react_agent``), whose tools come from ``langchain-mcp-adapters`` over one stdio
session, traced by OpenInference's ``LangChainInstrumentor``.

Tool errors: ``load_mcp_tools(handle_tool_errors=True)`` (the adapters' default) turns an
``isError`` result into a ``ToolMessage(status="error")`` instead of raising ``ToolException``,
so the run goes on; ``create_agent`` sets ``recursion_limit`` 9999 itself.
``MCP_BREAKER_VARIANT=raise`` takes the other documented path: the tools raise
``ToolException`` (``handle_tool_errors=False``) and ``ToolErrorMiddleware`` hands its text
to the model.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import string
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import frameworks_common as common
from langchain.agents import create_agent
from langchain.agents.middleware import ToolErrorMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import ToolException
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.sessions import StdioConnection
from langchain_mcp_adapters.tools import load_mcp_tools
from openinference.instrumentation.langchain import LangChainInstrumentor, get_current_span
from pydantic import Field

USAGE = UsageMetadata(input_tokens=10, output_tokens=5, total_tokens=15)
ID_CHARS = string.ascii_letters + string.digits
RAISE = os.environ.get("MCP_BREAKER_VARIANT") == "raise"


class ScriptedModel(BaseChatModel):
    """Answers round N of the run with PLAN[N] as a tool call, then with FINAL_TEXT."""

    model_name: str = "scripted-plan"
    trace_ids: list[str] = Field(default_factory=list)  # of the runs it answered in

    @property
    def _llm_type(self) -> str:
        return "scripted-plan"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        span = get_current_span()
        if span is not None:
            trace_id = f"{span.get_span_context().trace_id:032x}"
            if trace_id not in self.trace_ids:
                self.trace_ids.append(trace_id)
        done = sum(1 for m in messages if isinstance(m, AIMessage))
        if done < len(common.PLAN):
            tool, arguments = common.PLAN[done]
            call_id = "call_" + "".join(secrets.choice(ID_CHARS) for _ in range(24))  # OpenAI's
            call = {"name": tool, "args": arguments, "id": call_id, "type": "tool_call"}
            message = AIMessage(content="", tool_calls=[call], usage_metadata=USAGE)
        else:
            message = AIMessage(content=common.FINAL_TEXT, usage_metadata=USAGE)
        return ChatResult(generations=[ChatGeneration(message=message)])


def tool_results(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """What each tool call handed back to the model, in order."""
    calls: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            blocks = message.content if isinstance(message.content, list) else [message.content]
            text = " ".join(b if isinstance(b, str) else b.get("text", "") for b in blocks)
            calls.append({"status": message.status, "text": text[:300]})
    return calls


def tool_error_text(error: Exception, request: Any) -> str | None:
    return str(error) if isinstance(error, ToolException) else None  # others propagate


async def run() -> tuple[list[BaseMessage], list[str]]:
    command, command_args = common.server_command()
    connection = StdioConnection(transport="stdio", command=command, args=command_args)
    client = MultiServerMCPClient({common.SERVER_NAME: connection})
    model = ScriptedModel()
    async with client.session(common.SERVER_NAME) as session:
        tools = await load_mcp_tools(
            session, server_name=common.SERVER_NAME, handle_tool_errors=not RAISE
        )
        middleware = [ToolErrorMiddleware(tool_error_text)] if RAISE else []
        agent = create_agent(model, tools, middleware=middleware)
        prompt = "Check the weather in Paris, invoice INV-1 and order A-1."
        state = await agent.ainvoke({"messages": [{"role": "user", "content": prompt}]})
    return state["messages"], model.trace_ids


def main() -> None:
    args = common.client_args()
    provider = common.install_tracing("langgraph-client", args.endpoint, simple=args.simple)
    LangChainInstrumentor().instrument(tracer_provider=provider)

    messages, trace_ids = asyncio.run(run())
    calls = tool_results(messages)
    for (tool, arguments), call in zip(common.PLAN, calls, strict=True):
        call.update(tool=tool, arguments=arguments)

    provider.shutdown()
    common.write_result(
        args.out,
        "langgraph-raise" if RAISE else "langgraph",
        trace_ids=trace_ids,
        calls=calls,
        final=str(messages[-1].content).strip(),
        versions=common.versions(
            "langchain",
            "langgraph",
            "langchain-core",
            "langchain-mcp-adapters",
            "openinference-instrumentation-langchain",
            "mcp",
            "opentelemetry-sdk",
        ),
    )


if __name__ == "__main__":
    main()
