"""Roster health through the running service, from real OTLP spans (the OTel SDK).

The sirens-echo seed's 25 listings, as the old instrument wrote them (no ``unavailable``
or ``registered``: the 21 cached ones are ambiguous) and as the fixed one does (they are
warm); its 86 -> 0 -> 86 turn; a Gitea-Tools namespace case; and malformed counts.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from processor.engines.roster import ListingState, RosterFinding
from tests.sdk import RESOURCE, export_grpc
from tests.support import CaptureCollector, ServiceThread, make_config, wait_until

# (configured, listed, reached, cached) and how many listings had it, from the seed.
SEED_LISTINGS = [
    ((12, 0, 0, True), 13),
    ((11, 0, 0, True), 8),
    ((11, 11, 11, False), 3),
    ((12, 12, 12, False), 1),
]
OFFERED_BY_ROUND = [(1, 86), (3, 86), (5, 86), (7, 86), (9, 0), (11, 0), (13, 86)]
BASE_NS = 1_787_011_200_000_000_000  # 2026-08-18 00:00 UTC


def listing_spans(listings: list[Mapping[str, Any]]) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("sirens-echo.harness", "943")
    for i, attributes in enumerate(listings):
        start = BASE_NS + i * 7_000_000_000
        span = tracer.start_span("mcp.tools.list", start_time=start)
        span.set_attributes(dict(attributes))
        span.end(end_time=start + 50_000_000)
    provider.shutdown()
    return list(memory.get_finished_spans())


def seed_listings(*, fixed: bool) -> list[dict[str, Any]]:
    listings = []
    for (configured, listed, reached, cached), count in SEED_LISTINGS:
        attributes: dict[str, Any] = {
            "mcp.tools.configured": configured,
            "mcp.tools.listed": listed,
            "mcp.tools.reached": reached,
            "mcp.tools.cached": cached,
        }
        if fixed:
            attributes["mcp.tools.unavailable"] = 0
            attributes["mcp.tools.registered"] = configured
        listings += [
            dict(attributes, **{"mcp.turn.id": f"t{len(listings) + k}"}) for k in range(count)
        ]
    return listings


class Findings:
    def __init__(self) -> None:
        self.items: list[RosterFinding] = []
        self._lock = threading.Lock()

    def __call__(self, finding: object) -> None:
        if isinstance(finding, RosterFinding):
            with self._lock:
                self.items.append(finding)

    def __len__(self) -> int:
        with self._lock:
            return len(self.items)


@pytest.fixture
def running(next_hop: CaptureCollector) -> Iterator[tuple[ServiceThread, Findings]]:
    findings = Findings()
    service = ServiceThread(
        make_config(f"forward.endpoint={next_hop.endpoint}"), event_sinks=[findings]
    )
    yield service, findings
    service.stop()


def forwarded_attributes(next_hop: CaptureCollector) -> dict[bytes, dict[str, Any]]:
    out = {}
    for span in next_hop.spans():
        values = {}
        for kv in span.attributes:
            which = kv.value.WhichOneof("value")
            values[kv.key] = getattr(kv.value, which) if which else None
        out[span.span_id] = values
    return out


@pytest.mark.parametrize(
    ("fixed", "cached_state"),
    [(False, ListingState.AMBIGUOUS), (True, ListingState.WARM)],
    ids=[
        "old instrument: the 21 cached listings are ambiguous",
        "fixed instrument: the 21 cached listings are warm",
    ],
)
def test_the_seed_listings(
    running: tuple[ServiceThread, Findings],
    next_hop: CaptureCollector,
    fixed: bool,
    cached_state: ListingState,
) -> None:
    service, findings = running
    export_grpc(service.grpc_endpoint, listing_spans(seed_listings(fixed=fixed)))
    wait_until(lambda: len(findings) == 25)
    states = [f.state for f in findings.items]
    assert states.count(cached_state) == 21
    assert states.count(ListingState.COLD) == 4
    if not fixed:
        assert all(
            f.missing_attributes == ("unavailable", "registered")
            for f in findings.items
            if f.state is ListingState.AMBIGUOUS
        )
    wait_until(lambda: len(next_hop.spans()) == 25)
    written = [a["mcp.roster.state"] for a in forwarded_attributes(next_hop).values()]
    assert sorted(written) == sorted(s.value for s in states)


def test_the_86_0_86_turn_is_one_collapse(
    running: tuple[ServiceThread, Findings], next_hop: CaptureCollector
) -> None:
    service, findings = running
    listings = [
        {
            "mcp.tools.configured": 12,
            "mcp.tools.registered": 12,
            "mcp.tools.unavailable": 0,
            "mcp.tools.reached": 0,
            "mcp.tools.cached": True,
            "mcp.tools.offered": offered,
            "mcp.turn.id": "1539078028959944794",
            "mcp.turn.round": round_,
        }
        for round_, offered in OFFERED_BY_ROUND
    ]
    export_grpc(service.grpc_endpoint, listing_spans(listings))
    wait_until(lambda: len(findings) == len(OFFERED_BY_ROUND))
    collapses = [f.collapse for f in findings.items if f.collapse is not None]
    assert {(c.from_round, c.offered_before) for c in collapses} == {(9, 86)}  # one collapse
    final = collapses[-1]
    assert (final.from_round, final.to_round, final.recovered_round) == (9, 11, 13)
    by_round = {f.listing.round: f for f in findings.items}
    assert by_round[9].state is ListingState.COLLAPSED
    assert by_round[13].state is ListingState.WARM
    wait_until(lambda: len(next_hop.spans()) == len(OFFERED_BY_ROUND))
    marked = [a for a in forwarded_attributes(next_hop).values() if "mcp.roster.collapse" in a]
    assert sorted((a["mcp.turn.round"], a["mcp.roster.collapse"]) for a in marked) == [
        (9, True),
        (11, True),
        (13, False),
    ]


def test_connected_but_missing_and_a_startup_race(
    running: tuple[ServiceThread, Findings], next_hop: CaptureCollector
) -> None:
    service, findings = running
    listing = {
        "mcp.tools.configured": 4,
        "mcp.tools.registered": 4,
        "mcp.tools.reached": 4,
        "mcp.tools.cached": False,
        "mcp.namespaces.connected": ["gitea-author", "gitea-reviewer", "gitea-merger"],
        "mcp.namespaces.attached": ["gitea-author"],
        "mcp.session.tool_snapshot_at": 1_787_011_200.0,
        "mcp.namespaces.connected_at": json.dumps(
            {"gitea-author": 1_787_011_100, "gitea-reviewer": 1_787_011_260}
        ),
        "mcp.namespaces.probe_source": "offline_spawn",
    }
    export_grpc(service.grpc_endpoint, listing_spans([listing]))
    wait_until(lambda: len(findings) == 1)
    health = findings.items[0].namespaces
    assert health is not None
    assert health.attachment.value == "connected_but_namespaces_missing"
    assert health.missing == ("gitea-merger", "gitea-reviewer")
    assert (health.startup_race, health.late) == (True, ("gitea-reviewer",))
    assert health.probe_proves is False
    wait_until(lambda: len(next_hop.spans()) == 1)
    (attributes,) = forwarded_attributes(next_hop).values()
    assert attributes["mcp.roster.attachment"] == "connected_but_namespaces_missing"
    assert attributes["mcp.roster.missing_namespaces"] == "gitea-merger,gitea-reviewer"
    assert attributes["mcp.roster.startup_race"] is True


def test_malformed_counts_are_flagged_never_collapsed(
    running: tuple[ServiceThread, Findings], next_hop: CaptureCollector
) -> None:
    service, findings = running
    listing = {
        "mcp.tools.configured": 12,
        "mcp.tools.registered": -1,
        "mcp.tools.offered": "0",
        "mcp.tools.listed": 40,
        "mcp.namespaces.attached": "gitea-author",
        "mcp.tools.cached": "yes",
    }
    export_grpc(service.grpc_endpoint, listing_spans([listing]))
    wait_until(lambda: len(findings) == 1)
    finding = findings.items[0]
    assert finding.state is not ListingState.COLLAPSED
    assert len(finding.listing.problems) >= 4
    wait_until(lambda: len(next_hop.spans()) == 1)  # forwarded all the same


def test_a_stale_roster_from_both_sides(next_hop: CaptureCollector) -> None:
    """A listing offering a tool whose breaker is open; an unknown-tool failure for a tool
    the turn's listing offered."""
    from opentelemetry.trace import SpanKind

    from processor.engines.breaker import CallDecision

    seen: list[object] = []
    service = ServiceThread(
        make_config(f"forward.endpoint={next_hop.endpoint}"), event_sinks=[seen.append]
    )
    try:
        memory = InMemorySpanExporter()
        provider = TracerProvider(resource=RESOURCE)
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer("harness")
        start = BASE_NS
        for i in range(3):  # three transport failures open the playwright server
            span = tracer.start_span(
                "mcp.tool.call", kind=SpanKind.CLIENT, start_time=start + i * 60 * 10**9
            )
            span.set_attributes(
                {
                    "mcp.tool.name": "navigate",
                    "mcp.server.name": "playwright",
                    "mcp.tool.outcome": "failed",
                    "mcp.turn.id": f"t{i}",
                    "mcp.tool.error": "upstream MCP session is closed",
                }
            )
            span.end(end_time=start + i * 60 * 10**9 + 10**9)
        later = start + 200 * 10**9
        listing = tracer.start_span("mcp.tools.list", start_time=later)
        listing.set_attributes(
            {
                "mcp.turn.id": "t9",
                "mcp.tools.configured": 2,
                "mcp.tools.offered_names": ["navigate", "search"],
                "mcp.server.name": "playwright",
            }
        )
        listing.end(end_time=later + 10**6)
        call = tracer.start_span("mcp.tool.call", kind=SpanKind.CLIENT, start_time=later + 10**9)
        call.set_attributes(
            {
                "mcp.tool.name": "search",
                "mcp.server.name": "playwright",
                "mcp.tool.outcome": "failed",
                "mcp.turn.id": "t9",
                "mcp.tool.error": "Unknown tool: search",
            }
        )
        call.end(end_time=later + 2 * 10**9)
        provider.shutdown()
        export_grpc(service.grpc_endpoint, list(memory.get_finished_spans()))
        wait_until(lambda: sum(isinstance(x, (RosterFinding, CallDecision)) for x in seen) == 5)
    finally:
        service.stop()
    listing_finding = next(x for x in seen if isinstance(x, RosterFinding))
    # The server is open, so every tool of it that the listing still offers is stale.
    assert listing_finding.stale_tools == ("navigate", "search")
    decision = next(x for x in seen if isinstance(x, CallDecision) and x.call.tool == "search")
    assert decision.stale_roster is True
    attributes = forwarded_attributes(next_hop)
    assert any(a.get("mcp.roster.stale") is True for a in attributes.values())
    assert any(a.get("mcp.roster.stale_tools") == "navigate,search" for a in attributes.values())
