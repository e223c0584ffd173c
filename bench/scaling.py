"""The shared-state benchmark: what sharing the breaker through Redis costs, and buys.

Three figures, each against a baseline measured in the same run:

1. **Advisory latency across replicas.** A real ``redis-server``, two replicas (A and B,
   separate ``serve`` processes), and two ``AdvisoryClient`` mirrors in this process, one
   subscribed to A and one to B. Failing tool-call spans (a new turn each) are exported
   to A; each is timed from before the Export to the moment each mirror holds its turn
   block: B's figure is the cross-replica one, A's the same-replica baseline.
2. **Span throughput** with ``state.backend=redis`` against ``memory``: ``bench/hop.py``
   on the ``mixed`` payload (fresh ids every request), serve alone (``--hops serve``), the
   two alternated ``--repeats`` times.
3. **Redis per tool call**: commands (``INFO commandstats``, all replicas together, minus
   what an idle second costs: reads and ticks) and stream bytes per event
   (``MEMORY USAGE`` of the stream over ``XLEN``).

    .venv/bin/python bench/scaling.py            # a few minutes
    .venv/bin/python bench/scaling.py --quick    # a smoke test

The run checks its own work: every failure reaches both mirrors, every hop run passes
hop.py's own checks.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

import redis  # noqa: E402  (after the path: run as a script from anywhere)
from mcp_breaker_client import AdvisoryClient  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind  # noqa: E402

from tests.redis_server import RedisServer  # noqa: E402
from tests.replicas import ReplicaProcess  # noqa: E402
from tests.sdk import RESOURCE, export_grpc  # noqa: E402

WAIT_S = 30.0


def failing_call(turn: str) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("scaling-bench")
    start = time.time_ns() - 200_000_000
    span = tracer.start_span("mcp.tool.call", kind=SpanKind.CLIENT, start_time=start)
    span.set_attributes(
        {
            "mcp.tool.name": "browser_navigate",
            "mcp.server.name": "playwright",
            "mcp.tool.outcome": "failed",
            "mcp.tool.error": "mcp-beaver: upstream MCP session is closed",
            "mcp.turn.id": turn,
        }
    )
    span.end(end_time=start + 100_000_000)
    provider.shutdown()
    return list(memory.get_finished_spans())


def quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": statistics.median(ordered),
        "p99": ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))],
        "max": ordered[-1],
    }


def latency(a: ReplicaProcess, b: ReplicaProcess, events: int, gap_s: float) -> dict[str, Any]:
    same, across = AdvisoryClient(a.advisories), AdvisoryClient(b.advisories)
    timings: dict[str, list[float]] = {"same replica (A)": [], "other replica (B)": []}
    missing = 0
    try:
        assert same.wait_until_synced(20) and across.wait_until_synced(20)
        for index in range(events):
            turn = f"bench-turn-{index}-{time.time_ns()}"
            spans = failing_call(turn)
            began = time.perf_counter()
            if export_grpc(a.otlp, spans).name != "SUCCESS":
                raise RuntimeError("the export failed")
            pending = {"same replica (A)": same, "other replica (B)": across}
            deadline = began + WAIT_S
            while pending and time.perf_counter() < deadline:
                for name, client in list(pending.items()):
                    if client.check(turn, "playwright", "browser_navigate").refused:
                        timings[name].append((time.perf_counter() - began) * 1000)
                        del pending[name]
                time.sleep(0.0002)
            missing += len(pending)
            time.sleep(gap_s)
    finally:
        same.close()
        across.close()
    return {
        "events": events,
        "missing": missing,
        "ms": {name: quantiles(values) for name, values in timings.items() if values},
    }


def redis_cost(client: redis.Redis, calls: int, a: ReplicaProcess) -> dict[str, float]:
    def commands() -> int:
        stats = client.info("commandstats")
        return sum(int(v["calls"]) for v in stats.values())  # type: ignore[union-attr]

    quiet_before, quiet_started = commands(), time.monotonic()
    time.sleep(2.0)
    idle_per_s = (commands() - quiet_before) / (time.monotonic() - quiet_started)
    before, started = commands(), time.monotonic()
    for index in range(calls):
        export_grpc(a.otlp, failing_call(f"cost-turn-{index}-{time.time_ns()}"))
    time.sleep(1.0)
    used = commands() - before - idle_per_s * (time.monotonic() - started)
    length = int(client.xlen("mcp-breaker:events"))
    size = int(client.memory_usage("mcp-breaker:events") or 0)
    return {
        "commands_per_call": used / calls,
        "idle_commands_per_s": idle_per_s,
        "stream_entries": length,
        "stream_bytes_per_entry": size / max(1, length),
    }


def throughput(redis_url: str, repeats: int, duration: float) -> dict[str, Any]:
    runs: dict[str, list[float]] = {"memory": [], "redis": []}
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="scaling-") as tmp:
        for _ in range(repeats):
            for backend in ("memory", "redis"):
                out = Path(tmp) / f"{backend}.json"
                command = [sys.executable, str(BENCH / "hop.py"), "--variants", "mixed"]
                command += ["--hops", "serve", "--repeats", "1", "--duration", str(duration)]
                command += ["--json", str(out)]
                if backend == "redis":
                    command += [
                        "--set",
                        "state.backend=redis",
                        "--set",
                        f"state.redis.url={redis_url}",
                    ]
                done = subprocess.run(command, capture_output=True, text=True, timeout=600)
                report = json.loads(out.read_text()) if out.exists() else {}
                problems += [f"{backend}: {p}" for p in report.get("problems", [])]
                if done.returncode != 0 and not report:
                    problems.append(f"{backend}: hop.py failed: {done.stderr[-500:]}")
                    continue
                runs[backend].append(report["summary"]["mixed"]["serve"]["spans_per_s"])
    ratio = statistics.median(r / m for r, m in zip(runs["redis"], runs["memory"], strict=False))
    return {"spans_per_s": runs, "redis_over_memory": ratio, "problems": problems}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.events, args.repeats, args.duration = 30, 1, 2.0
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="scaling-") as tmp:
        workdir = Path(tmp)
        server = RedisServer(workdir / "redis").start()
        a = ReplicaProcess("a", server.url, workdir).start()
        b = ReplicaProcess("b", server.url, workdir).start()
        try:
            lat = latency(a, b, args.events, gap_s=0.05)
            cost = redis_cost(redis.Redis.from_url(server.url), max(20, args.events // 4), a)
        finally:
            a.stop()
            b.stop()
        hop = throughput(server.url, args.repeats, args.duration)
        server.stop()
    if lat["missing"]:
        problems.append(f"{lat['missing']} advisories never reached a mirror")
    problems += hop["problems"]
    print(f"shared-state benchmark ({args.events} failing spans, a turn each, into replica A)\n")
    print("failure exported to A -> the advisory in a mirror, ms      p50      p99      max")
    for name, q in lat["ms"].items():
        print(
            f"  mirror subscribed to the {name:<24} {q['p50']:8.2f} {q['p99']:8.2f} {q['max']:8.2f}"
        )
    print("\nspans/s through the hop, mixed payload (bench/hop.py, median of runs)")
    for backend, values in hop["spans_per_s"].items():
        shown = ", ".join(f"{v:,.0f}" for v in values)
        print(f"  state.backend={backend:<8} {shown}")
    print(f"  redis / memory               {hop['redis_over_memory']:.2f}")
    print("\nRedis per tool call (all replicas)")
    print(f"  commands per failing call    {cost['commands_per_call']:.2f}")
    print(f"  idle commands per second     {cost['idle_commands_per_s']:.1f} (reads and ticks)")
    print(f"  stream bytes per entry       {cost['stream_bytes_per_entry']:.0f}")
    print("\nchecks: " + ("ok" if not problems else "\n  - ".join(["FAILED", *problems])))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
