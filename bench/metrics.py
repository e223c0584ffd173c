"""Metrics cost per decision, scrape time at the series cap, and memory per series.

    .venv/bin/python bench/metrics.py [--decisions 20000] [--rounds 5]
    .venv/bin/python bench/metrics.py --quick    # a smoke test: a few seconds

Cost: FindingMetrics.__call__ over the CallDecisions a real Breaker made from engines.py's
stream (2,000 turns, 300 tools, 20% failures), in µs per decision, next to a baseline
measured in the same run: a dict counter increment per decision. Also the cost when every
call names a new tool past the cap (the cardinality attack: each update is folded).

Scrape: collect, and collect + generate_latest (text and OpenMetrics), with every bounded
metric at the default cap of 2,000 series and 2,000 circuits to read. Memory: tracemalloc's
growth per new series of a table, for a counter series and a histogram series (with one
exemplar), label strings excluded (they are the engines' too).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from engines import stream
from mcp_breaker_client.shared.verdict import FailureClass, NeutralReason, Outcome, Verdict
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest as text_latest
from prometheus_client.openmetrics import exposition

from processor.classify.events import Dialect, ToolListing
from processor.classify.pairing import PairingStats
from processor.config import BreakerConfig, Rule, TelemetryConfig
from processor.config.telemetry import DEFAULT_MAX_SERIES_PER_METRIC
from processor.engines.breaker import Breaker, CallDecision
from processor.engines.roster import RosterHealth
from processor.telemetry.catalogue import CALL_DURATION_BUCKETS_S
from processor.telemetry.findings import FindingMetrics
from processor.telemetry.series import CounterValue, Exemplar, HistogramValue, SeriesTable

SERIES = DEFAULT_MAX_SERIES_PER_METRIC
# prometheus_client's OpenMetrics exposition is untyped; this is its signature.
openmetrics_latest: Callable[[CollectorRegistry], bytes] = exposition.generate_latest
T = TypeVar("T")


def decisions_of(breaker: Breaker, events: int, tools: int, seed: int = 7) -> list[CallDecision]:
    return [breaker.observe(call) for call in stream(events, turns=2_000, tools=tools, seed=seed)]


def best_us_per(work: Callable[[], None], count: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter_ns()
        work()
        best = min(best, (time.perf_counter_ns() - started) / count / 1_000)
    return best


def best_ms(work: Callable[[], T], rounds: int) -> tuple[float, T]:
    """The best time in ms, and what the work returned."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter_ns()
        result = work()
        best = min(best, (time.perf_counter_ns() - started) / 1e6)
    return best, result


def metrics_for(breaker: Breaker, max_series: int = SERIES) -> FindingMetrics:
    return FindingMetrics(
        TelemetryConfig(max_series_per_metric=max_series), breaker, PairingStats(), lambda: 0.0
    )


def full_metrics() -> FindingMetrics:
    """Every bounded table at the cap, and the breaker holding as many circuits."""
    breaker = Breaker(BreakerConfig(max_circuits=4 * SERIES), jitter=lambda: 0.5)
    metrics = metrics_for(breaker)
    roster = RosterHealth()
    calls = stream(SERIES, turns=SERIES, tools=1, seed=11)
    for i, made in enumerate(calls):
        decision = breaker.observe(replace(made, tool=f"tool-{i}"))  # a circuit per tool
        call = decision.call
        tool = f"other-{i}"
        metrics(decision)  # tool_calls, the duration histogram
        dead = replace(decision, dead_call=True, rule=Rule.TOOL, stale_roster=True)
        metrics(replace(dead, call=replace(call, tool=tool)))  # dead calls, seconds, stale
        hidden = replace(call, tool=tool, verdict=_HIDDEN)
        metrics(replace(decision, call=hidden))
        neutral = replace(call, tool=tool, verdict=_DECLINED)
        metrics(replace(decision, call=neutral))
    for i in range(SERIES):
        metrics(roster.observe(_listing(i)))
    return metrics


_HIDDEN = Verdict(outcome=Outcome.FAILED, failure_class=FailureClass.HIDDEN)
_DECLINED = Verdict(outcome=Outcome.NEUTRAL, neutral_reason=NeutralReason.DECLINED)


def _listing(i: int) -> ToolListing:
    start = 1_700_000_000_000_000_000 + i * 1_000_000_000
    return ToolListing(
        turn=f"turn-{i}",
        round=1,
        server=f"server-{i}",
        configured=3,
        offered=12,
        namespaces_connected=("a", "b"),
        namespaces_attached=("a",),
        start_ns=start,
        end_ns=start + 50_000_000,
        trace_id=i.to_bytes(16, "big"),
        span_ids=(i.to_bytes(8, "big"),),
        dialect=Dialect.HARNESS,
        harness=f"harness-{i}",
    )


def bytes_per_series(
    make: Callable[[SeriesTable[CounterValue], SeriesTable[HistogramValue], int], None], count: int
) -> float:
    counters: SeriesTable[CounterValue] = SeriesTable(CounterValue, count, 3600.0)
    histograms: SeriesTable[HistogramValue] = SeriesTable(
        lambda: HistogramValue(CALL_DURATION_BUCKETS_S), count, 3600.0
    )
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(count):
        make(counters, histograms, i)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return grown / count


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--decisions", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2,000 decisions, 1 round")
    args = parser.parse_args()
    if args.quick:
        args.decisions, args.rounds = 2_000, 1

    breaker = Breaker(BreakerConfig(), jitter=lambda: 0.5)
    decisions = decisions_of(breaker, args.decisions, tools=300)
    flood_breaker = Breaker(BreakerConfig(max_circuits=4 * args.decisions), jitter=lambda: 0.5)
    flood = decisions_of(flood_breaker, args.decisions, tools=10 * args.decisions, seed=3)

    def record_all() -> None:
        metrics = metrics_for(breaker)
        for decision in decisions:
            metrics(decision)

    def record_flood() -> None:
        metrics = metrics_for(flood_breaker, max_series=50)  # past the cap from the start
        for decision in flood:
            metrics(decision)

    def count_all() -> None:
        counts: dict[str, int] = {}
        for decision in decisions:
            tool = decision.call.tool
            counts[tool] = counts.get(tool, 0) + 1

    cost = best_us_per(record_all, len(decisions), args.rounds)
    folded = best_us_per(record_flood, len(flood), args.rounds)
    baseline = best_us_per(count_all, len(decisions), args.rounds)

    full = full_metrics()
    registry = CollectorRegistry()
    registry.register(full)
    scrape_rounds = max(1, min(args.rounds, 3))
    collect_ms, families = best_ms(lambda: list(full.collect()), scrape_rounds)
    # What a scrape holds the event loop for: the copy; the rest runs in a thread.
    snapshot_ms, _ = best_ms(full.snapshot, scrape_rounds)
    text_ms, text = best_ms(lambda: text_latest(registry), scrape_rounds)
    openmetrics_ms, _ = best_ms(lambda: openmetrics_latest(registry), scrape_rounds)
    samples = sum(len(family.samples) for family in families)
    states = next(len(f.samples) for f in families if f.name == "mcp_breaker_circuit_state")

    labels = [("server", f"tool-{i}", "ok", "") for i in range(SERIES)]
    trace, span = "ab" * 16, "cd" * 8

    def counter(c: SeriesTable[CounterValue], h: SeriesTable[HistogramValue], i: int) -> None:
        c.at(labels[i], 0.0).add(1)

    def histogram(c: SeriesTable[CounterValue], h: SeriesTable[HistogramValue], i: int) -> None:
        h.at(labels[i][:3], 0.0).observe(0.3, Exemplar(trace, span, 0.3, 1_700_000_000.0))

    print(f"decisions: {len(decisions):,} (2,000 turns, 300 tools, 20% failures)")
    print(f"FindingMetrics.__call__     {cost:10.2f} µs/decision")
    print(f"  every call a new tool      {folded:10.2f} µs/decision (folded past a cap of 50)")
    print(f"dict counter (baseline)     {baseline:10.2f} µs/decision")
    print(f"ratio                       {cost / baseline:10.1f}x")
    print(
        f"scrape at {SERIES:,} series per metric ({samples:,} samples, "
        f"{states:,} of them circuit states; {len(text) / 1e6:.1f} MB of text):"
    )
    print(f"  copy on the event loop     {snapshot_ms:10.1f} ms (snapshot; the rest in a thread)")
    print(f"  collect                    {collect_ms:10.1f} ms")
    print(f"  collect + text format      {text_ms:10.1f} ms")
    print(f"  collect + OpenMetrics      {openmetrics_ms:10.1f} ms")
    print(f"memory per counter series   {bytes_per_series(counter, SERIES):10,.0f} bytes")
    print(
        f"memory per histogram series {bytes_per_series(histogram, SERIES):10,.0f} bytes "
        f"({len(CALL_DURATION_BUCKETS_S) + 1} buckets, one exemplar)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
