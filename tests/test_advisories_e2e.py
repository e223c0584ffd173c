"""The seed's turn, end to end, with every part real: mcp-breaker spares the tool 7 of 8 calls.

    harness (this test)                                       tool server (subprocess)
    mcp.ClientSession ─ BreakerSession ──── stdio, MCP ─────▶ MCPServer: browser_navigate
         │ mcp.tool.call spans (PromptToolSpanProcessor)          └─▶ upstream: a closed port
         ▼                                                          "upstream MCP session is
    OTLP/gRPC ─▶ mcp-breaker (ServiceThread) ─▶ advisory ─┐         closed ..." (isError)
    AdvisoryClient mirror ◀──── Subscribe stream ◀────────┘

The model asks for the same call in rounds 1, 5, 7, 7, 9, 9, 11, 11 of one turn (the
seed: tests/test_seed_replay.py). Without mcp-breaker all eight reach the tool and fail.
With it, the first fails, its span goes to mcp-breaker at once, the turn block comes back
as an advisory, and the other seven are answered from the mirror: an ``isError`` result
naming the outage, and the tool never sees them.

One concession, stated plainly: after the first failing call the harness waits until its
mirror holds the advisory before playing the next round. A real model round takes seconds
(the seed's came 10 s apart), far longer than the span → advisory path; a test loop takes
microseconds, and racing it against the network would test the scheduler, not the
breaker. The wait has a generous bound, and how long it took is printed, never asserted.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent
from mcp_breaker_client import AdvisoryClient
from mcp_breaker_client.mcp_adapter import BreakerSession
from mcp_breaker_client.shared.verdict import FailureClass, NeutralReason, Outcome
from mcp_breaker_client.tracing import PromptToolSpanProcessor
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

from processor.engines.breaker import CallDecision
from tests.support import LOOPBACK, ServiceThread, free_port, make_config, wait_until

TOOL_SERVER = Path(__file__).with_name("advisories_e2e_server.py")
HARNESS = "e2e-harness"
SERVER, TOOL = "playwright", "browser_navigate"
TURN = "turn-0106"
ROUNDS = (1, 5, 7, 7, 9, 9, 11, 11)
ARGUMENTS = {"url": "https://artifacts.example.test/run/1539078028959944794"}
ADVISORY_WAIT_S = 30.0  # generous: a bound on waiting, not a measurement


class Decisions:
    """The service's decisions, as an event sink."""

    def __init__(self) -> None:
        self._items: list[CallDecision] = []
        self._lock = threading.Lock()

    def __call__(self, finding: object) -> None:
        if isinstance(finding, CallDecision):
            with self._lock:
                self._items.append(finding)

    def of_turn(self, turn: str) -> list[CallDecision]:
        with self._lock:
            found = [d for d in self._items if d.call.turn == turn]
        return sorted(found, key=lambda d: d.call.start_ns)


def closed_port() -> int:
    """A loopback port nothing listens on: the dead upstream."""
    return free_port()


def text_of(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def play_the_seed_turn(
    call: Callable[[int], Awaitable[CallToolResult]],
    after_first: Callable[[], Awaitable[None]] | None = None,
) -> list[CallToolResult]:
    results = []
    for index, round_number in enumerate(ROUNDS):
        results.append(await call(round_number))
        if index == 0 and after_first is not None:
            await after_first()
    return results


async def run_turn(
    invocations: Path,
    upstream_port: int,
    wrap: Callable[[ClientSession], Any],
    after_first: Callable[[], Awaitable[None]] | None = None,
    turn_span: Tracer | None = None,
) -> list[CallToolResult]:
    """Start the tool server over stdio and play the turn through ``wrap(session)``: with
    ``set_turn(TURN, ...)``, or (``turn_span``) without it, inside one span for the turn."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(TOOL_SERVER)],
        env={"INVOCATIONS_FILE": str(invocations), "UPSTREAM_PORT": str(upstream_port)},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        assert [t.name for t in tools.tools] == [TOOL]
        harness_session = wrap(session)

        async def call(round_number: int) -> CallToolResult:
            if isinstance(harness_session, BreakerSession) and turn_span is None:
                harness_session.set_turn(TURN, round_number)
            result = await harness_session.call_tool(TOOL, dict(ARGUMENTS))
            assert isinstance(result, CallToolResult)
            return result

        if turn_span is None:
            return await play_the_seed_turn(call, after_first)
        with turn_span.start_as_current_span("agent turn"):
            return await play_the_seed_turn(call, after_first)


def reached_the_tool(invocations: Path) -> int:
    return len(invocations.read_text().splitlines()) if invocations.exists() else 0


@pytest.fixture
def service() -> Iterator[tuple[ServiceThread, Decisions]]:
    decisions = Decisions()
    running = ServiceThread(make_config(), event_sinks=[decisions])
    yield running, decisions
    running.stop()


def test_without_mcp_breaker_every_call_reaches_the_dead_tool(tmp_path: Path) -> None:
    invocations = tmp_path / "invocations.txt"
    results = anyio.run(run_turn, invocations, closed_port(), lambda session: session)
    assert reached_the_tool(invocations) == len(ROUNDS) == 8
    assert all(r.is_error and "upstream MCP session is closed" in text_of(r) for r in results)


def test_with_mcp_breaker_one_call_reaches_the_dead_tool_and_seven_are_refused(
    tmp_path: Path, service: tuple[ServiceThread, Decisions]
) -> None:
    running, decisions = service
    invocations = tmp_path / "invocations.txt"
    provider = TracerProvider(resource=Resource.create({"service.name": HARNESS}))
    exporter = OTLPSpanExporter(endpoint=running.grpc_endpoint, insecure=True, timeout=10)
    provider.add_span_processor(PromptToolSpanProcessor(exporter))
    tracer = provider.get_tracer("e2e-harness")
    advisories = AdvisoryClient(
        f"{LOOPBACK}:{running.service.ports['advisories']}", harness=HARNESS
    )
    waited: list[float] = []
    try:
        assert advisories.wait_until_synced(20)

        async def wait_for_the_advisory() -> None:
            started = time.monotonic()
            deadline = started + ADVISORY_WAIT_S
            while not advisories.check(TURN, SERVER, TOOL, ARGUMENTS).refused:
                assert time.monotonic() < deadline, "the advisory never reached the mirror"
                await anyio.sleep(0.005)
            waited.append(time.monotonic() - started)

        results = anyio.run(
            run_turn,
            invocations,
            closed_port(),
            lambda session: BreakerSession(session, advisories, tracer, SERVER),
            wait_for_the_advisory,
        )
    finally:
        provider.shutdown()
        advisories.close()
    print(f"\nfailure returned → advisory in the harness's mirror: {waited[0] * 1000:.1f} ms")

    assert reached_the_tool(invocations) == 1
    first, *refused = results
    assert first.is_error and "upstream MCP session is closed" in text_of(first)
    assert len(refused) == 7
    for result in refused:
        text = text_of(result)
        assert result.is_error
        assert "unavailable" in text and f"`{TOOL}`" in text
        assert "upstream MCP session is closed" in text  # the recorded error, redacted
        assert f"{LOOPBACK}:" in text  # which upstream stays in the excerpt

    # mcp-breaker saw all eight: the failure, and seven refusals that count for nothing.
    wait_until(lambda: len(decisions.of_turn(TURN)) == 8, what="all eight calls at the service")
    failure, *refusals = decisions.of_turn(TURN)
    assert failure.call.outcome is Outcome.FAILED
    assert failure.call.failure_class is FailureClass.TRANSPORT
    assert failure.opened_block is not None
    assert [d.call.round for d in decisions.of_turn(TURN)] == list(ROUNDS)
    for decision in refusals:
        assert decision.call.outcome is Outcome.NEUTRAL
        assert decision.call.verdict.neutral_reason is NeutralReason.REFUSED_BY_ADVISORY
        assert not decision.dead_call  # refused by the harness: never made, never dead
        assert decision.call.fingerprint == failure.call.fingerprint


def test_a_harness_that_never_sets_the_turn_is_kept_from_repeats_by_its_trace(
    tmp_path: Path, service: tuple[ServiceThread, Decisions]
) -> None:
    """No set_turn, the turn in one span: the client takes the trace as the turn, as the
    service does, so the repeats are refused all the same."""
    running, decisions = service
    invocations = tmp_path / "invocations.txt"
    provider = TracerProvider(resource=Resource.create({"service.name": HARNESS}))
    exporter = OTLPSpanExporter(endpoint=running.grpc_endpoint, insecure=True, timeout=10)
    provider.add_span_processor(PromptToolSpanProcessor(exporter))
    tracer = provider.get_tracer("e2e-harness")
    advisories = AdvisoryClient(
        f"{LOOPBACK}:{running.service.ports['advisories']}", harness=HARNESS
    )
    turns: list[str] = []
    try:
        assert advisories.wait_until_synced(20)

        async def wait_for_the_advisory() -> None:
            turns.append(
                trace.format_trace_id(trace.get_current_span().get_span_context().trace_id)
            )
            deadline = time.monotonic() + ADVISORY_WAIT_S
            while not advisories.check(turns[0], SERVER, TOOL, ARGUMENTS).refused:
                assert time.monotonic() < deadline, "the advisory never reached the mirror"
                await anyio.sleep(0.005)

        results = anyio.run(
            run_turn,
            invocations,
            closed_port(),
            lambda session: BreakerSession(session, advisories, tracer, SERVER),
            wait_for_the_advisory,
            tracer,
        )
    finally:
        provider.shutdown()
        advisories.close()

    assert reached_the_tool(invocations) == 1
    assert [r.is_error for r in results] == [True] * 8
    assert all("unavailable" in text_of(r) for r in results[1:])
    wait_until(lambda: len(decisions.of_turn(turns[0])) == 8, what="all eight calls, one turn")
    failure, *refusals = decisions.of_turn(turns[0])
    assert failure.call.outcome is Outcome.FAILED
    assert all(d.call.verdict.neutral_reason is NeutralReason.REFUSED_BY_ADVISORY for d in refusals)
