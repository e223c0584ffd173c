"""The offline analysis (``mcp-breaker analyze``): its defaults and its one config."""

from __future__ import annotations

from dataclasses import dataclass

# Spans are analysed in span-end order: a span may come this much later in its file than a
# span that ended after it (exporters batch and retry; client and server halves are
# recorded by different processes) and still be put in its place.
DEFAULT_REORDER_WINDOW_S = 60.0
DEFAULT_REORDER_MAX_SPANS = 50_000  # MCP spans held for reordering at most, all files together
# One JSON line or one protobuf record, after decompression: larger ones are skipped.
DEFAULT_MAX_RECORD_BYTES = 64 * 1024 * 1024
DEFAULT_IDS_PER_FIGURE = 20  # trace and span ids listed behind each figure of the report
DEFAULT_WORST_TURNS = 20  # turns reported in full, worst first
# Rows of each table keyed by names the senders chose (servers, tools, circuits,
# namespaces...): the rest are counted in one "other" row.
DEFAULT_MAX_REPORT_ROWS = 10_000


@dataclass(frozen=True, kw_only=True)
class AnalyzeConfig:
    """``mcp-breaker analyze``: how recorded traces are read, and how much the report keeps.

    Set by the command's flags (it is not part of ``ServiceConfig``, which configures the
    service the analysis replays). Times are span times, Unix nanoseconds; ``None`` leaves
    that end of the window open.
    """

    reorder_window_s: float = DEFAULT_REORDER_WINDOW_S
    reorder_max_spans: int = DEFAULT_REORDER_MAX_SPANS
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    ids_per_figure: int = DEFAULT_IDS_PER_FIGURE
    worst_turns: int = DEFAULT_WORST_TURNS
    max_report_rows: int = DEFAULT_MAX_REPORT_ROWS
    since_ns: int | None = None
    until_ns: int | None = None

    def validate(self) -> list[str]:
        flags = {
            "reorder_window_s": "--reorder-window",
            "reorder_max_spans": "--reorder-spans",
            "max_record_bytes": "--max-record-bytes",
            "worst_turns": "--worst",
            "max_report_rows": "--max-rows",
        }
        problems = [
            f"{flag}: must be positive, got {getattr(self, key)}"
            for key, flag in flags.items()
            if getattr(self, key) <= 0
        ]
        if self.ids_per_figure < 0:
            problems.append(f"--ids: must not be negative, got {self.ids_per_figure}")
        if (
            self.since_ns is not None
            and self.until_ns is not None
            and self.until_ns <= self.since_ns
        ):
            problems.append("--until: must be later than --since")
        return problems
