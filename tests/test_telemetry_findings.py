"""Metrics from findings: what a real Breaker and RosterHealth decide, as Prometheus reads it.

Call decisions come from running a real ``Breaker`` over ToolCalls built by hand (span time
only, see tests/engine_builders.py), roster findings from a real ``RosterHealth``; a few
come through the real ``Pipeline`` from OTLP spans. ``FindingMetrics`` gets a fake clock
for its own idle expiry, and is read the way Prometheus reads it: registered on a fresh
registry, through ``get_sample_value``, the OpenMetrics exposition and its parser.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from mcp_breaker_client.shared.verdict import FailureClass, NeutralReason, Outcome
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest as generate_text
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition, parser
from prometheus_client.parser import (
    text_string_to_metric_families as text_format_families,
)
from prometheus_client.samples import Sample

from processor.classify.classifier import Classifier
from processor.classify.events import Dialect, ToolCall, ToolListing
from processor.classify.pairing import PairingStats
from processor.config import BreakerConfig, TelemetryConfig
from processor.engines.breaker import Breaker, CallDecision
from processor.engines.circuit import CircuitKey, Scope, State
from processor.engines.roster import RosterHealth
from processor.inflight.pipeline import Pipeline
from processor.telemetry.findings import FindingMetrics
from processor.telemetry.series import MAX_LABEL_VALUE_CHARS, OVERFLOW_LABEL
from tests import classify_builders as otlp
from tests.engine_builders import (
    at_ns,
    at_s,
    declined,
    failed,
    new_span_id,
    round_ns,
    tool_call,
    trace_of,
)

# The OpenMetrics side of prometheus_client is untyped; these are its signatures.
generate_openmetrics: Callable[[CollectorRegistry], bytes] = exposition.generate_latest
openmetrics_families: Callable[[str], Iterator[Metric]] = parser.text_string_to_metric_families

P = "mcp_breaker_"
TOOL_CALLS = P + "tool_calls_total"
DURATION = P + "tool_call_duration_seconds"
DEAD_CALLS = P + "dead_calls_total"
DEAD_SECONDS = P + "dead_call_seconds_total"
CIRCUIT_STATE = P + "circuit_state"
FAILING_SINCE = P + "circuit_failing_since_timestamp_seconds"
IDLE_S = 3600.0
HARNESS = "agent"
TRANSPORT = FailureClass.TRANSPORT


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Rig:
    """A real Breaker and RosterHealth, their findings fed to FindingMetrics on a registry."""

    def __init__(self, breaker: BreakerConfig | None = None, **telemetry: Any) -> None:
        telemetry.setdefault("series_idle_s", IDLE_S)
        self.clock = FakeClock()
        self.breaker = Breaker(breaker or BreakerConfig(), jitter=lambda: 0.5)  # periods exact
        self.roster = RosterHealth()
        self.pairing = PairingStats()
        self.metrics = FindingMetrics(
            TelemetryConfig(**telemetry), self.breaker, self.pairing, clock=self.clock
        )
        self.registry = CollectorRegistry()
        self.registry.register(self.metrics)

    def call(self, call: ToolCall) -> CallDecision:
        decision = self.breaker.observe(call)
        self.metrics(decision)
        return decision

    def calls(self, calls: Iterable[ToolCall]) -> list[CallDecision]:
        return [self.call(call) for call in calls]

    def listing(self, listing: ToolListing) -> None:
        self.metrics(self.roster.observe(listing))

    def value(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)

    def samples(self, name: str) -> list[Sample]:
        return [s for family in self.registry.collect() for s in family.samples if s.name == name]

    def sample(self, name: str, **labels: str) -> Sample:
        (found,) = [s for s in self.samples(name) if s.labels == labels]
        return found

    def openmetrics(self) -> str:
        return generate_openmetrics(self.registry).decode()


def tool_labels(server: str = "web", tool: str = "search", **more: str) -> dict[str, str]:
    return {"server": server, "tool": tool, **more}


SERVER_TOOLS = ("search", "fetch", "crawl")


def open_server(rig: Rig, *, server: str = "web", first_minute: float = 0) -> None:
    """Three session failures in three turns, one on each of three tools: the server's
    circuit opens (consecutive), and no tool failed often enough to open its own."""
    for i in range(3):
        minute = first_minute + i
        call = failed(minute, TRANSPORT, server=server, tool=SERVER_TOOLS[i], turn=f"fail-{minute}")
        decision = rig.call(call)
    assert decision.transitions[-1].target is State.OPEN


def listing(
    model_round: int | None = None,
    *,
    turn: str = "turn-1",
    harness: str = HARNESS,
    server: str | None = None,
    minute: float = 0,
    **fields: Any,
) -> ToolListing:
    start_ns = at_ns(minute + (model_round or 0) * 0.1)
    return ToolListing(
        turn=turn,
        round=model_round,
        server=server,
        start_ns=start_ns,
        end_ns=start_ns + round_ns(0.05),
        trace_id=trace_of(turn),
        span_ids=(new_span_id(),),
        dialect=Dialect.HARNESS,
        harness=harness,
        **fields,
    )


# --- calls ----------------------------------------------------------------------------------


def test_tool_calls_by_outcome_and_failure_class() -> None:
    rig = Rig()
    rig.calls(
        [
            tool_call(0, turn="a"),
            tool_call(1, turn="b"),
            failed(2, TRANSPORT, turn="c"),
            failed(3, FailureClass.TOOL_ERROR, turn="d"),
            failed(4, FailureClass.HIDDEN, turn="e"),
            declined(5, turn="f"),
            tool_call(6, turn="g", outcome=Outcome.NEUTRAL, neutral_reason=NeutralReason.CANCELLED),
            tool_call(7, turn="h", outcome=Outcome.UNKNOWN),
            tool_call(8, turn="i", tool="fetch", server="api"),
        ]
    )
    counted = {
        (s.labels["server"], s.labels["tool"], s.labels["outcome"], s.labels["failure_class"]): (
            s.value
        )
        for s in rig.samples(TOOL_CALLS)
    }
    assert counted == {
        ("web", "search", "ok", ""): 2,
        ("web", "search", "failed", "transport"): 1,
        ("web", "search", "failed", "tool_error"): 1,
        ("web", "search", "failed", "hidden"): 1,
        ("web", "search", "neutral", ""): 2,
        ("web", "search", "unknown", ""): 1,
        ("api", "fetch", "ok", ""): 1,
    }
    assert rig.value(P + "hidden_failures_total", **tool_labels()) == 1
    assert rig.value(P + "hidden_failures_total", **tool_labels("api", "fetch")) is None
    neutral = {s.labels["reason"]: s.value for s in rig.samples(P + "neutral_calls_total")}
    assert neutral == {"declined": 1, "cancelled": 1}


def test_call_duration_buckets_are_seconds_and_less_or_equal() -> None:
    rig = Rig()
    for minute, seconds in enumerate((0.005, 0.3, 400.0)):
        rig.call(tool_call(minute, turn=f"t{minute}", duration_s=seconds))
    labels = tool_labels(outcome="ok")
    buckets = {
        s.labels["le"]: s.value
        for s in rig.samples(DURATION + "_bucket")
        if s.labels["tool"] == "search"
    }
    assert buckets["0.005"] == 1  # exactly on the bound: in it
    assert buckets["0.25"] == 1
    assert buckets["0.5"] == 2
    assert buckets["300.0"] == 2
    assert buckets["+Inf"] == 3
    assert list(buckets.values()) == sorted(buckets.values())  # cumulative
    assert rig.value(DURATION + "_count", **labels) == 3
    assert rig.value(DURATION + "_sum", **labels) == pytest.approx(400.305)


SHADOW_CASES = [
    pytest.param(BreakerConfig(), "enforced", "enforced", id="enforced"),
    pytest.param(BreakerConfig(shadow=True), "shadow", "shadow", id="all in shadow"),
    pytest.param(BreakerConfig(shadow_rules=("server",)), "shadow", "enforced", id="server rule"),
    pytest.param(BreakerConfig(shadow_rules=("turn_tool",)), "enforced", "shadow", id="turn rule"),
]


@pytest.mark.parametrize(("config", "server_mode", "turn_mode"), SHADOW_CASES)
def test_dead_calls_and_their_seconds_by_rule_and_mode(
    config: BreakerConfig, server_mode: str, turn_mode: str
) -> None:
    rig = Rig(config)
    open_server(rig)
    dead = rig.call(tool_call(3, turn="after", duration_s=1.5))  # the server is open: dead
    # Within one turn: a transport failure blocks the tool for the rest of the turn.
    rig.call(failed(4, TRANSPORT, server="api", tool="fetch", turn="busy"))
    repeat = rig.call(tool_call(4.5, server="api", tool="fetch", turn="busy", duration_s=0.25))
    assert (dead.dead_call, dead.rule, repeat.dead_call, repeat.rule) == (
        True,
        "server",
        True,
        "turn_tool",
    )

    server = tool_labels(rule="server", mode=server_mode)
    turn = tool_labels("api", "fetch", rule="turn_tool", mode=turn_mode)
    assert rig.value(DEAD_CALLS, **server) == 1
    assert rig.value(DEAD_SECONDS, **server) == 1.5
    assert rig.value(DEAD_CALLS, **turn) == 1
    assert rig.value(DEAD_SECONDS, **turn) == 0.25
    assert len(rig.samples(DEAD_CALLS)) == 2  # nothing under the other mode, no other rule


def test_exemplars_carry_the_trace_of_the_call() -> None:
    rig = Rig()
    open_server(rig)
    dead = rig.call(tool_call(3, turn="after", duration_s=1.5)).call
    trace, span = dead.trace_id.hex(), dead.span_ids[0].hex()
    assert trace == trace_of("after").hex()

    on_dead = rig.sample(DEAD_CALLS, **tool_labels(rule="server", mode="enforced")).exemplar
    assert on_dead is not None
    assert on_dead.labels == {"trace_id": trace, "span_id": span}
    assert on_dead.value == 1.0  # the increment; the duration is on the histogram
    assert on_dead.timestamp == pytest.approx(at_s(3) + 1.5)

    ok = tool_labels(outcome="ok")
    bucket = rig.sample(DURATION + "_bucket", **ok, le="2.5").exemplar
    assert bucket is not None
    assert bucket.labels["trace_id"] == trace
    # Only the bucket the call fell in carries it.
    assert rig.sample(DURATION + "_bucket", **ok, le="1.0").exemplar is None
    assert rig.sample(DURATION + "_bucket", **ok, le="+Inf").exemplar is None
    failed_bucket = rig.sample(DURATION + "_bucket", **tool_labels(outcome="failed"), le="2.5")
    assert failed_bucket.exemplar is not None
    # search's one failure (open_server fails each of three tools once)
    assert failed_bucket.exemplar.labels["trace_id"] == trace_of("fail-0").hex()

    text = rig.openmetrics()
    assert f'# {{span_id="{span}",trace_id="{trace}"}} 1.5' in text


def test_no_exemplars_when_turned_off() -> None:
    rig = Rig(exemplars=False)
    open_server(rig)
    rig.call(tool_call(3, turn="after", duration_s=1.5))
    samples = [s for family in rig.registry.collect() for s in family.samples]
    assert rig.value(DEAD_CALLS, **tool_labels(rule="server", mode="enforced")) == 1
    assert [s for s in samples if s.exemplar is not None] == []
    assert " # {" not in rig.openmetrics()


# --- circuits, read at scrape time ----------------------------------------------------------


def states(rig: Rig) -> dict[tuple[str, str], dict[str, float]]:
    """(scope, key) -> {state: 0 or 1}, from the stateset."""
    read: dict[tuple[str, str], dict[str, float]] = {}
    for s in rig.samples(CIRCUIT_STATE):
        read.setdefault((s.labels["scope"], s.labels["key"]), {})[s.labels[CIRCUIT_STATE]] = s.value
    return read


def current(rig: Rig) -> dict[tuple[str, str], str]:
    """(scope, key) -> the one state set to 1; fails unless exactly one is."""
    read = {}
    for circuit, flags in states(rig).items():
        assert set(flags) == {state.value for state in State}
        assert set(flags.values()) <= {0.0, 1.0}
        (on,) = [state for state, flag in flags.items() if flag == 1.0]
        read[circuit] = on
    return read


def circuits(rig: Rig) -> dict[tuple[str, str], float]:
    samples = rig.samples(P + "circuits")
    return {(s.labels["scope"], s.labels["state"]): s.value for s in samples if s.value}


def test_circuit_state_is_a_stateset_read_at_the_latest_span_time() -> None:
    rig = Rig()
    open_server(rig)
    tools = {("tool", f"web/{tool}"): "closed" for tool in SERVER_TOOLS}
    assert current(rig) == {("server", "web"): "open", **tools}
    since = {s.labels["key"]: s.value for s in rig.samples(FAILING_SINCE)}
    assert since == {"web": at_s(0) + 2.0}  # the first failure's end; none for closed
    assert circuits(rig) == {("server", "open"): 1, ("tool", "closed"): 3}

    # A call elsewhere moves the breaker's span clock past web's open period (300 s):
    # read now, web is half-open, though no call to it has moved the circuit itself.
    rig.call(tool_call(10, server="docs", tool="read", turn="elsewhere"))
    assert rig.breaker.latest_s > at_s(2) + 2.0 + 300
    assert current(rig) == {
        ("server", "web"): "half_open",
        **tools,
        ("server", "docs"): "closed",
        ("tool", "docs/read"): "closed",
    }
    assert rig.breaker.circuits[CircuitKey(Scope.SERVER, "web")].state is State.OPEN
    assert {s.labels["key"] for s in rig.samples(FAILING_SINCE)} == {"web"}
    assert circuits(rig) == {
        ("server", "half_open"): 1,
        ("server", "closed"): 1,
        ("tool", "closed"): 4,
    }

    # Its probe succeeds: closed, and no longer failing.
    rig.call(tool_call(11, turn="probe"))
    assert current(rig)[("server", "web")] == "closed"
    assert rig.samples(FAILING_SINCE) == []


def test_tenants_with_the_same_server_are_separate_circuits_and_series() -> None:
    rig = Rig()
    for i in range(3):
        rig.call(failed(i, TRANSPORT, server="web", turn=f"acme-{i}", tenant="acme"))
    rig.call(tool_call(3, server="web", turn="globex-1", tenant="globex"))
    samples = rig.samples(CIRCUIT_STATE)
    open_by_tenant = {
        s.labels.get("tenant", ""): s.labels[CIRCUIT_STATE]
        for s in samples
        if s.labels["scope"] == "server" and s.value == 1
    }
    assert open_by_tenant == {"acme": "open", "globex": "closed"}
    labelsets = [tuple(sorted(s.labels.items())) for s in samples]
    assert len(labelsets) == len(set(labelsets))  # no duplicate series in one scrape


def test_forced_circuits_read_as_forced() -> None:
    rig = Rig()
    rig.call(tool_call(0, turn="a"))
    now = at_s(0) + 2.0
    rig.breaker.force(CircuitKey(Scope.SERVER, "web"), State.FORCED_OPEN, now + 60, "ops", now)
    assert current(rig)[("server", "web")] == "forced_open"
    rig.call(tool_call(5, server="docs", tool="read", turn="later"))  # the override ran out
    assert current(rig)[("server", "web")] == "closed"


def test_a_failing_circuit_forced_closed_is_not_shown_as_failing() -> None:
    rig = Rig()
    open_server(rig)
    assert {s.labels["key"] for s in rig.samples(FAILING_SINCE)} == {"web"}
    now = rig.breaker.latest_s
    rig.breaker.force(CircuitKey(Scope.SERVER, "web"), State.FORCED_CLOSED, now + 60, "ops", now)
    assert current(rig)[("server", "web")] == "forced_closed"
    assert rig.samples(FAILING_SINCE) == []


def test_the_cap_on_circuits_shown_keeps_the_open_ones() -> None:
    rig = Rig(max_series_per_metric=2)
    for i in range(4):
        rig.call(tool_call(i, server=None, tool=f"fine-{i}", turn=f"ok-{i}"))
    for i in range(3):
        rig.call(failed(5 + i, FailureClass.TOOL_ERROR, server=None, tool="bad", turn=f"b-{i}"))
    shown = current(rig)
    assert len(shown) == 2
    assert shown[("tool", "-/bad")] == "open"
    assert circuits(rig) == {("tool", "closed"): 4, ("tool", "open"): 1}  # counts see all


def transitions(rig: Rig) -> dict[tuple[str, str, str, str], float]:
    return {
        (s.labels["scope"], s.labels["from_state"], s.labels["to_state"], s.labels["reason"]): (
            s.value
        )
        for s in rig.samples(P + "circuit_transitions_total")
    }


def probes(rig: Rig) -> dict[tuple[str, str], float]:
    samples = rig.samples(P + "probes_total")
    return {(s.labels["scope"], s.labels["result"]): s.value for s in samples if s.value}


def test_transitions_by_reason_and_probes_by_result() -> None:
    rig = Rig()
    open_server(rig)  # minutes 0-2; open for 300 s from the end of the third
    assert rig.call(tool_call(4, turn="while-open")).dead_call  # denied: no probe
    assert probes(rig) == {}
    rig.call(tool_call(10, turn="probe-1"))  # half-open: the probe, which succeeds
    open_server(rig, first_minute=11)  # open again, minutes 11-13
    rig.call(failed(20, TRANSPORT, turn="probe-2"))  # the probe fails: open again
    assert transitions(rig) == {
        ("server", "closed", "open", "consecutive_failures"): 2,
        ("server", "open", "half_open", "open_period_over"): 2,
        ("server", "half_open", "closed", "probe_succeeded"): 1,
        ("server", "half_open", "open", "probe_failed"): 1,
    }
    assert probes(rig) == {
        ("server", "granted"): 2,
        ("server", "succeeded"): 1,
        ("server", "failed"): 1,
    }
    assert current(rig)[("server", "web")] == "open"


def test_tool_scope_probes() -> None:
    rig = Rig()
    for i in range(3):
        rig.call(failed(i, FailureClass.TOOL_ERROR, server="api", tool="fetch", turn=f"f{i}"))
    rig.call(tool_call(10, server="api", tool="fetch", turn="probe"))
    assert probes(rig) == {("tool", "granted"): 1, ("tool", "succeeded"): 1}
    assert transitions(rig)[("tool", "closed", "open", "consecutive_failures")] == 1


def test_a_probe_is_counted_as_granted_even_when_its_turn_blocked_the_call() -> None:
    """The circuit granted its permit, so the probe counts as granted, whatever rule then
    governed the call (here a within-turn block opened by an earlier failure)."""
    rig = Rig()
    open_server(rig)  # open from minute 2 for 300 s
    rig.call(failed(4, TRANSPORT, server="web", tool="search", turn="T"))  # dead; blocks T
    decision = rig.call(tool_call(10, server="web", tool="search", turn="T"))
    assert decision.state == "turn_blocked" and decision.probe is Scope.SERVER
    assert probes(rig) == {("server", "granted"): 1, ("server", "succeeded"): 1}


# --- the roster -----------------------------------------------------------------------------


LISTING_STATES: list[tuple[str, dict[str, Any]]] = [
    ("cold", {"configured": 2, "reached": 2, "offered": 10}),
    ("warm", {"configured": 2, "cached": True, "registered": 2, "unavailable": 0}),
    ("backoff", {"configured": 2, "unavailable": 1}),
    ("collapsed", {"configured": 2, "offered": 0}),
    ("ambiguous", {"configured": 2, "cached": True, "reached": 0}),
    ("unknown", {}),
]


def test_listings_by_state() -> None:
    rig = Rig()
    for turn, (_, fields) in enumerate(LISTING_STATES):
        rig.listing(listing(turn=f"turn-{turn}", **fields))
    rig.listing(listing(turn="again", configured=2, reached=2, server="web"))
    by_state = {
        (s.labels["server"], s.labels["state"]): s.value
        for s in rig.samples(P + "tool_listings_total")
        if s.labels["harness"] == HARNESS
    }
    assert by_state == {("", state): 1 for state, _ in LISTING_STATES} | {("web", "cold"): 1}


def test_offered_tools_is_the_latest_listing() -> None:
    rig = Rig()
    rig.listing(listing(turn="a", configured=2, offered=86))
    assert rig.value(P + "offered_tools", harness=HARNESS, server="") == 86
    rig.listing(listing(turn="b", configured=2, offered=40))
    assert rig.value(P + "offered_tools", harness=HARNESS, server="") == 40
    # Registered counts servers, not tools: without an offered count the gauge stays.
    rig.listing(listing(turn="c", configured=2, registered=7))
    assert rig.value(P + "offered_tools", harness=HARNESS, server="") == 40
    rig.listing(listing(turn="d", configured=2))
    assert rig.value(P + "offered_tools", harness=HARNESS, server="") == 40


def collapses(rig: Rig) -> float | None:
    return rig.value(P + "roster_collapses_total", harness=HARNESS)


def offer(rig: Rig, *rounds: tuple[int, int], turn: str = "turn-1") -> None:
    for model_round, offered in rounds:
        rig.listing(listing(model_round, turn=turn, configured=3, offered=offered))


def test_a_collapse_is_counted_once_however_many_rounds_it_lasts() -> None:
    rig = Rig()
    offer(rig, (1, 86), (3, 86))
    assert collapses(rig) is None
    offer(rig, (5, 0))
    assert collapses(rig) == 1
    offer(rig, (7, 0), (9, 0))  # extended
    assert collapses(rig) == 1
    offer(rig, (11, 86))  # recovered
    assert collapses(rig) == 1
    offer(rig, (13, 0))  # a second collapse in the same turn
    assert collapses(rig) == 2
    offer(rig, (1, 86), (2, 0), turn="turn-2")  # and one in another turn
    assert collapses(rig) == 3


def test_a_collapse_extended_backwards_by_a_late_listing_is_not_counted_again() -> None:
    """Listings of a turn may arrive in any order: round 3 after round 5 moves the
    collapse's first round back, and it is still the same collapse."""
    rig = Rig()
    offer(rig, (1, 86), (5, 0))
    assert collapses(rig) == 1
    offer(rig, (3, 0))
    assert collapses(rig) == 1
    offer(rig, (7, 86))
    assert collapses(rig) == 1


def test_namespaces_missing_is_the_latest_listing_that_named_them() -> None:
    rig = Rig()
    rig.listing(
        listing(
            turn="a",
            server="gitea",
            namespaces_connected=("a", "b", "c"),
            namespaces_attached=("a",),
        )
    )
    assert rig.value(P + "roster_namespaces_missing", harness=HARNESS, server="gitea") == 2
    rig.listing(listing(turn="b", server="gitea", configured=1))  # names none: unchanged
    assert rig.value(P + "roster_namespaces_missing", harness=HARNESS, server="gitea") == 2
    rig.listing(
        listing(
            turn="c",
            server="gitea",
            namespaces_connected=("a", "b"),
            namespaces_attached=("a", "b"),
        )
    )
    assert rig.value(P + "roster_namespaces_missing", harness=HARNESS, server="gitea") == 0


def test_stale_roster_both_ways_through_the_pipeline() -> None:
    """Through the real Pipeline, from OTLP spans: a listing offering a tool whose circuit
    is open (offered_open), and an unknown-tool failure for a tool the turn's listing
    offered (offered_unknown)."""
    rig = Rig()
    pipeline = Pipeline(
        Classifier(), rig.breaker, (rig.metrics,), RosterHealth(), clock=lambda: 0.0
    )
    spans = [
        otlp.make_span(
            "mcp.tool.call",
            {
                "mcp.tool.name": "search",
                "mcp.server.name": "web",
                "mcp.tool.outcome": "failed",
                "mcp.turn.id": f"failing-{i}",
            },
            span=i + 1,
        )
        for i in range(3)
    ]
    offered = otlp.make_span(
        "mcp.tools.list",
        {
            "mcp.server.name": "web",
            "mcp.tools.configured": 1,
            "mcp.tools.offered": 2,
            "mcp.tools.offered_names": ["search", "ghost"],
            "mcp.turn.id": "stale",
        },
        span=10,
    )
    unknown = otlp.make_span(
        "mcp.tool.call",
        {
            "mcp.tool.name": "ghost",
            "mcp.server.name": "web",
            "mcp.tool.outcome": "failed",
            "mcp.tool.error": "tool ghost not found",
            "mcp.turn.id": "stale",
        },
        span=11,
    )
    pipeline(otlp.make_request(*spans, service=HARNESS))
    pipeline(otlp.make_request(offered, unknown, service=HARNESS))
    stale = {s.labels["direction"]: s.value for s in rig.samples(P + "stale_roster_total")}
    assert stale == {"offered_open": 1, "offered_unknown": 1}
    assert {s.labels["harness"] for s in rig.samples(P + "stale_roster_total")} == {HARNESS}


def test_a_harness_cannot_forge_the_overflow_series() -> None:
    """A service.name is whatever the sender says, NUL bytes included."""
    rig = Rig()
    forged = "\0overflow"
    offer(rig, (1, 86), (2, 0), turn="x")
    rig.listing(listing(1, turn="y", harness=forged, configured=3, offered=86))
    rig.listing(listing(2, turn="y", harness=forged, configured=3, offered=0))
    labels = [s.labels for s in rig.samples(P + "roster_collapses_total")]
    assert labels == [{"harness": HARNESS}, {"harness": forged}]


# --- what classification could not do, read live ---------------------------------------


def test_classification_errors_are_read_live_from_the_pairing_stats() -> None:
    rig = Rig()
    errors = P + "classification_errors_total"
    assert rig.value(errors, kind="unpaired") == 0
    rig.pairing.unpaired = 3
    rig.pairing.pending_overflow = 2
    rig.pairing.malformed_listings = 1
    rig.pairing.duplicate_spans = 7
    assert rig.value(errors, kind="unpaired") == 3
    assert rig.value(errors, kind="pending_overflow") == 2
    assert rig.value(errors, kind="malformed_listing") == 1
    assert rig.value(P + "duplicate_spans_total") == 7


# --- the metrics' own bounds ----------------------------------------------------------------


def test_series_are_capped_with_an_overflow_series_and_counted() -> None:
    rig = Rig(max_series_per_metric=2)
    for i in range(5):
        rig.call(tool_call(i, tool=f"tool-{i}", turn=f"t{i}"))
    rig.call(tool_call(9, tool="tool-0", turn="again"))  # held before the cap: still its own
    counted = {s.labels.get("tool", OVERFLOW_LABEL): s.value for s in rig.samples(TOOL_CALLS)}
    assert counted == {"tool-0": 2, "tool-1": 1, OVERFLOW_LABEL: 3}
    assert rig.value(TOOL_CALLS, **{OVERFLOW_LABEL: "true"}) == 3
    assert rig.value(DURATION + "_count", **{OVERFLOW_LABEL: "true"}) == 3
    for metric in ("tool_calls", "tool_call_duration_seconds"):
        assert rig.value(P + "metric_series", metric=metric) == 3  # two, and the overflow
        assert rig.value(P + "metric_overflow_total", metric=metric) == 3
    assert rig.value(P + "metric_series", metric="dead_calls") == 0
    assert rig.value(P + "metric_overflow_total", metric="dead_calls") == 0


def test_idle_series_expire_at_scrape_on_the_metrics_clock() -> None:
    rig = Rig(series_idle_s=60.0)
    rig.call(tool_call(0, tool="old", turn="a"))
    rig.clock.now += 30
    rig.call(tool_call(1, tool="new", turn="b"))
    rig.clock.now += 30  # old idle for 60 s, new for 30 s
    assert {s.labels["tool"] for s in rig.samples(TOOL_CALLS)} == {"new"}
    assert rig.value(P + "metric_series", metric="tool_calls") == 1
    rig.clock.now += 30
    assert rig.samples(TOOL_CALLS) == []


def test_a_long_tool_name_is_cut_in_every_label() -> None:
    rig = Rig()
    name = "x" * 100_000
    rig.call(tool_call(0, tool=name, turn="long"))
    (calls,) = rig.samples(TOOL_CALLS)
    assert calls.labels["tool"] == "x" * MAX_LABEL_VALUE_CHARS
    keys = {s.labels["key"] for s in rig.samples(CIRCUIT_STATE)}
    assert keys == {"web", ("web/" + name)[:MAX_LABEL_VALUE_CHARS]}


# --- the exposition -------------------------------------------------------------------------


def busy_rig() -> Rig:
    """A bit of everything, past the cap."""
    rig = Rig(max_series_per_metric=3)
    open_server(rig)
    rig.call(tool_call(3, turn="after", duration_s=1.5))
    rig.call(declined(4, turn="no"))
    for i in range(5):
        rig.call(tool_call(5 + i, server="docs", tool=f"read-{i}", turn=f"r{i}", duration_s=0.01))
    offer(rig, (1, 86), (2, 0), (3, 86))
    rig.listing(
        listing(turn="ns", server="gitea", namespaces_connected=("a",), namespaces_attached=())
    )
    return rig


def test_the_openmetrics_exposition_parses_back() -> None:
    rig = busy_rig()
    text = rig.openmetrics()
    assert text.endswith("# EOF\n")
    families = {family.name: family for family in openmetrics_families(text)}
    assert families[P + "tool_calls"].type == "counter"
    assert families[P + "tool_call_duration_seconds"].type == "histogram"
    assert families[P + "tool_call_duration_seconds"].unit == "seconds"
    assert families[P + "circuit_state"].type == "stateset"

    calls = {tuple(sorted(s.labels.items())): s.value for s in families[P + "tool_calls"].samples}
    assert len(calls) == 3 + 1  # the cap, and the overflow series
    # The three failures (one per tool) fill the cap; the seven calls after come past it.
    assert calls[((OVERFLOW_LABEL, "true"),)] == 7
    assert sum(calls.values()) == 3 + 1 + 1 + 5  # every call counted once

    histogram = families[P + "tool_call_duration_seconds"].samples
    overflow = [s for s in histogram if s.labels.get(OVERFLOW_LABEL) == "true"]
    assert {s.name for s in overflow} == {
        DURATION + "_bucket",
        DURATION + "_count",
        DURATION + "_sum",
    }
    exemplars = [s.exemplar for s in histogram if s.exemplar is not None]
    assert exemplars and all(len(e.labels["trace_id"]) == 32 for e in exemplars)

    (dead,) = families[P + "dead_calls"].samples
    assert dead.exemplar is not None
    assert dead.exemplar.labels["trace_id"] == trace_of("after").hex()
    assert families[P + "roster_collapses"].samples[0].value == 1
    assert families[P + "roster_namespaces_missing"].samples[0].value == 1
    overflow_total = {s.labels["metric"]: s.value for s in families[P + "metric_overflow"].samples}
    assert overflow_total["tool_calls"] == calls[((OVERFLOW_LABEL, "true"),)]


def test_the_classic_text_exposition_parses_back() -> None:
    rig = busy_rig()
    text = generate_text(rig.registry).decode()
    families = {family.name: family for family in text_format_families(text)}
    samples = families[P + "tool_calls"].samples
    assert any(s.labels == {OVERFLOW_LABEL: "true"} for s in samples)
    assert sum(s.value for s in samples) == 3 + 1 + 1 + 5


def test_a_span_from_the_future_does_not_move_the_scraped_circuits() -> None:
    """One span stamped years ahead (a skewed clock, or any sender) must not flip every
    open circuit to half-open in the scrape: the read is capped at our clock + skew."""
    rig = Rig()
    metrics = FindingMetrics(
        TelemetryConfig(), rig.breaker, rig.pairing, clock=rig.clock, wall=lambda: at_s(4)
    )
    registry = CollectorRegistry()
    registry.register(metrics)
    open_server(rig)  # open from minute 2 for 300 s
    rig.call(tool_call(60 * 24 * 365 * 50, server="elsewhere", turn="from-the-future"))
    assert rig.breaker.latest_s > at_s(60 * 24 * 365)
    state = registry.get_sample_value(
        CIRCUIT_STATE, {"scope": "server", "key": "web", CIRCUIT_STATE: "open"}
    )
    assert state == 1.0


def test_a_prepared_scrape_reports_the_copy_not_the_live_tables() -> None:
    """The loop copies (prepare_scrape); the thread that builds the families must read
    only that copy, whatever the loop does meanwhile; the next collect reads live again."""
    rig = Rig()
    rig.call(tool_call(1, turn="a"))
    rig.metrics.prepare_scrape()
    list(rig.metrics.collect())  # the series' first scrape: shown at zero
    rig.metrics.prepare_scrape()
    rig.call(tool_call(2, turn="b"))  # after the copy: not in this scrape
    families = list(rig.metrics.collect())
    calls = next(f for f in families if f.name == P + "tool_calls")
    assert sum(s.value for s in calls.samples) == 1
    assert rig.value(P + "tool_calls_total", **tool_labels(outcome="ok", failure_class="")) == 2


def scraped_calls(rig: Rig) -> dict[tuple[tuple[str, str], ...], float]:
    rig.metrics.prepare_scrape()
    families = {f.name: f for f in rig.metrics.collect()}
    return {tuple(sorted(s.labels.items())): s.value for s in families[P + "tool_calls"].samples}


def test_a_new_series_is_scraped_at_zero_first() -> None:
    """Prometheus's increase() counts from a series' first sample: a counter that first
    appears at 3 is read as "always 3". So its first scrape shows it at 0, the next its
    count; a series already shown goes on as usual."""
    rig = Rig()
    for minute in range(3):
        rig.call(failed(minute, TRANSPORT, turn=f"t{minute}"))
    labels = tuple(sorted(tool_labels(outcome="failed", failure_class="transport").items()))
    assert scraped_calls(rig) == {labels: 0.0}
    assert scraped_calls(rig) == {labels: 3.0}
    rig.call(tool_call(5, turn="ok"))
    ok = tuple(sorted(tool_labels(outcome="ok", failure_class="").items()))
    assert scraped_calls(rig) == {labels: 3.0, ok: 0.0}
    assert scraped_calls(rig) == {labels: 3.0, ok: 1.0}
    # Outside a scrape (a registry read, as a test or another collector does) nothing waits.
    assert rig.value(P + "tool_calls_total", **tool_labels(outcome="ok", failure_class="")) == 1


def test_a_refused_call_is_counted_apart_from_the_calls_that_ran() -> None:
    """A call an advisory kept the harness from making is outcome refused, not neutral:
    failed / (ok + failed) stays a true error ratio."""
    rig = Rig()
    refused = tool_call(
        1, outcome=Outcome.NEUTRAL, neutral_reason=NeutralReason.REFUSED_BY_ADVISORY
    )
    rig.call(refused)
    rig.call(declined(2))
    assert rig.value(TOOL_CALLS, **tool_labels(outcome="refused", failure_class="")) == 1
    assert rig.value(TOOL_CALLS, **tool_labels(outcome="neutral", failure_class="")) == 1
    reasons = {s.labels["reason"]: s.value for s in rig.samples(P + "neutral_calls_total")}
    assert reasons == {"refused_by_advisory": 1, "declined": 1}
