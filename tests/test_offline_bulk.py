"""A million spans, in bounded memory, with the unreadable lines counted.

The file is made by bench/bulk_traces.py (the hop benchmark's requests, rewritten line by
line: quick to make), ``--lean`` so the test stays short: ordinary spans with two
attributes, 5% MCP spans (about 50,000 tool calls and listings through the real
pipeline), zstd-compressed as a whole, with a malformed line every 200. The analysis runs
as the command, in its own process; its peak RSS comes from the kernel (wait4) and is
printed. The cap is generous: it catches a reader that holds the file, or a tally that
grows with it, not a few megabytes more.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from processor.offline.command import EXIT_PARTIAL

# A bound on waiting for the subprocesses (their own timeouts are the inner bound), above
# pytest's default for one test: a million spans made, then analysed.
pytestmark = pytest.mark.timeout(900)

BENCH = Path(__file__).resolve().parents[1] / "bench"
SPANS = 1_000_000
RSS_CAP_MIB = 300  # under the 380 MiB of JSON the file holds once decompressed


# The command run in its own process, which then reports its own peak resident set
# (VmHWM, of this process's memory only). Not the child's ru_maxrss: Linux carries the
# high-water mark across exec, so a child forked from a big test process reports the
# test process's size, not its own.
MEASURED = """
import sys
from processor.cli import main
peak, arguments = sys.argv[1], sys.argv[2:]
try:
    code = main(["analyze", *arguments])
finally:
    with open("/proc/self/status") as status:
        hwm = next(line for line in status if line.startswith("VmHWM:"))
    with open(peak, "w") as out:
        out.write(hwm.split()[1])
sys.exit(code)
"""


def test_a_million_spans_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "traces.json.zst"
    made = subprocess.run(
        [sys.executable, str(BENCH / "bulk_traces.py"), str(path), "--spans", str(SPANS), "--lean"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr
    found = re.search(r"([\d,]+) spans, ([\d,]+) malformed lines", made.stdout)
    assert found, made.stdout
    spans, malformed = (int(n.replace(",", "")) for n in found.groups())
    assert spans >= SPANS and malformed > 0

    out, peak = tmp_path / "report.json", tmp_path / "peak.txt"
    process = subprocess.Popen(
        [sys.executable, "-c", MEASURED, str(peak), str(path), "--format", "json", "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    errors = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    peak_mib = int(peak.read_text()) / 1024  # VmHWM, kilobytes
    print(f"\nanalyze: {spans:,} spans, peak RSS {peak_mib:.0f} MiB, {usage.ru_utime:.1f} s CPU")

    assert process.returncode == EXIT_PARTIAL, errors.decode()[-2000:]
    report = json.loads(out.read_text())
    source = report["input"]
    assert source["spans"] == spans
    assert source["skipped"]["count"] == malformed
    assert errors.decode().count(f"{path}:") == min(malformed, 20)
    assert source["analysis_errors"] == 0 and source["reorder"]["late_spans"] == 0
    assert source["mcp_spans"] > 0.04 * spans
    assert report["calls"]["calls"] > 0 and report["roster"]["listings"] > 0
    assert report["turns"]["total"] > 10_000  # far more turns than the report holds open
    assert peak_mib < RSS_CAP_MIB
