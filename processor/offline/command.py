"""``mcp-breaker analyze``: its flags, its messages and its exit codes (the thin edge)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from processor.config import AnalyzeConfig, load_config
from processor.errors import ConfigError
from processor.offline import sweep as sweeping
from processor.offline.read import Problem, expand, size_of
from processor.offline.report import build
from processor.offline.run import Analysis, InputStats, make_analysis, run

EXIT_OK = 0
EXIT_FAILED = 1  # no report
EXIT_USAGE = 2  # argparse's own
EXIT_PARTIAL = 3  # a report, but some input could not be read
PROBLEMS_PRINTED = 20
# Works as printed in a checkout (tests/test_fresh_clone.py runs it); docs/analyze.md
# has the same for a wheel.
EXTRA_HINT = ".venv/bin/pip install -e '.[analyze]' (in a checkout; a wheel: docs/analyze.md)"

DESCRIPTION = """\
Replay recorded traces through mcp-breaker's own classifier, breaker and roster health, as
enforcing (a call it refuses is never made, so it is evidence for nothing after it), and
report what the breaker would have done: per server and tool, the calls, their outcomes
and failure classes; per turn, the refused calls, what they cost and the failure each
repeated; the calls it would have refused, within and across turns, the tool
seconds and model rounds that would have saved, and the good calls refusing would have
cost; the circuits that would have opened, and when; the tool rosters. Worst first; the
json lists the trace and span ids behind every figure.

FILE is an OTLP trace file as the Collector's file exporter writes it (OTLP/JSON lines,
or format: proto), a serialized ExportTraceServiceRequest, or any of these compressed
with gzip or zstd; a directory (its files, by name); or - for standard input. Spans of all
files are analysed together, in span-time order.

The settings are the service's (--config, MCP_BREAKER_* variables, --set): what the
breaker would have done with exactly the thresholds you would deploy."""

EPILOG = """\
exit codes:
  0  the report is written and every record was read
  1  no report: invalid settings, no input could be read, the output cannot be
     written, or --format html without its extra (in a checkout:
     .venv/bin/pip install -e '.[analyze]')
  2  the command line is wrong
  3  the report is written, but some records or files could not be read: each is named
     on standard error (file, line or record, what is wrong) and counted in the report

examples:
  mcp-breaker analyze /var/log/otel/traces.json
  mcp-breaker analyze traces/ --since 2026-08-18T00:00Z --until 2026-08-18T03:00Z
  mcp-breaker analyze traces.json.zst --format html --output report.html
  mcp-breaker analyze traces.json --sweep breaker.min_calls=2,3,5 \\
      --sweep breaker.failure_ratio=0.5,1.0
  zstd -dc traces.json.zst | mcp-breaker analyze - --format json | jq .counterfactual"""


def add_parser(commands: Any, add_config_flags: Callable[[argparse.ArgumentParser], None]) -> None:
    parser = commands.add_parser(
        "analyze",
        help="what the breaker would have done, from recorded traces",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("inputs", nargs="+", metavar="FILE", help="trace file, directory, or -")
    add_config_flags(parser)
    parser.add_argument(
        "--format", choices=("text", "json", "html"), default="text", help="default: text"
    )
    parser.add_argument("--output", "-o", metavar="PATH", help="write here (default: stdout)")
    parser.add_argument(
        "--since",
        metavar="TIME",
        help="only spans that started at or after "
        "TIME (ISO 8601, UTC unless it says otherwise; or Unix seconds)",
    )
    parser.add_argument("--until", metavar="TIME", help="only spans that started before TIME")
    parser.add_argument(
        "--sweep",
        metavar="KEY=V1,V2,...",
        action="append",
        default=[],
        help="analyse once per value and add the trade-off table: dead calls spared "
        "against good calls refused (one or two keys)",
    )
    defaults = AnalyzeConfig()
    parser.add_argument(
        "--reorder-window",
        type=float,
        default=defaults.reorder_window_s,
        metavar="SECONDS",
        help="how far out of span-time order a file's spans may be (default: %(default)s)",
    )
    parser.add_argument(
        "--reorder-spans",
        type=int,
        default=defaults.reorder_max_spans,
        metavar="N",
        help="MCP spans held for reordering at most (default: %(default)s)",
    )
    parser.add_argument(
        "--ids",
        type=int,
        default=defaults.ids_per_figure,
        metavar="N",
        help="trace and span ids listed behind each figure (default: %(default)s)",
    )
    parser.add_argument(
        "--worst",
        type=int,
        default=defaults.worst_turns,
        metavar="N",
        help="turns reported in full (default: %(default)s)",
    )
    parser.add_argument(
        "--max-rows",
        type=int,
        default=defaults.max_report_rows,
        metavar="N",
        help="rows per table keyed by names from the spans; the rest in one (other) row "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--max-record-bytes",
        type=int,
        default=defaults.max_record_bytes,
        metavar="N",
        help="a larger line or record is skipped (default: %(default)s)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def parse_time(text: str) -> int:
    """Unix nanoseconds from ISO 8601 (naive: UTC) or from Unix seconds."""
    stripped = text.strip()
    try:
        return int(float(stripped) * 1e9)
    except ValueError:
        pass
    moment = datetime.datetime.fromisoformat(stripped)  # raises ValueError
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


def _fail(lines: list[str]) -> int:
    for line in lines:
        print(f"mcp-breaker analyze: {line}", file=sys.stderr)
    return EXIT_FAILED


def main(args: argparse.Namespace) -> int:
    try:
        since = parse_time(args.since) if args.since else None
        until = parse_time(args.until) if args.until else None
    except ValueError:
        bad = "--since" if args.since and not _parses(args.since) else "--until"
        return _fail([f"{bad}: not an ISO 8601 time or Unix seconds: {getattr(args, bad[2:])!r}"])
    options = AnalyzeConfig(
        reorder_window_s=args.reorder_window,
        reorder_max_spans=args.reorder_spans,
        ids_per_figure=args.ids,
        worst_turns=args.worst,
        max_report_rows=args.max_rows,
        max_record_bytes=args.max_record_bytes,
        since_ns=since,
        until_ns=until,
    )
    keys, problems = sweeping.parse(args.sweep)
    problems = options.validate() + problems
    if problems:
        return _fail(problems)
    if args.format == "html":
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return _fail([f"--format html draws its pictures with matplotlib: {EXTRA_HINT}"])
    analyses = _analyses(args, options, keys)
    if isinstance(analyses, int):
        return analyses
    stats = _read(args, analyses, options)
    if stats.skipped and not any(f.records for f in stats.files):
        return _fail(["no input could be read"])
    sweep = sweeping.Sweep(keys, analyses[1:]) if keys else None
    report = build(analyses[0], stats, options, sweep)
    try:
        _write(report, args.format, args.output)
    except OSError as error:
        return _fail([f"--output {args.output}: {error.strerror}"])
    return EXIT_PARTIAL if stats.skipped else EXIT_OK


def _parses(text: str) -> bool:
    try:
        parse_time(text)
    except ValueError:
        return False
    return True


def _analyses(
    args: argparse.Namespace, options: AnalyzeConfig, keys: list[sweeping.SweepKey]
) -> list[Analysis] | int:
    try:
        config = load_config(path=args.config, environ=os.environ, overrides=args.overrides)
    except ConfigError as error:
        return _fail(["invalid configuration:", *(f"  - {p}" for p in error.problems)])
    analyses = [make_analysis(config, options)]
    for label in sweeping.combinations(keys):
        overrides = [*args.overrides, *(f"{key}={value}" for key, value in label)]
        try:
            variant = load_config(path=args.config, environ=os.environ, overrides=overrides)
        except ConfigError as error:
            return _fail([f"--sweep: {p}" for p in error.problems])
        analyses.append(make_analysis(variant, options, label))
    return analyses


def _read(args: argparse.Namespace, analyses: list[Analysis], options: AnalyzeConfig) -> InputStats:
    bar = _progress_bar(args)
    printed = [0]

    def on_problem(problem: Problem) -> None:
        printed[0] += 1
        if printed[0] <= PROBLEMS_PRINTED:
            line = f"mcp-breaker analyze: {problem}"
            if bar is not None:
                bar.write(line, file=sys.stderr)
            else:
                print(line, file=sys.stderr)

    try:
        stats = run(
            args.inputs,
            analyses,
            options,
            on_problem=on_problem,
            progress=bar.update if bar is not None else None,
        )
    finally:
        if bar is not None:
            bar.close()
    if stats.skipped > PROBLEMS_PRINTED:
        print(
            f"mcp-breaker analyze: ... and {stats.skipped - PROBLEMS_PRINTED:,} more unreadable "
            "records, counted in the report",
            file=sys.stderr,
        )
    return stats


def _progress_bar(args: argparse.Namespace) -> Any:
    """A progress bar over the bytes stored, on a terminal only."""
    if args.no_progress or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    sizes = [size_of(path) for path in expand(args.inputs)[0]]
    total = None if any(s is None for s in sizes) else sum(s or 0 for s in sizes)
    return tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        desc="reading",
        file=sys.stderr,
        leave=False,
        dynamic_ncols=True,
    )


def _write(report: dict[str, Any], form: str, output: str | None) -> None:
    if form == "json":
        text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    elif form == "html":
        from processor.offline import html

        text = html.render(report)
    else:
        from processor.offline import text as plain

        text = plain.render(report)
    if output is None or output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    with open(output, "w", encoding="utf-8") as out:
        out.write(text)
