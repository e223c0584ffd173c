"""The hop benchmark: what putting ``mcp-breaker serve`` in a trace pipeline costs.

For each payload variant (``plain``: no MCP span, the pass-through path; ``mixed``: about
15% MCP spans, the parsed path) it alternates two runs, ``--repeats`` times:

    baseline  loadgen ──▶ null receiver
    hop       loadgen ──▶ mcp-breaker serve ──▶ null receiver

Every process is separate (the load generator too), all on 127.0.0.1. The machine is
small and noisy, so what matters are ratios against a baseline measured in the same run,
pair by pair: throughput hop/baseline, latency added by the hop, and the serve process's
CPU seconds per million spans next to the null receiver's (the floor for a Python hop).

    .venv/bin/python bench/hop.py            # 8 s runs, 3 repeats: a couple of minutes
    .venv/bin/python bench/hop.py --quick    # 2 s runs, 1 repeat: a smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

# A sibling module: bench/ is on sys.path when these files are run as scripts.
from payload import SPANS_PER_REQUEST, VARIANTS
from prometheus_client.parser import text_string_to_metric_families

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0  # SIGTERM, then SIGKILL
DRAIN_TIMEOUT_S = 30.0
LOADGEN_SLACK_S = 60.0  # start-up, payload building and the last calls, over its duration
PATH_LABELS = {"plain": "pass-through", "mixed": "15% MCP"}


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    output: Path  # stdout and stderr, for the end-of-run report


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def start(name: str, argv: list[str], workdir: Path) -> Child:
    output = workdir / f"{name}.log"
    with output.open("wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO)
    return Child(name, process, output)


def stop(child: Child) -> None:
    if child.process.poll() is None:
        child.process.send_signal(signal.SIGTERM)
        try:
            child.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.process.kill()
            child.process.wait()


def check_alive(child: Child) -> None:
    if child.process.poll() is not None:
        tail = child.output.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{child.name} exited with {child.process.returncode}:\n{tail}")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, all its threads, from /proc/PID/stat."""
    # The command name (field 2) may hold spaces; the fields after it are space-separated.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def wait_grpc_ready(child: Child, port: int) -> None:
    with grpc.insecure_channel(f"{LOOPBACK}:{port}") as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=START_TIMEOUT_S)
        except grpc.FutureTimeoutError:
            check_alive(child)
            raise RuntimeError(f"{child.name} did not listen within {START_TIMEOUT_S}s") from None


def wait_http_ready(child: Child, url: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        check_alive(child)
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass  # not listening yet, or 503: not ready yet
        if time.monotonic() > deadline:
            raise RuntimeError(f"{child.name}: {url} not 200 within {START_TIMEOUT_S}s")
        time.sleep(0.1)


def scrape(port: int) -> dict[str, float]:
    """The serve process's metrics, summed by name and by name{label=value}."""
    url = f"http://{LOOPBACK}:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    values: dict[str, float] = defaultdict(float)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[sample.name] += sample.value
            for label, value in sample.labels.items():
                values[f"{sample.name}{{{label}={value}}}"] += sample.value
    return values


def wait_drained(port: int) -> None:
    """The hop answers before it forwards: let it deliver what it holds before reading CPU."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while scrape(port)["mcp_breaker_exporter_queue_spans"] > 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the hop still holds spans after {DRAIN_TIMEOUT_S}s")
        time.sleep(0.05)


def run_loadgen(port: int, variant: str, args: argparse.Namespace) -> dict[str, Any]:
    argv = [sys.executable, str(BENCH / "loadgen.py"), "--target", f"{LOOPBACK}:{port}"]
    argv += ["--payload", variant, "--concurrency", str(args.concurrency)]
    argv += ["--duration", str(args.duration), "--warmup", str(args.warmup)]
    limit_s = args.duration + args.warmup + LOADGEN_SLACK_S
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=limit_s, check=False)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"loadgen did not finish within {limit_s:.0f}s") from None
    if done.returncode != 0:
        raise RuntimeError(f"loadgen exited with {done.returncode}:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@dataclass
class Pipeline:
    null: Child
    null_port: int
    serve: Child
    serve_port: int
    metrics_port: int


def measure(
    pipeline: Pipeline, kind: str, variant: str, args: argparse.Namespace
) -> dict[str, Any]:
    """One loadgen run, against the null receiver ("baseline") or through the hop ("hop")."""
    hop = kind == "hop"
    check_alive(pipeline.null)
    check_alive(pipeline.serve)
    null_pid, serve_pid = pipeline.null.process.pid, pipeline.serve.process.pid
    null_cpu, serve_cpu = cpu_seconds(null_pid), cpu_seconds(serve_pid)
    before = scrape(pipeline.metrics_port) if hop else {}
    result = run_loadgen(pipeline.serve_port if hop else pipeline.null_port, variant, args)
    check_alive(pipeline.null)
    check_alive(pipeline.serve)
    if hop:
        wait_drained(pipeline.metrics_port)
    # Every span the target took, warm-up included, is what its CPU time was spent on.
    taken_requests = result["requests"] + result["warmup_ok_requests"]
    per_million = 1e6 / max(taken_requests * SPANS_PER_REQUEST, 1)
    run = {"kind": kind, **result, "taken_requests": taken_requests}
    run["null_cpu_s_per_m_spans"] = (cpu_seconds(null_pid) - null_cpu) * per_million
    if hop:
        run["hop_cpu_s_per_m_spans"] = (cpu_seconds(serve_pid) - serve_cpu) * per_million
        after = scrape(pipeline.metrics_port)
        for key, metric in (
            ("hop_accepted_spans", "mcp_breaker_receiver_accepted_spans_total"),
            ("hop_sent_spans", "mcp_breaker_exporter_sent_spans_total"),
            ("hop_passthrough_requests", "mcp_breaker_stage_requests_total{path=passthrough}"),
            ("hop_parsed_requests", "mcp_breaker_stage_requests_total{path=parsed}"),
        ):
            run[key] = int(after[metric] - before[metric])
    return run


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over repeats; ratios and differences are taken pair by pair, then the median."""
    base = [r for r in runs if r["kind"] == "baseline"]
    hop = [r for r in runs if r["kind"] == "hop"]
    pairs = list(zip(base, hop, strict=True))
    median = statistics.median
    hop_cpu = median(r["hop_cpu_s_per_m_spans"] for r in hop)
    floor_cpu = median(r["null_cpu_s_per_m_spans"] for r in base)
    parsed = sum(r["hop_parsed_requests"] for r in hop)
    staged = parsed + sum(r["hop_passthrough_requests"] for r in hop)
    latency = {}
    for quantile in ("p50", "p99"):
        latency[f"baseline_{quantile}_ms"] = median(b["latency_ms"][quantile] for b in base)
        latency[f"hop_{quantile}_ms"] = median(h["latency_ms"][quantile] for h in hop)
        latency[f"added_{quantile}_ms"] = median(
            h["latency_ms"][quantile] - b["latency_ms"][quantile] for b, h in pairs
        )
    return {
        "baseline_spans_per_s": median(r["spans_per_s"] for r in base),
        "hop_spans_per_s": median(r["spans_per_s"] for r in hop),
        "throughput_ratio": median(h["spans_per_s"] / b["spans_per_s"] for b, h in pairs),
        "hop_cpu_s_per_m_spans": hop_cpu,
        "floor_cpu_s_per_m_spans": floor_cpu,
        "cpu_ratio_to_floor": hop_cpu / floor_cpu if floor_cpu else float("nan"),
        **latency,
        "errors_baseline": sum(sum(r["errors"].values()) + r["warmup_errors"] for r in base),
        "errors_hop": sum(sum(r["errors"].values()) + r["warmup_errors"] for r in hop),
        "parsed_share": parsed / staged if staged else float("nan"),
    }


def received_bytes(null: Child) -> int | None:
    """What the null receiver printed as it stopped; None if it never got to say.

    Bytes, not requests: the hop merges requests that wait in its queue. It forwards
    pass-through requests byte for byte; parsed ones come out re-encoded, a little longer
    where it annotated spans.
    """
    lines = null.output.read_text(errors="replace").splitlines()
    reports = [line for line in lines if line.startswith("{")]
    return int(json.loads(reports[-1])["bytes"]) if reports else None


def check(runs: list[dict[str, Any]], received: int | None) -> list[str]:
    """What would make the numbers meaningless: lost spans, or the wrong stage path."""
    problems = []
    for number, run in enumerate(runs, 1):
        what = f"run {number} ({run['payload']} {run['kind']})"
        if run["errors"] or run["warmup_errors"]:
            problems.append(f"{what}: {run['errors']} errors, {run['warmup_errors']} in warm-up")
        if run["kind"] != "hop":
            continue
        taken = run["taken_requests"] * SPANS_PER_REQUEST
        if not run["hop_accepted_spans"] == run["hop_sent_spans"] == taken:
            problems.append(
                f"{what}: loadgen got ok for {taken} spans, the hop accepted "
                f"{run['hop_accepted_spans']} and delivered {run['hop_sent_spans']}"
            )
        wrong_path = (
            "hop_parsed_requests" if run["payload"] == "plain" else "hop_passthrough_requests"
        )
        if run[wrong_path]:
            problems.append(f"{what}: {run[wrong_path]} requests took the wrong stage path")
    sent = sum(run["ok_bytes"] for run in runs)
    # At least what was sent: the hop adds mcp.breaker.* attributes to the MCP spans.
    if received is None or received < sent:
        problems.append(f"the null receiver got {received} bytes; {sent} were sent")
    return problems


def print_progress(run: dict[str, Any], number: int, total: int) -> None:
    latency = run["latency_ms"]
    print(
        f"[{number:>{len(str(total))}}/{total}] {run['payload']:<5} {run['kind']:<8} "
        f"{run['spans_per_s']:>10,.0f} spans/s   p50 {latency['p50']:7.2f} ms   "
        f"p99 {latency['p99']:7.2f} ms   errors {run['errors'] or 0}",
        flush=True,  # the table comes at the end; show the runs as they finish
    )


def print_table(summaries: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"\nhop benchmark: {SPANS_PER_REQUEST} spans/request, {args.concurrency} in flight, "
        f"{args.duration:g} s runs (+{args.warmup:g} s warm-up), {args.repeats} repeat(s); "
        "medians, ratios and differences pair by pair"
    )
    rows = (
        ("baseline spans/s (loadgen -> null)", "baseline_spans_per_s", "{:,.0f}"),
        ("hop spans/s (loadgen -> serve -> null)", "hop_spans_per_s", "{:,.0f}"),
        ("throughput hop/baseline", "throughput_ratio", "{:.2f}"),
        ("serve CPU s per million spans", "hop_cpu_s_per_m_spans", "{:.2f}"),
        ("null receiver CPU s per million spans", "floor_cpu_s_per_m_spans", "{:.2f}"),
        ("serve CPU / null receiver CPU", "cpu_ratio_to_floor", "{:.2f}"),
        ("latency p50 baseline ms", "baseline_p50_ms", "{:.2f}"),
        ("latency p50 added by hop ms", "added_p50_ms", "{:+.2f}"),
        ("latency p99 baseline ms", "baseline_p99_ms", "{:.2f}"),
        ("latency p99 added by hop ms", "added_p99_ms", "{:+.2f}"),
        ("requests parsed by the hop", "parsed_share", "{:.0%}"),
        ("errors baseline / hop", None, ""),
    )
    width = max(len(label) for label, _, _ in rows) + 2
    header = "".join(f"{v} ({PATH_LABELS[v]})".rjust(24) for v in summaries)
    print(" " * width + header)
    for label, key, form in rows:
        cells = (
            form.format(s[key]) if key else f"{s['errors_baseline']} / {s['errors_hop']}"
            for s in summaries.values()
        )
        print(label.ljust(width) + "".join(cell.rjust(24) for cell in cells))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds per run")
    parser.add_argument("--repeats", type=int, default=3, help="baseline/hop pairs per variant")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    parser.add_argument("--quick", action="store_true", help="2 s runs, 1 repeat")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every number here")
    parser.add_argument(
        "--set",
        dest="serve_settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra setting for the serve process (repeatable)",
    )
    args = parser.parse_args()
    if args.quick:
        args.duration, args.warmup, args.repeats = 2.0, 0.5, 1
    args.variants = [v for v in args.variants.split(",") if v]
    if unknown := set(args.variants) - set(VARIANTS):
        parser.error(f"unknown variants {sorted(unknown)}; choose from {VARIANTS}")
    return args


def start_pipeline(workdir: Path, children: ExitStack, settings: list[str]) -> Pipeline:
    null_port, serve_port, metrics_port = free_port(), free_port(), free_port()
    advisory_port = free_port()
    null_argv = [sys.executable, str(BENCH / "null_receiver.py"), "--port", str(null_port)]
    null = start("null-receiver", null_argv, workdir)
    children.callback(stop, null)
    wait_grpc_ready(null, null_port)
    serve_argv = [sys.executable, "-m", "processor", "serve", "--log-level", "warning"]
    for setting in (
        f"receivers.grpc.endpoint={LOOPBACK}:{serve_port}",
        "receivers.http.enabled=false",
        f"telemetry.metrics_endpoint={LOOPBACK}:{metrics_port}",
        f"forward.endpoint={LOOPBACK}:{null_port}",
        # The advisory port runs as it does in production (nobody subscribes here); a
        # token keeps it from warning that it is open to anyone.
        f"advisories.endpoint={LOOPBACK}:{advisory_port}",
        "advisories.tokens=bench-token=bench",
        *settings,
    ):
        serve_argv += ["--set", setting]
    serve = start("serve", serve_argv, workdir)
    children.callback(stop, serve)  # stopped first (last in, first out): it drains into null
    wait_http_ready(serve, f"http://{LOOPBACK}:{metrics_port}/readyz")
    return Pipeline(null, null_port, serve, serve_port, metrics_port)


def run_all(args: argparse.Namespace) -> tuple[list[dict[str, Any]], int | None, str]:
    """Every run, alternated; then what the null receiver got and what the hop logged."""
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hop-bench-") as tmp, ExitStack() as children:
        pipeline = start_pipeline(Path(tmp), children, args.serve_settings)
        total = args.repeats * len(args.variants) * 2
        for _ in range(args.repeats):
            for variant in args.variants:
                for kind in ("baseline", "hop"):  # alternated, so drift hits both alike
                    runs.append(measure(pipeline, kind, variant, args))
                    print_progress(runs[-1], len(runs), total)
        children.close()  # the serve process drains, then the null receiver reports
        received = received_bytes(pipeline.null)
        serve_log = pipeline.serve.output.read_text(errors="replace").strip()
    return runs, received, serve_log


def stop_on_sigterm(signum: int, frame: object) -> None:
    # Python's default SIGTERM ends the process at once, leaving the children running;
    # as an exception it unwinds through the ExitStack that stops them.
    raise SystemExit(128 + signum)


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        runs, received, serve_log = run_all(args)
    except RuntimeError as error:  # a child died or hung: say which, with its last words
        print(f"hop benchmark failed: {error}", file=sys.stderr)
        return 2
    summaries = {v: summarize([r for r in runs if r["payload"] == v]) for v in args.variants}
    print_table(summaries, args)
    problems = check(runs, received)
    if serve_log:
        problems.append(f"the serve process logged:\n{serve_log[-3000:]}")
    print("\nchecks: " + ("ok" if not problems else "\n  - ".join(["FAILED", *problems])))
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        report = {"settings": settings, "summary": summaries, "runs": runs, "problems": problems}
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
