"""analyze = enforcement: a recorded run, analysed, says what the same run enforced did.

    harness (this test)                                      tool server (subprocess)
    mcp.ClientSession ─ BreakerSession ─── stdio, MCP ─────▶ MCPServer: browser_navigate
                                                               └─▶ a closed port: isError
    record-only:  spans ─▶ a file ─▶ mcp-breaker analyze (its own process)
    enforced:     spans ─▶ mcp-breaker (ServiceThread) ─▶ advisories ─▶ the session's mirror

Two scenarios (``SCENARIOS``): the seed's turn (rounds 1, 5, 7, 7, 9, 9, 11, 11, the same
call) four times against a tool whose upstream is dead; and a live server whose one tool's
backend is dead and another's answers a typed failure in a success envelope, with
successes, corrected arguments and repeats, three turns. The mcp SDK's own spans (its
``initialize`` and ``tools/list`` outside any turn, its client span of every call made) are
recorded beside the harness's. Each is played once with ``BreakerSession`` in record-only
mode (``client=None``: every call reaches the tool), written to a Collector-style OTLP
file and analysed; and once enforced, against the running service, default settings.

**Tolerance: 0 calls.** The analysis's refused calls, and their split within a turn and
across turns, equal the enforced run's refusals call for call (the same turn and index),
and its seconds are the recorded durations of exactly the calls enforcement refused (to
the report's rounding, a millisecond).

The concession of tests/test_advisories_e2e.py, stated as plainly: after each call that
reached the tool, the enforced harness waits until the service has decided every call so
far and its mirror holds every advisory the service has published (a model round takes
seconds, the span-to-advisory path milliseconds; racing them would test the scheduler).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp.shared._otel
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult
from mcp_breaker_client import AdvisoryClient
from mcp_breaker_client.mcp_adapter import BreakerSession
from mcp_breaker_client.tracing import PromptToolSpanProcessor
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from processor.engines.breaker import CallDecision
from tests.offline_support import analyze_json
from tests.otlp_file import write_json_lines
from tests.support import LOOPBACK, ServiceThread, free_port, make_config, wait_until

HARNESS = "enforcement-harness"
SYNC_WAIT_S = 30.0  # a bound on waiting, not a measurement
WITHIN_SCOPES = frozenset({"turn_tool", "turn_call"})
SEED_URL = {"url": "https://artifacts.example.test/run/1539078028959944794"}


@dataclass(frozen=True)
class Scenario:
    """Turns of calls (round, tool, arguments) to one tool server over stdio."""

    name: str
    script: str  # the tool server, beside this file
    server: str  # the MCP server's name, as the harness names it
    env: Callable[[Path], dict[str, str]]  # the server's environment, from a scratch dir
    calls: tuple[tuple[int, str, dict[str, Any]], ...]  # one turn's
    turns: int


SCENARIOS = (
    # The seed's turn, four times: a dead upstream, the same call in every round.
    Scenario(
        "dead-upstream",
        "advisories_e2e_server.py",
        "playwright",
        lambda tmp: {"INVOCATIONS_FILE": str(tmp / "calls"), "UPSTREAM_PORT": str(free_port())},
        tuple((r, "browser_navigate", SEED_URL) for r in (1, 5, 7, 7, 9, 9, 11, 11)),
        4,
    ),
    # A live server with a dead backend behind one tool and a hidden failure behind
    # another: successes, corrected arguments, exact-call and tool circuits.
    Scenario(
        "billing",
        "blame_e2e_server.py",
        "billing",
        lambda tmp: {
            "INVOCATIONS_FILE": str(tmp / "calls"),
            "PID_FILE": str(tmp / "pid"),
            "BILLING_PORT": str(free_port()),
        },
        (
            (1, "get_weather", {"city": "Lyon"}),
            (1, "fetch_invoice", {"invoice_id": "inv-1"}),
            (2, "fetch_invoice", {"invoice_id": "inv-1"}),
            (2, "fetch_invoice", {"invoice_id": "inv-2"}),
            (3, "t3_queue_list", {"limit": 1, "threadId": "th-9"}),
            (3, "t3_queue_list", {"limit": 1, "threadId": "th-9"}),
            (4, "t3_queue_list", {"limit": 1}),
            (4, "get_weather", {"city": "Lyon"}),
        ),
        3,
    ),
)


@dataclass(frozen=True)
class Played:
    turn: str
    index: int  # the call's place in its turn
    span: ReadableSpan  # the harness's mcp.tool.call span
    refused: bool
    scope: str  # the refusing advisory's scope, "" when the call was made

    @property
    def seconds(self) -> float:
        assert self.span.start_time is not None and self.span.end_time is not None
        return (self.span.end_time - self.span.start_time) / 1e9


class _Route(SpanProcessor):
    """The mcp SDK's spans go to the global tracer provider: this sends them where the
    test playing says, and nowhere between tests."""

    def __init__(self) -> None:
        self.to: SpanProcessor | None = None

    def on_end(self, span: ReadableSpan) -> None:
        if self.to is not None:
            self.to.on_end(span)


ROUTE = _Route()


@pytest.fixture(scope="module", autouse=True)
def sdk_spans() -> Iterator[None]:
    """The SDK's tracer, for this module only: a global tracer provider would outlive it
    and record (and drop) the SDK spans of every later test's harness, whose server spans
    would then name a parent that never arrives."""
    provider = TracerProvider(resource=Resource.create({"service.name": HARNESS}))
    provider.add_span_processor(ROUTE)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mcp.shared._otel, "_tracer", provider.get_tracer("mcp-python-sdk"))
        yield
    provider.shutdown()


def turn_id(n: int) -> str:
    return f"turn-{n + 1}"


def reached(invocations: Path) -> int:
    return len(invocations.read_text().splitlines()) if invocations.exists() else 0


async def play(
    scenario: Scenario,
    session_of: Callable[[ClientSession], BreakerSession],
    tmp: Path,
    after_made: Callable[[], None],
) -> list[CallToolResult]:
    tmp.mkdir()
    env = scenario.env(tmp)
    params = StdioServerParameters(
        command=sys.executable, args=[str(Path(__file__).with_name(scenario.script))], env=env
    )
    invocations = Path(env["INVOCATIONS_FILE"])
    results = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        harness = session_of(session)
        for n in range(scenario.turns):
            for round_number, tool, arguments in scenario.calls:
                harness.set_turn(turn_id(n), round_number)
                made = reached(invocations)
                results.append(await harness.call_tool(tool, dict(arguments)))
                if reached(invocations) > made:
                    after_made()
    return results


def harness_spans(memory: InMemorySpanExporter) -> list[ReadableSpan]:
    return sorted(
        (s for s in memory.get_finished_spans() if s.name == "mcp.tool.call"),
        key=lambda s: s.start_time or 0,
    )


def played(memory: InMemorySpanExporter) -> list[Played]:
    out = []
    counts: dict[str, int] = {}
    for span in harness_spans(memory):
        attributes = dict(span.attributes or {})
        turn = str(attributes["mcp.turn.id"])
        index = counts[turn] = counts.get(turn, -1) + 1
        advisory = str(attributes.get("mcp.breaker.advisory", ""))
        refused = bool(attributes.get("mcp.breaker.refused", False))
        # Advisory ids: "{tenant}|{scope}|..." from the service, "local|{scope}|..." noted.
        out.append(Played(turn, index, span, refused, advisory.split("|")[1] if refused else ""))
    return out


def record_only(scenario: Scenario, tmp: Path) -> tuple[list[Played], Path]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": HARNESS}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    ROUTE.to = SimpleSpanProcessor(memory)
    try:
        anyio.run(
            play,
            scenario,
            lambda s: BreakerSession(s, None, provider.get_tracer(HARNESS), scenario.server),
            tmp / "recorded",
            lambda: None,
        )
    finally:
        ROUTE.to = None
        provider.shutdown()
    spans = sorted(memory.get_finished_spans(), key=lambda s: s.end_time or 0)
    return played(memory), write_json_lines(tmp / "recorded.json", [spans])


class Decided:
    def __init__(self) -> None:
        self.items: list[CallDecision] = []
        self._lock = threading.Lock()

    def __call__(self, finding: object) -> None:
        if isinstance(finding, CallDecision) and not finding.late:
            with self._lock:
                self.items.append(finding)

    def __len__(self) -> int:
        with self._lock:
            return len(self.items)


def enforced(scenario: Scenario, tmp: Path) -> list[Played]:
    decided = Decided()
    running = ServiceThread(make_config(), event_sinks=[decided])
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": HARNESS}))
    exporter = OTLPSpanExporter(endpoint=running.grpc_endpoint, insecure=True, timeout=10)
    prompt = PromptToolSpanProcessor(exporter)
    provider.add_span_processor(prompt)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    ROUTE.to = prompt
    advisories = AdvisoryClient(
        f"{LOOPBACK}:{running.service.ports['advisories']}", harness=HARNESS
    )
    hub = running.service.advisories.hub

    def in_step() -> None:
        # Every harness call so far decided at the service (refusals too: they are spans),
        # then every advisory it published in the mirror. The advisories hear of a decision
        # before the test's sink does (server.py), so the hub's seq is read after it.
        calls = len(harness_spans(memory))
        wait_until(lambda: len(decided) >= calls, timeout_s=SYNC_WAIT_S, what="the decisions")
        seq = hub.seq
        deadline = time.monotonic() + SYNC_WAIT_S
        while advisories.position[1] < seq:
            assert time.monotonic() < deadline, "the mirror never caught up"
            time.sleep(0.005)

    try:
        assert advisories.wait_until_synced(20)
        anyio.run(
            play,
            scenario,
            lambda s: BreakerSession(s, advisories, provider.get_tracer(HARNESS), scenario.server),
            tmp / "enforced",
            in_step,
        )
    finally:
        ROUTE.to = None
        provider.shutdown()
        advisories.close()
        running.stop()
    return played(memory)


Runs = tuple[Scenario, list[Played], Path, list[Played]]


@pytest.fixture(scope="module", params=SCENARIOS, ids=[s.name for s in SCENARIOS])
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    scenario: Scenario = request.param
    tmp = tmp_path_factory.mktemp(scenario.name)
    recorded, path = record_only(scenario, tmp)
    return scenario, recorded, path, enforced(scenario, tmp)


def test_the_runs_are_the_same_traffic(runs: Runs) -> None:
    scenario, recorded, _, enforcement = runs
    assert [(p.turn, p.index) for p in recorded] == [(p.turn, p.index) for p in enforcement]
    assert len(recorded) == scenario.turns * len(scenario.calls)
    assert not any(p.refused for p in recorded)
    assert any(p.scope in WITHIN_SCOPES for p in enforcement)  # both kinds happened
    assert any(p.refused and p.scope not in WITHIN_SCOPES for p in enforcement)


def test_analyze_refuses_what_enforcement_refused(runs: Runs) -> None:
    _, recorded, path, enforcement = runs
    report = analyze_json(str(path))
    c = report["counterfactual"]
    refused = [p for p in enforcement if p.refused]
    within = [p for p in refused if p.scope in WITHIN_SCOPES]
    print(
        f"\nenforced: {len(refused)} refused ({len(within)} within, "
        f"{len(refused) - len(within)} across); analyze: {c['would_refuse']['count']} "
        f"({c['within_turns']['count']} within, {c['across_turns']['count']} across)"
    )
    assert c["would_refuse"]["count"] == len(refused)
    assert c["within_turns"]["count"] == len(within)
    assert c["across_turns"]["count"] == len(refused) - len(within)
    # The very calls: the recorded spans analyze names are those enforcement refused.
    by_place = {(p.turn, p.index): p for p in recorded}
    spared = [by_place[(p.turn, p.index)] for p in refused]
    span_ids = {format(p.span.context.span_id, "016x") for p in spared}
    listed = {i["span_id"] for i in c["would_refuse"]["ids"]}
    assert listed <= span_ids and len(listed) == min(len(span_ids), 20)
    assert c["would_refuse"]["seconds"] == pytest.approx(sum(p.seconds for p in spared), abs=1e-3)
    within_s = sum(by_place[(p.turn, p.index)].seconds for p in within)
    assert c["within_turns"]["seconds"] == pytest.approx(within_s, abs=1e-3)
    assert c["dead_calls_in_flight"]["count"] == 0  # one call at a time: none in flight


def test_analyze_counts_the_turns_the_harness_played(runs: Runs) -> None:
    scenario, recorded, path, _ = runs
    report = analyze_json(str(path))
    # The mcp SDK's spans of each call are paired with the harness's, not counted again;
    # the session's initialize and tools/list trace is no turn.
    assert report["calls"]["calls"] == len(recorded)
    assert report["turns"]["total"] == scenario.turns
    assert report["counterfactual"]["model_rounds_saved"] is not None
