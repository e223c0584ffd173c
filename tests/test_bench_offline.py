"""The analyze benchmark still runs, checks its own work and prints its figures (which are
not judged: timing belongs in benchmarks, never in tests)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

# A bound on waiting for the benchmark's subprocesses (their own timeouts are the
# inner bound), above pytest's default for one test.
pytestmark = pytest.mark.timeout(600)

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_the_analyze_benchmark_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH / "offline.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=BENCH.parent,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    out = result.stdout
    assert "checks: ok" in out
    for label in ("read + parse (baseline)", "mcp-breaker analyze"):
        row = next(line for line in out.splitlines() if line.startswith(label))
        assert len(re.findall(r"[\d,.]+", row[len(label) :])) == 4, row
    assert re.search(r"throughput, analyze / baseline \(CPU\): \d+\.\d\d", out)
