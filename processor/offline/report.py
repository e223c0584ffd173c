"""The report as plain data: what was read, under which settings, and what was found.

This is the ``--format json`` document, and the one source of every figure the text and
HTML formats show. Its shape is documented in docs/analyze.md; ``REPORT_VERSION`` changes
when a field changes meaning or goes away.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from processor import __version__
from processor.config import AnalyzeConfig, ServiceConfig
from processor.offline.figures import iso
from processor.offline.run import ANALYSED_SECTIONS, Analysis, InputStats
from processor.offline.sweep import Sweep

# 2: the replay enforces (a refused call is never made), turns are those with a tool call,
# model rounds saved may be null (cannot be known), dead_calls_in_flight.
REPORT_VERSION = 2


def build(
    analysis: Analysis,
    stats: InputStats,
    options: AnalyzeConfig,
    sweep: Sweep | None = None,
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "report": "mcp-breaker analyze",
        "report_version": REPORT_VERSION,
        "mcp_breaker_version": __version__,
        "input": input_json(stats, options),
        "settings": settings_json(analysis.config),
        **analysis.tally.to_json(),
    }
    if sweep is not None:
        report["sweep"] = sweep.to_json()
    return report


def input_json(stats: InputStats, options: AnalyzeConfig) -> dict[str, Any]:
    order = stats.order
    return {
        "files": [
            {
                "name": f.name,
                "records": f.records,
                "spans": f.spans,
                "mcp_spans": f.kept,
                "outside_window": f.outside,
                "skipped": f.skipped,
            }
            for f in stats.files
        ],
        "records": sum(f.records for f in stats.files),
        "spans": stats.spans,
        "mcp_spans": sum(f.kept for f in stats.files),
        "outside_window": sum(f.outside for f in stats.files),
        "skipped": {"count": stats.skipped, "first": [str(p) for p in stats.problems]},
        "invalid_ids": stats.invalid_ids,
        "analysis_errors": stats.analysis_errors,
        "first_span_end_at": iso(stats.first_end_s),
        "last_span_end_at": iso(stats.last_end_s),
        "first_span_end_s": stats.first_end_s,
        "last_span_end_s": stats.last_end_s,
        "window": {
            "since": iso(options.since_ns / 1e9) if options.since_ns is not None else None,
            "until": iso(options.until_ns / 1e9) if options.until_ns is not None else None,
        },
        "reorder": {
            "window_s": options.reorder_window_s,
            "max_spans": options.reorder_max_spans,
            "held_max": order.held_max,
            "released_early": order.forced,
            "late_spans": order.late,
            "late_max_seconds": round(order.late_max_ns / 1e9, 3),
        },
    }


def settings_json(config: ServiceConfig) -> dict[str, Any]:
    """The analysis settings that differ from the defaults (every rule enforced: the
    shadow settings are set aside, and not listed)."""
    defaults = ServiceConfig()
    changed: dict[str, Any] = {}
    for section in ANALYSED_SECTIONS:
        ours, theirs = getattr(config, section), getattr(defaults, section)
        for f in dataclasses.fields(ours):
            value = getattr(ours, f.name)
            if value != getattr(theirs, f.name) and (section, f.name) not in _SET_ASIDE:
                changed[f"{section}.{f.name}"] = _plain(value)
    return {"enforcing": True, "open_period_jitter": True, "changed": changed}


_SET_ASIDE = frozenset({("breaker", "shadow"), ("breaker", "shadow_rules")})


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    return value
