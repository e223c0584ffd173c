"""The benchmark commands still run and print their figures (the figures are not judged:
timing belongs in benchmarks, never in tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.mark.parametrize(
    ("script", "args", "expected"),
    [
        ("classify.py", ["--rounds", "1"], "classify alone, ns per MCP span"),
        ("engines.py", ["--events", "500", "--rounds", "1"], "memory per tracked turn"),
        ("hop.py", ["--quick", "--duration", "1", "--warmup", "0.2"], "checks: ok"),
        (
            "delivery.py",
            ["--quick", "--duration", "1", "--warmup", "0.2", "--store-requests", "16"],
            "checks: ok",
        ),
    ],
    ids=["classify", "engines", "hop", "delivery"],
)
def test_the_benchmark_runs(script: str, args: list[str], expected: str) -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=BENCH.parent,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert expected in result.stdout
