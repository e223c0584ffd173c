"""The advisory benchmark still runs and prints its figures.

The figures are not judged: timing belongs in benchmarks, never in tests. What is checked
is that every figure is there, as a number, and the counts that are not timings: every
change delivered, every span accepted during the stall, the stalled subscriber cut off.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
NUMBER = r"-?\d+(?:\.\d+)?"

# Each latency row: its label, then this many figures (p50 p90 p99 max, or p50 p99 max).
LATENCY_ROWS = {
    "Export round trip (baseline)": 4,
    "every subscriber, every event": 4,
    "every subscriber, after Export returned": 4,
    "first subscriber of each event": 4,
    "last subscriber of each event": 4,
    "healthy subscribers, no stall": 3,
    "healthy subscribers, with the stall": 3,
    "first subscriber, with the stall": 3,
    "Export round trip, with the stall": 3,
    "grpc.health.v1 Check, OTLP port (baseline)": 3,
    "Advisories/Check, a blocked call (DENY)": 3,
    "Advisories/Check, an unknown turn (ALLOW)": 3,
}
SUMMARY_ROWS = (
    "Export round trip",
    "delivery, every subscriber",
    "delivery after Export returned (RTT + this)",
    "delivery, first subscriber",
    "delivery with a stalled subscriber",
    "Check, DENY",
    "Check, ALLOW",
    "health Check (baseline)",
)


def _line(stdout: str, label: str) -> str:
    found = [line for line in stdout.splitlines() if line.strip().startswith(label + "  ")]
    assert len(found) == 1, f"{label!r}: {len(found)} lines in\n{stdout}"
    return found[0].strip()[len(label) :]


def test_the_advisory_benchmark_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH / "advisories.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=BENCH.parent,
    )
    out = result.stdout
    assert result.returncode == 0, f"{out[-3000:]}\n{result.stderr[-3000:]}"
    assert out.startswith("advisory benchmark: 10 subscribers, 30 failing spans")
    for header in ("1. delivery latency", "2. one stalled subscriber", "3. Check RPC", "summary"):
        assert header in out

    for label, count in LATENCY_ROWS.items():
        assert re.fullmatch(rf"(\s+{NUMBER}){{{count}}}", _line(out, label)), label
    for label in SUMMARY_ROWS:
        assert re.fullmatch(rf"\s+{NUMBER} / {NUMBER}", _line(out, label)), label
    for label in ("service CPU per span, no subscriber", "this process's CPU per span"):
        assert re.search(rf"{re.escape(label)}.*\s{NUMBER} ms$", out, re.MULTILINE), label

    # Counts, not timings: everything delivered and accepted, the stalled one cut off.
    delivered = re.fullmatch(r"\s+(\d+) of (\d+)", _line(out, "changes delivered"))
    assert delivered and delivered[1] == delivered[2] == "300"
    to_healthy = _line(out, "changes delivered to healthy subscribers")
    healthy = re.fullmatch(r"\s+(\d+) of (\d+)", to_healthy)
    assert healthy and healthy[1] == healthy[2]
    accepted = re.fullmatch(
        r"\s+(\d+) of (\d+) \(service counted (\d+)\)",
        _line(out, "spans accepted during the stall (Export OK)"),
    )
    assert accepted and accepted[1] == accepted[2] == accepted[3]
    assert _line(out, "subscribers cut off (service counter)").strip() == "1"
    stalled = _line(out, "stalled stream, read at last")
    assert re.fullmatch(
        r"\s+a snapshot of \d+ advisories \([\d,]+ bytes\), \d+ changes, then RESOURCE_EXHAUSTED",
        stalled,
    )
    assert _line(out, "stalled subscriber's stream ended").strip() == "RESOURCE_EXHAUSTED"
    assert out.rstrip().endswith("checks: ok")
