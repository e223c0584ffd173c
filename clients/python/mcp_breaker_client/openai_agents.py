"""``BreakerMCPServer``: an OpenAI Agents SDK MCP server that heeds mcp-breaker.

Wrap the SDK's server object (``MCPServerStdio``, ``MCPServerStreamableHttp``, ...) and
hand the wrapper to the agent instead::

    billing = MCPServerStdio(params=..., name="billing")
    async with BreakerMCPServer(billing, advisories, tracer, server="billing") as server:
        agent = Agent(name="assistant", mcp_servers=[server])

The SDK makes every tool call of the model through its server's ``call_tool(tool_name,
arguments, meta)`` and hands the ``CallToolResult``'s content to the model (an ``isError``
one included). The wrapper changes that one method, through ``BreakerSession``
(``mcp_adapter.py``), whose session here is the wrapped server: the
refusals, the half-open probe, the session's own notes of the failures it just recorded
and the ``mcp.tool.call`` span are all the session's. A refused call is not made; it
returns ``CallToolResult(is_error=True)`` with the advisory's message, which the model
reads as the tool's error. Everything else (the tool list, approval policy, guardrails,
``use_structured_content``, connect and cleanup) is the wrapped server's.

Turns: as ``BreakerSession`` has them. The SDK's own traces are not OpenTelemetry's, so
no OpenTelemetry span is current during a run unless the harness opens one: run each
turn inside a span (its trace is the turn), or call ``server.breaker.set_turn(turn_id)``
before each run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from agents.agent import AgentBase
from agents.mcp import MCPServer
from agents.run_context import RunContextWrapper
from agents.tool import ToolErrorFunction
from mcp import Tool as MCPTool
from mcp.types import (
    CallToolResult,
    GetPromptResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ReadResourceResult,
)
from opentelemetry import trace
from opentelemetry.trace import Tracer

from mcp_breaker_client.mcp_adapter import AdvisorySource, BreakerSession
from mcp_breaker_client.shared.turns import TurnKey

ApprovalPolicy = bool | Callable[[RunContextWrapper[Any], dict[str, Any], str], Awaitable[bool]]


class _ThroughServer:
    """The session ``BreakerSession`` wraps: the SDK's server, called as the SDK calls it."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | None = None,
        progress_callback: Any = None,
        **kwargs: Any,
    ) -> CallToolResult:
        return await self.server.call_tool(name, arguments, **kwargs)


class BreakerMCPServer(MCPServer):
    """The wrapped server, each tool call checked first (see the module docstring)."""

    def __init__(
        self,
        wrapped: MCPServer,
        client: AdvisorySource | None = None,
        tracer: Tracer | None = None,
        *,
        server: str = "",
        turn_key: TurnKey | None = TurnKey.CAUSE,
    ) -> None:
        """``client``: the ``AdvisoryClient`` (None: spans only); ``tracer``: the one the
        ``mcp.tool.call`` spans go to (default: the global provider's); ``server``: the MCP
        server's name as mcp-breaker should know it; ``turn_key`` as ``BreakerSession``'s.
        ``MCPServer.__init__`` is not called: every setting it would make is read from the
        wrapped server instead (``__getattr__``)."""
        self.wrapped = wrapped
        tracer = tracer or trace.get_tracer(__name__)
        self.breaker = BreakerSession(
            _ThroughServer(wrapped), client, tracer, server, turn_key=turn_key
        )

    def __getattr__(self, name: str) -> Any:
        if name == "wrapped":  # not set yet (a copy being made): no endless lookup
            raise AttributeError(name)
        return getattr(self.wrapped, name)  # use_structured_content, guardrails, ...

    async def call_tool(
        self, tool_name: str, arguments: dict[str, Any] | None, meta: dict[str, Any] | None = None
    ) -> CallToolResult:
        extra: dict[str, Any] = {} if meta is None else {"meta": meta}
        return await self.breaker.call_tool(tool_name, arguments, **extra)

    # -- the rest is the wrapped server's -------------------------------------------------
    @property
    def name(self) -> str:
        return self.wrapped.name

    @property
    def cached_tools(self) -> list[MCPTool] | None:
        return self.wrapped.cached_tools

    async def connect(self) -> None:
        wrapped: Any = self.wrapped  # the SDK leaves connect and cleanup unannotated
        await wrapped.connect()

    async def cleanup(self) -> None:
        wrapped: Any = self.wrapped
        await wrapped.cleanup()

    async def __aenter__(self) -> BreakerMCPServer:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.cleanup()

    async def list_tools(
        self,
        run_context: RunContextWrapper[Any] | None = None,
        agent: AgentBase[Any] | None = None,
    ) -> list[MCPTool]:
        return await self.wrapped.list_tools(run_context, agent)

    async def list_prompts(self) -> ListPromptsResult:
        return await self.wrapped.list_prompts()

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None
    ) -> GetPromptResult:
        return await self.wrapped.get_prompt(name, arguments)

    async def list_resources(self, cursor: str | None = None) -> ListResourcesResult:
        return await self.wrapped.list_resources(cursor)

    async def list_resource_templates(
        self, cursor: str | None = None
    ) -> ListResourceTemplatesResult:
        return await self.wrapped.list_resource_templates(cursor)

    async def read_resource(self, uri: str) -> ReadResourceResult:
        return await self.wrapped.read_resource(uri)

    def _get_needs_approval_for_tool(
        self, tool: MCPTool, agent: AgentBase[Any] | None
    ) -> ApprovalPolicy:
        return self.wrapped._get_needs_approval_for_tool(tool, agent)

    def _get_failure_error_function(
        self, agent_failure_error_function: ToolErrorFunction | None
    ) -> ToolErrorFunction | None:
        return self.wrapped._get_failure_error_function(agent_failure_error_function)
