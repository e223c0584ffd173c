"""The advisory benchmark's figures: percentiles, delivery latencies, and the report's rows.

Latencies are in ms unless a name says otherwise; nearest-rank percentiles, NaN (printed
as ``-``) when there is nothing to rank.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

# Sibling modules: bench/ is on sys.path when these files are run as scripts.
from advisories_fleet import Stream
from advisories_spans import Event

QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("max", 1.0))


def quantiles(values: Sequence[float]) -> dict[str, float]:
    """Nearest-rank percentiles and the maximum; NaN when there is nothing to rank."""
    ordered = sorted(values)
    if not ordered:
        return {name: math.nan for name, _ in QUANTILES}
    return {
        name: ordered[max(0, min(len(ordered), math.ceil(q * len(ordered))) - 1)]
        for name, q in QUANTILES
    }


def delivery(events: Sequence[Event], streams: Sequence[Stream]) -> dict[str, Any]:
    """Latencies in ms over every (subscriber, event) pair, and per event for the first."""
    every: list[float] = []
    after_return: list[float] = []
    first: list[float] = []
    last: list[float] = []
    missing = 0
    for event in events:
        times = [s.got[event.turn] for s in streams if event.turn in s.got]
        missing += len(streams) - len(times)
        if not times:
            continue
        every += [(t - event.t0_ns) / 1e6 for t in times]
        after_return += [(t - event.t1_ns) / 1e6 for t in times]
        first.append((min(times) - event.t0_ns) / 1e6)
        last.append((max(times) - event.t0_ns) / 1e6)
    return {
        "events": len(events),
        "subscribers": len(streams),
        "pairs": len(every),
        "missing": missing,
        "exports_ok": sum(e.ok for e in events),
        "export_errors": sorted({e.error for e in events if not e.ok}),
        "export_rtt_ms": quantiles([(e.t1_ns - e.t0_ns) / 1e6 for e in events]),
        "every_ms": quantiles(every),
        "after_return_ms": quantiles(after_return),
        "first_ms": quantiles(first),
        "last_ms": quantiles(last),
    }


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    began = time.perf_counter_ns()
    result = call()
    return (time.perf_counter_ns() - began) / 1e6, result


# The report: a label, then one column for each of the heading's quantiles.
ALL = tuple(name for name, _ in QUANTILES)
SHORT = ("p50", "p99", "max")
LABEL_WIDTH = 48


def _ms(value: float) -> str:
    return f"{value:9.2f}" if not math.isnan(value) else f"{'-':>9}"


def heading(text: str, keys: Sequence[str]) -> None:
    print(f"\n{text:<{LABEL_WIDTH + 2}}" + "".join(f"{k:>9}" for k in keys))


def row(label: str, figures: dict[str, float], keys: Sequence[str]) -> None:
    print(f"  {label:<{LABEL_WIDTH}}" + "".join(_ms(figures[k]) for k in keys))


def line(label: str, value: object) -> None:
    print(f"  {label:<{LABEL_WIDTH}}{value}")
