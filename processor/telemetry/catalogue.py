"""Every metric mcp-breaker exports: name, type, unit, labels, meaning and a query.

The one list the code declares its metrics from and ``docs/metrics.md`` is checked
against. Names are ``mcp_breaker_`` + snake_case, in base units; counters are listed
with their ``_total`` suffix as scraped. Label values come from closed sets (enums),
except ``server``, ``tool`` and ``harness``, which outsiders name: those are bounded
per metric by ``telemetry.max_series_per_metric`` (see ``series.py``).

One piece, over 500 lines: it is one list read top to bottom, section by section, as
``docs/metrics.md`` mirrors it; the few types above it (``MetricSpec``, ``Kind``,
``Merge``) are the shape of its entries, and splitting the sections apart would only
scatter the list that the docs are checked against.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

PREFIX = "mcp_breaker"

# Tool calls take from milliseconds to minutes: buckets in seconds up to five minutes.
CALL_DURATION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class Merge(enum.StrEnum):
    """How the workers' values of a metric combine into the one the telemetry port shows
    (``serve --workers``): each worker counts what reached it, but the breaker's state is
    replicated, the same in every worker, and must appear once."""

    SUM = "sum"  # counters, histograms and what each process holds: added
    ONE = "one"  # replicated state (circuits, advisories): one worker's, the first's
    MAX = "max"  # the latest listing of a harness: whichever worker saw it
    MIN = "min"  # up only if up in every worker


class Kind(enum.StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"
    STATESET = "stateset"


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricSpec:
    name: str  # without the prefix; counters without ``_total``
    kind: Kind
    unit: str  # "" for a count
    labels: tuple[str, ...]
    help: str
    query: str  # an example PromQL query, for the docs
    bounded: bool = False  # labels named by outsiders: capped, folded, expired
    exemplars: bool = False
    workers: Merge = Merge.SUM

    @property
    def full_name(self) -> str:
        return f"{PREFIX}_{self.name}"

    @property
    def scraped_name(self) -> str:
        return f"{self.full_name}_total" if self.kind is Kind.COUNTER else self.full_name


TOOL = ("server", "tool")

# -- derived from the spans: what the tools did ---------------------------------------
TOOL_CALLS = MetricSpec(
    name="tool_calls",
    kind=Kind.COUNTER,
    unit="",
    labels=(*TOOL, "outcome", "failure_class"),
    help="Tool calls by outcome (ok, failed, neutral, unknown; refused: not made, an "
    "advisory said the tool was out) and failure class.",
    query='sum by (server, tool) (rate(mcp_breaker_tool_calls_total{outcome="failed"}[5m])) '
    '/ sum by (server, tool) (rate(mcp_breaker_tool_calls_total{outcome=~"ok|failed"}[5m]))',
    bounded=True,
)
CALL_DURATION = MetricSpec(
    name="tool_call_duration_seconds",
    kind=Kind.HISTOGRAM,
    unit="seconds",
    labels=(*TOOL, "outcome"),
    help="How long tool calls took, as the harness saw them.",
    query="histogram_quantile(0.99, sum by (le, server) "
    "(rate(mcp_breaker_tool_call_duration_seconds_bucket[5m])))",
    bounded=True,
    exemplars=True,
)
DEAD_CALLS = MetricSpec(
    name="dead_calls",
    kind=Kind.COUNTER,
    unit="",
    labels=(*TOOL, "rule", "mode"),
    help="Calls made while the breaker said no, by rule; mode enforced or shadow.",
    query='sum by (server, tool) (increase(mcp_breaker_dead_calls_total{mode="enforced"}[1h]))',
    bounded=True,
    exemplars=True,
)
DEAD_CALL_SECONDS = MetricSpec(
    name="dead_call_seconds",
    kind=Kind.COUNTER,
    unit="seconds",
    labels=(*TOOL, "rule", "mode"),
    help="Seconds the dead calls took: time the harness spent on calls it was told to skip.",
    query="sum by (server) (increase(mcp_breaker_dead_call_seconds_total[1h]))",
    bounded=True,
)
DEAD_CALLS_FOUND_LATE = MetricSpec(
    name="dead_calls_found_late",
    kind=Kind.COUNTER,
    unit="",
    labels=("rule",),
    help="Dead calls found only after their spans went on: a failure they repeated (or a "
    "circuit that opened before they were made) arrived after them. Counted in dead_calls "
    "too; their spans say dead_call false.",
    query="sum by (rule) (increase(mcp_breaker_dead_calls_found_late_total[1h]))",
)
HIDDEN_FAILURES = MetricSpec(
    name="hidden_failures",
    kind=Kind.COUNTER,
    unit="",
    labels=TOOL,
    help="Calls that reported success around a failure body (isError false).",
    query="sum by (server, tool) (increase(mcp_breaker_hidden_failures_total[1h]))",
    bounded=True,
)
NEUTRAL_CALLS = MetricSpec(
    name="neutral_calls",
    kind=Kind.COUNTER,
    unit="",
    labels=(*TOOL, "reason"),
    help="Calls the user declined or dismissed, the harness cancelled, or the harness did "
    "not make because an advisory said the tool was out (refused_by_advisory): not failures.",
    query="sum by (server, tool) "
    '(increase(mcp_breaker_neutral_calls_total{reason="refused_by_advisory"}[1h]))',
    bounded=True,
)

# -- the breaker ------------------------------------------------------------------------
CIRCUIT_STATE = MetricSpec(
    name="circuit_state",
    kind=Kind.STATESET,
    unit="",
    labels=("scope", "key", "tenant"),
    help="Each circuit's state, read at scrape time, as of the latest span seen; key is "
    "the server, or server/tool; tenant empty for the default tenant.",
    query='mcp_breaker_circuit_state{mcp_breaker_circuit_state="open"} == 1',
    bounded=True,
    workers=Merge.ONE,
)
CIRCUIT_FAILING_SINCE = MetricSpec(
    name="circuit_failing_since_timestamp_seconds",
    kind=Kind.GAUGE,
    unit="seconds",
    labels=("scope", "key", "tenant"),
    help="When the first failure of the streak that opened a circuit ended (Unix time, "
    "span time); only for circuits open, half-open or forced open.",
    query='time() - mcp_breaker_circuit_failing_since_timestamp_seconds{scope="server"}',
    bounded=True,
    workers=Merge.ONE,
)
CIRCUITS = MetricSpec(
    name="circuits",
    kind=Kind.GAUGE,
    unit="",
    labels=("scope", "state"),
    help="Circuits tracked, by scope and state, read at scrape time.",
    query='sum by (scope) (mcp_breaker_circuits{state=~"open|forced_open"})',
    workers=Merge.ONE,
)
TRANSITIONS = MetricSpec(
    name="circuit_transitions",
    kind=Kind.COUNTER,
    unit="",
    labels=("scope", "from_state", "to_state", "reason"),
    help="Circuit state changes, by the reason they happened.",
    query='sum by (reason) (increase(mcp_breaker_circuit_transitions_total{to_state="open"}[1h]))',
)
PROBES = MetricSpec(
    name="probes",
    kind=Kind.COUNTER,
    unit="",
    labels=("scope", "result"),
    help="Half-open probes: granted, and how they ended (succeeded or failed).",
    query='increase(mcp_breaker_probes_total{result="failed"}[1h])',
)

# -- the roster -------------------------------------------------------------------------
LISTINGS = MetricSpec(
    name="tool_listings",
    kind=Kind.COUNTER,
    unit="",
    labels=("harness", "server", "state"),
    help="Tool listings by roster state (cold, warm, backoff, collapsed, ambiguous, unknown).",
    query='sum by (harness) (rate(mcp_breaker_tool_listings_total{state="ambiguous"}[15m]))',
    bounded=True,
)
OFFERED_TOOLS = MetricSpec(
    name="offered_tools",
    kind=Kind.GAUGE,
    unit="",
    labels=("harness", "server"),
    help="Tools offered to the model by the latest listing of each harness (and server).",
    query="sum by (harness) (mcp_breaker_offered_tools)",
    bounded=True,
    workers=Merge.MAX,
)
COLLAPSES = MetricSpec(
    name="roster_collapses",
    kind=Kind.COUNTER,
    unit="",
    labels=("harness",),
    help="Turns whose offered tools fell to zero mid-turn.",
    query="increase(mcp_breaker_roster_collapses_total[10m]) > 0",
    bounded=True,
)
NAMESPACES_MISSING = MetricSpec(
    name="roster_namespaces_missing",
    kind=Kind.GAUGE,
    unit="",
    labels=("harness", "server"),
    help="Namespaces connected (or required) but not attached, in the latest listing "
    "that named them.",
    query="max by (harness) (mcp_breaker_roster_namespaces_missing) > 0",
    bounded=True,
    workers=Merge.MAX,
)
STALE_ROSTER = MetricSpec(
    name="stale_roster",
    kind=Kind.COUNTER,
    unit="",
    labels=("harness", "direction"),
    help="Listings offering tools whose breaker is open (offered_open), and unknown-tool "
    "failures for tools the turn's listing offered (offered_unknown).",
    query="sum by (direction) (increase(mcp_breaker_stale_roster_total[1h]))",
    bounded=True,
)

# -- classification ----------------------------------------------------------------------
STORE_ENTRIES = MetricSpec(
    name="store_entries",
    kind=Kind.GAUGE,
    unit="",
    labels=("store",),
    help="Entries held by each bounded store: pending_calls, seen_spans, annotated_spans, "
    "circuits, turns, reorder_calls, roster_turns, advisories.",
    query="mcp_breaker_store_entries / mcp_breaker_store_capacity_entries",
)
STORE_CAPACITY = MetricSpec(
    name="store_capacity_entries",
    kind=Kind.GAUGE,
    unit="",
    labels=("store",),
    help="Each bounded store's cap in entries; past it the oldest entry makes room "
    "(names in an entry are cut to classify.max_name_chars, so bytes are bounded too).",
    query="mcp_breaker_store_capacity_entries",
)
CLASSIFICATION_ERRORS = MetricSpec(
    name="classification_errors",
    kind=Kind.COUNTER,
    unit="",
    labels=("kind",),
    help="What classification could not do cleanly: unpaired (a call half decided alone), "
    "pending_overflow (decided early: too many held), malformed_listing, span_time_clamped "
    "(a span from the future, read at our clock plus classify.max_clock_skew_s), name_cut "
    "(a name over classify.max_name_chars), tenant_mismatch (a resource naming another "
    "tenant than its sender's credentials, forwarded unread).",
    query="sum by (kind) (rate(mcp_breaker_classification_errors_total[5m]))",
)
SPANS_FORWARDED_PENDING = MetricSpec(
    name="spans_forwarded_pending",
    kind=Kind.COUNTER,
    unit="",
    labels=(),
    help="Call spans forwarded before their call was decided (held for their other half): "
    "they carry their own outcome and mcp.breaker.pending, not the breaker's decision.",
    query="rate(mcp_breaker_spans_forwarded_pending_total[5m])",
)
DUPLICATE_SPANS = MetricSpec(
    name="duplicate_spans",
    kind=Kind.COUNTER,
    unit="",
    labels=(),
    help="MCP spans received twice (a retried export); the second copy is not counted again.",
    query="rate(mcp_breaker_duplicate_spans_total[5m])",
)

# -- the metrics' own bounds ------------------------------------------------------------
SERIES = MetricSpec(
    name="metric_series",
    kind=Kind.GAUGE,
    unit="",
    labels=("metric",),
    help="Series held for each bounded metric (at most telemetry.max_series_per_metric, "
    "plus the overflow series).",
    query="max by (metric) (mcp_breaker_metric_series)",
)
OVERFLOW = MetricSpec(
    name="metric_overflow",
    kind=Kind.COUNTER,
    unit="",
    labels=("metric",),
    help='Updates folded into a metric\'s overflow series (otel_metric_overflow="true") '
    "because it held as many series as allowed.",
    query="sum by (metric) (rate(mcp_breaker_metric_overflow_total[5m])) > 0",
)

# -- advisories ----------------------------------------------------------------------------
SUBSCRIBERS = MetricSpec(
    name="advisory_subscribers",
    kind=Kind.GAUGE,
    unit="",
    labels=(),
    help="Harnesses subscribed to advisories now.",
    query="mcp_breaker_advisory_subscribers",
)
ADVISORIES = MetricSpec(
    name="advisories",
    kind=Kind.GAUGE,
    unit="",
    labels=(),
    help="Advisories in force now (circuits not closed, turn blocks).",
    query="mcp_breaker_advisories",
    workers=Merge.ONE,
)
ADVISORY_CHANGES = MetricSpec(
    name="advisory_changes",
    kind=Kind.COUNTER,
    unit="",
    labels=(),
    help="Advisory changes published to subscribers.",
    query="rate(mcp_breaker_advisory_changes_total[5m])",
    workers=Merge.ONE,
)
SUBSCRIBERS_CUT = MetricSpec(
    name="advisory_subscribers_cut_off",
    kind=Kind.COUNTER,
    unit="",
    labels=(),
    help="Subscribers cut off because their queue was full (they resync on reconnect).",
    query="increase(mcp_breaker_advisory_subscribers_cut_off_total[15m]) > 0",
)
CHECKS = MetricSpec(
    name="advisory_checks",
    kind=Kind.COUNTER,
    unit="",
    labels=("verdict",),
    help="Check calls answered, by verdict (allow, deny, probe).",
    query="sum by (verdict) (rate(mcp_breaker_advisory_checks_total[5m]))",
)

DERIVED: tuple[MetricSpec, ...] = (
    TOOL_CALLS,
    CALL_DURATION,
    DEAD_CALLS,
    DEAD_CALL_SECONDS,
    DEAD_CALLS_FOUND_LATE,
    HIDDEN_FAILURES,
    NEUTRAL_CALLS,
    CIRCUIT_STATE,
    CIRCUIT_FAILING_SINCE,
    CIRCUITS,
    TRANSITIONS,
    PROBES,
    LISTINGS,
    OFFERED_TOOLS,
    COLLAPSES,
    NAMESPACES_MISSING,
    STALE_ROSTER,
    STORE_ENTRIES,
    STORE_CAPACITY,
    CLASSIFICATION_ERRORS,
    SPANS_FORWARDED_PENDING,
    DUPLICATE_SPANS,
    SERIES,
    OVERFLOW,
    SUBSCRIBERS,
    ADVISORIES,
    ADVISORY_CHANGES,
    SUBSCRIBERS_CUT,
    CHECKS,
)


# -- shared state (state.backend redis only) -----------------------------------------
SHARED_STATE_UP = MetricSpec(
    name="shared_state_up",
    kind=Kind.GAUGE,
    unit="",
    labels=(),
    help="1 while this replica shares its breaker through Redis; 0 while Redis is away and "
    "it decides alone (redis backend only).",
    query="min(mcp_breaker_shared_state_up) == 0",
    workers=Merge.MIN,
)
SHARED_EVENTS_APPENDED = MetricSpec(
    name="shared_events_appended",
    kind=Kind.COUNTER,
    unit="",
    labels=(),
    help="This replica's events appended to the shared stream.",
    query="sum(rate(mcp_breaker_shared_events_appended_total[5m]))",
)
SHARED_EVENTS_APPLIED = MetricSpec(
    name="shared_events_applied",
    kind=Kind.COUNTER,
    unit="",
    labels=(),
    help="Other replicas' events this replica applied from the shared stream.",
    query="rate(mcp_breaker_shared_events_applied_total[5m])",
)
SHARED_EVENTS_DROPPED = MetricSpec(
    name="shared_events_dropped",
    kind=Kind.COUNTER,
    unit="",
    labels=(),
    help="This replica's events dropped while Redis was away: more than "
    "state.redis.buffer_events waited; the other replicas never heard of them.",
    query="increase(mcp_breaker_shared_events_dropped_total[1h]) > 0",
)
SHARED_EVENTS_UNREADABLE = MetricSpec(
    name="shared_events_unreadable",
    kind=Kind.COUNTER,
    unit="",
    labels=(),
    help="Entries of the shared stream this replica could not read (another version?), skipped.",
    query="increase(mcp_breaker_shared_events_unreadable_total[1h]) > 0",
)
SHARED_OUTBOX = MetricSpec(
    name="shared_outbox_events",
    kind=Kind.GAUGE,
    unit="",
    labels=(),
    help="This replica's events waiting to be appended to the shared stream.",
    query="max(mcp_breaker_shared_outbox_events)",
)
SHARED: tuple[MetricSpec, ...] = (
    SHARED_STATE_UP,
    SHARED_EVENTS_APPENDED,
    SHARED_EVENTS_APPLIED,
    SHARED_EVENTS_DROPPED,
    SHARED_EVENTS_UNREADABLE,
    SHARED_OUTBOX,
)


# -- the hop itself (the Collector's otelcol_receiver_* / otelcol_exporter_* under our prefix)
def _hop(name: str, kind: Kind, labels: tuple[str, ...], help: str, query: str) -> MetricSpec:
    unit = "bytes" if name.endswith("_bytes") else ""
    return MetricSpec(name=name, kind=kind, unit=unit, labels=labels, help=help, query=query)


C, G = Kind.COUNTER, Kind.GAUGE
ACCEPTED_SPANS = _hop(
    "receiver_accepted_spans",
    C,
    ("transport",),
    "Spans taken in and owned for delivery.",
    "sum(rate(mcp_breaker_receiver_accepted_spans_total[5m]))",
)
REFUSED_SPANS = _hop(
    "receiver_refused_spans",
    C,
    ("transport",),
    "Spans the sender was told to retry (queue full, shutting down, or the disk queue "
    "could not write).",
    "rate(mcp_breaker_receiver_refused_spans_total[5m]) > 0",
)
REJECTED_SPANS = _hop(
    "receiver_rejected_spans",
    C,
    ("transport",),
    "Spans rejected as invalid and reported to the sender as partial success.",
    "rate(mcp_breaker_receiver_rejected_spans_total[5m]) > 0",
)
REQUESTS = _hop(
    "receiver_requests",
    C,
    ("transport", "outcome"),
    "Export requests by outcome: success, refused (retry: the forwarder could not take "
    "them, the OTLP/HTTP receiver held receivers.http.max_inflight_bytes, or OTLP/gRPC had "
    "receivers.grpc.max_concurrent_rpcs exports in progress), invalid (not retryable), "
    "unauthenticated (no or a wrong credential: nothing read).",
    "sum by (outcome) (rate(mcp_breaker_receiver_requests_total[5m]))",
)
RECEIVER_CONNECTIONS = _hop(
    "receiver_connections",
    G,
    ("transport",),
    "Connections open on a port with a connection cap: http (receivers.http.max_connections), "
    "grpc and advisories (the gRPC ports' gates).",
    "mcp_breaker_receiver_connections",
)
RECEIVER_CONNECTIONS_REFUSED = _hop(
    "receiver_connections_refused",
    C,
    ("transport",),
    "Connections closed as they were accepted: the receiver held its cap, every "
    "connection busy with a request.",
    "rate(mcp_breaker_receiver_connections_refused_total[5m]) > 0",
)
RECEIVER_CONNECTIONS_EVICTED = _hop(
    "receiver_connections_evicted",
    C,
    ("transport",),
    "Quiet connections closed to make room for a new one at the cap: many idle "
    "connections (an attack, or clients that never close) if it keeps rising.",
    "rate(mcp_breaker_receiver_connections_evicted_total[5m])",
)
RECEIVER_GOAWAYS = _hop(
    "receiver_goaways",
    C,
    ("transport", "reason"),
    "Connections a gRPC port's gate sent a GOAWAY and closed: rapid_reset (the client "
    "reset streams faster than the gate allows, CVE-2023-44487). Cleartext only; under "
    "TLS, gRPC's own stream limits apply.",
    "sum by (transport) (rate(mcp_breaker_receiver_goaways_total[5m])) > 0",
)
STAGE_REQUESTS = _hop(
    "stage_requests",
    C,
    ("path",),
    "Requests by stage path: passthrough (no MCP marker: forwarded as received), parsed "
    "(what holds a marker decoded, its possible MCP spans analysed), or unreadable (a "
    "resource, scope or span holding a marker does not decode: forwarded as received, not "
    "analysed).",
    "sum by (path) (rate(mcp_breaker_stage_requests_total[5m]))",
)
STAGE_ERRORS = _hop(
    "stage_errors",
    C,
    (),
    "Requests whose span analysis failed; they were forwarded without it.",
    "rate(mcp_breaker_stage_errors_total[5m]) > 0",
)
SENT_SPANS = _hop(
    "exporter_sent_spans",
    C,
    (),
    "Spans the next hop accepted.",
    "rate(mcp_breaker_exporter_sent_spans_total[5m])",
)
SEND_FAILED_SPANS = _hop(
    "exporter_send_failed_spans",
    C,
    ("reason",),
    "Accepted spans that were not delivered, by reason: permanent (the next hop refused "
    "them for good), retries_exhausted, rejected_by_next_hop (partial success), shutdown "
    "(held in memory at the end of the grace period), storage (the disk queue could not "
    "read them back).",
    "sum by (reason) (rate(mcp_breaker_exporter_send_failed_spans_total[5m])) > 0",
)
REJECTED_BY_SENDER = MetricSpec(
    name="exporter_rejected_spans",
    kind=C,
    unit="",
    labels=("service_name",),
    help="Spans the next hop refused for good for what was in them, by the service.name of "
    "the resource that sent them: the export was split until only the refused spans were "
    "left, so other senders' spans went on (reason permanent in send_failed_spans counts "
    "them too; the log names the peer).",
    query="sum by (service_name) (increase(mcp_breaker_exporter_rejected_spans_total[1h])) > 0",
    bounded=True,
)
SEND_RETRIES = _hop(
    "exporter_send_retries",
    C,
    (),
    "Export attempts that failed and were retried.",
    "rate(mcp_breaker_exporter_send_retries_total[5m])",
)
RELEASED_SPANS = _hop(
    "released_spans",
    C,
    (),
    "Spans analysed and released because no next hop is configured.",
    "rate(mcp_breaker_released_spans_total[5m])",
)
QUEUE_SPANS = _hop(
    "exporter_queue_spans",
    G,
    (),
    "Spans held by the forwarder, queued or in flight.",
    "mcp_breaker_exporter_queue_spans / mcp_breaker_exporter_queue_capacity_spans",
)
QUEUE_CAPACITY_SPANS = _hop(
    "exporter_queue_capacity_spans",
    G,
    (),
    "Most spans the forwarder may hold.",
    "mcp_breaker_exporter_queue_capacity_spans",
)
QUEUE_BYTES = _hop(
    "exporter_queue_bytes",
    G,
    (),
    "Encoded bytes held by the forwarder.",
    "mcp_breaker_exporter_queue_bytes / mcp_breaker_exporter_queue_capacity_bytes",
)
QUEUE_CAPACITY_BYTES = _hop(
    "exporter_queue_capacity_bytes",
    G,
    (),
    "Most encoded bytes the forwarder may hold.",
    "mcp_breaker_exporter_queue_capacity_bytes",
)
IN_FLIGHT = _hop(
    "exporter_in_flight_requests",
    G,
    (),
    "Export requests being sent to the next hop.",
    "mcp_breaker_exporter_in_flight_requests",
)
ATTEMPT_TIMEOUT = MetricSpec(
    name="exporter_attempt_timeout_seconds",
    kind=G,
    unit="",
    labels=(),
    help="The deadline a new export's first attempt gets: forward.timeout_s, or longer, up "
    "to forward.max_timeout_s, learnt from a next hop that answers slower (recent answers' "
    "p95 latency x 2, or twice an attempt that timed out).",
    query="max(mcp_breaker_exporter_attempt_timeout_seconds)",
    workers=Merge.MAX,
)

HOP: tuple[MetricSpec, ...] = (
    ACCEPTED_SPANS,
    REFUSED_SPANS,
    REJECTED_SPANS,
    REQUESTS,
    RECEIVER_CONNECTIONS,
    RECEIVER_CONNECTIONS_REFUSED,
    RECEIVER_CONNECTIONS_EVICTED,
    RECEIVER_GOAWAYS,
    STAGE_REQUESTS,
    STAGE_ERRORS,
    SENT_SPANS,
    SEND_FAILED_SPANS,
    REJECTED_BY_SENDER,
    SEND_RETRIES,
    RELEASED_SPANS,
    QUEUE_SPANS,
    QUEUE_CAPACITY_SPANS,
    QUEUE_BYTES,
    QUEUE_CAPACITY_BYTES,
    IN_FLIGHT,
    ATTEMPT_TIMEOUT,
)
CATALOGUE: tuple[MetricSpec, ...] = DERIVED + SHARED + HOP
