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

    .venv/bin/python bench/hop.py            # 6 s runs, 3 repeats: about 6 minutes
    .venv/bin/python bench/hop.py --quick    # 2 s runs, 1 repeat: a smoke test
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
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
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

# Sibling modules: bench/ is on sys.path when these files are run as scripts.
from null_receiver import REPORT_METHOD
from payload import SPANS_PER_REQUEST, VARIANTS
from ports import free_port
from prometheus_client.parser import text_string_to_metric_families

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0  # SIGTERM, then SIGKILL
DRAIN_TIMEOUT_S = 30.0
LOADGEN_SLACK_S = 60.0  # start-up, payload building and the last calls, over its duration
PAYLOAD_LABELS = {
    "plain": "no MCP",
    "mixed": "15% MCP",
    "harness": "agent traffic",
    "frameworks": "agent frameworks' runs",
}
HOPS = ("null-receiver", "null-forwarder", "naive-hop", "rotel", "serve", "serve-2w")
HOP_LABELS = {
    "null-receiver": "null receiver (no hop)",
    "null-forwarder": "null forwarder",
    "naive-hop": "naive hop",
    "rotel": "rotel",
    "serve": "mcp-breaker serve",
    "serve-2w": "mcp-breaker serve --workers 2 (Redis)",
}
RATIO_BASE = "null-forwarder"  # throughput ratios: the fair floor for a forwarding hop
LATENCY_BASE = "null-receiver"  # latency added: to the calls that went through no hop
# serve's one start-up warning here: the receivers run without authentication, as in the
# figures published so far (a credential check per request is not what is measured).
EXPECTED_SERVE_LOG = ("receivers: no authentication (receivers.auth: none)",)
SAMPLED_HOPS = (
    "naive-hop",
    "serve",
    "serve-2w",
)  # whose output is decoded, in a sample, and checked
DEFAULT_SAMPLE = 24  # requests per run kept by the null receiver and checked
GENERATOR_BOUND = 0.9  # of a core: the load generator, not the target, sets the pace
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
class Child:
    name: str
    process: subprocess.Popen[bytes]
    output: Path  # stdout and stderr, for the end-of-run report


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
    """User plus system CPU time of a process and its live children (the workers of
    ``serve --workers``), all their threads, from /proc/PID/stat."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(k) for k in children.read_text().split()] if children.exists() else []
    return _cpu_of(pid) + sum(_cpu_of(kid) for kid in kids)


def _cpu_of(pid: int) -> float:
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
    argv += ["--connections", str(getattr(args, "connections", 1))]
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


def received_bytes(null: Child) -> int | None:
    """What the null receiver printed as it stopped (bytes, since it started); None if it
    never got to say."""
    lines = null.output.read_text(errors="replace").splitlines()
    reports = [line for line in lines if line.startswith("{")]
    return int(json.loads(reports[-1])["bytes"]) if reports else None


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
        elif name == "serve-2w":
            redis = start_redis(workdir, children)
            if redis is None:
                hop = "redis-server is not installed (scripts/_system.sh installs it)"
            else:
                shared = ["state.backend=redis", f"state.redis.url={redis}"]
                settings = [*shared, *args.serve_settings]
                hop = start_serve(workdir, sink_port, settings, name, workers=2)
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


def summarize(runs: list[dict[str, Any]], hops: list[str]) -> dict[str, dict[str, Any]]:
    """Per hop, medians over repeats; ratios and differences are taken within a repeat
    (against the baseline's run of the same repeat), then the median."""
    median = statistics.median
    by_repeat: dict[tuple[int, str], dict[str, Any]] = {(r["repeat"], r["hop"]): r for r in runs}
    summary: dict[str, dict[str, Any]] = {}
    for hop in hops:
        mine = [r for r in runs if r["hop"] == hop]
        if not mine:
            continue
        row: dict[str, Any] = {
            "spans_per_s": median(r["spans_per_s"] for r in mine),
            "cpu_s_per_m_spans": median(r["hop_cpu_s_per_m_spans"] for r in mine),
            "p50_ms": median(r["latency_ms"]["p50"] for r in mine),
            "p99_ms": median(r["latency_ms"]["p99"] for r in mine),
            "loadgen_core_share": median(r["loadgen_core_share"] for r in mine),
            "loadgen_cpu_s_per_m_spans": median(r["loadgen_cpu_s_per_m_spans"] for r in mine),
            "render_us_per_request": median(r["render_us_per_request"] for r in mine),
            "runs": len(mine),
        }

        def paired(
            base: str,
            value: Callable[[dict[str, Any], dict[str, Any]], float],
            mine: list[dict[str, Any]] = mine,
        ) -> Any:
            pairs = [
                (by_repeat[(r["repeat"], base)], r)
                for r in mine
                if (r["repeat"], base) in by_repeat
            ]
            return median(value(b, r) for b, r in pairs) if pairs else None

        row["throughput_vs_null_forwarder"] = paired(
            RATIO_BASE, lambda b, r: r["spans_per_s"] / b["spans_per_s"]
        )
        for q in ("p50", "p99"):

            def added(base: dict[str, Any], run: dict[str, Any], q: str = q) -> float:
                return float(run["latency_ms"][q] - base["latency_ms"][q])

            row[f"{q}_added_ms"] = paired(LATENCY_BASE, added)
        summary[hop] = row
    return summary


def check_run(run: dict[str, Any]) -> list[str]:
    """What would make a run's numbers meaningless, or say the hop did not do its work."""
    what = f"run {run['number']} ({run['payload']} -> {run['hop']})"
    problems = []
    if run["errors"] or run["warmup_errors"]:
        problems.append(f"{what}: {run['errors']} errors, {run['warmup_errors']} in warm-up")
    got, hop, payload = run["received"], run["hop"], run["payload"]
    if hop == "null-receiver":
        if (got["requests"], got["bytes"]) != (run["taken_requests"], run["ok_bytes"]):
            problems.append(
                f"{what}: sent {run['taken_requests']} requests, {run['ok_bytes']} bytes; "
                f"received {got['requests']}, {got['bytes']}"
            )
        return problems
    if got.get("spans") != run["ok_spans"]:
        problems.append(f"{what}: sent {run['ok_spans']} spans, received {got.get('spans')}")
    # Forwarded as received: the null forwarder always, serve on its pass-through path.
    if (hop == "null-forwarder" or (hop.startswith("serve") and payload == "plain")) and got[
        "bytes"
    ] != run["ok_bytes"]:
        problems.append(f"{what}: sent {run['ok_bytes']} bytes, received {got['bytes']}")
    sample = got.get("sample")
    if hop in SAMPLED_HOPS:
        if not sample or not sample.get("spans"):
            problems.append(f"{what}: nothing sampled at the receiving end")
            sample = {}
        mcp_share = run["ok_mcp_spans"] / max(run["ok_spans"], 1)
        sampled_mcp = sample.get("named_mcp", 0)
        if abs(sampled_mcp - mcp_share * sample.get("spans", 0)) > 0.5:
            problems.append(f"{what}: {sampled_mcp} MCP spans in the sample, not {mcp_share:.1%}")
    if hop == "naive-hop" and sample.get("naive_marked") != sample.get("named_mcp"):
        problems.append(
            f"{what}: {sample.get('naive_marked')} of {sample.get('named_mcp')} sampled MCP "
            "spans marked"
        )
    if hop.startswith("serve"):
        problems += check_serve(what, run, sample or {})
    return problems


def check_serve(what: str, run: dict[str, Any], sample: dict[str, int]) -> list[str]:
    serve, problems = run["serve"], []
    taken = run["ok_spans"]
    if not serve["accepted_spans"] == serve["sent_spans"] == taken:
        problems.append(
            f"{what}: loadgen got ok for {taken} spans, serve accepted "
            f"{serve['accepted_spans']} and delivered {serve['sent_spans']}"
        )
    path = "passthrough_requests" if run["payload"] == "plain" else "parsed_requests"
    if serve[path] != run["taken_requests"]:
        problems.append(f"{what}: {serve[path]} of {run['taken_requests']} requests on {path}")
    expect = {
        "duplicate_spans": 0,
        "stage_errors": 0,
        "forwarded_pending": 0,  # every call decided in its own request
        "classification_errors": 0,  # none unpaired, none decided early, none clamped
        "pending_calls_after": 0,
        "tool_calls": run["ok_calls"],
        "tool_listings": run["ok_listings"],
    }
    for key, value in expect.items():
        if serve[key] != value:
            problems.append(f"{what}: serve's {key} {serve[key]}, expected {value}")
    calls, listings = sample.get("call_spans", 0), sample.get("listing_spans", 0)
    for found, of, text in (
        ("call_outcome", calls, "call spans with mcp.breaker.outcome"),
        ("call_decided", calls, "call spans with their decision (mcp.breaker.state)"),
        ("listing_state", listings, "listing spans with mcp.roster.state"),
    ):
        if sample.get(found, 0) != of:
            problems.append(f"{what}: {sample.get(found, 0)} of {of} sampled {text}")
    for bad, text in (
        ("call_pending", "call spans marked pending"),
        ("other_annotated", "non-MCP spans annotated"),
    ):
        if sample.get(bad, 0):
            problems.append(f"{what}: {sample[bad]} sampled {text}")
    return problems


def self_checks(runs: list[dict[str, Any]]) -> list[str]:
    """The checks that held, in figures, for the report."""
    lines = []
    serve = [r for r in runs if r["hop"].startswith("serve")]
    if serve:
        s: defaultdict[str, int] = defaultdict(int)
        for r in serve:
            for key in ("duplicate_spans", "forwarded_pending", "classification_errors"):
                s[key] += r["serve"][key]
            s["tool_calls"] += r["serve"]["tool_calls"]
            s["calls_sent"] += r["ok_calls"]
            s["tool_listings"] += r["serve"]["tool_listings"]
            s["listings_sent"] += r["ok_listings"]
            s["dead_calls"] += r["serve"]["dead_calls"]
            sample = r["received"].get("sample", {})
            for key in ("spans", "call_spans", "call_decided", "listing_spans", "listing_state"):
                s[f"sample_{key}"] += sample.get(key, 0)
            s["sample_requests"] += sample.get("requests", 0)
        lines += [
            f"serve: duplicate spans {s['duplicate_spans']}, spans forwarded pending "
            f"{s['forwarded_pending']}, classification errors {s['classification_errors']}",
            f"serve: tool calls decided {s['tool_calls']:,} of {s['calls_sent']:,} sent, "
            f"listings {s['tool_listings']:,} of {s['listings_sent']:,} "
            f"(dead calls among them {s['dead_calls']:,})",
            f"serve, at the receiving end ({s['sample_requests']} sampled requests, "
            f"{s['sample_spans']:,} spans): call spans with their decision "
            f"{s['sample_call_decided']:,} of {s['sample_call_spans']:,}, listing spans with "
            f"their roster state {s['sample_listing_state']:,} of {s['sample_listing_spans']:,}",
        ]
    sent = sum(r["ok_spans"] for r in runs)
    received = sum(
        r["received"].get("spans", r["received"]["requests"] * SPANS_PER_REQUEST) for r in runs
    )
    lines.append(f"all runs: {received:,} spans received of {sent:,} sent")
    render = sum(r["render_s"] for r in runs) / max(sum(r["cpu_s"] for r in runs), 1e-9)
    lines.append(
        f"loadgen: {statistics.median(r['render_us_per_request'] for r in runs):.0f} µs of CPU "
        f"to make a request fresh ({render:.0%} of its CPU); at most "
        f"{max(r['loadgen_core_share'] for r in runs):.0%} of a core in any run"
    )
    return lines


def print_progress(run: dict[str, Any], total: int) -> None:
    latency = run["latency_ms"]
    print(
        f"[{run['number']:>{len(str(total))}}/{total}] {run['payload']:<8} {run['hop']:<15}"
        f"{run['spans_per_s']:>10,.0f} spans/s   p50 {latency['p50']:7.2f} ms   "
        f"p99 {latency['p99']:7.2f} ms   hop CPU {run['hop_cpu_s_per_m_spans']:6.2f} s/M   "
        f"loadgen {run['loadgen_core_share']:.0%} of a core   errors {run['errors'] or 0}",
        flush=True,  # the table comes at the end; show the runs as they finish
    )


def _cell(value: Any, form: str) -> str:
    return "-" if value is None else form.format(value)


def print_table(summaries: dict[str, dict[str, dict[str, Any]]], args: argparse.Namespace) -> None:
    print(
        f"\nhop benchmark: {SPANS_PER_REQUEST} spans/request, fresh ids every request, "
        f"{args.concurrency} in flight, {args.duration:g} s runs (+{args.warmup:g} s warm-up), "
        f"{args.repeats} repeat(s); medians; ratios and differences within a repeat"
    )
    columns = (
        ("spans/s", "spans_per_s", "{:,.0f}", 11),
        ("vs null fwd", "throughput_vs_null_forwarder", "{:.2f}", 14),
        ("CPU s/M spans", "cpu_s_per_m_spans", "{:.2f}", 16),
        ("p50 added ms", "p50_added_ms", "{:+.2f}", 15),
        ("p99 added ms", "p99_added_ms", "{:+.2f}", 15),
        ("loadgen CPU", "loadgen_core_share", "{:.0%}", 14),
    )
    width = max(len(label) for label in HOP_LABELS.values()) + 4
    for variant, summary in summaries.items():
        header = f"{variant} ({PAYLOAD_LABELS[variant]})".ljust(width)
        print("\n" + header + "".join(label.rjust(w) for label, _, _, w in columns))
        for hop, row in summary.items():
            cells = [_cell(row[key], form).rjust(w) for _, key, form, w in columns]
            if row["loadgen_core_share"] >= GENERATOR_BOUND:
                cells[-1] += " *"
            print(f"  {HOP_LABELS[hop]}".ljust(width) + "".join(cells))
    print(
        "\nCPU s/M spans: the hop process's CPU time (the null receiver's own, on its row) per "
        "million spans taken.\nloadgen CPU: the load generator's CPU time over its run, of one "
        f"core; * at {GENERATOR_BOUND:.0%} or more: that row's\nthroughput is the load "
        "generator's (its CPU per span is still the receiving process's own)."
    )


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
            if h.name in ("serve", "serve-2w", "rotel")
        }
    return runs, logs, bench.skipped


def stop_on_sigterm(signum: int, frame: object) -> None:
    # Python's default SIGTERM ends the process at once, leaving the children running;
    # as an exception it unwinds through the ExitStack that stops them.
    raise SystemExit(128 + signum)


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
        for name in ("serve", "serve-2w")
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
