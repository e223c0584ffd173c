"""Drive the real pipeline over recorded traces, as enforcing, in span-time order.

Each configuration gets its own ``Pipeline`` (the classifier, the breaker and roster
health, wired exactly as the service wires them) with a ``Tally`` as its sink. Spans come
out of the merge (``order.py``) in end-time order and go in as requests of at most
``BATCH_SPANS`` spans covering at most one tick of span time; the pipeline's clock is span
time: set to the end of each batch before it is classified, and to the start of the next
batch for a ``tick()`` first, so a call waiting for its other half is decided alone when
``classify.pair_wait_s`` of span time has passed, as the service's ticker would.

Decisions are the in-flight ones, as with every rule enforced by a harness that heeds them
(``enforce.py``): a call the breaker would have refused was never made, so it is evidence
for nothing after it, and the counterfactual is what enforcing does on the same traffic.
``breaker.shadow`` and ``breaker.shadow_rules`` are set aside for it. Open periods are
jittered as in the service (``circuit.jitter_of``: drawn from what opened the circuit, so
every run gives the same figures). Spans whose ids OTLP calls invalid are dropped as the
hop drops them (``stage.reject_invalid_spans``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from processor.classify.classifier import Classifier
from processor.config import AnalyzeConfig, ServiceConfig
from processor.engines.roster import RosterHealth
from processor.engines.turns import NS_PER_S
from processor.errors import InvalidRequest
from processor.inflight.pipeline import Pipeline
from processor.inflight.stage import reject_invalid_spans
from processor.offline.decode import Decoded, Kept, Origin, Window, decode
from processor.offline.enforce import EnforcingBreaker
from processor.offline.order import OrderStats, in_span_order
from processor.offline.read import STDIN, Problem, Progress, Report, expand, records
from processor.offline.tally import Tally

log = logging.getLogger(__name__)

BATCH_SPANS = 512
PEEK_RECORDS = 64  # records read, at most, to find when a file's spans begin
# How often the service's ticker decides held calls (server.TICK_INTERVAL_S; a test keeps
# the two equal): importing the server for it would cost a command start-up its imports.
TICK_INTERVAL_S = 0.5
ANALYSED_SECTIONS = ("classify", "breaker", "roster")  # the settings the pipeline reads


@dataclass(slots=True)
class FileStats:
    name: str
    records: int = 0
    spans: int = 0
    kept: int = 0  # spans the analysis read (MCP spans in the window)
    outside: int = 0  # MCP spans outside --since/--until
    skipped: int = 0  # records or files that could not be read


@dataclass(slots=True)
class InputStats:
    files: list[FileStats] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # the first few, to show
    skipped: int = 0
    first_end_s: float | None = None
    last_end_s: float | None = None
    invalid_ids: int = 0
    analysis_errors: int = 0
    order: OrderStats = field(default_factory=OrderStats)

    @property
    def spans(self) -> int:
        return sum(f.spans for f in self.files)


class _FileFeed:
    """One input file for the merge: its records decoded, its problems counted."""

    def __init__(
        self,
        name: str,
        stats: FileStats,
        options: AnalyzeConfig,
        window: Window,
        report: Report,
        progress: Progress | None,
    ) -> None:
        self.name = name
        self._stats = stats
        self._options = options
        self._window = window
        self._report = report
        self._progress = progress

    def first_end_ns(self) -> int | None:
        if self.name == STDIN:
            return None  # a stream is read once: from the start
        for n, record in enumerate(records(self.name, self._options.max_record_bytes, _quiet)):
            if n >= PEEK_RECORDS:
                break
            try:
                decoded = decode(record, self._window)
            except InvalidRequest:
                continue
            if decoded.latest_end_ns >= 0:
                return min((k[0] for k in decoded.kept or ()), default=decoded.latest_end_ns)
        return None

    def records(self) -> Iterator[Decoded]:
        stats, limit = self._stats, self._options.max_record_bytes

        def report(problem: Problem) -> None:
            stats.skipped += 1
            self._report(problem)

        for record in records(self.name, limit, report, self._progress):
            try:
                decoded = decode(record, self._window)
            except InvalidRequest as error:
                report(Problem(record.source, record.where, str(error)))
                continue
            stats.records += 1
            stats.spans += decoded.spans
            stats.kept += len(decoded.kept or ())
            stats.outside += decoded.outside
            yield decoded


def _quiet(problem: Problem) -> None:
    """Problems met while peeking are reported when the file is read for real."""


@dataclass(slots=True)
class Analysis:
    """One configuration replayed: its pipeline, and the tally of what it found."""

    label: tuple[tuple[str, str], ...]  # the swept keys and values; () for the config as given
    config: ServiceConfig
    tally: Tally
    pipeline: Pipeline
    clock: list[float]


def make_analysis(
    config: ServiceConfig, options: AnalyzeConfig, label: tuple[tuple[str, str], ...] = ()
) -> Analysis:
    enforcing = replace(config, breaker=replace(config.breaker, shadow=False, shadow_rules=()))
    tally = Tally(
        ids=options.ids_per_figure,
        max_rows=options.max_report_rows,
        worst_turns=options.worst_turns,
        turn_idle_s=enforcing.breaker.turn_idle_s,
    )
    clock = [0.0]
    pipeline = Pipeline(
        Classifier(enforcing.classify),
        EnforcingBreaker(enforcing.breaker),
        (tally,),
        RosterHealth(enforcing.roster),
        clock=lambda: clock[0],
    )
    return Analysis(label, enforcing, tally, pipeline, clock)


def run(
    paths: list[str],
    analyses: list[Analysis],
    options: AnalyzeConfig,
    *,
    on_problem: Report = lambda problem: None,
    progress: Progress | None = None,
    max_problems_kept: int = 20,
) -> InputStats:
    """Read every input once and feed every analysis; returns what was read."""
    stats = InputStats()

    def report(problem: Problem) -> None:
        stats.skipped += 1
        if len(stats.problems) < max_problems_kept:
            stats.problems.append(problem)
        on_problem(problem)

    files, problems = expand(paths)
    for problem in problems:
        report(problem)
    window = Window(options.since_ns, options.until_ns)
    feeds = []
    for name in files:
        file_stats = FileStats(name)
        stats.files.append(file_stats)
        feeds.append(_FileFeed(name, file_stats, options, window, report, progress))
    tick_ns = int(_tick_s(analyses) * NS_PER_S)
    batch: list[Kept] = []
    merged = in_span_order(
        list(feeds),
        int(options.reorder_window_s * NS_PER_S),
        options.reorder_max_spans,
        stats.order,
    )
    for item in merged:
        if batch and (len(batch) >= BATCH_SPANS or item[0] > batch[0][0] + tick_ns):
            _feed(batch, analyses, stats)
            batch = []
        batch.append(item)
    if batch:
        _feed(batch, analyses, stats)
    for analysis in analyses:
        analysis.pipeline.flush()
        analysis.tally.finish()
    return stats


def _tick_s(analyses: list[Analysis]) -> float:
    waits = [a.config.classify.pair_wait_s for a in analyses] or [TICK_INTERVAL_S * 4]
    return min(TICK_INTERVAL_S, min(waits) / 4)


def _feed(batch: list[Kept], analyses: list[Analysis], stats: InputStats) -> None:
    first_s, last_s = batch[0][0] / NS_PER_S, max(item[0] for item in batch) / NS_PER_S
    stats.first_end_s = first_s if stats.first_end_s is None else min(stats.first_end_s, first_s)
    stats.last_end_s = last_s if stats.last_end_s is None else max(stats.last_end_s, last_s)
    request = request_of(batch)
    stats.invalid_ids += reject_invalid_spans(request)
    # The pipeline annotates the spans it reads: each analysis gets its own copy.
    data = request.SerializeToString() if len(analyses) > 1 else b""
    for index, analysis in enumerate(analyses):
        own = request if index == len(analyses) - 1 else ExportTraceServiceRequest.FromString(data)
        clock = analysis.clock
        try:
            if first_s > clock[0]:
                clock[0] = first_s
                analysis.pipeline.tick()
            clock[0] = max(clock[0], last_s)
            analysis.pipeline(own)
        except Exception:  # as in the hop: one bad batch must not cost the whole report
            stats.analysis_errors += 1
            if stats.analysis_errors == 1:
                log.exception("the analysis failed on %d spans; carrying on", len(batch))


def request_of(batch: list[Kept]) -> ExportTraceServiceRequest:
    """One request for a batch: consecutive spans of one origin share their resource."""
    request = ExportTraceServiceRequest()
    current: Origin | None = None
    spans = None
    for _, span, origin in batch:
        if origin is not current or spans is None:
            resource_spans = request.resource_spans.add()
            resource_spans.resource.CopyFrom(origin.resource)
            resource_spans.schema_url = origin.resource_schema_url
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.CopyFrom(origin.scope)
            scope_spans.schema_url = origin.scope_schema_url
            spans, current = scope_spans.spans, origin
        spans.append(span)
    return request
