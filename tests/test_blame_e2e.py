"""A dead tool on a live server, end to end with real parts: the right thing is blamed.

    harness (this test)                                    tool server (subprocess)
    mcp.ClientSession ─ BreakerSession ─── stdio, MCP ───▶ MCPServer "billing":
         │ mcp.tool.call spans (PromptToolSpanProcessor)     get_weather: works
         ▼                                                   fetch_invoice: its backend is down
    OTLP/gRPC ─▶ mcp-breaker (ServiceThread) ─▶ next hop      t3_queue_list: the T3 seed's
    AdvisoryClient mirror ◀── Subscribe ◀── advisories          typed failure, isError false

The official ``mcp`` SDK 2.x on both sides (tests/blame_e2e_server.py), the real
OpenTelemetry SDK exporting to the running service, the client library's adapter and
mirror. As in tests/test_advisories_e2e.py, after a call whose failure should raise an
advisory the harness waits until its mirror holds it before the next call: a model round
takes seconds, a test loop microseconds; the wait is bounded, never measured.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from mcp_breaker_client import AdvisoryClient
from mcp_breaker_client.mcp_adapter import BreakerSession, record_result
from mcp_breaker_client.shared.verdict import FailureClass
from mcp_breaker_client.tracing import PromptToolSpanProcessor, record_tool_call
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from processor.advisories.v1 import advisories_pb2 as pb
from processor.engines.circuit import CircuitKey, Scope, State
from tests.support import (
    LOOPBACK,
    CaptureCollector,
    Decisions,
    ServiceThread,
    make_config,
    wait_until,
)
from tests.test_advisories_e2e import closed_port

TOOL_SERVER = Path(__file__).with_name("blame_e2e_server.py")
HARNESS = "blame-harness"
SERVER = "billing"
TURNS = 6
ADVISORY_WAIT_S = 30.0  # a bound on waiting, not a measurement
TOOL_CIRCUIT = CircuitKey(Scope.TOOL, f"{SERVER}/fetch_invoice")
SERVER_CIRCUIT = CircuitKey(Scope.SERVER, SERVER)


class Rig:
    """The service, its next hop, the harness's tracer and (optionally) its mirror."""

    def __init__(self, stack: ExitStack, *, with_advisories: bool) -> None:
        self.decisions = Decisions()
        self.next_hop = CaptureCollector().start()
        stack.callback(self.next_hop.stop)
        self.service = ServiceThread(
            make_config(f"forward.endpoint={self.next_hop.endpoint}"),
            event_sinks=[self.decisions],
        )
        stack.callback(self.service.stop)
        provider = TracerProvider(resource=Resource.create({"service.name": HARNESS}))
        exporter = OTLPSpanExporter(endpoint=self.service.grpc_endpoint, insecure=True, timeout=10)
        provider.add_span_processor(PromptToolSpanProcessor(exporter))
        self.recorded = InMemorySpanExporter()  # what the harness wrote, as it wrote it
        provider.add_span_processor(SimpleSpanProcessor(self.recorded))
        stack.callback(provider.shutdown)
        self.tracer: Tracer = provider.get_tracer("blame-harness")
        self.advisories: AdvisoryClient | None = None
        if with_advisories:
            endpoint = f"{LOOPBACK}:{self.service.service.ports['advisories']}"
            self.advisories = AdvisoryClient(endpoint, harness=HARNESS)
            stack.callback(self.advisories.close)
            assert self.advisories.wait_until_synced(20)

    def circuit(self, key: CircuitKey) -> State:
        circuit = self.service.service.breaker.circuits.peek(key)
        return circuit.state if circuit is not None else State.CLOSED

    def held(self, scope: int) -> list[pb.Advisory]:
        assert self.advisories is not None
        return [a for a in self.advisories.advisories() if a.scope == scope]

    async def until_mirror(self, what: str, holds: Callable[[], bool]) -> None:
        deadline = time.monotonic() + ADVISORY_WAIT_S
        while not holds():
            assert time.monotonic() < deadline, f"the mirror never held {what}"
            await anyio.sleep(0.005)


def tool_server(tmp: Path) -> tuple[StdioServerParameters, Path, Path]:
    invocations, pid = tmp / "invocations.txt", tmp / "server.pid"
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(TOOL_SERVER)],
        env={
            "INVOCATIONS_FILE": str(invocations),
            "PID_FILE": str(pid),
            "BILLING_PORT": str(closed_port()),
        },
    )
    return params, invocations, pid


def reached(invocations: Path, tool: str) -> int:
    if not invocations.exists():
        return 0
    return sum(1 for line in invocations.read_text().splitlines() if line.split("\t")[0] == tool)


def text_of(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def with_session(
    params: StdioServerParameters, play: Callable[[ClientSession], Awaitable[Any]]
) -> Any:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await play(session)


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as exits:
        yield exits


def test_the_dead_tool_is_refused_up_front_and_its_healthy_sibling_never(
    tmp_path: Path, stack: ExitStack
) -> None:
    rig = Rig(stack, with_advisories=True)
    assert rig.advisories is not None
    mirror = rig.advisories
    params, invocations, _ = tool_server(tmp_path)
    refused_from: list[int] = []

    async def play(session: ClientSession) -> None:
        harness = BreakerSession(session, mirror, rig.tracer, SERVER)
        for turn in range(1, TURNS + 1):
            harness.set_turn(f"turn-{turn}", 1)
            weather = await harness.call_tool("get_weather", {"city": "Paris"})
            assert not weather.is_error and text_of(weather) == "sunny in Paris"
            invoice = await harness.call_tool("fetch_invoice", {"invoice_id": f"inv-{turn}"})
            assert invoice.is_error
            if "unavailable" in text_of(invoice):
                refused_from.append(turn)
                continue
            # Its span went out at once; let the service decide it before the next turn
            # (and, once the tool's circuit opens, its advisory reach the mirror).
            await rig.until_mirror(
                f"the decision of turn {turn}",
                lambda t=turn: len(rig.decisions.of_tool("fetch_invoice")) >= t,
            )
            if rig.circuit(TOOL_CIRCUIT) is State.OPEN:
                await rig.until_mirror("the tool's advisory", lambda: bool(rig.held(pb.SCOPE_TOOL)))

    anyio.run(with_session, params, play)

    # Refused up front from the turn after its circuit opened: three failures in a row
    # (breaker.consecutive_failures) open it in turn 3; turns 4 to 6 never reach it.
    assert refused_from == [4, 5, 6]
    assert reached(invocations, "fetch_invoice") == 3
    assert reached(invocations, "get_weather") == TURNS  # never refused
    assert rig.circuit(TOOL_CIRCUIT) is State.OPEN
    assert rig.circuit(SERVER_CIRCUIT) is State.CLOSED
    assert rig.held(pb.SCOPE_SERVER) == []
    (tool_advisory,) = rig.held(pb.SCOPE_TOOL)
    assert (tool_advisory.server, tool_advisory.tool) == (SERVER, "fetch_invoice")
    invoice_failures = [
        d for d in rig.decisions.of_tool("fetch_invoice") if d.call.outcome.value == "failed"
    ]
    assert len(invoice_failures) == 3
    assert all(
        d.call.verdict.origin is not None and d.call.verdict.origin.value == "tool"
        for d in invoice_failures
    )
    service = rig.service
    labels = {"server": SERVER, "tool": "fetch_invoice"}
    wait_until(
        lambda: (
            service.metric(
                "mcp_breaker_tool_calls_total", **labels, outcome="refused", failure_class=""
            )
            == 3
        ),
        what="the refusals counted apart",
    )
    assert (
        service.metric(
            "mcp_breaker_tool_calls_total", **labels, outcome="failed", failure_class="tool_error"
        )
        == 3
    )


def test_with_no_advisories_the_forwarded_spans_say_the_same(
    tmp_path: Path, stack: ExitStack
) -> None:
    """The harness records its mcp.tool.call spans and heeds nothing: every call reaches
    the tools, and the spans in the tracing backend say which were dead calls."""
    rig = Rig(stack, with_advisories=False)
    params, invocations, _ = tool_server(tmp_path)
    spans: dict[str, list[bytes]] = {"get_weather": [], "fetch_invoice": []}

    async def call(session: ClientSession, turn: int, tool: str, arguments: dict[str, Any]) -> None:
        with record_tool_call(
            rig.tracer,
            tool=tool,
            server=SERVER,
            turn_id=f"turn-{turn}",
            round_number=1,
            arguments=arguments,
        ) as record:
            spans[tool].append(record.span.get_span_context().span_id.to_bytes(8, "big"))
            record_result(record, await session.call_tool(tool, arguments))

    async def play(session: ClientSession) -> None:
        for turn in range(1, TURNS + 1):
            await call(session, turn, "get_weather", {"city": "Paris"})
            await call(session, turn, "fetch_invoice", {"invoice_id": f"inv-{turn}"})
            await rig.until_mirror(
                f"the decision of turn {turn}",
                lambda t=turn: len(rig.decisions.of_tool("fetch_invoice")) >= t,
            )

    anyio.run(with_session, params, play)
    assert reached(invocations, "fetch_invoice") == TURNS  # nothing heeded
    wait_until(lambda: rig.next_hop.span_count() >= 2 * TURNS, what="the spans downstream")
    forwarded = {s.span_id: {kv.key: kv.value for kv in s.attributes} for s in rig.next_hop.spans()}
    dead = [forwarded[span]["mcp.breaker.dead_call"].bool_value for span in spans["fetch_invoice"]]
    assert dead == [False, False, False, True, True, True]
    for span in spans["fetch_invoice"][3:]:
        assert forwarded[span]["mcp.breaker.rule"].string_value == "tool"
        assert forwarded[span]["mcp.breaker.state"].string_value == "open"
    assert all(
        forwarded[span]["mcp.breaker.dead_call"].bool_value is False
        for span in spans["get_weather"]
    )


def test_a_server_that_dies_is_refused_for_every_tool_with_one_server_advisory(
    tmp_path: Path, stack: ExitStack
) -> None:
    rig = Rig(stack, with_advisories=True)
    assert rig.advisories is not None
    mirror = rig.advisories
    params, invocations, pid_file = tool_server(tmp_path)
    tools = ("get_weather", "fetch_invoice", "t3_queue_list")
    arguments = {
        "get_weather": {"city": "Paris"},
        "fetch_invoice": {"invoice_id": "inv-9"},
        "t3_queue_list": {"limit": 1},
    }
    raised: list[str] = []
    after: dict[str, CallToolResult] = {}

    async def play(session: ClientSession) -> None:
        harness = BreakerSession(session, mirror, rig.tracer, SERVER)
        harness.set_turn("turn-1", 1)
        assert not (await harness.call_tool("get_weather", arguments["get_weather"])).is_error
        os.kill(int(pid_file.read_text()), signal.SIGKILL)  # the MCP server process dies
        for turn, tool in enumerate(tools, start=2):
            harness.set_turn(f"turn-{turn}", 1)
            try:
                await harness.call_tool(tool, arguments[tool])
            except MCPError as error:
                raised.append(str(error))
            await rig.until_mirror(
                f"the decision of turn {turn}", lambda t=tool: len(rig.decisions.of_tool(t)) >= 1
            )
        await rig.until_mirror("the server's advisory", lambda: bool(rig.held(pb.SCOPE_SERVER)))
        harness.set_turn("turn-9", 1)
        for tool in (*tools, "a_tool_never_called"):
            after[tool] = await harness.call_tool(tool, arguments.get(tool, {}))

    anyio.run(with_session, params, play)

    assert raised == ["Connection closed"] * 3
    session_failures = [
        d for t in tools for d in rig.decisions.of_tool(t) if d.call.outcome.value == "failed"
    ]
    assert {d.call.failure_class for d in session_failures} == {FailureClass.TRANSPORT}
    assert {d.call.verdict.origin.value for d in session_failures if d.call.verdict.origin} == {
        "session"
    }
    assert rig.circuit(SERVER_CIRCUIT) is State.OPEN
    for tool, result in after.items():  # refused from the mirror, the dead session untouched
        assert result.is_error and "unavailable" in text_of(result), tool
        assert f"MCP server `{SERVER}`" in text_of(result)
    (server_advisory,) = rig.held(pb.SCOPE_SERVER)
    assert server_advisory.server == SERVER
    assert reached(invocations, "get_weather") == 1


def test_the_t3_typed_failure_through_the_adapter_is_hidden_and_its_repeat_refused(
    tmp_path: Path, stack: ExitStack
) -> None:
    rig = Rig(stack, with_advisories=True)
    assert rig.advisories is not None
    mirror = rig.advisories
    params, invocations, _ = tool_server(tmp_path)
    bad = {"threadId": "00000000-0000-4000-8000-000000000000", "limit": 1}
    results: list[CallToolResult] = []

    async def play(session: ClientSession) -> None:
        harness = BreakerSession(session, mirror, rig.tracer, SERVER)
        harness.set_turn("turn-t3", 1)
        results.append(await harness.call_tool("t3_queue_list", dict(bad)))
        await rig.until_mirror("the call block", lambda: bool(rig.held(pb.SCOPE_TURN_CALL)))
        harness.set_turn("turn-t3", 2)
        results.append(await harness.call_tool("t3_queue_list", dict(bad)))  # the same call
        results.append(await harness.call_tool("t3_queue_list", {"limit": 1}))  # corrected

    anyio.run(with_session, params, play)

    first, repeat, corrected = results
    assert first.is_error is False  # what the tool said: the adapter passes it on as it is
    assert repeat.is_error and "already failed in this turn" in text_of(repeat)
    assert "OrchestratorMcpFailure" in text_of(repeat)
    assert corrected.is_error is False and "nextCursor" in text_of(corrected)
    assert reached(invocations, "t3_queue_list") == 2  # the repeat never reached the tool
    (decision, *_) = rig.decisions.of_tool("t3_queue_list")
    assert decision.call.failure_class is FailureClass.HIDDEN
    assert decision.call.verdict.error_excerpt == (
        "OrchestratorMcpFailure (orchestration_error): The operation could not be completed."
    )
    # The harness's span records the typed failure's identifying fields, nothing else.
    (written, *_) = [
        s for s in rig.recorded.get_finished_spans() if "mcp.tool.result" in (s.attributes or {})
    ]
    assert written.attributes is not None
    assert json.loads(str(written.attributes["mcp.tool.result"])) == {
        "_tag": "OrchestratorMcpFailure",
        "code": "orchestration_error",
        "message": "The operation could not be completed.",
    }
