"""What ``mcp-breaker analyze`` costs, against reading and parsing the same file.

    .venv/bin/python bench/offline.py [--spans 1000000] [--repeats 2]
    .venv/bin/python bench/offline.py --quick        # 100,000 spans, once: a smoke test

One file from bulk_traces.py (the hop benchmark's ``mixed`` requests: 512 spans each,
about 15% MCP, as Collector OTLP/JSON lines, zstd-compressed, a malformed line every 200).
Each run is its own process, measured by the kernel (wait4: CPU seconds and peak RSS):

    baseline  decompress the file, json.loads every line, count its spans: the least any
              reader of this file must do
    analyze   mcp-breaker analyze FILE --format json: the same reading, then the spans
              the classifier reads decoded to protobuf, merged in span-time order and
              replayed through the pipeline (classify, breaker, roster), then the report

The two alternate (baseline, analyze, baseline, ...) so drift on a shared machine hits
both; medians are printed. CPU seconds are the steadier figure here: wall time includes
waiting for the other processes on the machine. The run checks its own work: both count
the same spans, analyze skips exactly the malformed lines, and its report has findings.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float
    peak_mib: float
    output: str


def measure(command: list[str]) -> Run:
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdout is not None
    output = process.stdout.read().decode()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 3):  # 3: a report, with the malformed lines skipped
        raise SystemExit(f"{command[:4]} exited {code}")
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, output)


def baseline(path: str) -> int:
    """Read and parse: every line decompressed and json.loads'ed, its spans counted."""
    import zstandard

    spans = 0
    with open(path, "rb") as raw:
        stream = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        import io

        for line in io.BufferedReader(stream, 1 << 20):  # type: ignore[arg-type]
            try:
                document = json.loads(line)
            except ValueError:
                continue
            if not isinstance(document, dict):
                continue
            for resource in document.get("resourceSpans", ()):
                for scope in resource.get("scopeSpans", ()):
                    spans += len(scope.get("spans", ()))
    print(spans)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="100,000 spans, one run each")
    parser.add_argument("--baseline", metavar="FILE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline:
        return baseline(args.baseline)
    if args.quick:
        args.spans, args.repeats = 100_000, 1

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "traces.json.zst"
        made = subprocess.run(
            [sys.executable, str(HERE / "bulk_traces.py"), str(path), "--spans", str(args.spans)],
            capture_output=True,
            text=True,
            check=True,
        )
        found = re.search(r"([\d,]+) spans, ([\d,]+) malformed lines, ([\d.,]+) MiB", made.stdout)
        assert found, made.stdout
        spans, malformed = (int(found.group(n).replace(",", "")) for n in (1, 2))
        report = Path(directory) / "report.json"
        analyze = [
            sys.executable,
            "-m",
            "processor",
            "analyze",
            str(path),
            "--format",
            "json",
            "-o",
            str(report),
            "--no-progress",
        ]
        base = [sys.executable, str(Path(__file__).resolve()), "--baseline", str(path)]
        runs: dict[str, list[Run]] = {"baseline": [], "analyze": []}
        for _ in range(args.repeats):
            runs["baseline"].append(measure(base))
            runs["analyze"].append(measure(analyze))
        result = json.loads(report.read_text())

    problems = []
    # The baseline only parses JSON: it also counts the span of the malformed line whose
    # JSON is valid but whose trace id is not hex.
    if any(not spans <= int(r.output) <= spans + malformed for r in runs["baseline"]):
        problems.append("the baseline counted other spans than were written")
    if result["input"]["spans"] != spans:
        problems.append(f"analyze read {result['input']['spans']} spans, not {spans}")
    if result["input"]["skipped"]["count"] != malformed:
        problems.append("analyze did not skip exactly the malformed lines")
    if not result["calls"]["calls"] or result["input"]["analysis_errors"]:
        problems.append("the analysis found no call, or failed")

    def median(name: str, attribute: str) -> float:
        return statistics.median(getattr(r, attribute) for r in runs[name])

    mcp = result["input"]["mcp_spans"]
    print(
        f"file: {spans:,} spans ({mcp:,} MCP), {malformed} malformed lines, "
        f"{found.group(3)} MiB zstd; {args.repeats} run(s) each, medians"
    )
    print(f"{'':28}{'wall s':>9}{'CPU s':>9}{'spans/s (CPU)':>15}{'peak RSS MiB':>14}")
    for name, label in (
        ("baseline", "read + parse (baseline)"),
        ("analyze", "mcp-breaker analyze"),
    ):
        cpu = median(name, "cpu_s")
        print(
            f"{label:28}{median(name, 'wall_s'):9.1f}{cpu:9.1f}{spans / cpu:15,.0f}"
            f"{median(name, 'peak_mib'):14.0f}"
        )
    ratio = median("baseline", "cpu_s") / median("analyze", "cpu_s")
    print(f"throughput, analyze / baseline (CPU): {ratio:.2f}")
    print(
        f"analyze CPU per MCP span, over the baseline: "
        f"{(median('analyze', 'cpu_s') - median('baseline', 'cpu_s')) / mcp * 1e6:,.0f} us"
    )
    print("checks: " + ("ok" if not problems else "; ".join(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
