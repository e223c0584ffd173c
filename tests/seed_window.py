"""The sirens-echo seed window (2026-08-18), as the harness recorded it, in a Collector file.

Made by the seed's builders in tests/test_seed_replay.py and tests/test_roster_replay.py,
through the real OpenTelemetry SDK: the 25 ``mcp.tools.list`` spans of the old instrument
(21 of them cached with nothing reached), then the turns at 00:20, 00:30, 00:40 and 01:00
calling ``playwright__browser_navigate`` nine times, every call failing, then the 01:06
turn calling it in rounds 1, 5, 7, 7, 9, 9, 11, 11, three seconds a call, all failing.
One export per turn, one line per export, as the ``file`` exporter writes them.
"""

from __future__ import annotations

import random
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan

from tests.otlp_file import write_json_lines
from tests.test_roster_replay import listing_spans, seed_listings
from tests.test_seed_replay import CALL_SECONDS, EARLIER_TURNS, ROUNDS, TOOL, at_ns, harness_calls

INCIDENT_TURN = "turn-0106"
SEED_CALLS = sum(calls for _, _, calls in EARLIER_TURNS) + len(ROUNDS)
FILE_NAME = "sirens-echo-2026-08-18.json"
SEED_943 = 943

__all__ = [
    "CALL_SECONDS",
    "FILE_NAME",
    "INCIDENT_TURN",
    "ROUNDS",
    "SEED_CALLS",
    "TOOL",
    "seed_exports",
    "write_seed_window",
]


def seed_exports() -> list[list[ReadableSpan]]:
    """The window's exports; the same trace and span ids every time (the SDK draws them
    from ``random``, seeded here and put back as it was), so a report of it is the same."""
    state = random.getstate()
    random.seed(SEED_943)
    try:
        exports = [listing_spans(seed_listings(fixed=False))]
        for turn, minute, calls in EARLIER_TURNS:
            starts = [(1 + i, at_ns(minute, 40 * i)) for i in range(calls)]
            exports.append(harness_calls(turn, starts))
        incident = [(r, at_ns(66, 36.875 + 10 * i)) for i, r in enumerate(ROUNDS)]
        exports.append(harness_calls(INCIDENT_TURN, incident))
    finally:
        random.setstate(state)
    return exports


def write_seed_window(directory: Path, *, compression: str = "") -> Path:
    suffix = {"": "", "gzip": ".gz", "zstd": ".zst"}[compression]
    return write_json_lines(
        directory / (FILE_NAME + suffix), seed_exports(), compression=compression
    )
