"""``BreakerSession`` around a real ``mcp.Client`` (an in-process ``MCPServer``): which calls
go through, what a refused call returns, and the span each call leaves.

The advisories come from a scripted source here (what ``AdvisoryClient.check`` and
``check_remote`` would answer); tests/test_advisories_e2e.py runs the real one.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent
from mcp_breaker_client.calls import call_fingerprint
from mcp_breaker_client.mcp_adapter import LOCAL_ID_PREFIX, BreakerSession, FailureNotes
from mcp_breaker_client.mirror import CheckResult, Decision
from mcp_breaker_client.shared.verdict import FailureClass, Outcome, Verdict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from processor.advisories.convert import to_wire
from processor.advisories.model import from_block
from processor.advisories.v1 import advisories_pb2 as pb
from processor.classify.classifier import Classifier
from processor.classify.events import ToolCall
from processor.config import BreakerConfig, TurnKey
from processor.engines.turns import TurnBreaker

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
    caplog.set_level(logging.WARNING, logger="mcp_breaker_client")
    calls_without_set_turn(provider, advisories, in_a_turn_span=False, calls=3)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        f"mcp-breaker: no turn for calls to {SERVER}: call set_turn(turn_id) before each "
        "model round, or make the calls inside a span for the turn (its trace is the turn); "
        "without either, each call is a turn of its own and a repeated call cannot be refused"
    ]
    assert [turn for _, turn, *_ in advisories.asked] == ["", "", ""]


# -- repeats the mirror cannot know of yet: the session's own notes --------------------------
DEAD = "upstream MCP session is closed"  # a transport failure: the whole tool is out
PICKY = "no results: the query language was not understood"  # a tool error: this call only


def failing_server(calls: list[str], parallel: int = 1) -> MCPServer:
    """``dead`` fails as a closed session, ``picky`` as a tool error, ``status`` (no
    arguments) as a tool error, ``declined`` as a user's "no"; ``twin`` fails as a closed
    session once ``parallel`` calls of it are in flight together."""
    server = MCPServer(SERVER)
    arrived = 0
    all_in = anyio.Event()

    def failure(text: str) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    @server.tool()
    def dead(url: str) -> CallToolResult:
        """Always fails: the session behind it is gone."""
        calls.append(f"dead {url}")
        return failure(DEAD)

    @server.tool()
    def picky(query: str) -> CallToolResult:
        """Fails unless the query is good."""
        calls.append(f"picky {query}")
        return failure(PICKY) if query != "good" else CallToolResult(content=[])

    @server.tool()
    def status() -> CallToolResult:
        """Always fails, and takes no arguments."""
        calls.append("status")
        return failure("quota exhausted for today")

    @server.tool()
    def declined(url: str) -> CallToolResult:
        """The user said no."""
        calls.append(f"declined {url}")
        return failure("the user declined the permission prompt")

    @server.tool()
    async def twin(url: str) -> CallToolResult:
        """Fails once ``parallel`` calls are in flight."""
        nonlocal arrived
        calls.append(f"twin {url}")
        arrived += 1
        if arrived >= parallel:
            all_in.set()
        await all_in.wait()
        return failure(DEAD)

    return server


Step = tuple[str, dict[str, Any] | None]


def run_turn(
    provider: TracerProvider,
    advisories: Any,
    steps: list[Step],
    *,
    reached: list[str],
    turn: str | None = "t1",
    turn_key: TurnKey | None = TurnKey.CAUSE,
) -> list[CallToolResult]:
    """The calls of ``steps`` one after another in one turn, each as soon as the last ended."""

    async def run() -> list[CallToolResult]:
        async with Client(failing_server(reached)) as client:
            session = BreakerSession(
                client, advisories, provider.get_tracer("h"), SERVER, turn_key=turn_key
            )
            results = []
            for number, (tool, arguments) in enumerate(steps):
                session.set_turn(turn or f"turn-{number}", 1)
                results.append(await session.call_tool(tool, arguments))
            return results

    return anyio.run(run)


def text_of(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


def tool_spans(memory: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in memory.get_finished_spans() if s.name == "mcp.tool.call"]


def allowing() -> ScriptedAdvisories:
    """A mirror that has heard of nothing yet: the advisory is still on its way."""
    return ScriptedAdvisories(CheckResult(decision=Decision.ALLOW))


def test_a_back_to_back_repeat_of_a_dead_session_is_refused_before_the_mirror_knows(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """The seed's turn: the same call again 2 ms after it failed. A transport failure
    closes the whole tool for the turn, whatever the arguments, as the service's turn
    rules do; other tools, and other turns, are untouched."""
    provider, memory = spans
    reached: list[str] = []
    url = {"url": "https://artifact.test"}
    results = run_turn(
        provider,
        allowing(),
        [
            ("dead", url),
            ("dead", url),
            ("dead", {"url": "https://other.test"}),
            ("picky", {"query": "good"}),
        ],
        reached=reached,
    )
    assert reached == ["dead https://artifact.test", "picky good"]
    assert [r.is_error for r in results] == [True, True, True, False]
    refusal = (
        f"`dead` on MCP server `{SERVER}` is unavailable for the rest of this turn, so do not "
        f"call it again; answer what you can without it (the error: {DEAD})."
    )
    assert text_of(results[1]) == text_of(results[2]) == refusal
    first, second, third, _ = tool_spans(memory)
    assert first.attributes is not None and first.attributes["mcp.tool.outcome"] == "failed"
    for refused in (second, third):
        attributes = refused.attributes or {}
        assert attributes["mcp.tool.outcome"] == "cancelled"
        assert attributes["mcp.breaker.refused"] is True
        advisory_id = str(attributes["mcp.breaker.advisory"])
        assert advisory_id == f"{LOCAL_ID_PREFIX}turn_tool|t1|{SERVER}/dead"

    reached.clear()  # a new turn for every call: nothing is refused
    run_turn(provider, allowing(), [("dead", url), ("dead", url)], reached=reached, turn=None)
    assert reached == ["dead https://artifact.test"] * 2


def test_a_tool_error_refuses_only_the_identical_call(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, _ = spans
    reached: list[str] = []
    bad = {"query": "bad"}
    results = run_turn(
        provider,
        allowing(),
        [("picky", bad), ("picky", bad), ("picky", {"query": "good"}), ("picky", bad)],
        reached=reached,
    )
    assert reached == ["picky bad", "picky good"]  # the correction goes through
    assert (
        text_of(results[1])
        == text_of(results[3])
        == (
            f"This exact call to `picky` on MCP server `{SERVER}` already failed in this turn, "
            f"so do not repeat it; change the arguments or answer without it (the error: "
            f"{PICKY})."
        )
    )
    assert not results[2].is_error


def test_a_raised_timeout_closes_the_tool_for_the_turn(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, _ = spans
    session = BreakerSession(RaisingSession(), allowing(), provider.get_tracer("h"), SERVER)
    session.set_turn("t1")

    async def run() -> CallToolResult:
        with pytest.raises(MCPError):
            await session.call_tool("navigate", {"url": "u"})
        return await session.call_tool("navigate", {"url": "another"})

    result = anyio.run(run)  # RaisingSession would raise again: it was not called
    # The words are the service's (test_the_note_is_the_block_the_service_will_open).
    assert result.is_error
    assert text_of(result).startswith(
        f"`navigate` on MCP server `{SERVER}` is unavailable for the rest of this turn, "
    )
    assert "Request timed out" in text_of(result)


def test_what_the_service_would_not_block_is_not_refused(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """Neutral outcomes block nothing; a call-scoped failure without arguments has no
    fingerprint, so a repeat cannot be told from a correction; turn_key=None: no notes."""
    provider, _ = spans
    reached: list[str] = []
    url = {"url": "u"}
    run_turn(
        provider,
        allowing(),
        [("declined", url), ("declined", url), ("status", None), ("status", None)],
        reached=reached,
    )
    assert reached == ["declined u", "declined u", "status", "status"]
    reached.clear()
    run_turn(provider, allowing(), [("dead", url), ("dead", url)], reached=reached, turn_key=None)
    assert reached == ["dead u", "dead u"]


def test_turn_key_tool_blocks_the_tool_after_any_failure(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, _ = spans
    reached: list[str] = []
    steps: list[Step] = [("picky", {"query": "bad"}), ("picky", {"query": "good"})]
    run_turn(provider, allowing(), steps, reached=reached, turn_key=TurnKey.TOOL)
    assert reached == ["picky bad"]


def test_once_the_mirror_has_the_advisory_the_mirror_answers(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, _ = spans
    reached: list[str] = []
    url = {"url": "u"}
    mirror = allowing()  # then told what the service sent
    service_says = pb.Advisory(
        id="|turn_tool|t1|tools/dead",
        scope=pb.SCOPE_TURN_TOOL,
        state=pb.STATE_TURN_BLOCKED,
        server=SERVER,
        tool="dead",
        turn="t1",
        message="the service's own words",
        enforced=True,
    )

    async def run() -> list[CallToolResult]:
        async with Client(failing_server(reached)) as client:
            session = BreakerSession(client, mirror, provider.get_tracer("h"), SERVER)
            session.set_turn("t1", 1)
            results = [await session.call_tool("dead", url)]
            results.append(await session.call_tool("dead", url))  # the note refuses
            mirror.local = CheckResult(decision=Decision.DENY, advisory=service_says)
            results.append(await session.call_tool("dead", url))  # the mirror refuses
            # The service withdrew it (or sent it in shadow mode): the mirror's word stands.
            mirror.local = CheckResult(decision=Decision.ALLOW)
            results.append(await session.call_tool("dead", url))
            return results

    results = anyio.run(run)
    assert reached == ["dead u", "dead u"]
    assert text_of(results[1]).startswith(
        f"`dead` on MCP server `{SERVER}` is unavailable for the rest of this turn"
    )
    assert text_of(results[2]) == "the service's own words"
    assert results[3].is_error and text_of(results[3]) == DEAD  # made, and failed again


def test_calls_in_flight_together_all_go_then_a_repeat_is_refused(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """Two identical calls of one round, side by side: both were checked before either
    failed, so both reach the tool. The call after them is refused."""
    provider, _ = spans
    reached: list[str] = []
    url = {"url": "u"}

    async def run() -> list[CallToolResult]:
        results: list[CallToolResult] = []
        async with Client(failing_server(reached, parallel=2)) as client:
            session = BreakerSession(client, allowing(), provider.get_tracer("h"), SERVER)
            session.set_turn("t1", 1)

            async def call() -> None:
                results.append(await session.call_tool("twin", url))

            with anyio.fail_after(10):  # the tool answers only once both are in flight
                async with anyio.create_task_group() as group:
                    group.start_soon(call)
                    group.start_soon(call)
            results.append(await session.call_tool("twin", url))
        return results

    results = anyio.run(run)
    assert reached == ["twin u", "twin u"]
    assert [text_of(r) for r in results[:2]] == [DEAD, DEAD]
    assert text_of(results[2]).startswith(
        f"`twin` on MCP server `{SERVER}` is unavailable for the rest of this turn"
    )


# What the service makes of the very span the session recorded: its note must be the same
# block, keyed the same way, with the same words for the model.
def service_block(span: ReadableSpan) -> pb.Advisory | None:
    classifier = Classifier()
    assert span.end_time is not None
    events = classifier.classify(encode_spans([span]), now=span.end_time / 1e9)
    events += classifier.flush()
    (call,) = [e for e in events if isinstance(e, ToolCall)]
    config = BreakerConfig()
    placed = TurnBreaker(config).observe(call).placed
    made = placed and from_block(call, placed, enforced=True, turn_idle_s=config.turn_idle_s)
    return to_wire(made) if made else None


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("dead", {"url": "u"}),  # transport: the tool
        ("picky", {"query": "bad"}),  # tool error: the call
        ("status", None),  # tool error without arguments: nothing
        ("declined", {"url": "u"}),  # neutral: nothing
        ("raises", {"url": "u"}),  # a raised timeout (MCPError -32001): the tool
    ],
)
def test_the_note_is_the_block_the_service_will_open(
    spans: tuple[TracerProvider, InMemorySpanExporter], tool: str, arguments: dict[str, Any] | None
) -> None:
    provider, memory = spans

    async def run() -> FailureNotes | None:
        async with Client(failing_server([])) as client:
            inner: Any = RaisingSession() if tool == "raises" else client
            session = BreakerSession(inner, allowing(), provider.get_tracer("h"), SERVER)
            session.set_turn("t1", 1)
            with contextlib.suppress(MCPError):  # the raised timeout
                await session.call_tool(tool, arguments)
            return session.notes

    notes = anyio.run(run)
    assert notes is not None
    (span,) = tool_spans(memory)
    expected = service_block(span)
    noted = notes.check("t1", SERVER, tool, arguments)
    if expected is None:
        assert noted is None and len(notes) == 0
        return
    assert noted is not None
    assert noted.id == "local" + expected.id  # the service's, with "local" for the tenant
    for name in ("scope", "key", "state", "server", "tool", "turn", "fingerprint", "cause"):
        assert getattr(noted, name) == getattr(expected, name), name
    assert noted.message == expected.message and noted.enforced
    assert noted.evidence.failure_class == expected.evidence.failure_class
    assert noted.evidence.excerpt == expected.evidence.excerpt
    assert noted.evidence.span_id == expected.evidence.span_id
    assert noted.evidence.trace_id == expected.evidence.trace_id


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def failed(failure_class: FailureClass) -> Verdict:
    return Verdict(outcome=Outcome.FAILED, failure_class=failure_class, error_excerpt="gone")


def test_the_notes_are_bounded_and_expire() -> None:
    clock = FakeClock()
    notes = FailureNotes(max_turns=2, max_blocks_per_turn=2, ttl_s=60, clock=clock)
    transport, tool_error = failed(FailureClass.TRANSPORT), failed(FailureClass.TOOL_ERROR)
    for turn in ("a", "b"):
        assert notes.note(turn, SERVER, "dead", None, transport) is not None
    assert notes.check("a", SERVER, "dead", None) is not None  # "a" used last: "b" goes next
    notes.note("c", SERVER, "dead", None, transport)
    assert notes.check("b", SERVER, "dead", None) is None
    assert notes.check("a", SERVER, "dead", None) is not None
    assert notes.check("c", SERVER, "dead", None) is not None

    assert notes.note("a", SERVER, "picky", {"q": 1}, tool_error) is not None
    assert notes.note("a", SERVER, "picky", {"q": 2}, tool_error) is None  # the turn is full
    assert notes.check("a", SERVER, "picky", {"q": 1}) is not None
    assert notes.check("a", SERVER, "picky", {"q": 2}) is None
    assert len(notes) == 3

    clock.now += 60  # the service's advisory would have expired too
    assert notes.check("a", SERVER, "dead", None) is None
    assert notes.check("a", SERVER, "picky", {"q": 1}) is None
    assert notes.check("c", SERVER, "dead", None) is None
    assert len(notes) == 0


def test_the_first_failure_of_a_key_stands_and_the_fingerprint_is_the_services() -> None:
    clock = FakeClock()
    notes = FailureNotes(clock=clock)
    first = notes.note("t", SERVER, "picky", {"q": 1}, failed(FailureClass.PROTOCOL))
    clock.now += 5
    again = notes.note("t", SERVER, "picky", {"q": 1}, failed(FailureClass.HIDDEN))
    assert first is not None and again is first
    assert first.fingerprint == call_fingerprint(SERVER, "picky", {"q": 1})
    assert first.cause == "protocol" and first.scope == pb.SCOPE_TURN_CALL
