"""Metrics derived from the analysis: a sink for its findings, a collector for the scrape.

``FindingMetrics`` is one of the pipeline's consumers: each call decision and roster
finding updates plain counters here (bounded ``SeriesTable``s for the labels outsiders
name). At scrape time ``collect`` translates them into Prometheus families, and reads the
breaker's circuits and the classifier's pairing counts live, never copying them.

Everything runs on the service's event loop (the analysis and the scrape both do), so
nothing here needs a lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from mcp_breaker_client.shared.verdict import FailureClass, NeutralReason, Outcome
from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Exemplar as PromExemplar

from processor.classify.events import ToolCall
from processor.classify.pairing import PairingStats
from processor.config import Rule, TelemetryConfig
from processor.engines.bounded import LruMap
from processor.engines.breaker import Breaker, CallDecision
from processor.engines.circuit import CircuitKey, State, Transition, Trigger
from processor.engines.roster import ListingState, RosterFinding
from processor.engines.turns import NS_PER_S
from processor.telemetry import catalogue as c
from processor.telemetry.catalogue import CALL_DURATION_BUCKETS_S, Kind, MetricSpec
from processor.telemetry.series import (
    OVERFLOW_LABEL,
    CounterValue,
    Exemplar,
    GaugeValue,
    HistogramValue,
    SeriesTable,
    SeriesValue,
    label_value,
)

MAX_COLLAPSES_REMEMBERED = 4096  # turns whose collapses (their first rounds) were counted
MAX_COLLAPSES_PER_TURN = 8  # the latest first rounds counted, per turn
# The metrics updated from findings, each in a bounded table; the rest are read at scrape.
RECORDED = (
    c.TOOL_CALLS,
    c.CALL_DURATION,
    c.DEAD_CALLS,
    c.DEAD_CALL_SECONDS,
    c.HIDDEN_FAILURES,
    c.NEUTRAL_CALLS,
    c.LISTINGS,
    c.OFFERED_TOOLS,
    c.COLLAPSES,
    c.NAMESPACES_MISSING,
    c.STALE_ROSTER,
    c.REJECTED_BY_SENDER,  # counted by the forwarder, bounded here with the others
)
PROBE_RESULTS = ("granted", "succeeded", "failed")
REFUSED = "refused"  # the outcome label of a call an advisory kept the harness from making
MAX_CLOCK_SKEW_S = 60.0  # span clocks ahead of ours by more than this are not believed
_PROBE_RESULT = {Trigger.PROBE_SUCCEEDED: "succeeded", Trigger.PROBE_FAILED: "failed"}
_SEVERITY_ORDER = {State.FORCED_OPEN: 0, State.OPEN: 1, State.HALF_OPEN: 2}  # closed last
# Label values of every call, looked up: an enum's .value is a property, read slowly.
_OUTCOME_LABEL = {outcome: outcome.value for outcome in Outcome}
_FAILURE_LABEL: dict[FailureClass | None, str] = {None: ""}
_FAILURE_LABEL.update((failure, failure.value) for failure in FailureClass)
_RULE_LABEL: dict[Rule | None, str] = {None: ""}  # of a dead call; "" when no rule
_RULE_LABEL.update((rule, rule.value) for rule in Rule)
_LISTING_LABEL = {state: state.value for state in ListingState}  # of every listing
# The members every call is compared with, read once: on Python 3.11 an enum member read
# off its class costs some 60 ns, a module name 10.
_REFUSED_BY_ADVISORY = NeutralReason.REFUSED_BY_ADVISORY
_HIDDEN, _NEUTRAL = FailureClass.HIDDEN, Outcome.NEUTRAL


class FindingMetrics(Collector):
    def __init__(
        self,
        config: TelemetryConfig,
        breaker: Breaker,
        pairing: PairingStats,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._config = config
        self._breaker = breaker
        self._pairing = pairing
        self._clock = clock
        self._wall = wall
        self._scrape: Snapshot | None = None  # copied by prepare_scrape for the next collect
        self._tables: dict[str, SeriesTable[SeriesValue]]
        self._tables = {}
        for spec in RECORDED:
            self._tables[spec.name] = SeriesTable(
                _maker(spec), config.max_series_per_metric, config.series_idle_s
            )
        # The two tables every call updates, held apart: looked up once, not per call.
        self._calls = self._tables[c.TOOL_CALLS.name]
        self._durations = self._tables[c.CALL_DURATION.name]
        # Closed label sets: plain dictionaries.
        self._transitions: dict[tuple[str, ...], float] = {}
        self._probes: dict[tuple[str, ...], float] = {
            (scope, result): 0 for scope in ("server", "tool") for result in PROBE_RESULTS
        }
        self._collapses_seen: LruMap[str, list[int]] = LruMap(MAX_COLLAPSES_REMEMBERED)
        self._dead_found_late: dict[tuple[str, ...], float] = {(r.value,): 0 for r in Rule}

    def count_rejected_spans(self, service_name: str, spans: int) -> None:
        """Spans the next hop refused for good, by their sender's service.name."""
        self._add(c.REJECTED_BY_SENDER, (label_value(service_name),), self._clock(), amount=spans)

    # -- the sink -------------------------------------------------------------------------
    def __call__(self, finding: object) -> None:
        if isinstance(finding, CallDecision):
            self._decision(finding)
        elif isinstance(finding, RosterFinding):
            self._roster(finding)
        # Raw events are counted through the decisions and findings made from them.

    def _decision(self, decision: CallDecision) -> None:
        now = self._clock()
        call = decision.call
        server, tool = label_value(call.server), label_value(call.tool)
        seconds = max(0, call.end_ns - call.start_ns) / NS_PER_S
        exemplar = self._exemplar(call, seconds)
        if decision.late:  # the call itself was counted when it arrived; now it is dead
            _bump(self._dead_found_late, (_RULE_LABEL[decision.rule],))
            self._dead_call(decision, server, tool, seconds, exemplar, now)
            return
        verdict = call.verdict
        failure = _FAILURE_LABEL[verdict.failure_class]
        # A call the harness did not make is not one that ran: apart, so failed / (ok +
        # failed) is a true error ratio.
        refused = verdict.neutral_reason is _REFUSED_BY_ADVISORY
        outcome = REFUSED if refused else _OUTCOME_LABEL[verdict.outcome]
        counted = self._calls.at((server, tool, outcome, failure), now)  # as _add would
        assert isinstance(counted, CounterValue)
        counted.add(1.0)
        duration = self._durations.at((server, tool, outcome), now)
        assert isinstance(duration, HistogramValue)
        duration.observe(seconds, exemplar)
        if verdict.failure_class is _HIDDEN:
            self._add(c.HIDDEN_FAILURES, (server, tool), now)
        if verdict.outcome is _NEUTRAL and verdict.neutral_reason is not None:
            self._add(c.NEUTRAL_CALLS, (server, tool, verdict.neutral_reason.value), now)
        if decision.dead_call:
            self._dead_call(decision, server, tool, seconds, exemplar, now)
        if decision.stale_roster:
            self._add(c.STALE_ROSTER, (label_value(call.harness), "offered_unknown"), now)
        if decision.transitions:
            self.count_transitions(decision.transitions)
        if decision.probe is not None:
            _bump(self._probes, (decision.probe.value, "granted"))

    def _dead_call(
        self,
        decision: CallDecision,
        server: str,
        tool: str,
        seconds: float,
        exemplar: Exemplar | None,
        now: float,
    ) -> None:
        labels = (
            server,
            tool,
            _RULE_LABEL[decision.rule],
            "enforced" if decision.enforced else "shadow",
        )
        # A counter's exemplar carries the increment (1), not the duration. (Made as
        # dataclasses.replace would, without its reading of the fields: every dead call.)
        counted = (
            Exemplar(
                trace_id=exemplar.trace_id,
                span_id=exemplar.span_id,
                value=1.0,
                at_s=exemplar.at_s,
            )
            if exemplar is not None
            else None
        )
        self._add(c.DEAD_CALLS, labels, now, exemplar=counted)
        self._add(c.DEAD_CALL_SECONDS, labels, now, amount=seconds)

    def count_transitions(self, transitions: Iterable[Transition]) -> None:
        """Circuit moves: from call decisions, and from operators (forced, released)."""
        for transition in transitions:
            scope = transition.key.scope.value
            key = (scope, transition.source.value, transition.target.value)
            _bump(self._transitions, (*key, transition.trigger.value))
            if transition.trigger in _PROBE_RESULT:
                _bump(self._probes, (scope, _PROBE_RESULT[transition.trigger]))

    def _roster(self, finding: RosterFinding) -> None:
        now = self._clock()
        listing = finding.listing
        harness, server = label_value(listing.harness), label_value(listing.server)
        self._add(c.LISTINGS, (harness, server, _LISTING_LABEL[finding.state]), now)
        # Only the offered count is tools; registered and listed count servers.
        if listing.offered is not None:
            self._set(c.OFFERED_TOOLS, (harness, server), listing.offered, now)
        collapse = finding.collapse
        if collapse is not None:
            # A collapse already counted may come back longer, at either end: listings of a
            # turn arrive in any order, so an earlier round can move its first round back.
            counted = self._collapses_seen.setdefault(collapse.turn, list)
            if not any(collapse.from_round <= r <= collapse.to_round for r in counted):
                self._add(c.COLLAPSES, (harness,), now)
            if collapse.from_round not in counted:
                counted.append(collapse.from_round)
                del counted[:-MAX_COLLAPSES_PER_TURN]
        if finding.namespaces is not None:
            self._set(c.NAMESPACES_MISSING, (harness, server), len(finding.namespaces.missing), now)
        if finding.stale_tools:
            self._add(c.STALE_ROSTER, (harness, "offered_open"), now)

    def _exemplar(self, call: ToolCall, seconds: float) -> Exemplar | None:
        if not self._config.exemplars:
            return None
        return Exemplar(
            trace_id=call.trace_id.hex(),
            span_id=call.span_ids[0].hex() if call.span_ids else "",
            value=seconds,
            at_s=call.end_ns / NS_PER_S,
        )

    def _table(self, spec: MetricSpec) -> SeriesTable[SeriesValue]:
        return self._tables[spec.name]  # by name: hashing a whole spec costs µs

    def _add(
        self,
        spec: MetricSpec,
        labels: tuple[str, ...],
        now: float,
        *,
        amount: float = 1.0,
        exemplar: Exemplar | None = None,
    ) -> None:
        value = self._tables[spec.name].at(labels, now)  # as _table, one call less
        assert isinstance(value, CounterValue)
        value.add(amount, exemplar)

    def _set(self, spec: MetricSpec, labels: tuple[str, ...], amount: float, now: float) -> None:
        value = self._table(spec).at(labels, now)
        assert isinstance(value, GaugeValue)
        value.set(amount)

    # -- the scrape -----------------------------------------------------------------------
    # Reading the state is cheap and happens on the event loop that owns it (``snapshot``);
    # building tens of thousands of samples from the copy can then happen anywhere
    # (``_families``), so a scrape at the cap does not hold up intake.
    def prepare_scrape(self) -> None:
        """On the loop: copy what the next ``collect`` reports (it may run in a thread).

        This is the scrape: a counter or histogram series it sees for the first time is
        shown at zero (``series.py``), so Prometheus counts its first increments."""
        self._scrape = self.snapshot(first_at_zero=True)

    def collect(self) -> Iterator[Metric]:
        data, self._scrape = self._scrape, None
        yield from _families(data if data is not None else self.snapshot(), self._config)

    def snapshot(self, *, first_at_zero: bool = False) -> Snapshot:
        now = self._clock()
        tables = []
        for spec in RECORDED:
            table = self._tables[spec.name]
            table.expire(now)
            copied = [(labels, _copy(value, first_at_zero)) for labels, value in table.items()]
            tables.append((spec, copied))
        breaker = self._breaker
        # As of the latest span, but never past the wall clock (plus skew): one span
        # stamped in the future must not flip every circuit to half-open in the scrape.
        read_at = min(breaker.latest_s, self._wall() + MAX_CLOCK_SKEW_S)
        state_at = breaker.machine.state_at
        circuits = [
            (circuit.key, state_at(circuit, read_at), circuit.since_s)
            for circuit in breaker.circuits.values()
        ]
        pairing = self._pairing
        return Snapshot(
            tables=tables,
            circuits=circuits,
            transitions=dict(self._transitions),
            probes=dict(self._probes),
            dead_found_late=dict(self._dead_found_late),
            forwarded_pending=pairing.forwarded_pending,
            classification_errors={
                ("unpaired",): pairing.unpaired,
                ("pending_overflow",): pairing.pending_overflow,
                ("malformed_listing",): pairing.malformed_listings,
                ("span_time_clamped",): pairing.clamped_times,
                ("name_cut",): pairing.cut_names,
                ("tenant_mismatch",): pairing.tenant_mismatches,
            },
            duplicate_spans=pairing.duplicate_spans,
            series={(name,): len(table) for name, table in self._tables.items()},
            folded={(name,): table.folded for name, table in self._tables.items()},
        )


@dataclass(slots=True, kw_only=True)
class Snapshot:
    """What one scrape reports, copied off the live state."""

    tables: list[tuple[MetricSpec, list[tuple[tuple[str, ...] | None, SeriesValue]]]]
    circuits: list[tuple[CircuitKey, State, float | None]]
    transitions: dict[tuple[str, ...], float]
    probes: dict[tuple[str, ...], float]
    dead_found_late: dict[tuple[str, ...], float]
    forwarded_pending: float
    classification_errors: dict[tuple[str, ...], float]
    duplicate_spans: float
    series: dict[tuple[str, ...], float]
    folded: dict[tuple[str, ...], float]


def _copy(value: SeriesValue, first_at_zero: bool) -> SeriesValue:
    if isinstance(value, GaugeValue):
        return GaugeValue(value.value)
    if first_at_zero and not value.exposed:
        value.exposed = True  # shown at zero now; its count from the next scrape on
        if isinstance(value, CounterValue):
            return CounterValue()
        return HistogramValue(value.bounds)
    if isinstance(value, CounterValue):
        return CounterValue(value.total, value.exemplar)
    return HistogramValue(value.bounds, list(value.counts), value.sum, dict(value.exemplars))


def _families(data: Snapshot, config: TelemetryConfig) -> Iterator[Metric]:
    for spec, series in data.tables:
        yield _family(spec, series)
    yield from _circuits(data.circuits, config.max_series_per_metric)
    yield closed_family(c.TRANSITIONS, data.transitions)
    yield closed_family(c.PROBES, data.probes)
    yield closed_family(c.DEAD_CALLS_FOUND_LATE, data.dead_found_late)
    yield closed_family(c.CLASSIFICATION_ERRORS, data.classification_errors)
    yield closed_family(c.SPANS_FORWARDED_PENDING, {(): data.forwarded_pending})
    yield closed_family(c.DUPLICATE_SPANS, {(): data.duplicate_spans})
    yield closed_family(c.SERIES, data.series)
    yield closed_family(c.OVERFLOW, data.folded)


def _circuits(read: list[tuple[CircuitKey, State, float | None]], cap: int) -> Iterator[Metric]:
    # The circuits that say something first, so the cap never hides an open one.
    read = sorted(read, key=lambda item: _SEVERITY_ORDER.get(item[1], 3))
    counts: dict[tuple[str, ...], float] = {
        (scope, state.value): 0 for scope in ("server", "tool") for state in State
    }
    states = Metric(c.CIRCUIT_STATE.full_name, c.CIRCUIT_STATE.help, "stateset")
    since = Metric(c.CIRCUIT_FAILING_SINCE.full_name, c.CIRCUIT_FAILING_SINCE.help, "gauge")
    for index, (key, state, since_s) in enumerate(read):
        scope = key.scope.value
        counts[(scope, state.value)] += 1
        if index >= cap:
            continue
        labels = {"scope": scope, "key": label_value(key.name)}
        if key.tenant:  # two tenants may name the same server: never one series
            labels["tenant"] = label_value(key.tenant)
        for each in State:
            states.add_sample(
                states.name, {**labels, states.name: each.value}, 1.0 if each is state else 0.0
            )
        failing = state not in (State.CLOSED, State.FORCED_CLOSED)  # forced closed: aside
        if failing and since_s is not None:
            since.add_sample(since.name, labels, since_s)
    yield states
    yield since
    yield closed_family(c.CIRCUITS, counts)


def _maker(spec: MetricSpec) -> Callable[[], SeriesValue]:
    if spec.kind is Kind.HISTOGRAM:
        return lambda: HistogramValue(CALL_DURATION_BUCKETS_S)
    if spec.kind is Kind.GAUGE:
        return GaugeValue
    return CounterValue


def _bump(counts: dict[tuple[str, ...], float], labels: tuple[str, ...]) -> None:
    counts[labels] = counts.get(labels, 0) + 1


def _prom_exemplar(exemplar: Exemplar | None) -> PromExemplar | None:
    if exemplar is None:
        return None
    return PromExemplar(
        {"trace_id": exemplar.trace_id, "span_id": exemplar.span_id},
        exemplar.value,
        exemplar.at_s,
    )


def _family(
    spec: MetricSpec,
    series: Iterable[tuple[tuple[str, ...] | None, SeriesValue]],
) -> Metric:
    family = Metric(spec.full_name, spec.help, spec.kind.value, spec.unit)
    for labels, value in series:
        if labels is None:
            names = {OVERFLOW_LABEL: "true"}
        else:
            names = dict(zip(spec.labels, labels, strict=True))
        if isinstance(value, CounterValue):
            exemplar = _prom_exemplar(value.exemplar)
            family.add_sample(f"{spec.full_name}_total", names, value.total, exemplar=exemplar)
        elif isinstance(value, GaugeValue):
            family.add_sample(spec.full_name, names, value.value)
        else:
            bounds = [*map(_le, value.bounds), "+Inf"]
            for index, (bound, count) in enumerate(zip(bounds, value.cumulative(), strict=True)):
                exemplar = _prom_exemplar(value.exemplars.get(index))
                family.add_sample(
                    f"{spec.full_name}_bucket", {**names, "le": bound}, count, exemplar=exemplar
                )
            family.add_sample(f"{spec.full_name}_count", names, value.count)
            family.add_sample(f"{spec.full_name}_sum", names, value.sum)
    return family


def closed_family(spec: MetricSpec, values: dict[tuple[str, ...], float]) -> Metric:
    """A family whose label sets are known and few: a counter or gauge per set."""
    family = Metric(spec.full_name, spec.help, spec.kind.value, spec.unit)
    sample = f"{spec.full_name}_total" if spec.kind is Kind.COUNTER else spec.full_name
    for labels, value in values.items():
        family.add_sample(sample, dict(zip(spec.labels, labels, strict=True)), value)
    return family


def _le(bound: float) -> str:
    return repr(float(bound))
