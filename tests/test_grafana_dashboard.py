"""The Grafana dashboard (deploy/grafana/mcp-breaker.json): its queries read the catalogue's
metrics, parse, and show data from a real Prometheus that scraped the service.

The scrape is the one tests/test_metrics_prometheus.py reads like the incident report: the
sirens-echo seed replayed through the running service (dead calls, the open server circuit,
hidden failures, a declined call, the old instrument's listings), plus what the seed does
not hold and the dashboard shows: a turn whose roster collapsed, a listing with namespaces
connected but missing, a harness's Check call. Every panel query, with Grafana's variables
put in as Grafana would, must then give Prometheus's API at least one series (but the
shared-state panels': the service runs on the in-memory backend, which exports none; they
are filled by three replicas on Redis in tests/test_grafana_replicas.py, which also checks
that the replicated-state panels show the truth once, not once per replica).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from processor.telemetry.catalogue import CATALOGUE, SHARED, Merge
from tests.prometheus_server import PrometheusServer
from tests.sdk import export_grpc
from tests.support import LOOPBACK, CaptureCollector, ServiceThread, make_config, wait_until
from tests.test_alert_rules import (
    MATCHER_LABEL,
    METRIC_NAME,
    QUOTED,
    SELECTOR,
    allowed_labels,
    scraped_names,
)
from tests.test_metrics_prometheus import SCRAPE_SETTLE_S, Sink, replay_the_incident
from tests.test_roster_replay import OFFERED_BY_ROUND, listing_spans

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "deploy" / "grafana" / "mcp-breaker.json"
GRID_COLUMNS = 24
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
# What each variable becomes when the dashboard shows everything (Grafana's own macros
# at a plausible resolution for a one-second scrape).
VARIABLES = {
    "$__rate_interval": "1m",
    "$__range": "1h",
    '"$job"': '"mcp-breaker"',
    '"$instance"': '".*"',
}
# What the issue asks the dashboard to show, by the metric that shows it.
REQUIRED = {
    "mcp_breaker_dead_calls_total": "dead calls",
    "mcp_breaker_dead_call_seconds_total": "the seconds they cost",
    "mcp_breaker_circuit_state": "circuits open by server and tool",
    "mcp_breaker_circuit_transitions_total": "transitions",
    "mcp_breaker_tool_listings_total": "roster states",
    "mcp_breaker_roster_collapses_total": "collapses",
    "mcp_breaker_hidden_failures_total": "hidden failures",
    "mcp_breaker_neutral_calls_total": "declines",
    "mcp_breaker_receiver_accepted_spans_total": "accepted spans",
    "mcp_breaker_receiver_refused_spans_total": "refused spans",
    "mcp_breaker_exporter_sent_spans_total": "sent spans",
    "mcp_breaker_exporter_queue_capacity_spans": "queue fill",
    "mcp_breaker_advisory_subscribers": "advisory subscribers",
    "mcp_breaker_shared_state_up": "replicas deciding alone",
    "mcp_breaker_shared_events_applied_total": "events applied by each replica",
    "mcp_breaker_shared_events_unreadable_total": "unreadable stream entries",
}
# Exported only with state.backend redis.
SHARED_NAMES = {spec.scraped_name for spec in SHARED}
# What every replica holds alike (the circuits, the advisories) or holds its latest of (a
# harness's listing): the catalogue's policy for combining workers is the one for replicas.
ONE_VIEW = {spec.scraped_name for spec in CATALOGUE if spec.workers in (Merge.ONE, Merge.MAX)}
ONE_VIEW_AGGREGATIONS = {"max", "min"}
WINDOWED = {"rate", "increase", "irate", "delta", "max_over_time", "min_over_time"}
CALL_BEFORE = re.compile(r"([a-z_]+)\s*(?:(?:by|without)\s*\([^)]*\)\s*)?$")


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target of every panel."""
    return [(p["title"], t["expr"]) for p in panels() for t in p["targets"]]


def shared_state_only(panel: dict[str, Any]) -> bool:
    """A panel every query of which reads only shared-state metrics (redis backend)."""
    return all(set(METRIC_NAME.findall(t["expr"])) <= SHARED_NAMES for t in panel["targets"])


def enclosing_call(expr: str, at: int) -> tuple[str, int]:
    """The function or aggregation whose parentheses hold position ``at``, and where its
    name starts ("" if none)."""
    depth = 0
    for index in range(at - 1, -1, -1):
        if expr[index] == ")":
            depth += 1
        elif expr[index] == "(":
            if depth == 0:
                found = CALL_BEFORE.search(expr[:index])
                return (found.group(1), found.start()) if found else ("", index)
            depth -= 1
    return "", 0


def as_grafana_sends_it(expr: str) -> str:
    for variable, value in VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"a variable left in {expr}"
    return expr


# -- the file -------------------------------------------------------------------------------
def test_the_dashboard_is_one_grid_of_prometheus_panels() -> None:
    board = dashboard()
    assert (board["uid"], board["title"]) == ("mcp-breaker", "mcp-breaker")
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("job", "instance"):
        assert variables[name]["datasource"] == DATASOURCE and variables[name]["includeAll"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    taken: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= GRID_COLUMNS, panel["title"]
        cells = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells
    for panel in panels():
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["description"].strip(), f"{panel['title']}: no description"
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]
        assert all(t["datasource"] == DATASOURCE for t in panel["targets"]), panel["title"]


def test_every_query_reads_only_catalogued_metrics_and_labels() -> None:
    known = scraped_names()
    for title, expr in queries():
        text = QUOTED.sub('""', expr)
        used = set(METRIC_NAME.findall(text))
        assert used, f"{title}: reads no mcp_breaker_ metric"
        assert not used - known.keys(), f"{title}: not in the catalogue: {used - known.keys()}"
        labels_of_used = set().union(*(allowed_labels(m, known[m]) for m in used))
        for metric, matchers in SELECTOR.findall(text):
            extra = set(MATCHER_LABEL.findall(matchers)) - allowed_labels(metric, known[metric])
            assert not extra, f"{title}: {metric} has no label {sorted(extra)}"
        for grouping in GROUPING.findall(text):
            by = {label.strip() for label in grouping.split(",") if label.strip()}
            assert by <= labels_of_used, f"{title}: groups by {sorted(by - labels_of_used)}"
        assert 'job=~"$job"' in expr and 'instance=~"$instance"' in expr, title


def test_replicated_state_is_one_replicas_view_never_a_sum_over_replicas() -> None:
    """Each replica exports the whole shared state: a panel of it that added replicas up
    would show three circuits for one with three replicas. The aggregation nearest to such
    a metric (past a rate or increase over time) must be max or min; sums come after."""
    for title, expr in queries():
        for found in SELECTOR.finditer(expr):
            if found.group(1) not in ONE_VIEW:
                continue
            call, start = enclosing_call(expr, found.start())
            while call in WINDOWED:
                call, start = enclosing_call(expr, start)
            assert call in ONE_VIEW_AGGREGATIONS, (
                f"{title}: {found.group(1)} is replicated; {call or 'nothing'} over it "
                "adds the replicas' copies up"
            )


def test_the_dashboard_shows_what_sres_asked_for() -> None:
    shown = {name for _, expr in queries() for name in METRIC_NAME.findall(expr)}
    missing = {what for metric, what in REQUIRED.items() if metric not in shown}
    assert not missing, f"no panel shows: {sorted(missing)}"


# -- against a real Prometheus --------------------------------------------------------------
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
    server = PrometheusServer(tmp_path, [f"{LOOPBACK}:{service.service.ports['telemetry']}"])
    try:
        yield server.start()
    finally:
        server.stop()
        print(server.log_tail())  # shown by pytest only when the test failed


def what_the_seed_lacks(service: ServiceThread, sink: Sink) -> None:
    """A collapse, namespaces connected but missing, and a harness asking Check."""
    before = len(sink.roster())
    turn = [
        {
            "mcp.tools.configured": 12,
            "mcp.tools.registered": 12,
            "mcp.tools.unavailable": 0,
            "mcp.tools.reached": 0,
            "mcp.tools.cached": True,
            "mcp.tools.offered": offered,
            "mcp.turn.id": "turn-collapse",
            "mcp.turn.round": round_,
        }
        for round_, offered in OFFERED_BY_ROUND
    ]
    missing = {
        "mcp.tools.configured": 4,
        "mcp.tools.registered": 4,
        "mcp.tools.reached": 4,
        "mcp.tools.cached": False,
        "mcp.namespaces.connected": ["gitea-author", "gitea-reviewer"],
        "mcp.namespaces.attached": ["gitea-author"],
        "mcp.turn.id": "turn-namespaces",
    }
    listings = listing_spans([*turn, missing])
    export_grpc(service.grpc_endpoint, listings)
    wait_until(lambda: len(sink.roster()) == before + len(listings), what="the listings")
    assert any(f.collapse is not None for f in sink.roster())
    port = service.service.ports["advisories"]
    with grpc.insecure_channel(f"{LOOPBACK}:{port}") as channel:
        answer = pb_grpc.AdvisoriesStub(channel).Check(
            pb.CheckRequest(server="playwright", tool="browser_navigate", turn="turn-check"),
            timeout=10,
        )
    # The seed left the playwright circuit open; by the wall clock its period may be over.
    assert answer.verdict in (pb.VERDICT_DENY, pb.VERDICT_PROBE)


def test_every_query_parses_and_shows_data_from_the_scrape(
    running: tuple[ServiceThread, Sink], prometheus: PrometheusServer
) -> None:
    service, sink = running
    replay_the_incident(service, sink)
    what_the_seed_lacks(service, sink)
    pending = {
        (p["title"], as_grafana_sends_it(t["expr"]))
        for p in panels()
        if not shared_state_only(p)
        for t in p["targets"]
    }
    for title, expr in sorted(pending):
        try:
            prometheus.query(expr)  # Prometheus refuses one that does not parse: 400
        except AssertionError as error:
            pytest.fail(f"{title}: Prometheus does not take {expr}: {error}")

    def all_answered() -> bool:
        for title, expr in sorted(pending):
            if prometheus.query(expr):
                pending.discard((title, expr))
        return not pending

    try:
        wait_until(all_answered, SCRAPE_SETTLE_S)
    except AssertionError:
        empty = "\n".join(f"  {title}: {expr}" for title, expr in sorted(pending))
        raise AssertionError(f"no data for:\n{empty}\n{prometheus.log_tail()}") from None
    # The in-memory backend exports no shared-state series (so the split alert, which reads
    # one, cannot fire for it): the panels left out above have nothing to show here.
    for name in sorted(SHARED_NAMES):
        assert not prometheus.query(name), f"{name} exported by the in-memory backend"
