"""A closed-loop OTLP/gRPC load generator, meant to run in a process of its own.

``--concurrency`` coroutines share ``--connections`` channels (each its own TCP connection:
a hop with several worker processes gets connections, not requests, spread over them);
each sends a request (raw bytes, no serializer), waits for the answer and sends the next,
until ``--duration`` seconds have
passed. The first ``--warmup`` seconds are sent but not measured (connection set-up, first
calls). Every request is new: one of the payload's eight templates (payload.py), cycled,
with fresh trace and span ids, times just before now and new turn ids, rewritten in place
in its encoded bytes (``payload.Fresh``: about 60 µs a request), so a hop never sees the
same span twice. It prints one JSON document:

    requests, spans, errors (by gRPC status code), spans_per_s, latency_ms p50/p90/p99,
    the warm-up's ok requests, and what every answered request held (bytes, spans, MCP
    spans, tool calls, listings: so a caller can account for all it sent); cpu_s, the
    load generator's own CPU time, and render_s, the part of it spent making requests new

    python bench/loadgen.py --target 127.0.0.1:4417 --payload mixed --duration 8
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import grpc

# A sibling module: bench/ is on sys.path when these files are run as scripts.
from payload import VARIANTS, Fresh, Template, build_templates
from payload_spans import SPANS_PER_REQUEST

EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
CALL_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 10.0
# After a failed call (a refusal says "retry later"), pause so errors do not become a hot loop.
ERROR_PAUSE_S = 0.05


@dataclass
class Tally:
    latencies_s: list[float] = field(default_factory=list)  # ok calls only
    errors: Counter[str] = field(default_factory=Counter)
    warmup_ok: int = 0
    warmup_errors: int = 0
    last_finish: float = 0.0
    ok_bytes: int = 0  # every answered request, warm-up included: the receiver's total
    ok_spans: int = 0  # the same in spans, MCP spans, tool calls and listings
    ok_mcp_spans: int = 0
    ok_calls: int = 0
    ok_listings: int = 0


def percentile(ordered: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def run(
    target: str,
    templates: list[Template],
    concurrency: int,
    duration_s: float,
    warmup_s: float,
    connections: int = 1,
) -> dict[str, Any]:
    tally = Tally()
    fresh = Fresh(templates)
    cpu_before_s, wall_before_s = time.process_time(), time.perf_counter()
    # A local subchannel pool each, or gRPC would share one connection between them.
    channels = [
        grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
        for _ in range(connections)
    ]
    async with contextlib.AsyncExitStack() as stack:
        for channel in channels:
            await stack.enter_async_context(channel)
            await asyncio.wait_for(channel.channel_ready(), CONNECT_TIMEOUT_S)
        # no serializer: bytes in, bytes out
        exports = [channel.unary_unary(EXPORT_METHOD) for channel in channels]
        measure_from = time.perf_counter() + warmup_s
        stop_at = measure_from + duration_s

        async def worker(offset: int) -> None:
            export = exports[offset % len(exports)]
            sent = offset  # workers start at different templates so the mix is even
            while time.perf_counter() < stop_at:
                template = templates[sent % len(templates)]
                payload = fresh.render(template)  # before the clock starts
                sent += 1
                started = time.perf_counter()
                try:
                    await export(payload, timeout=CALL_TIMEOUT_S)
                    code = None
                except grpc.aio.AioRpcError as error:
                    code = error.code().name
                finished = time.perf_counter()
                if started < measure_from:
                    tally.warmup_ok += code is None
                    tally.warmup_errors += code is not None
                elif code is None:
                    tally.latencies_s.append(finished - started)
                else:
                    tally.errors[code] += 1
                tally.last_finish = max(tally.last_finish, finished)
                if code is None:
                    counts = template.counts
                    tally.ok_bytes += len(payload)
                    tally.ok_spans += counts.spans
                    tally.ok_mcp_spans += counts.mcp_spans
                    tally.ok_calls += counts.calls
                    tally.ok_listings += counts.listings
                if code is not None:
                    await asyncio.sleep(ERROR_PAUSE_S)

        await asyncio.gather(*(worker(i) for i in range(concurrency)))

    # Until the last answer came back: the calls still in flight at stop_at were measured.
    elapsed_s = max(tally.last_finish - measure_from, 1e-9)
    ordered = sorted(tally.latencies_s)
    spans = len(ordered) * SPANS_PER_REQUEST  # every template has as many
    return {
        "target": target,
        "concurrency": concurrency,
        "duration_s": round(elapsed_s, 3),
        "requests": len(ordered),
        "spans": spans,
        "errors": dict(tally.errors),
        "spans_per_s": round(spans / elapsed_s, 1),
        "latency_ms": {
            name: round(percentile(ordered, fraction) * 1000, 3)
            for name, fraction in (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))
        },
        "warmup_ok_requests": tally.warmup_ok,
        "warmup_errors": tally.warmup_errors,
        "ok_bytes": tally.ok_bytes,
        "ok_spans": tally.ok_spans,
        "ok_mcp_spans": tally.ok_mcp_spans,
        "ok_calls": tally.ok_calls,
        "ok_listings": tally.ok_listings,
        "wall_s": round(time.perf_counter() - wall_before_s, 3),  # for cpu_s: a core's share
        "cpu_s": round(time.process_time() - cpu_before_s, 3),
        "render_s": round(fresh.render_s, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, metavar="HOST:PORT")
    parser.add_argument("--payload", choices=VARIANTS, default="mixed")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument(
        "--connections", type=int, default=1, help="channels (TCP connections) they share"
    )
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds first")
    args = parser.parse_args()
    templates = build_templates(args.payload)
    result = asyncio.run(
        run(
            args.target,
            templates,
            args.concurrency,
            args.duration,
            args.warmup,
            args.connections,
        )
    )
    print(json.dumps({"payload": args.payload, **result}))


if __name__ == "__main__":
    main()
