"""A scrape after the seed replay reads like the incident report, checked with Prometheus's
own tools.

The sirens-echo incident is replayed through the running service from real OpenTelemetry
SDK spans (tests/test_seed_replay.py): nine failing calls in four earlier turns, then the
01:06 turn's eight calls, all failing on the transport. Around it, the seed's 25 tool
listings as the old instrument wrote them (tests/test_roster_replay.py) and a few calls to
another server that worked, were declined by the user, or reported success around a
failure body.

Then the scrape is read by what will read it in production: ``promtool check metrics``
lints the classic text exposition; a real Prometheus server (``--enable-feature=
exemplar-storage``) scrapes the telemetry port every two seconds over loopback, negotiates
OpenMetrics, and is asked, through its HTTP API, the questions the incident report answers:
how many calls failed and how, how many were made against a breaker that said no, since
when the server has been failing, and which trace is behind the number.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from processor.engines.breaker import CallDecision
from processor.engines.circuit import CircuitKey, Scope, State, Trigger
from processor.engines.roster import RosterFinding
from tests.prometheus_server import PrometheusServer, binary, promtool_check_metrics
from tests.sdk import RESOURCE, export_grpc
from tests.support import LOOPBACK, CaptureCollector, ServiceThread, make_config, wait_until
from tests.test_roster_replay import listing_spans, seed_listings
from tests.test_seed_replay import EARLIER_TURNS, ROUNDS, TOOL, at_ns, harness_calls

OPENMETRICS = "application/openmetrics-text; version=1.0.0"
SEED_TURN = "turn-0106"
SERVER = "playwright"
SEED_LABELS = f'server="{SERVER}",tool="{TOOL}"'
# Calls to another server, in turns of their own inside the 01:06 turn's minutes, so the
# breaker's span clock (and so the playwright circuit read at scrape time) stays in it:
# (turn, second after 01:06:00, seconds taken, outcome, result body).
OTHER_SERVER, OTHER_TOOL = "gitea", "gitea__create_issue"
OTHER_CALLS = (
    ("turn-gitea-1", 40, 0.02, "ok", None),
    ("turn-gitea-2", 50, 0.4, "ok", None),
    ("turn-gitea-3", 60, 1.5, "declined", None),
    ("turn-gitea-4", 70, 7.0, "ok", {"_tag": "OrchestratorMcpFailure", "message": "no repo"}),
)
parse_openmetrics: Callable[[str], Iterable[Metric]] = text_string_to_metric_families
SCRAPE_SETTLE_S = 90  # a deadline on waiting for Prometheus, never a measured duration


class Sink:
    """What the service decided, as its pipeline hands it to every event sink."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.decisions: list[CallDecision] = []
        self.listings: list[RosterFinding] = []

    def __call__(self, finding: object) -> None:
        with self._lock:
            if isinstance(finding, CallDecision):
                self.decisions.append(finding)
            elif isinstance(finding, RosterFinding):
                self.listings.append(finding)

    def calls(self, turn: str | None = None) -> list[CallDecision]:
        with self._lock:
            found = [d for d in self.decisions if turn is None or d.call.turn == turn]
        return sorted(found, key=lambda d: d.call.start_ns)

    def roster(self) -> list[RosterFinding]:
        with self._lock:
            return list(self.listings)


@dataclass
class Replay:
    """What was sent, and what the service's own decisions say the scrape must show."""

    sink: Sink
    spans: list[ReadableSpan] = field(default_factory=list)

    @property
    def trace_ids(self) -> set[str]:
        return {format(span.context.trace_id, "032x") for span in self.spans}

    def dead(self) -> list[CallDecision]:
        return [d for d in self.sink.calls() if d.dead_call]

    def dead_by_rule(self) -> dict[str, int]:
        return dict(Counter(d.rule.value for d in self.dead() if d.rule is not None))

    def dead_seconds(self) -> float:
        return sum((d.call.end_ns - d.call.start_ns) / 1e9 for d in self.dead())

    def latest_dead_by_rule(self) -> dict[str, CallDecision]:
        """The call behind each dead-call series' exemplar: the latest one counted in it."""
        latest: dict[str, CallDecision] = {}
        for decision in self.sink.calls():  # in span order, which is the order they arrived
            if decision.dead_call and decision.rule is not None:
                latest[decision.rule.value] = decision
        return latest

    def probes_failed(self) -> int:
        return sum(
            t.trigger is Trigger.PROBE_FAILED and t.key.scope is Scope.SERVER
            for d in self.sink.calls()
            for t in d.transitions
        )


def other_server_calls() -> list[ReadableSpan]:
    """Calls to another server that worked, were declined, or hid a failure."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("sirens-echo.harness", "943")
    for index, (turn, second, seconds, outcome, result) in enumerate(OTHER_CALLS):
        start = at_ns(66, second)
        span = tracer.start_span("mcp.tool.call", kind=SpanKind.CLIENT, start_time=start)
        span.set_attributes(
            {
                "mcp.tool.name": OTHER_TOOL,
                "mcp.server.name": OTHER_SERVER,
                "mcp.tool.outcome": outcome,
                "mcp.tool.arguments": json.dumps({"title": f"issue {index}"}),
                "mcp.turn.id": turn,
                "mcp.turn.round": 1,
            }
        )
        if result is not None:
            span.set_attribute("mcp.tool.is_error", False)
            span.set_attribute("mcp.tool.result", json.dumps(result))
        span.end(end_time=start + int(seconds * 1e9))
    provider.shutdown()
    return list(memory.get_finished_spans())


def replay_the_incident(service: ServiceThread, sink: Sink) -> Replay:
    """The seed's listings, its earlier turns, the 01:06 turn, then the other calls; each
    batch decided before the next is sent, as the harness would have sent them."""
    replay = Replay(sink)
    endpoint = service.grpc_endpoint

    seed: list[Mapping[str, Any]] = [*seed_listings(fixed=False)]
    listings = listing_spans(seed)
    export_grpc(endpoint, listings)
    wait_until(lambda: len(sink.roster()) == len(listings), what="the seed's listings")

    def send(spans: list[ReadableSpan], what: str) -> None:
        expected = len(sink.calls()) + len(spans)
        export_grpc(endpoint, spans)
        replay.spans += spans
        wait_until(lambda: len(sink.calls()) == expected, what=what)

    for turn, minute, calls in EARLIER_TURNS:
        starts = [(1 + i, at_ns(minute, 40 * i)) for i in range(calls)]
        send(harness_calls(turn, starts), f"the decisions of {turn}")
    starts = [(r, at_ns(66, 36.875 + 10 * i)) for i, r in enumerate(ROUNDS)]
    send(harness_calls(SEED_TURN, starts), "the decisions of the 01:06 turn")
    send(other_server_calls(), "the decisions of the other server's calls")
    return replay


def assert_the_seed_shape(replay: Replay) -> None:
    """The 01:06 turn as the seed tells it: eight calls, all dead; the first refused by the
    open server circuit, the seven after it repeats within the turn."""
    first, *repeats = replay.sink.calls(SEED_TURN)
    assert len(ROUNDS) == 8
    assert (first.dead_call, first.state, first.rule and first.rule.value) == (
        True,
        "open",
        "server",
    )
    assert all(d.dead_call and d.rule and d.rule.value == "turn_tool" for d in repeats)
    assert len(repeats) == 7
    assert all(d.enforced for d in (first, *repeats))


def get(url: str, accept: str = "") -> tuple[str, str]:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(response.headers["Content-Type"]), response.read().decode()


@pytest.fixture
def running(next_hop: CaptureCollector) -> Iterator[tuple[ServiceThread, Sink]]:
    sink = Sink()
    service = ServiceThread(
        make_config(f"forward.endpoint={next_hop.endpoint}"), event_sinks=[sink]
    )
    yield service, sink
    service.stop()


@pytest.fixture
def prometheus(running: tuple[ServiceThread, Sink], tmp_path: Path) -> Iterator[PrometheusServer]:
    service, _ = running
    target = f"{LOOPBACK}:{service.service.ports['telemetry']}"
    server = PrometheusServer(tmp_path, [target])
    try:
        yield server.start()
    finally:
        server.stop()
        # Shown by pytest only when the test failed (captured output of the teardown).
        print(server.log_tail())


def test_promtool_lints_the_scrape_and_openmetrics_carries_the_traces(
    running: tuple[ServiceThread, Sink],
) -> None:
    """The classic text exposition after the replay passes ``promtool check metrics`` with
    no warning at all; the OpenMetrics one ends in ``# EOF`` and links each dead-call
    counter to the trace of the latest call it counted."""
    binary("promtool")  # fail at once, not after the replay, when it is missing
    service, sink = running
    replay = replay_the_incident(service, sink)
    assert_the_seed_shape(replay)

    content_type, text = get(service.telemetry_url + "/metrics")
    assert content_type.startswith("text/plain; version=0.0.4")
    # The replay is in it: the families promtool reads are the ones that moved.
    assert 'mcp_breaker_tool_calls_total{failure_class="transport",outcome="failed",' in text
    assert 'mcp_breaker_circuit_state{key="playwright",mcp_breaker_circuit_state="open"' in text
    checked = promtool_check_metrics(text)
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, ""), (
        f"promtool check metrics said:\n{checked.stdout}{checked.stderr}"
    )

    content_type, text = get(service.telemetry_url + "/metrics", OPENMETRICS)
    assert content_type.startswith("application/openmetrics-text; version=1.0.0")
    assert text.endswith("# EOF\n")
    exemplar = re.compile(
        r"^mcp_breaker_dead_calls_total\{(?P<labels>[^}]*)\} \S+ "
        r'# \{span_id="(?P<span_id>[0-9a-f]{16})",trace_id="(?P<trace_id>[0-9a-f]{32})"\} '
        r"(?P<value>\S+) (?P<at>\S+)$",
        re.MULTILINE,
    )
    found = {m["trace_id"]: m for m in exemplar.finditer(text)}
    assert found, "no exemplar on any mcp_breaker_dead_calls_total sample"
    assert set(found) <= replay.trace_ids

    # Parsed as OpenMetrics: each dead-call series points at its latest call, span and all.
    latest = replay.latest_dead_by_rule()
    families = {f.name: f for f in parse_openmetrics(text)}
    dead = [s for s in families["mcp_breaker_dead_calls"].samples if s.name.endswith("_total")]
    assert {s.labels["rule"] for s in dead} == set(latest) == {"server", "turn_tool"}
    for sample in dead:
        call = latest[sample.labels["rule"]].call
        assert sample.exemplar is not None, sample
        assert sample.exemplar.labels == {
            "trace_id": call.trace_id.hex(),
            "span_id": call.span_ids[0].hex(),
        }
        assert sample.exemplar.value == 1.0  # a counter exemplar carries its increment
        assert sample.exemplar.timestamp is not None
        assert float(sample.exemplar.timestamp) == pytest.approx(call.end_ns / 1e9, abs=1e-3)
    # The duration buckets carry them too; the 3-second seed calls land in le="5.0".
    buckets = [
        s
        for s in families["mcp_breaker_tool_call_duration_seconds"].samples
        if s.name.endswith("_bucket") and s.labels["server"] == SERVER
    ]
    (five,) = [s for s in buckets if s.labels["le"] == "5.0"]
    assert five.exemplar is not None
    assert five.exemplar.labels["trace_id"] == latest["turn_tool"].call.trace_id.hex()


def test_prometheus_scrapes_the_incident(
    running: tuple[ServiceThread, Sink], prometheus: PrometheusServer
) -> None:
    """A scrape after the seed replay reads like the incident report: a real Prometheus,
    scraping the telemetry port throughout the replay, answers the report's questions."""
    service, sink = running
    replay = replay_the_incident(service, sink)
    assert_the_seed_shape(replay)
    breaker = service.service.breaker
    assert breaker.circuits[CircuitKey(Scope.SERVER, SERVER)].state is State.OPEN

    def eventually(predicate: Callable[[], bool], what: Callable[[], str]) -> None:
        """Poll Prometheus; on time-out, say what it last gave and show its log."""
        try:
            wait_until(predicate, SCRAPE_SETTLE_S)
        except AssertionError:
            raise AssertionError(f"{what()}\n{prometheus.log_tail()}") from None

    def settles(expr: str, expected: float, tolerance: float = 0.0) -> None:
        seen: list[float | None] = [None]

        def equal() -> bool:
            seen.append(prometheus.value(expr))
            return seen[-1] is not None and abs(seen[-1] - expected) <= tolerance

        eventually(equal, lambda: f"{expr}: Prometheus gave {seen[-1]}, expected {expected}")

    # The target is up, healthy, and spoke OpenMetrics: the state set keeps its type and
    # the duration histogram its unit, which the classic text format cannot say.
    settles(f'up{{job="{prometheus.job}"}}', 1)
    (target,) = prometheus.targets()
    assert (target["health"], target["lastError"]) == ("up", ""), target
    assert target["scrapeUrl"] == f"{service.telemetry_url}/metrics"
    (state_meta,) = prometheus.target_metadata("mcp_breaker_circuit_state")
    assert state_meta["type"] == "stateset", state_meta
    (duration_meta,) = prometheus.target_metadata("mcp_breaker_tool_call_duration_seconds")
    assert (duration_meta["type"], duration_meta["unit"]) == ("histogram", "seconds")

    # The report's figures. 17 calls to the dead server, every one failed on the transport.
    settles('sum(mcp_breaker_tool_calls_total{outcome="failed",failure_class="transport"})', 17)
    settles(f"sum(mcp_breaker_tool_calls_total{{{SEED_LABELS}}})", 17)
    # Every dead call the service decided is counted, enforced: the 01:06 turn's first call
    # made against the open server, and the repeats within turns (seven of them at 01:06).
    dead = replay.dead()
    assert len(dead) == 13 and replay.dead_by_rule() == {"server": 1, "turn_tool": 12}
    settles('sum(mcp_breaker_dead_calls_total{mode="enforced"})', len(dead))
    settles('sum(mcp_breaker_dead_calls_total{mode="shadow"}) or vector(0)', 0)
    for rule, count in replay.dead_by_rule().items():
        settles(f'sum(mcp_breaker_dead_calls_total{{{SEED_LABELS},rule="{rule}"}})', count)
    # 39 seconds of calls the harness had been told to skip.
    assert replay.dead_seconds() == 39
    settles("sum(mcp_breaker_dead_call_seconds_total)", replay.dead_seconds())
    # The server circuit is open, failing since the 00:20 turn (since its first failure
    # was known: the end of that call); two probes tried and failed.
    state = 'mcp_breaker_circuit_state{{scope="server",key="{}",mcp_breaker_circuit_state="{}"}}'
    settles(state.format(SERVER, "open"), 1)
    for not_now in State:
        if not_now is not State.OPEN:
            settles(state.format(SERVER, not_now.value), 0)
    first_failure = sink.calls(EARLIER_TURNS[0][0])[0].call
    assert time.strftime("%H:%M", time.gmtime(first_failure.start_ns / 1e9)) == "00:20"
    settles(
        f'mcp_breaker_circuit_failing_since_timestamp_seconds{{scope="server",key="{SERVER}"}}',
        first_failure.end_ns / 1e9,
        tolerance=1e-3,
    )
    assert replay.probes_failed() == 2
    settles('sum(mcp_breaker_probes_total{scope="server",result="failed"})', 2)
    settles(
        'sum(mcp_breaker_circuit_transitions_total{scope="server",from_state="closed",'
        'to_state="open",reason="consecutive_failures"})',
        1,
    )
    # The other server's calls are told apart: two worked, one was the user's "no" (not a
    # failure), one hid a failure behind isError false.
    other = f'server="{OTHER_SERVER}",tool="{OTHER_TOOL}"'
    settles(f'sum(mcp_breaker_tool_calls_total{{{other},outcome="ok"}})', 2)
    settles(f'sum(mcp_breaker_neutral_calls_total{{{other},reason="declined"}})', 1)
    settles(f"sum(mcp_breaker_hidden_failures_total{{{other}}})", 1)
    settles(
        f'sum(mcp_breaker_tool_calls_total{{{other},outcome="failed",failure_class="hidden"}})',
        1,
    )
    settles(f"sum(mcp_breaker_dead_calls_total{{{other}}}) or vector(0)", 0)
    # The seed's listings from the old instrument: 21 cached ones ambiguous, 4 cold.
    roster = Counter(f.state.value for f in sink.roster())
    assert roster == {"ambiguous": 21, "cold": 4}
    for listing_state, count in roster.items():
        settles(f'sum(mcp_breaker_tool_listings_total{{state="{listing_state}"}})', count)
    # Every span in the hop's own counters, none lost.
    settles(
        'mcp_breaker_receiver_accepted_spans_total{transport="grpc"}',
        len(replay.spans) + len(sink.roster()),
    )

    # From the number to the trace behind it: Prometheus kept each dead-call series'
    # exemplar, and the latest one is the latest call the series counted.
    latest = replay.latest_dead_by_rule()
    dead_traces = {d.call.trace_id.hex() for d in dead}

    def exemplars_by_rule() -> dict[str, list[dict[str, Any]]]:
        return {
            series["seriesLabels"]["rule"]: series["exemplars"]
            for series in prometheus.exemplars("mcp_breaker_dead_calls_total")
        }

    def newest_are_latest() -> bool:
        found = exemplars_by_rule()
        newest = {
            rule: max(exemplars, key=lambda e: float(e["timestamp"]))["labels"]["trace_id"]
            for rule, exemplars in found.items()
            if exemplars
        }
        return newest == {rule: d.call.trace_id.hex() for rule, d in latest.items()}

    eventually(
        newest_are_latest,
        lambda: f"the latest dead-call exemplars; Prometheus has {exemplars_by_rule()}",
    )
    for rule, exemplars in exemplars_by_rule().items():
        for exemplar in exemplars:  # older ones, if a scrape fell mid-replay: replayed too
            assert exemplar["labels"]["trace_id"] in dead_traces & replay.trace_ids, rule
    (refused,) = exemplars_by_rule()["server"]
    assert refused["labels"] == {
        "trace_id": latest["server"].call.trace_id.hex(),
        "span_id": latest["server"].call.span_ids[0].hex(),
    }
    assert latest["server"].call.turn == SEED_TURN
    assert float(refused["timestamp"]) == pytest.approx(
        latest["server"].call.end_ns / 1e9, abs=1e-3
    )


ALERT_RULES = Path(__file__).resolve().parents[1] / "deploy" / "prometheus" / "alerts.yaml"
DEAD_CALLS_ENFORCED = 'mcp_breaker_dead_calls_total{mode="enforced"}'


def test_increase_counts_the_first_burst_and_the_dead_calls_alert_goes_pending_with_it(
    running: tuple[ServiceThread, Sink], tmp_path: Path
) -> None:
    """A real Prometheus scraping every two seconds, with the shipped alert rules evaluated
    as often, through the seed replay. Every dead-call series is first seen at zero,
    so increase() over the last minute counts every dead call, the first burst included;
    and MCPBreakerDeadCallsRising goes pending within a scrape and an evaluation of the
    first dead calls (it fires its 5-minute for: later; that is promtool's to test)."""
    service, sink = running
    target = f"{LOOPBACK}:{service.service.ports['telemetry']}"
    prometheus = PrometheusServer(tmp_path, [target], rule_files=[ALERT_RULES]).start()
    try:
        wait_until(lambda: prometheus.value('up{job="mcp-breaker"}') == 1, SCRAPE_SETTLE_S)
        replay = replay_the_incident(service, sink)
        replayed_at = time.time()
        total = len(replay.dead())
        assert total == 13

        # Born at zero, in Prometheus's own view: each series' first sample is 0.
        def born_at_zero() -> bool:
            first = prometheus.query(f"min_over_time({DEAD_CALLS_ENFORCED}[5m])")
            return bool(first) and all(float(s["value"][1]) == 0.0 for s in first)

        wait_until(
            born_at_zero,
            SCRAPE_SETTLE_S,
            f"dead-call series first seen at 0\n{prometheus.log_tail()}",
        )

        # increase() over the last minute: every dead call, within what its extrapolation to
        # the end of the window adds (less than a scrape interval's worth).
        seen: list[float | None] = []

        def counted() -> bool:
            seen.append(prometheus.value(f"sum(increase({DEAD_CALLS_ENFORCED}[1m]))"))
            return seen[-1] is not None and total <= seen[-1] <= total * 1.25

        wait_until(counted, SCRAPE_SETTLE_S, f"increase gave {seen[-1:]} for {total} dead calls")
        assert prometheus.value(f"sum({DEAD_CALLS_ENFORCED})") == total

        def pending() -> list[dict[str, Any]]:
            return [
                a
                for a in prometheus.alerts()
                if a["labels"].get("alertname") == "MCPBreakerDeadCallsRising"
                and a["labels"].get("server") == SERVER
            ]

        wait_until(lambda: bool(pending()), SCRAPE_SETTLE_S, f"the alert\n{prometheus.log_tail()}")
        (alert,) = pending()
        assert alert["state"] == "pending"
        active_at = datetime.fromisoformat(alert["activeAt"].replace("Z", "+00:00")).timestamp()
        # Pending from the first scrape that saw the burst: within some scrape and
        # evaluation intervals of the replay (a loose bound, for a loaded machine), not
        # fifteen minutes on.
        assert active_at - replayed_at < 60, (active_at, replayed_at)
    finally:
        prometheus.stop()
        print(prometheus.log_tail())
