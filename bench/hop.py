"""The hop benchmark: what putting ``mcp-breaker serve`` in a trace pipeline costs.

Every request the load generator sends is new (fresh trace and span ids, times just before
now, new turn ids: see payload.py), and every MCP call in it is decided in that request,
so the hop does all its work on every MCP span: classification, pairing, the breaker,
annotation, metrics. Three payloads: ``plain`` (no MCP span: the pass-through path),
``mixed`` (about 15% MCP spans), ``harness`` (every request from an agent: LLM, HTTP and
tool spans). For each, in the same run and alternating, the load generator drives:

    null receiver   loadgen ──▶ null receiver                  (no hop: the floor)
    null forwarder  loadgen ──▶ bench/null_forwarder.py ──▶ null receiver
    naive hop       loadgen ──▶ bench/naive_hop.py ──────▶ null receiver
    rotel           loadgen ──▶ rotel (Rust collector) ──▶ null receiver
    serve           loadgen ──▶ mcp-breaker serve ───────▶ null receiver

Every process is separate (the load generator too), all on 127.0.0.1, gzip off. The
machine is small, shared and noisy, so what matters are ratios within a run: throughput
against the null forwarder's in the same repeat (the fair floor for a forwarding hop),
latency added to the null receiver's in the same repeat, and the hop process's CPU
seconds per million spans.

The run checks its own work, and fails if any check does: no errors; every span sent
arrives at the null receiver (and every byte, where a hop forwards bytes as they came);
through serve, no duplicate span, every tool call and listing sent decided (its counters
against what was sent), none left pending, and in a sample of what arrives, every call
span annotated with its decision and every listing with its roster state; through the
naive hop, every MCP span marked.

The child processes and what measures them are in hop_processes.py; the report and the
run's checks of its own work in hop_report.py.

    .venv/bin/python bench/hop.py            # 6 s runs, 3 repeats: about 11 minutes
    .venv/bin/python bench/hop.py --quick    # 2 s runs, 1 repeat: a smoke test

To compare two versions of the code, run this file from a checkout of each (``git
worktree``), with that checkout's ``clients/python`` first on ``PYTHONPATH``: serve is
started as ``python -m processor`` in the checkout this file is in, which comes before
anything ``PYTHONPATH`` names, so pointing ``PYTHONPATH`` at another checkout alone
changes nothing that serve runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import socket
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

# Sibling modules: bench/ is on sys.path when these files are run as scripts.
from hop_processes import (
    BENCH,
    DRAIN_TIMEOUT_S,
    LOOPBACK,
    START_TIMEOUT_S,
    Child,
    check_alive,
    cpu_seconds,
    run_loadgen,
    scrape,
    start,
    stop,
    stop_on_sigterm,
    wait_drained,
    wait_grpc_ready,
    wait_http_ready,
)
from hop_report import SAMPLED_HOPS, check_run, print_progress, print_table, self_checks, summarize
from null_receiver import REPORT_METHOD
from payload import VARIANTS
from payload_spans import SPANS_PER_REQUEST
from ports import free_port

HOPS = ("null-receiver", "null-forwarder", "naive-hop", "rotel", "serve", "serve-redis", "serve-2w")
SERVES = ("serve", "serve-redis", "serve-2w")
# serve's one start-up warning here: the receivers run without authentication, as in the
# figures published so far (a credential check per request is not what is measured).
EXPECTED_SERVE_LOG = ("receivers: no authentication (receivers.auth: none)",)
DEFAULT_SAMPLE = 24  # requests per run kept by the null receiver and checked
# The serve counters read around each run (deltas), and the stores read after it.
SERVE_COUNTERS = {
    "accepted_spans": "mcp_breaker_receiver_accepted_spans_total",
    "sent_spans": "mcp_breaker_exporter_sent_spans_total",
    "passthrough_requests": "mcp_breaker_stage_requests_total{path=passthrough}",
    "parsed_requests": "mcp_breaker_stage_requests_total{path=parsed}",
    "unreadable_requests": "mcp_breaker_stage_requests_total{path=unreadable}",
    "stage_errors": "mcp_breaker_stage_errors_total",
    "duplicate_spans": "mcp_breaker_duplicate_spans_total",
    "tool_calls": "mcp_breaker_tool_calls_total",
    "tool_listings": "mcp_breaker_tool_listings_total",
    "forwarded_pending": "mcp_breaker_spans_forwarded_pending_total",
    "classification_errors": "mcp_breaker_classification_errors_total",
    "dead_calls": "mcp_breaker_dead_calls_total",
}


@dataclass
class Hop:
    name: str
    child: Child
    port: int  # where the load generator sends
    metrics_port: int | None = None  # serve's telemetry endpoint

    @property
    def pid(self) -> int:
        return self.child.process.pid


@dataclass
class Bench:
    sink: Child  # the null receiver every hop forwards to
    sink_port: int
    hops: dict[str, Hop]
    skipped: dict[str, str]  # hop -> why it is not measured

    def control(self, **order: Any) -> dict[str, Any]:
        """What the null receiver got since its last reset; ``reset=True`` starts anew."""
        with grpc.insecure_channel(f"{LOOPBACK}:{self.sink_port}") as channel:
            call = channel.unary_unary(REPORT_METHOD)
            answer: bytes = call(json.dumps(order).encode(), timeout=120)
        result: dict[str, Any] = json.loads(answer)
        return result


def start_serve(
    workdir: Path, sink_port: int, settings: list[str], name: str = "serve", workers: int = 1
) -> Hop:
    port, metrics_port, advisory_port = free_port(), free_port(), free_port()
    argv = [sys.executable, "-m", "processor", "serve", "--log-level", "warning"]
    argv += ["--workers", str(workers)]
    for setting in (
        f"receivers.grpc.endpoint={LOOPBACK}:{port}",
        "receivers.http.enabled=false",
        f"telemetry.metrics_endpoint={LOOPBACK}:{metrics_port}",
        f"forward.endpoint={LOOPBACK}:{sink_port}",
        # The advisory port runs as it does in production (nobody subscribes here); a
        # token keeps it from warning that it is open to anyone.
        f"advisories.endpoint={LOOPBACK}:{advisory_port}",
        "advisories.tokens=bench-token=bench",
        *settings,
    ):
        argv += ["--set", setting]
    child = start(name, argv, workdir)
    return Hop(name, child, port, metrics_port)


def start_redis(workdir: Path, children: ExitStack) -> str | None:
    """A redis-server for the workers' shared state, or None when there is none here."""
    binary = shutil.which("redis-server")
    if binary is None:
        return None
    port = free_port()
    argv = [binary, "--port", str(port), "--bind", LOOPBACK, "--save", "", "--appendonly", "no"]
    argv += ["--dir", str(workdir)]
    redis = start("redis", argv, workdir)
    children.callback(stop, redis)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), 1):
            return f"redis://{LOOPBACK}:{port}/0"
        time.sleep(0.05)
    return None


def rotel_binary() -> str | None:
    try:
        import rotel  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    path = Path(rotel.__file__).parent / "rotel-agent"
    return str(path) if path.exists() else shutil.which("rotel")


def start_rotel(workdir: Path, sink_port: int) -> Hop | str:
    binary = rotel_binary()
    if binary is None:
        return "the rotel package is not installed (the test extra has it)"
    port, http_port = free_port(), free_port()
    argv = [binary, "start", "--otlp-grpc-endpoint", f"{LOOPBACK}:{port}"]
    argv += ["--otlp-http-endpoint", f"{LOOPBACK}:{http_port}", "--exporter", "otlp"]
    argv += ["--otlp-exporter-endpoint", f"http://{LOOPBACK}:{sink_port}"]
    argv += ["--otlp-exporter-protocol", "grpc", "--otlp-exporter-compression", "none"]
    argv += ["--pid-file", str(workdir / "rotel.pid")]
    return Hop("rotel", start("rotel", argv, workdir), port)


def start_bench(workdir: Path, children: ExitStack, args: argparse.Namespace) -> Bench:
    sink_port = free_port()
    sink_argv = [sys.executable, str(BENCH / "null_receiver.py"), "--port", str(sink_port)]
    sink = start("null-receiver", sink_argv, workdir)
    children.callback(stop, sink)  # stopped last (last in, first out): the hops drain into it
    wait_grpc_ready(sink, sink_port)
    hops: dict[str, Hop] = {"null-receiver": Hop("null-receiver", sink, sink_port)}
    skipped: dict[str, str] = {}
    target = f"{LOOPBACK}:{sink_port}"
    for name in args.hops:
        hop: Hop | str
        if name == "null-receiver":
            continue
        if name in ("null-forwarder", "naive-hop"):
            port = free_port()
            script = BENCH / f"{name.replace('-', '_')}.py"
            argv = [sys.executable, str(script), "--port", str(port), "--target", target]
            hop = Hop(name, start(name, argv, workdir), port)
        elif name == "rotel":
            hop = start_rotel(workdir, sink_port)
        elif name in ("serve-redis", "serve-2w"):
            redis = start_redis(workdir, children)
            if redis is None:
                hop = "redis-server is not installed (scripts/_system.sh installs it)"
            else:
                shared = ["state.backend=redis", f"state.redis.url={redis}"]
                settings = [*shared, *args.serve_settings]
                workers = 2 if name == "serve-2w" else 1
                hop = start_serve(workdir, sink_port, settings, name, workers=workers)
        else:
            hop = start_serve(workdir, sink_port, args.serve_settings)
        if isinstance(hop, str):
            skipped[name] = hop
            continue
        children.callback(stop, hop.child)
        if hop.metrics_port is not None:
            wait_http_ready(hop.child, f"http://{LOOPBACK}:{hop.metrics_port}/readyz")
        elif name != "rotel":
            wait_grpc_ready(hop.child, hop.port)
        else:  # measured if it runs here
            try:
                wait_grpc_ready(hop.child, hop.port)
            except RuntimeError as error:
                stop(hop.child)
                skipped[name] = f"it did not start: {error}"
                continue
        hops[name] = hop
    return Bench(sink, sink_port, {n: hops[n] for n in args.hops if n in hops}, skipped)


def wait_delivered(bench: Bench, hop: Hop, result: dict[str, Any]) -> dict[str, Any]:
    """What the null receiver holds once the hop has passed everything on (or once it
    stops growing: then the checks say what is missing)."""
    counted = hop.name != "null-receiver"
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    last, still_since = None, time.monotonic()
    while True:
        got = bench.control(inspect=False)
        have = got["spans"] if counted else got["requests"] * SPANS_PER_REQUEST
        if have >= result["ok_spans"]:
            return got
        if have != last:
            last, still_since = have, time.monotonic()
        if time.monotonic() > deadline or time.monotonic() - still_since > 5.0:
            return got
        time.sleep(0.05)


def measure(bench: Bench, hop: Hop, variant: str, args: argparse.Namespace) -> dict[str, Any]:
    """One loadgen run into ``hop``; what it cost the hop and what came out of it."""
    for child in (bench.sink, *(h.child for h in bench.hops.values())):
        check_alive(child)
    counted = hop.name != "null-receiver"  # the floor stays bare: no counting there
    sample = args.sample if hop.name in SAMPLED_HOPS else 0
    bench.control(reset=True, count_spans=counted, sample=sample, inspect=False)
    hop_cpu, sink_cpu = cpu_seconds(hop.pid), cpu_seconds(bench.sink.process.pid)
    before = scrape(hop.metrics_port) if hop.metrics_port is not None else {}
    result = run_loadgen(hop.port, variant, args)
    check_alive(hop.child)
    if hop.metrics_port is not None:
        wait_drained(hop.metrics_port)
    wait_delivered(bench, hop, result)
    hop_cpu = cpu_seconds(hop.pid) - hop_cpu
    sink_cpu = cpu_seconds(bench.sink.process.pid) - sink_cpu
    got = bench.control(inspect=True)  # outside the timed part: decodes the sample
    # Every span the target took, warm-up included, is what its CPU time was spent on.
    per_million = 1e6 / max(result["ok_spans"], 1)
    run = {"hop": hop.name, **result, "received": got}
    run["taken_requests"] = result["requests"] + result["warmup_ok_requests"]
    run["hop_cpu_s_per_m_spans"] = hop_cpu * per_million
    run["sink_cpu_s_per_m_spans"] = sink_cpu * per_million
    run["loadgen_cpu_s_per_m_spans"] = result["cpu_s"] * per_million
    run["loadgen_core_share"] = result["cpu_s"] / max(result["wall_s"], 1e-9)
    run["render_us_per_request"] = result["render_s"] / max(run["taken_requests"], 1) * 1e6
    if hop.metrics_port is not None:
        after = scrape(hop.metrics_port)
        run["serve"] = {k: int(after[m] - before[m]) for k, m in SERVE_COUNTERS.items()}
        run["serve"]["pending_calls_after"] = int(
            after["mcp_breaker_store_entries{store=pending_calls}"]
        )
    return run


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=6.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds per run")
    parser.add_argument("--repeats", type=int, default=3, help="rounds over the hops")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument(
        "--connections",
        type=int,
        default=4,
        help="TCP connections the requests share (the kernel spreads connections over "
        "serve's workers)",
    )
    parser.add_argument("--variants", default=",".join(VARIANTS), help="payloads, comma-separated")
    parser.add_argument(
        "--hops", default=",".join(HOPS), help="comma-separated, of: " + ", ".join(HOPS)
    )
    parser.add_argument(
        "--sample", type=int, default=DEFAULT_SAMPLE, help="requests checked per run at the end"
    )
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
    args.hops = [h for h in HOPS if h in args.hops.split(",")]
    if unknown := set(args.hops) - set(HOPS):
        parser.error(f"unknown hops {sorted(unknown)}; choose from {HOPS}")
    return args


def run_all(
    args: argparse.Namespace,
) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, str]]:
    """Every run, alternated; then what the hops logged, and the hops not measured."""
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hop-bench-") as tmp, ExitStack() as children:
        bench = start_bench(Path(tmp), children, args)
        for name, why in bench.skipped.items():
            print(f"{name}: not measured: {why}", flush=True)
        hops = list(bench.hops.values())
        total = args.repeats * len(args.variants) * len(hops)
        for repeat in range(args.repeats):
            for variant in args.variants:
                # Alternated, and reversed every other repeat, so drift hits every hop alike.
                for hop in hops if repeat % 2 == 0 else hops[::-1]:
                    run = measure(bench, hop, variant, args)
                    run.update(number=len(runs) + 1, repeat=repeat)
                    runs.append(run)
                    print_progress(run, total)
        children.close()  # the hops drain, then the null receiver reports
        logs = {
            h.name: h.child.output.read_text(errors="replace").strip()
            for h in hops
            if h.name in (*SERVES, "rotel")
        }
    return runs, logs, bench.skipped


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    started = time.monotonic()
    try:
        runs, logs, skipped = run_all(args)
    except RuntimeError as error:  # a child died or hung: say which, with its last words
        print(f"hop benchmark failed: {error}", file=sys.stderr)
        return 2
    summaries = {
        v: summarize([r for r in runs if r["payload"] == v], args.hops) for v in args.variants
    }
    print_table(summaries, args)
    problems = [p for run in runs for p in check_run(run)]
    serve_log = "\n".join(
        line
        for name in SERVES
        for line in logs.get(name, "").splitlines()
        if not any(expected in line for expected in EXPECTED_SERVE_LOG)
    )
    if serve_log:
        problems.append(f"the serve process logged:\n{serve_log[-3000:]}")
    elapsed = time.monotonic() - started
    print("\nself-checks:\n  " + "\n  ".join(self_checks(runs)))
    print(f"\nelapsed: {elapsed:.0f} s")
    print("\nchecks: " + ("ok" if not problems else "\n  - ".join(["FAILED", *problems])))
    if args.json:
        settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        report = {
            "settings": settings,
            "summary": summaries,
            "self_checks": self_checks(runs),
            "skipped_hops": skipped,
            "elapsed_s": round(elapsed, 1),
            "runs": runs,
            "problems": problems,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
