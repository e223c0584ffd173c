"""A closed-loop OTLP/gRPC load generator, meant to run in a process of its own.

``--concurrency`` coroutines share one channel; each sends a pre-encoded request (raw bytes,
no serializer), waits for the answer and sends the next, until ``--duration`` seconds have
passed. The first ``--warmup`` seconds are sent but not measured (connection set-up, first
calls). It prints one JSON document:

    requests, spans, errors (by gRPC status code), spans_per_s, latency_ms p50/p90/p99,
    the warm-up's ok requests (so a caller can account for every span sent), and cpu_s,
    the load generator's own CPU time

    python bench/loadgen.py --target 127.0.0.1:4417 --payload mixed --duration 8
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import grpc

# A sibling module: bench/ is on sys.path when these files are run as scripts.
from payload import SPANS_PER_REQUEST, VARIANTS, build_requests

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


def percentile(ordered: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def run(
    target: str, requests: list[bytes], concurrency: int, duration_s: float, warmup_s: float
) -> dict[str, Any]:
    tally = Tally()
    cpu_before_s = time.process_time()
    async with grpc.aio.insecure_channel(target) as channel:
        await asyncio.wait_for(channel.channel_ready(), CONNECT_TIMEOUT_S)
        export = channel.unary_unary(EXPORT_METHOD)  # no serializer: bytes in, bytes out
        measure_from = time.perf_counter() + warmup_s
        stop_at = measure_from + duration_s

        async def worker(offset: int) -> None:
            sent = offset  # workers start at different requests so the mix is even
            while (started := time.perf_counter()) < stop_at:
                payload = requests[sent % len(requests)]
                sent += 1
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
                tally.ok_bytes += len(payload) if code is None else 0
                if code is not None:
                    await asyncio.sleep(ERROR_PAUSE_S)

        await asyncio.gather(*(worker(i) for i in range(concurrency)))

    # Until the last answer came back: the calls still in flight at stop_at were measured.
    elapsed_s = max(tally.last_finish - measure_from, 1e-9)
    ordered = sorted(tally.latencies_s)
    spans = len(ordered) * SPANS_PER_REQUEST
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
        "cpu_s": round(time.process_time() - cpu_before_s, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, metavar="HOST:PORT")
    parser.add_argument("--payload", choices=VARIANTS, default="mixed")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds first")
    args = parser.parse_args()
    requests = build_requests(args.payload)
    result = asyncio.run(run(args.target, requests, args.concurrency, args.duration, args.warmup))
    print(json.dumps({"payload": args.payload, **result}))


if __name__ == "__main__":
    main()
