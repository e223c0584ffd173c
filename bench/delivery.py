"""What the delivery guarantees cost: the disk queue, and a full check of pass-through spans.

Several ``mcp-breaker serve`` processes forward to one null receiver; a load generator in
its own process drives each in turn, alternating, ``--repeats`` times, so drift hits all:

    memory   the memory queue: the baseline of every ratio
    disk     forward.queue.storage: disk (SQLite, WAL, no fsync)
    fsync    the same with forward.queue.fsync: true (a commit waits for the disk)
    strict   the memory queue, and every pass-through request decoded whole
             (bench/strict_serve.py: what a validity check would cost; not a service mode)

Each run reports throughput, latency, the serve process's CPU per million spans and what it
wrote, per span: ``write_bytes`` (what reached the block layer, /proc/PID/io) and
``wchar`` (bytes passed to write calls, sockets apart). Then, in this process, the disk
store alone: how long an append takes to be committed, and how long the event loop was
ever held meanwhile (a ticker measuring its own lateness), against the memory store.

    .venv/bin/python bench/delivery.py            # 8 s runs, 3 repeats, about 6 minutes
    .venv/bin/python bench/delivery.py --quick    # 2 s runs, 1 repeat: a smoke test
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Sibling modules: bench/ is on sys.path when these files are run as scripts.
from hop import EXPECTED_SERVE_LOG
from hop_processes import (
    BENCH,
    LOOPBACK,
    Child,
    check_alive,
    cpu_seconds,
    received_bytes,
    run_loadgen,
    scrape,
    start,
    stop,
    wait_drained,
    wait_grpc_ready,
    wait_http_ready,
)
from payload_legacy import build_requests
from payload_spans import SPANS_PER_REQUEST
from ports import free_port

VARIANTS = ("memory", "disk", "fsync", "strict")
BASELINE = "memory"
FILE_NAME = "forward-queue.sqlite3"  # processor.forward.store.FILE_NAME, checked below


@dataclass
class Serve:
    variant: str
    child: Child
    port: int
    metrics_port: int
    directory: Path | None


def io_counters(pid: int) -> dict[str, int]:
    lines = Path(f"/proc/{pid}/io").read_text().splitlines()
    return {key: int(value) for key, value in (line.split(": ") for line in lines)}


def start_serve(variant: str, null_port: int, workdir: Path, children: ExitStack) -> Serve:
    port, metrics_port, advisory_port = free_port(), free_port(), free_port()
    settings = [
        f"receivers.grpc.endpoint={LOOPBACK}:{port}",
        "receivers.http.enabled=false",
        f"telemetry.metrics_endpoint={LOOPBACK}:{metrics_port}",
        f"forward.endpoint={LOOPBACK}:{null_port}",
        f"advisories.endpoint={LOOPBACK}:{advisory_port}",
        "advisories.tokens=bench-token=bench",
    ]
    directory = None
    if variant in ("disk", "fsync"):
        directory = workdir / f"queue-{variant}"
        settings += ["forward.queue.storage=disk", f"forward.queue.directory={directory}"]
        settings += ["forward.queue.fsync=true"] if variant == "fsync" else []
    program = [str(BENCH / "strict_serve.py")] if variant == "strict" else ["-m", "processor"]
    argv = [sys.executable, *program, "serve", "--log-level", "warning"]
    for setting in settings:
        argv += ["--set", setting]
    child = start(f"serve-{variant}", argv, workdir)
    children.callback(stop, child)
    wait_http_ready(child, f"http://{LOOPBACK}:{metrics_port}/readyz")
    return Serve(variant, child, port, metrics_port, directory)


def measure(serve: Serve, payload: str, args: argparse.Namespace) -> dict[str, Any]:
    pid = serve.child.process.pid
    check_alive(serve.child)
    cpu, io, before = cpu_seconds(pid), io_counters(pid), scrape(serve.metrics_port)
    result = run_loadgen(serve.port, payload, args)
    check_alive(serve.child)
    wait_drained(serve.metrics_port)  # what it took is delivered (and off the disk) first
    after, io_after = scrape(serve.metrics_port), io_counters(pid)
    taken = (result["requests"] + result["warmup_ok_requests"]) * SPANS_PER_REQUEST
    per_span = 1 / max(taken, 1)
    run = {"variant": serve.variant, **result, "taken_spans": taken}
    run["cpu_s_per_m_spans"] = (cpu_seconds(pid) - cpu) * 1e6 * per_span
    run["write_bytes_per_span"] = (io_after["write_bytes"] - io["write_bytes"]) * per_span
    run["wchar_per_span"] = (io_after["wchar"] - io["wchar"]) * per_span
    for key, metric in (
        ("accepted", "mcp_breaker_receiver_accepted_spans_total"),
        ("sent", "mcp_breaker_exporter_sent_spans_total"),
    ):
        run[key] = int(after[metric] - before[metric])
    return run


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Medians per variant; ratios and differences to the memory queue taken run by run."""
    median = statistics.median
    base = [r for r in runs if r["variant"] == BASELINE]
    summary = {}
    for variant in dict.fromkeys(r["variant"] for r in runs):
        mine = [r for r in runs if r["variant"] == variant]
        pairs = list(zip(base, mine, strict=True))
        summary[variant] = {
            "spans_per_s": median(r["spans_per_s"] for r in mine),
            "throughput_ratio": median(m["spans_per_s"] / b["spans_per_s"] for b, m in pairs),
            "p50_ms": median(r["latency_ms"]["p50"] for r in mine),
            "p99_ms": median(r["latency_ms"]["p99"] for r in mine),
            "added_p50_ms": median(
                m["latency_ms"]["p50"] - b["latency_ms"]["p50"] for b, m in pairs
            ),
            "added_p99_ms": median(
                m["latency_ms"]["p99"] - b["latency_ms"]["p99"] for b, m in pairs
            ),
            "cpu_s_per_m_spans": median(r["cpu_s_per_m_spans"] for r in mine),
            "write_bytes_per_span": median(r["write_bytes_per_span"] for r in mine),
            "wchar_per_span": median(r["wchar_per_span"] for r in mine),
        }
    return summary


# -- the store alone, in process -------------------------------------------------------------
async def store_latency(store: Any, payloads: list[bytes], in_flight: int) -> dict[str, float]:
    """Append ``payloads`` ``in_flight`` at a time; commit latency and the loop's worst lag."""
    from processor.inflight.stage import Prepared, StagePath
    from processor.request.sender import Sender

    lags: list[float] = []
    stopping = asyncio.Event()

    async def ticker() -> None:  # sleeps 1 ms at a time: how late it wakes is how long the
        while not stopping.is_set():  # loop was held by something else
            started = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - started - 0.001)

    latencies: list[float] = []
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for payload in payloads:
        queue.put_nowait(payload)

    async def writer() -> None:
        while not queue.empty():
            payload = queue.get_nowait()
            batch = Prepared(payload, SPANS_PER_REQUEST, 0, "", StagePath.PASSTHROUGH, Sender())
            started = time.perf_counter()
            held = await store.append(batch)
            latencies.append(time.perf_counter() - started)
            await store.remove([held])

    tick = asyncio.create_task(ticker())
    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(in_flight)))
    elapsed = time.perf_counter() - started
    stopping.set()
    await tick
    await store.close()
    ordered = sorted(latencies)
    return {
        "requests_per_s": len(payloads) / elapsed,
        "append_p50_ms": ordered[len(ordered) // 2] * 1000,
        "append_p99_ms": ordered[int(len(ordered) * 0.99)] * 1000,
        "loop_lag_max_ms": max(lags) * 1000 if lags else 0.0,
        "loop_lag_p99_ms": sorted(lags)[int(len(lags) * 0.99)] * 1000 if lags else 0.0,
    }


def in_process(workdir: Path, requests: int) -> dict[str, dict[str, float]]:
    from processor.forward.store import FILE_NAME as STORE_FILE
    from processor.forward.store import DiskStore, MemoryStore

    assert STORE_FILE == FILE_NAME
    payloads = (build_requests("plain") * (requests // 8 + 1))[:requests]
    results = {"memory": asyncio.run(store_latency(MemoryStore(), payloads, 8))}
    for name, fsync in (("disk", False), ("fsync", True)):
        directory = workdir / f"store-{name}"
        store = DiskStore(str(directory), fsync=fsync)
        results[name] = asyncio.run(store_latency(store, payloads, 8))
        shutil.rmtree(directory)
    return results


# -- the report ------------------------------------------------------------------------------
def unexpected_lines(log: str) -> str:
    """A serve process's log without its expected start-up warning (hop.EXPECTED_SERVE_LOG)."""
    lines = log.strip().splitlines()
    return "\n".join(line for line in lines if not any(e in line for e in EXPECTED_SERVE_LOG))


def check(runs: list[dict[str, Any]], received: int | None, logs: dict[str, str]) -> list[str]:
    problems = []
    for number, run in enumerate(runs, 1):
        what = f"run {number} ({run['variant']})"
        if run["errors"] or run["warmup_errors"]:
            problems.append(f"{what}: {run['errors']} errors, {run['warmup_errors']} in warm-up")
        if not run["accepted"] == run["sent"] == run["taken_spans"]:
            problems.append(
                f"{what}: loadgen got ok for {run['taken_spans']} spans, the hop accepted "
                f"{run['accepted']} and delivered {run['sent']}"
            )
    sent = sum(run["ok_bytes"] for run in runs)
    if received is None or received != sent:  # plain requests are forwarded byte for byte
        problems.append(f"the null receiver got {received} bytes; {sent} were sent")
    problems += [f"{name} logged:\n{log[-2000:]}" for name, log in logs.items() if log]
    return problems


def print_report(
    summary: dict[str, dict[str, float]],
    store: dict[str, dict[str, float]],
    files: dict[str, int],
    args: argparse.Namespace,
) -> None:
    print(
        f"\ndelivery benchmark: plain payload (pass-through), {SPANS_PER_REQUEST} spans/request, "
        f"{args.concurrency} in flight, {args.duration:g} s runs, {args.repeats} repeat(s); "
        "medians, ratios and differences to the memory queue run by run"
    )
    rows = (
        ("spans/s", "spans_per_s", "{:,.0f}"),
        ("throughput / memory", "throughput_ratio", "{:.2f}"),
        ("latency p50 ms", "p50_ms", "{:.2f}"),
        ("latency p50 added ms", "added_p50_ms", "{:+.2f}"),
        ("latency p99 ms", "p99_ms", "{:.2f}"),
        ("latency p99 added ms", "added_p99_ms", "{:+.2f}"),
        ("serve CPU s per million spans", "cpu_s_per_m_spans", "{:.2f}"),
        ("bytes to disk per span (write_bytes)", "write_bytes_per_span", "{:,.0f}"),
        ("bytes written per span (wchar)", "wchar_per_span", "{:,.0f}"),
    )
    width = max(len(label) for label, _, _ in rows) + 2
    print(" " * width + "".join(v.rjust(12) for v in summary))
    for label, key, form in rows:
        cells = (form.format(s[key]).rjust(12) for s in summary.values())
        print(label.ljust(width) + "".join(cells))
    request_bytes = len(build_requests("plain")[0])
    sizes = ", ".join(f"{name} {size:,}" for name, size in files.items())
    print(
        f"(a request: {request_bytes:,} bytes, {request_bytes / SPANS_PER_REQUEST:,.0f} per "
        f"span; the database files at the end, in bytes: {sizes})"
    )
    print(f"\nthe store alone, in process: {args.store_requests} appends, 8 at a time")
    columns = (
        "requests_per_s",
        "append_p50_ms",
        "append_p99_ms",
        "loop_lag_p99_ms",
        "loop_lag_max_ms",
    )
    print(" " * 10 + "".join(c.rjust(18) for c in columns))
    for name, figures in store.items():
        print(name.ljust(10) + "".join(f"{figures[c]:,.2f}".rjust(18) for c in columns))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds per run")
    parser.add_argument("--repeats", type=int, default=3, help="rounds over the variants")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    parser.add_argument("--store-requests", type=int, default=400, help="in-process appends")
    parser.add_argument(
        "--directory", type=Path, help="where the disk queues go (default: a temporary one)"
    )
    parser.add_argument("--quick", action="store_true", help="2 s runs, 1 repeat")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every number here")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.warmup, args.repeats, args.store_requests = 2.0, 0.5, 1, 80
    args.variants = [v for v in args.variants.split(",") if v]
    if unknown := set(args.variants) - set(VARIANTS):
        parser.error(f"unknown variants {sorted(unknown)}; choose from {VARIANTS}")
    if BASELINE not in args.variants:
        args.variants.insert(0, BASELINE)
    return args


def main() -> int:
    args = parse_args()
    runs: list[dict[str, Any]] = []
    with ExitStack() as children:
        workdir = Path(tempfile.mkdtemp(prefix="delivery-bench-", dir=args.directory))
        children.callback(shutil.rmtree, workdir, True)
        null_port = free_port()
        null_argv = [sys.executable, str(BENCH / "null_receiver.py"), "--port", str(null_port)]
        null = start("null-receiver", null_argv, workdir)
        children.callback(stop, null)
        wait_grpc_ready(null, null_port)
        serves = [start_serve(v, null_port, workdir, children) for v in args.variants]
        try:
            for repeat in range(args.repeats):
                order = serves if repeat % 2 == 0 else serves[::-1]
                for serve in order:
                    runs.append(measure(serve, "plain", args))
                    last = runs[-1]
                    print(
                        f"[{len(runs)}/{args.repeats * len(serves)}] {serve.variant:<7}"
                        f"{last['spans_per_s']:>12,.0f} spans/s   p50 "
                        f"{last['latency_ms']['p50']:7.2f} ms   p99 "
                        f"{last['latency_ms']['p99']:7.2f} ms",
                        flush=True,
                    )
        except RuntimeError as error:
            print(f"delivery benchmark failed: {error}", file=sys.stderr)
            return 2
        files = {
            s.variant: (s.directory / FILE_NAME).stat().st_size
            for s in serves
            if s.directory is not None
        }
        for serve in serves:
            stop(serve.child)  # each drains into the null receiver, which then reports
        stop(null)
        received = received_bytes(null)
        logs = {
            s.variant: unexpected_lines(s.child.output.read_text(errors="replace")) for s in serves
        }
        store = in_process(workdir, args.store_requests)
    summary = summarize(runs)
    print_report(summary, store, files, args)
    problems = check(runs, received, logs)
    print("\nchecks: " + ("ok" if not problems else "\n  - ".join(["FAILED", *problems])))
    if args.json:
        settings = {k: str(v) for k, v in vars(args).items() if k != "json"}
        report = {"settings": settings, "summary": summary, "store": store, "runs": runs}
        args.json.write_text(json.dumps({**report, "problems": problems}, indent=2) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
