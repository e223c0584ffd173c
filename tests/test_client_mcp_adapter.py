"""``BreakerSession`` around a real ``mcp.Client`` (an in-process ``MCPServer``): which calls
go through, what a refused call returns, and the span each call leaves.

The advisories come from a scripted source here (what ``AdvisoryClient.check`` and
``check_remote`` would answer); tests/test_advisories_e2e.py runs the real one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from processor.advisories.v1 import advisories_pb2 as pb
from processor.client.mcp_adapter import BreakerSession
from processor.client.mirror import CheckResult, Decision

SERVER = "tools"
MESSAGE = "`navigate` is unavailable for the rest of this turn: upstream MCP session is closed."


def tool_server(calls: list[str]) -> MCPServer:
    server = MCPServer(SERVER)

    @server.tool()
    def navigate(url: str) -> str:
        """Open a URL."""
        calls.append(url)
        return f"opened {url}"

    @server.tool()
    def broken(url: str) -> CallToolResult:
        """Always fails."""
        calls.append(url)
        return CallToolResult(
            content=[TextContent(type="text", text="upstream MCP session is closed")],
            is_error=True,
        )

    return server


class ScriptedAdvisories:
    """Answers check() and check_remote() as told; records what was asked."""

    def __init__(self, local: CheckResult, remote: CheckResult | None = None) -> None:
        self.local = local
        self.remote = remote or CheckResult(decision=Decision.ALLOW)
        self.asked: list[tuple[str, str, str | None, str, Any]] = []

    def check(
        self,
        turn: str,
        server: str | None,
        tool: str,
        arguments: Any = None,
        *,
        fingerprint: str | None = None,
    ) -> CheckResult:
        self.asked.append(("local", turn, server, tool, arguments))
        return self.local

    def check_remote(
        self,
        turn: str,
        server: str | None,
        tool: str,
        arguments: Any = None,
        *,
        fingerprint: str | None = None,
        timeout_s: float | None = None,
    ) -> CheckResult:
        self.asked.append(("remote", turn, server, tool, arguments))
        return self.remote


def advisory(state: int = pb.STATE_TURN_BLOCKED, message: str = MESSAGE) -> pb.Advisory:
    return pb.Advisory(id="|turn_tool|t1|tools/navigate", state=state, message=message)  # type: ignore[arg-type]


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield provider, memory
    provider.shutdown()


def call_through(
    provider: TracerProvider,
    advisories: ScriptedAdvisories | None,
    tool: str = "navigate",
    reached: list[str] | None = None,
) -> CallToolResult:
    reached = reached if reached is not None else []

    async def run() -> CallToolResult:
        async with Client(tool_server(reached)) as client:
            session = BreakerSession(client, advisories, provider.get_tracer("h"), SERVER)
            session.set_turn("t1", 3)
            assert [t.name for t in (await session.list_tools()).tools] == ["navigate", "broken"]
            return await session.call_tool(tool, {"url": "https://example.test"})

    return anyio.run(run)


def only_span(memory: InMemorySpanExporter) -> ReadableSpan:
    (span,) = [s for s in memory.get_finished_spans() if s.name == "mcp.tool.call"]
    return span


def test_an_allowed_call_goes_through_and_records_ok(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = spans
    reached: list[str] = []
    advisories = ScriptedAdvisories(CheckResult(decision=Decision.ALLOW))
    result = call_through(provider, advisories, reached=reached)
    assert not result.is_error and reached == ["https://example.test"]
    attributes = only_span(memory).attributes
    assert attributes["mcp.tool.outcome"] == "ok"
    assert (attributes["mcp.turn.id"], attributes["mcp.turn.round"]) == ("t1", 3)
    assert attributes["mcp.server.name"] == SERVER
    assert advisories.asked == [
        ("local", "t1", SERVER, "navigate", {"url": "https://example.test"})
    ]


def test_a_denied_call_is_not_made_and_the_model_reads_why(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = spans
    reached: list[str] = []
    advisories = ScriptedAdvisories(CheckResult(decision=Decision.DENY, advisory=advisory()))
    result = call_through(provider, advisories, reached=reached)
    assert reached == []
    assert result.is_error and [c.text for c in result.content] == [MESSAGE]  # type: ignore[union-attr]
    attributes = only_span(memory).attributes
    assert attributes["mcp.tool.outcome"] == "cancelled"
    assert attributes["mcp.breaker.refused"] is True
    assert attributes["mcp.breaker.advisory"] == advisory().id
    assert "mcp.tool.error" not in attributes  # the tool did not fail: it was not called


def test_half_open_asks_the_service_and_only_the_permit_holder_calls(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = spans
    half_open = advisory(state=pb.STATE_HALF_OPEN, message="")
    probe = CheckResult(decision=Decision.PROBE, advisory=half_open, probe_permit=7)
    reached: list[str] = []
    granted = ScriptedAdvisories(CheckResult(decision=Decision.PROBE_NEEDED), probe)
    assert not call_through(provider, granted, reached=reached).is_error
    assert reached == ["https://example.test"]
    assert [asked[0] for asked in granted.asked] == ["local", "remote"]
    assert only_span(memory).attributes["mcp.breaker.probe_permit"] == 7

    memory.clear()
    testing = advisory(state=pb.STATE_HALF_OPEN, message="another call is testing it now")
    refused = ScriptedAdvisories(
        CheckResult(decision=Decision.PROBE_NEEDED),
        CheckResult(decision=Decision.DENY, advisory=testing),
    )
    result = call_through(provider, refused, reached=reached)
    assert reached == ["https://example.test"]  # still only the probe
    assert result.is_error and "testing" in result.content[0].text  # type: ignore[union-attr]
    assert only_span(memory).attributes["mcp.breaker.refused"] is True


def test_a_shadow_advisory_is_noted_and_the_call_made(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = spans
    reached: list[str] = []
    shadow = CheckResult(decision=Decision.ALLOW, advisory=advisory())
    call_through(provider, ScriptedAdvisories(shadow), reached=reached)
    assert reached == ["https://example.test"]
    assert only_span(memory).attributes["mcp.breaker.shadow_advisory"] == advisory().id


def test_an_error_result_is_recorded_as_failed_with_its_text(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = spans
    result = call_through(provider, None, tool="broken")  # no advisories: spans only
    assert result.is_error
    attributes = only_span(memory).attributes
    assert attributes["mcp.tool.outcome"] == "failed"
    assert attributes["mcp.tool.error"] == "upstream MCP session is closed"
    assert attributes["mcp.tool.is_error"] is True


class RaisingSession:
    async def call_tool(self, name: str, arguments: Any = None, *args: Any, **kw: Any) -> Any:
        raise MCPError(code=-32001, message="Request timed out")


def test_a_raised_error_is_recorded_and_raised_again(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = spans
    allow = ScriptedAdvisories(CheckResult(decision=Decision.ALLOW))
    session = BreakerSession(RaisingSession(), allow, provider.get_tracer("h"), SERVER)
    with pytest.raises(MCPError):
        anyio.run(session.call_tool, "navigate", {"url": "u"})
    attributes = only_span(memory).attributes
    assert attributes["mcp.tool.outcome"] == "failed"
    assert attributes["error.type"] == "-32001"  # mcp-breaker reads it as a timeout
    assert "Request timed out" in str(attributes["mcp.tool.error"])


def calls_without_set_turn(
    provider: TracerProvider, advisories: ScriptedAdvisories, *, in_a_turn_span: bool, calls: int
) -> str | None:
    """Make ``calls`` calls without ``set_turn``, inside one span or none; the trace id of
    that span (hex), if any."""

    async def run() -> str | None:
        tracer = provider.get_tracer("h")
        async with Client(tool_server([])) as client:
            session = BreakerSession(client, advisories, tracer, SERVER)
            if not in_a_turn_span:
                for _ in range(calls):
                    await session.call_tool("navigate", {"url": "https://example.test"})
                return None
            with tracer.start_as_current_span("agent turn") as turn:
                for _ in range(calls):
                    await session.call_tool("navigate", {"url": "https://example.test"})
                return f"{turn.get_span_context().trace_id:032x}"

    return anyio.run(run)


def test_without_set_turn_the_current_trace_is_the_turn(
    spans: tuple[TracerProvider, InMemorySpanExporter], caplog: pytest.LogCaptureFixture
) -> None:
    """As the service reads a span without mcp.turn.id: its trace id is the turn."""
    provider, memory = spans
    advisories = ScriptedAdvisories(CheckResult(decision=Decision.ALLOW))
    trace_hex = calls_without_set_turn(provider, advisories, in_a_turn_span=True, calls=2)
    assert trace_hex is not None and len(trace_hex) == 32
    assert [turn for _, turn, *_ in advisories.asked] == [trace_hex, trace_hex]
    tool_spans = [s for s in memory.get_finished_spans() if s.name == "mcp.tool.call"]
    assert len(tool_spans) == 2
    for span in tool_spans:  # the service will read the same turn from them
        assert span.context is not None and f"{span.context.trace_id:032x}" == trace_hex
        assert "mcp.turn.id" not in (span.attributes or {})
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_set_turn_wins_over_the_trace(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, _ = spans
    advisories = ScriptedAdvisories(CheckResult(decision=Decision.ALLOW))
    call_through(provider, advisories)  # set_turn("t1", 3), no span around the call
    assert [turn for _, turn, *_ in advisories.asked] == ["t1"]


def test_with_neither_a_turn_nor_a_trace_the_session_warns_once(
    spans: tuple[TracerProvider, InMemorySpanExporter], caplog: pytest.LogCaptureFixture
) -> None:
    provider, _ = spans
    advisories = ScriptedAdvisories(CheckResult(decision=Decision.ALLOW))
    caplog.set_level(logging.WARNING, logger="processor.client")
    calls_without_set_turn(provider, advisories, in_a_turn_span=False, calls=3)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        f"mcp-breaker: no turn for calls to {SERVER}: call set_turn(turn_id) before each "
        "model round, or make the calls inside a span for the turn (its trace is the turn); "
        "without either, each call is a turn of its own and a repeated call cannot be refused"
    ]
    assert [turn for _, turn, *_ in advisories.asked] == ["", "", ""]
