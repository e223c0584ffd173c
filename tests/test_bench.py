"""The benchmark commands still run and print their figures (the figures are not judged:
timing belongs in benchmarks, never in tests)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# A bound on waiting for the benchmark's subprocesses (their own timeouts are the
# inner bound), above pytest's default for one test.
pytestmark = pytest.mark.timeout(600)

BENCH = Path(__file__).resolve().parents[1] / "bench"


def run_bench(script: str, args: list[str], timeout_s: float = 300) -> str:
    """Run ``bench/<script>`` as a person would, from the repository; what it printed,
    once it has exited 0."""
    result = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=BENCH.parent,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    return result.stdout


@pytest.mark.parametrize(
    ("script", "args", "expected"),
    [
        (
            "classify.py",
            ["--rounds", "1", "--seen-spans", "20000"],
            "bytes per MCP span remembered",
        ),
        ("engines.py", ["--events", "500", "--rounds", "1"], "memory per tracked turn"),
        (
            "delivery.py",
            ["--quick", "--duration", "1", "--warmup", "0.2", "--store-requests", "16"],
            "checks: ok",
        ),
        ("stall.py", ["--repeats", "1"], "checks: ok"),
        ("sharing.py", ["--rounds", "1", "--requests", "4"], "two workers / one"),
    ],
    ids=["classify", "engines", "delivery", "stall", "sharing"],
)
def test_the_benchmark_runs(script: str, args: list[str], expected: str) -> None:
    assert expected in run_bench(script, args)


def test_the_instruction_count_runs_and_checks_its_own_work(tmp_path: Path) -> None:
    """One request of one payload under valgrind: every workload counted (more than
    nothing), the stage's parts too, the run's own checks pass, and the goal's ratio is
    printed."""
    if shutil.which("valgrind") is None:
        pytest.fail("valgrind is not on PATH (Debian/Ubuntu: apt-get install valgrind)")
    figures = tmp_path / "instructions.json"
    args = ["--requests", "1", "--variants", "mixed", "--parts", "--json", str(figures)]
    printed = run_bench("instructions.py", args, timeout_s=500)
    assert "stage / floor" in printed
    assert "+ classify: dialects, pairing" in printed
    assert "checks: ok" in printed
    row = json.loads(figures.read_text())["rows"]["mixed"]
    parts = {"stage:read", "stage:classify", "stage:pipeline", "stage:sinks"}
    workloads = {"parse+serialize", "naive", "floor", "floor+product", "stage"}
    assert set(row["instructions"]) == workloads | parts
    assert all(count > 0 for count in row["instructions"].values())
    assert row["said"]["stage"]["mcp_spans"] == row["said"]["floor"]["mcp_spans"] > 0
    product = row["said"]["floor+product"]
    assert product["mcp_spans"] == row["said"]["floor"]["mcp_spans"]
    assert 0 < product["decided_spans"] <= product["call_spans"]
    # The least of the product's work costs more than the floor, and less than the stage.
    counted = row["instructions"]
    assert counted["floor"] < counted["floor+product"] < counted["stage"]
    # Each row adds a part to the one before it: the counts grow row by row.
    built_up = [row["instructions"][f"stage:{p}"] for p in ("read", "classify", "pipeline")]
    assert built_up == sorted(built_up) and built_up[-1] < row["instructions"]["stage"]


def test_the_hop_benchmark_runs_every_hop_and_checks_its_own_work(tmp_path: Path) -> None:
    """Every payload through every hop, in one run; the run's own checks (no span lost,
    none a duplicate, every MCP call decided in its request and annotated) pass."""
    report_path = tmp_path / "hop.json"
    args = ["--quick", "--duration", "1", "--warmup", "0.2", "--sample", "8"]
    printed = run_bench("hop.py", [*args, "--json", str(report_path)])
    assert "checks: ok" in printed
    report = json.loads(report_path.read_text())
    assert report["problems"] == []
    assert set(report["summary"]) == {"plain", "mixed", "harness", "frameworks"}
    hops = {"null-receiver", "null-forwarder", "naive-hop", "rotel", "serve"}
    hops |= {"serve-redis", "serve-2w"}
    hops -= set(report["skipped_hops"])  # rotel, where it is not installed
    assert "rotel" in hops or "not installed" in report["skipped_hops"]["rotel"]
    for payload, summary in report["summary"].items():
        assert set(summary) == hops, payload
        assert summary["null-forwarder"]["throughput_vs_null_forwarder"] == 1.0
        for row in summary.values():
            assert row["spans_per_s"] > 0 and row["cpu_s_per_m_spans"] > 0
        # The goals' ratios, each against its own baseline in the same repeat.
        assert summary["naive-hop"]["throughput_vs_naive"] == 1.0
        assert summary["serve"]["cpu_vs_serve"] is None
        assert summary["serve-redis"]["cpu_vs_serve"] > 0 < summary["serve-2w"]["cpu_vs_serve"]
        per_mcp_span = summary["serve"]["cpu_us_per_mcp_span"]
        assert per_mcp_span is None if payload == "plain" else per_mcp_span > 0
    # One process, the same on the Redis backend, and two workers sharing one breaker.
    for name in ("serve", "serve-redis", "serve-2w"):
        serve = {r["payload"]: r for r in report["runs"] if r["hop"] == name}
        for payload in ("mixed", "harness", "frameworks"):
            counters, sample = serve[payload]["serve"], serve[payload]["received"]["sample"]
            assert counters["duplicate_spans"] == counters["forwarded_pending"] == 0
            assert counters["tool_calls"] == serve[payload]["ok_calls"] > 0
            assert sample["call_decided"] == sample["call_spans"] > 0
        plain = serve["plain"]
        assert plain["serve"]["passthrough_requests"] == plain["taken_requests"]
