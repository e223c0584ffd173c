"""A call counts once whichever process exports its half first, end to end with real parts.

    harness (this test)                                 tool server (subprocess)
    mcp.ClientSession ─ BreakerSession ── stdio, MCP ──▶ MCPServer "billing" (names no server)
      │ mcp.tool.call spans (server "billing",            │ tools/call spans, parent: the
      │ turn, arguments): batched or prompt               │ caller's span; Simple or Batch
      ▼                                                   ▼ span processor
    OTLP/gRPC ──────────────────▶ mcp-breaker (ServiceThread) ◀──────────── OTLP/gRPC
                                    │ /metrics, GetState, status
    AdvisoryClient mirror ◀─ Subscribe

Both halves of every call reach the service, in the order their exporters send them: a
server exporting each span as it ends (``SimpleSpanProcessor``) delivers its half before
the harness's batch; a batching server, after the harness's prompt span. Either way each
call is counted once, under the server the harness names, and the dead tool opens one
circuit, ``billing/fetch_invoice``: never a second one for a server nobody named.

The official ``mcp`` SDK 2.x on both sides (tests/pairing_e2e_server.py), the real
OpenTelemetry SDK and its OTLP exporter in both processes, the client library's adapter
and mirror. With ``sdk_spans`` the harness also records the SDK's own client span under
its ``mcp.tool.call`` span (as a harness with a global tracer provider does): three spans
per call, from two processes.
"""

from __future__ import annotations

import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import anyio
import mcp.shared._otel
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent
from mcp_breaker_client import AdvisoryClient
from mcp_breaker_client.mcp_adapter import BreakerSession
from mcp_breaker_client.tracing import PromptToolSpanProcessor
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from prometheus_client.parser import text_string_to_metric_families

from processor.advisories.status import fetch, status
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

TOOL_SERVER = Path(__file__).with_name("pairing_e2e_server.py")
HARNESS = "pairing-harness"
SERVER = "billing"
TURNS = 6
FAILURES_TO_OPEN = 3  # breaker.consecutive_failures
# Short batch delays keep the test quick; the pairing window still spans both.
HARNESS_BATCH_MS = 300
SERVER_BATCH_MS = 1_000
PAIR_WAIT_S = 5
WAIT_S = 30.0  # a bound on waiting, not a measurement
TOOL_CALLS = "mcp_breaker_tool_calls_total"
TOOL_CIRCUIT = CircuitKey(Scope.TOOL, f"{SERVER}/fetch_invoice")


@dataclass(frozen=True, kw_only=True)
class Export:
    server: str  # the tool server's span processor: "simple" or "batch"
    harness: str  # the harness's: "batch" (BatchSpanProcessor) or "prompt"
    sdk_spans: bool = False  # the harness records the mcp SDK's client spans too


EXPORTS = [
    pytest.param(Export(server="simple", harness="batch"), id="prompt server, batched harness"),
    pytest.param(Export(server="simple", harness="prompt"), id="prompt server, prompt harness"),
    pytest.param(Export(server="batch", harness="prompt"), id="batched server, prompt harness"),
    pytest.param(Export(server="batch", harness="batch"), id="batched server, batched harness"),
    pytest.param(
        Export(server="simple", harness="batch", sdk_spans=True),
        id="prompt server, batched harness with SDK spans",
    ),
    pytest.param(
        Export(server="simple", harness="prompt", sdk_spans=True),
        id="prompt server, prompt harness with SDK spans",
    ),
]


def text_of(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


def reached(invocations: Path, tool: str) -> int:
    if not invocations.exists():
        return 0
    return invocations.read_text().splitlines().count(tool)


def scraped_tool_calls(port: int) -> dict[tuple[str, str, str, str], float]:
    """``mcp_breaker_tool_calls_total`` as Prometheus would scrape it, every series > 0."""
    with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    found: dict[tuple[str, str, str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == TOOL_CALLS and sample.value > 0:
                labels = sample.labels
                key = (labels["server"], labels["tool"], labels["outcome"], labels["failure_class"])
                found[key] = sample.value
    return found


def server_call_spans(next_hop: CaptureCollector) -> list[Span]:
    return [
        span
        for span in next_hop.spans()
        if span.kind == Span.SPAN_KIND_SERVER and span.name.startswith("tools/call")
    ]


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as exits:
        yield exits


@pytest.mark.parametrize("export", EXPORTS)
def test_each_call_counts_once_under_the_harness_server_in_every_export_order(
    export: Export, tmp_path: Path, stack: ExitStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    decisions = Decisions()
    next_hop = CaptureCollector().start()
    stack.callback(next_hop.stop)
    service = ServiceThread(
        make_config(f"forward.endpoint={next_hop.endpoint}", f"classify.pair_wait_s={PAIR_WAIT_S}"),
        event_sinks=[decisions],
    )
    stack.callback(service.stop)
    advisories_target = f"{LOOPBACK}:{service.service.ports['advisories']}"

    provider = TracerProvider(resource=Resource.create({"service.name": HARNESS}))
    exporter = OTLPSpanExporter(endpoint=service.grpc_endpoint, insecure=True, timeout=10)
    if export.harness == "prompt":
        provider.add_span_processor(PromptToolSpanProcessor(exporter))
    else:
        provider.add_span_processor(
            BatchSpanProcessor(exporter, schedule_delay_millis=HARNESS_BATCH_MS)
        )
    stack.callback(provider.shutdown)
    if export.sdk_spans:
        # What a global tracer provider in the harness's process gives the SDK's own spans.
        monkeypatch.setattr(mcp.shared._otel, "_tracer", provider.get_tracer("mcp-python-sdk"))
    mirror = AdvisoryClient(advisories_target, harness=HARNESS)
    stack.callback(mirror.close)
    assert mirror.wait_until_synced(20)

    invocations = tmp_path / "invocations.txt"
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(TOOL_SERVER)],
        env={
            "INVOCATIONS_FILE": str(invocations),
            "BILLING_PORT": str(closed_port()),
            "OTLP_ENDPOINT": service.grpc_endpoint,
            "SPAN_PROCESSOR": export.server,
            "BATCH_DELAY_MS": str(SERVER_BATCH_MS),
        },
    )
    refused_from: list[int] = []

    async def until(what: str, holds: Callable[[], bool]) -> None:
        deadline = time.monotonic() + WAIT_S
        while not holds():
            assert time.monotonic() < deadline, f"never: {what}"
            await anyio.sleep(0.01)

    async def play() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            harness = BreakerSession(session, mirror, provider.get_tracer(HARNESS), SERVER)
            for turn in range(1, TURNS + 1):
                harness.set_turn(f"turn-{turn}", 1)
                weather = await harness.call_tool("get_weather", {"city": "Paris"})
                assert not weather.is_error
                invoice = await harness.call_tool("fetch_invoice", {"invoice_id": f"inv-{turn}"})
                assert invoice.is_error
                if "unavailable" in text_of(invoice):
                    refused_from.append(turn)
                    continue
                # As a model round would, give the service time to decide the failure
                # (and, once the circuit opens, its advisory time to reach the mirror).
                await until(
                    f"the decision of turn {turn}",
                    lambda t=turn: len(decisions.of_tool("fetch_invoice")) >= t,
                )
                circuit = service.service.breaker.circuits.peek(TOOL_CIRCUIT)
                if circuit is not None and circuit.state is State.OPEN:
                    await until(
                        "the tool's advisory in the mirror",
                        lambda: mirror.check("next", SERVER, "fetch_invoice").refused,
                    )

    anyio.run(play)  # the session ends: the server process flushes its spans and exits
    assert provider.force_flush(10_000)

    made = TURNS + FAILURES_TO_OPEN  # the calls that reached the tool server
    assert (reached(invocations, "get_weather"), reached(invocations, "fetch_invoice")) == (
        TURNS,
        FAILURES_TO_OPEN,
    )
    assert refused_from == list(range(FAILURES_TO_OPEN + 1, TURNS + 1))
    # Every half of every call has arrived, and none is still held for its other half.
    wait_until(lambda: len(server_call_spans(next_hop)) == made, WAIT_S, "the server's spans")
    pipeline = service.service.pipeline
    wait_until(lambda: pipeline.classifier.pending_calls == 0, WAIT_S, "no call held")

    expected = {
        (SERVER, "get_weather", "ok", ""): TURNS,
        (SERVER, "fetch_invoice", "failed", "tool_error"): FAILURES_TO_OPEN,
        (SERVER, "fetch_invoice", "refused", ""): TURNS - FAILURES_TO_OPEN,
    }
    # A new counter series is scraped at zero first (docs/metrics.md): scrape until each
    # shows its count. Every half is in and none held: nothing more can be counted.
    port = service.service.ports["telemetry"]
    wait_until(lambda: set(scraped_tool_calls(port)) >= set(expected), WAIT_S, "every series")
    assert scraped_tool_calls(port) == expected
    told = decisions.all()
    assert len(told) == 2 * TURNS
    assert {(d.call.server, d.call.turn) for d in told} == {
        (SERVER, f"turn-{turn}") for turn in range(1, TURNS + 1)
    }
    assert all(d.call.fingerprint is not None for d in told)  # the harness's arguments

    # One circuit for the dead tool, and nothing for a server nobody named.
    circuits = {c.key for c in service.service.breaker.circuits.values()}
    assert TOOL_CIRCUIT in circuits
    assert all(key.name.startswith(SERVER) for key in circuits), circuits
    state = fetch(advisories_target)
    across_turns = [a for a in state.advisories if a.scope in (pb.SCOPE_TOOL, pb.SCOPE_SERVER)]
    assert [(a.scope, a.server, a.tool) for a in across_turns] == [
        (pb.SCOPE_TOOL, SERVER, "fetch_invoice")
    ]
    assert {a.server for a in state.advisories} == {SERVER}
    table = status(advisories_target, token=None, ca_file=None, width=200)
    assert "fetch_invoice" in table and "-/fetch_invoice" not in table
