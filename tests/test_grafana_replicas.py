"""The Grafana dashboard with replicas: a real Prometheus scraping three real replicas that
share one real ``redis-server``, asked the dashboard's own queries.

The circuits and advisories are replicated (every replica holds them all), so a panel of
them must show one replica's view: its value is compared with the truth, read from the
replicas' ``GetState`` and from what was sent, and never three times it. Work (calls,
transitions, events applied) is counted where it happened, so its panels sum. Then Redis
is killed: the shared-state panels show every replica deciding alone, and the same
Prometheus, loaded with deploy/prometheus/alerts.yaml, holds MCPBreakerReplicasSplit
pending for each (its 5 minutes are promtool's to test: deploy/prometheus/alerts.test.yaml).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from processor.advisories.v1 import advisories_pb2 as pb
from tests.prometheus_server import PrometheusServer
from tests.redis_server import RedisServer
from tests.replicas import ReplicaProcess, circuits_of, tool_calls
from tests.sdk import export_grpc
from tests.support import LOOPBACK, wait_until
from tests.test_grafana_dashboard import as_grafana_sends_it, panels, shared_state_only
from tests.test_roster_replay import listing_spans

ROOT = Path(__file__).resolve().parent.parent
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yaml"
SETTLE_S = 60.0  # a bound on waiting for replicas and scrapes, never a measurement
FAILING = [f"down-{i}" for i in range(6)]  # each opened at one replica, in turn
HEALTHY = [f"up-{i}" for i in range(3)]  # ok calls only: closed circuits
OK_CALLS = 2
OFFERED = 12  # tools in the one harness's latest listing
STATES = ("closed", "open", "half_open", "forced_open", "forced_closed")
WINDOW = re.compile(r"\b(?:rate|increase)\((mcp_breaker_\w+\{[^}]*\})\[\$__rate_interval\]\)")

pytestmark = pytest.mark.timeout(300)


def query_of(title: str, ref: str = "A") -> str:
    (panel,) = [p for p in panels() if p["title"] == title]
    (target,) = [t for t in panel["targets"] if t["refId"] == ref]
    return as_grafana_sends_it(str(target["expr"]))


def cumulative(title: str, ref: str = "A") -> str:
    """A work panel's query over the whole run: its counter itself, not its rate over a
    window, so the sum it takes can be compared with what was sent, to the call."""
    (panel,) = [p for p in panels() if p["title"] == title]
    (target,) = [t for t in panel["targets"] if t["refId"] == ref]
    expr = WINDOW.sub(r"\1", str(target["expr"]))
    assert "$__rate_interval" not in expr, expr
    return as_grafana_sends_it(expr)


def settle(predicate: Callable[[], bool], what: str, seen: object) -> None:
    """Wait for ``predicate``; on timeout, say what was seen last (not what was seen when
    the wait began)."""
    try:
        wait_until(predicate, SETTLE_S, what)
    except AssertionError as error:
        raise AssertionError(f"{error}; last seen: {seen}") from None


def by_labels(result: list[dict[str, Any]], *labels: str) -> dict[tuple[str, ...], float]:
    table: dict[tuple[str, ...], float] = {}
    for series in result:
        key = tuple(series["metric"].get(label, "") for label in labels)
        assert key not in table, f"{key} twice in {result}"
        table[key] = float(series["value"][1])
    return table


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


@pytest.fixture
def three(redis: RedisServer, tmp_path: Path) -> Iterator[list[ReplicaProcess]]:
    # Long open periods and no jitter: nothing moves by itself while the test reads.
    settings = ("breaker.open_base_s=3600", "breaker.open_jitter=0")
    replicas = [ReplicaProcess(n, redis.url, tmp_path, *settings) for n in ("r0", "r1", "r2")]
    try:
        for replica in replicas:
            replica.start()
        yield replicas
    finally:
        for replica in replicas:
            replica.kill()


@pytest.fixture
def prometheus(three: list[ReplicaProcess], tmp_path: Path) -> Iterator[PrometheusServer]:
    targets = [f"{LOOPBACK}:{r.ports['telemetry']}" for r in three]
    workdir = tmp_path / "prometheus"
    workdir.mkdir()
    server = PrometheusServer(workdir, targets, rule_files=[ALERTS])
    try:
        yield server.start()
    finally:
        server.stop()
        print(server.log_tail())  # shown by pytest only when the test failed


def drive(replicas: list[ReplicaProcess]) -> Counter[str]:
    """Open FAILING's circuits, each at one replica in turn, call HEALTHY at others, and
    give each replica a listing of the same harness. The events each replica received."""
    received: Counter[str] = Counter()
    for index, server in enumerate(FAILING):
        replica = replicas[index % len(replicas)]
        spans = tool_calls([f"{server}-turn-{i}" for i in range(3)], server=server)
        assert export_grpc(replica.otlp, spans).name == "SUCCESS"
        received[replica.name] += len(spans)
    for index, server in enumerate(HEALTHY):
        replica = replicas[(index + 1) % len(replicas)]
        turns = [f"{server}-turn-{i}" for i in range(OK_CALLS)]
        spans = tool_calls(turns, server=server, outcome="ok")
        assert export_grpc(replica.otlp, spans).name == "SUCCESS"
        received[replica.name] += len(spans)
    for replica in replicas:
        listing = listing_spans([{"mcp.tools.offered": OFFERED, "mcp.turn.id": replica.name}])
        assert export_grpc(replica.otlp, listing).name == "SUCCESS"
        received[replica.name] += len(listing)
    return received


def agreed_state(replicas: list[ReplicaProcess]) -> pb.GetStateResponse:
    """Every replica's GetState once they all show FAILING's circuits open, alike (their
    circuits and states, and as many advisories; deadlines are not this test's concern)."""
    seen: list[object] = []
    out = {(pb.SCOPE_SERVER, "", server) for server in FAILING}

    def agree() -> bool:
        states = [r.state() for r in replicas]
        views = [{k: state for k, (state, _) in circuits_of(s).items()} for s in states]
        counts = [len(s.advisories) for s in states]
        seen[:] = [views, counts]
        alike = all(v == views[0] for v in views) and len(set(counts)) == 1
        return out <= views[0].keys() and alike

    settle(agree, "the replicas to agree", seen)
    return replicas[0].state()


def test_replicated_panels_show_the_truth_once_and_work_is_summed(
    three: list[ReplicaProcess], prometheus: PrometheusServer, redis: RedisServer
) -> None:
    received = drive(three)
    state = agreed_state(three)
    circuits = circuits_of(state)
    scope_name: dict[int, str] = {pb.SCOPE_SERVER: "server", pb.SCOPE_TOOL: "tool"}
    not_closed = {(scope_name[scope], key, "open") for (scope, _, key), _ in circuits.items()}
    assert all(state_ == pb.STATE_OPEN for state_, _ in circuits.values())
    assert len(not_closed) == 2 * len(FAILING)  # each server's circuit and its tool's
    truth_by_state = {(scope, s): 0.0 for scope in ("server", "tool") for s in STATES}
    for scope, _, _ in not_closed:
        truth_by_state[(scope, "open")] += 1
    for scope in ("server", "tool"):
        truth_by_state[(scope, "closed")] = len(HEALTHY)  # a server and a tool each
    advisories = len(state.advisories)
    assert advisories >= len(not_closed)

    # -- replicated state: one replica's view, equal to the truth ------------------------
    circuits_query = query_of("Circuits by state")
    advisories_query = query_of("Advisories in force")
    offered_query = query_of("Tools offered")
    table_query = query_of("Circuits not closed")
    failing_query = query_of("Failing for")
    shown: dict[str, object] = {}

    def replicated_panels_right() -> bool:
        shown["circuits"] = by_labels(prometheus.query(circuits_query), "scope", "state")
        shown["advisories"] = prometheus.value(advisories_query)
        shown["offered"] = by_labels(prometheus.query(offered_query), "harness")
        rows = prometheus.query(table_query)
        shown["rows"] = sorted(
            (r["metric"]["scope"], r["metric"]["key"], r["metric"]["mcp_breaker_circuit_state"])
            for r in rows
        )
        shown["failing"] = sorted(
            (r["metric"]["scope"], r["metric"]["key"]) for r in prometheus.query(failing_query)
        )
        return (
            shown["circuits"] == truth_by_state
            and shown["advisories"] == advisories
            and shown["offered"] == {("harness-under-test",): OFFERED}
            and shown["rows"] == sorted(not_closed)
            and shown["failing"] == sorted((scope, key) for scope, key, _ in not_closed)
        )

    # What the panels showed before, once every replica's scrape holds it all: each
    # replica's copy added up, three times the truth.
    summed = 'sum(mcp_breaker_advisories{job=~"mcp-breaker"})'
    opened = 'sum(mcp_breaker_circuits{job=~"mcp-breaker", state="open"})'
    wait_until(
        lambda: (
            prometheus.value(summed) == 3 * advisories
            and prometheus.value(opened) == 3 * len(not_closed)
        ),
        SETTLE_S,
        "every replica scraped with the whole state",
    )
    settle(replicated_panels_right, "the replicated panels", shown)

    # -- work: counted where it happened, summed ----------------------------------------
    calls_query = cumulative("Tool calls by outcome")
    transitions_query = cumulative("Transitions")
    calls_truth = {("failed", "transport"): 3 * len(FAILING), ("ok", ""): OK_CALLS * 3}
    # Each circuit opened once, at the replica its failures reached; the others applied
    # those events and count no transition of their own.
    opens_truth = {("server", "open"): len(FAILING), ("tool", "open"): len(FAILING)}

    def work_panels_right() -> bool:
        shown["calls"] = by_labels(prometheus.query(calls_query), "outcome", "failure_class")
        opens: Counter[tuple[str, str]] = Counter()
        for (scope, to_state, _), count in by_labels(
            prometheus.query(transitions_query), "scope", "to_state", "reason"
        ).items():
            opens[(scope, to_state)] += int(count)
        shown["opens"] = dict(opens)
        return shown["calls"] == calls_truth and shown["opens"] == opens_truth

    # A new counter series is scraped at zero first (docs/metrics.md): wait for its count.
    settle(work_panels_right, "the work panels", shown)

    # -- shared state, per replica -------------------------------------------------------
    instance = {f"{LOOPBACK}:{r.ports['telemetry']}": r.name for r in three}
    total = sum(received.values())
    applied_truth = {r.name: float(total - received[r.name]) for r in three}
    up_query = query_of("Shared state up, by replica")
    alone_query = query_of("Replicas deciding alone")
    applied_query = cumulative("Events through the shared stream, by replica", "B")
    unreadable_query = cumulative("Unreadable, dropped and waiting events, by replica", "A")

    def per_replica(expr: str) -> dict[str, float]:
        return {instance[k]: v for (k,), v in by_labels(prometheus.query(expr), "instance").items()}

    def shared_panels(up: float, alone: float) -> bool:
        shown.update(
            up=per_replica(up_query),
            alone=prometheus.value(alone_query),
            applied=per_replica(applied_query),
            unreadable=per_replica(unreadable_query),
        )
        return (
            shown["up"] == {r.name: up for r in three}
            and shown["alone"] == alone
            and shown["applied"] == applied_truth
            and shown["unreadable"] == {r.name: 0.0 for r in three}
        )

    settle(lambda: shared_panels(1.0, 0.0), "the shared-state panels", shown)
    # The panels test_grafana_dashboard cannot fill (the in-memory backend exports no
    # shared-state metric) show data here, every query of them.
    exempt = [p for p in panels() if shared_state_only(p)]
    assert {p["title"] for p in exempt} == {
        "Replicas deciding alone",
        "Shared state up, by replica",
        "Events through the shared stream, by replica",
        "Unreadable, dropped and waiting events, by replica",
    }
    for panel in exempt:
        for target in panel["targets"]:
            assert prometheus.query(as_grafana_sends_it(target["expr"])), panel["title"]
    assert not [
        a for a in prometheus.alerts() if a["labels"]["alertname"] == "MCPBreakerReplicasSplit"
    ]

    # -- Redis lost: every replica decides alone, and the alert goes pending for each ----
    redis.kill()
    settle(lambda: shared_panels(0.0, 3.0), "the split shown", shown)

    def pending_for_each() -> bool:
        split = [
            a for a in prometheus.alerts() if a["labels"]["alertname"] == "MCPBreakerReplicasSplit"
        ]
        shown["alerts"] = split
        return sorted(instance[a["labels"]["instance"]] for a in split) == ["r0", "r1", "r2"]

    settle(pending_for_each, "MCPBreakerReplicasSplit pending", shown)
    alerts = shown["alerts"]
    assert isinstance(alerts, list)
    # Its for: is 5 minutes, so pending here: firing is promtool's to show.
    assert {a["state"] for a in alerts} == {"pending"}
    assert {a["labels"]["severity"] for a in alerts} == {"critical"}
