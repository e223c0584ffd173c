"""``BreakerToolset``: Pydantic AI 2.x MCP tools that heed mcp-breaker.

Wrap the ``MCPToolset`` of one MCP server, and hand the wrapper to the agent instead::

    toolset = BreakerToolset(MCPToolset(...), advisories, tracer, server="billing")
    agent = Agent(model, toolsets=[toolset])

**The hook: a ``WrapperToolset``.** It is Pydantic AI's documented way to change how the
tools of a toolset run ("changing tool execution"): its ``call_tool(name, tool_args, ctx,
tool)`` sees every call the model makes to the wrapped toolset, before the toolset makes
it, and leaves the rest (tool list, instructions, connection) to the toolset. The
``MCPToolset``'s own ``process_tool_call`` hook would do too, but it is one slot the
harness may already be using; a wrapper composes with it. Wrap the ``MCPToolset`` itself,
not a prefixed or renamed one, so the names seen are the server's.

**The decisions are ``BreakerSession``'s** (``mcp_adapter.py``): the
wrapper's session makes its calls through the wrapped toolset, so the refusals, the
half-open probe, the session's own notes of the failures it just recorded and the
``mcp.tool.call`` span are all the session's. The toolset answers a value for the model
or raises ``ModelRetry`` / ``ToolFailed`` on an ``isError`` result (its
``tool_error_behavior``); the session is shown that as an MCP ``CallToolResult`` (the
value as text, or ``isError`` with the message), so the span says ``ok`` (or a hidden
failure) or ``failed`` with the error's text, and the wrapper then hands the toolset's own
answer, or its exception, on unchanged.

**A refused call raises ``ToolFailed(message)``.** The model gets a tool return with
``outcome='failed'`` whose content is the advisory's message: the tool's error, as the
model sees any failed tool. Not ``ModelRetry``: that prepends "fix the errors and try
again", which invites exactly the repeat the refusal is there to spare, and it consumes
the tool's retry budget (one retry by default), so a second refusal of the tool would end
the run with ``UnexpectedModelBehavior``. ``ToolFailed`` consumes no budget and never ends
the run. Not a plain return value either: the model would read the message as the tool's
success.

Turns: as ``BreakerSession`` has them. With Pydantic AI's instrumentation on
(``Agent.instrument_all()``), the agent run's span is current at each call and its trace
is the turn; otherwise run the agent inside a span of your own, or call
``toolset.breaker.set_turn(turn_id)`` before each run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mcp.types import CallToolResult, ContentBlock, TextContent
from opentelemetry import trace
from opentelemetry.trace import Tracer
from pydantic_ai import RunContext
from pydantic_ai.exceptions import ModelRetry, ToolFailed
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from mcp_breaker_client.mcp_adapter import AdvisorySource, BreakerSession, result_text
from mcp_breaker_client.shared.turns import TurnKey


class _Call:
    """One call of the model's, as the session's inner session makes it: through the
    wrapped toolset, keeping what the toolset answered for the wrapper to hand on."""

    def __init__(
        self, toolset: AbstractToolset[Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> None:
        self.toolset, self.ctx, self.tool = toolset, ctx, tool
        self.made = False
        self.value: Any = None
        self.error: ModelRetry | ToolFailed | None = None

    async def run(self, name: str, arguments: dict[str, Any] | None) -> CallToolResult:
        self.made = True
        try:
            self.value = await self.toolset.call_tool(name, arguments or {}, self.ctx, self.tool)
        except (ModelRetry, ToolFailed) as error:  # an isError result, as the toolset says it
            self.error = error
            return _text_result(error.message, is_error=True)
        return _text_result(_as_text(self.value), is_error=False)


class _ThroughToolset:
    """The session ``BreakerSession`` wraps: each call goes through its ``_Call``."""

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | None = None,
        progress_callback: Any = None,
        *,
        call: _Call | None = None,
        **kwargs: Any,
    ) -> CallToolResult:
        assert call is not None, "BreakerToolset passes each call's _Call"
        return await call.run(name, arguments)


@dataclass(init=False)
class BreakerToolset(WrapperToolset[AgentDepsT]):
    """The wrapped toolset's tools, each call checked first (see the module docstring)."""

    breaker: BreakerSession

    def __init__(
        self,
        wrapped: AbstractToolset[AgentDepsT],
        client: AdvisorySource | None = None,
        tracer: Tracer | None = None,
        *,
        server: str = "",
        turn_key: TurnKey | None = TurnKey.CAUSE,
        breaker: BreakerSession | None = None,
    ) -> None:
        """``client``: the ``AdvisoryClient`` (None: spans only); ``tracer``: the one the
        ``mcp.tool.call`` spans go to (default: the global provider's); ``server``: the MCP
        server's name as mcp-breaker should know it; ``turn_key`` as ``BreakerSession``'s.
        ``breaker``: the session to share (Pydantic AI copies a toolset per run and keeps
        the session, so the notes of a turn's failures outlive the copy)."""
        self.wrapped = wrapped
        if breaker is None:
            tracer = tracer or trace.get_tracer(__name__)
            breaker = BreakerSession(_ThroughToolset(), client, tracer, server, turn_key=turn_key)
        self.breaker = breaker

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[AgentDepsT],
        tool: ToolsetTool[AgentDepsT],
    ) -> Any:
        call = _Call(self.wrapped, ctx, tool)
        result = await self.breaker.call_tool(name, tool_args, call=call)
        if not call.made:
            raise ToolFailed(result_text(result))  # refused: the advisory's message
        if call.error is not None:
            raise call.error
        return call.value


def _text_result(text: str, *, is_error: bool) -> CallToolResult:
    content: list[ContentBlock] = [TextContent(type="text", text=text)] if text else []
    return CallToolResult(content=content, is_error=is_error)


def _as_text(value: Any) -> str:
    """The toolset's answer as the MCP text it came from, as far as it can be told: a
    string as it is, a mapped JSON body as JSON (so a typed failure inside it is read as
    one), anything else (images, app results) as nothing."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return ""
