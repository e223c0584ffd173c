"""The shared-state benchmark still runs, checks its own work and prints its figures
(which are not judged: timing belongs in benchmarks, never in tests)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

# A bound on waiting for the benchmark's subprocesses (their own timeouts are the
# inner bound), above pytest's default for one test.
pytestmark = pytest.mark.timeout(900)

BENCH = Path(__file__).resolve().parents[1] / "bench"
NUMBER = r"[\d,]+\.?\d*"


def test_the_scaling_benchmark_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH / "scaling.py"), "--quick", "--events", "20"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=BENCH.parent,
    )
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    assert out.rstrip().endswith("checks: ok")
    for label in ("same replica (A)", "other replica (B)"):
        assert re.search(rf"{re.escape(label)}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}$", out, re.M), label
    assert re.search(rf"redis / memory\s+{NUMBER}$", out, re.M)
    assert re.search(rf"commands per failing call\s+{NUMBER}$", out, re.M)
    assert re.search(rf"stream bytes per entry\s+{NUMBER}$", out, re.M)
