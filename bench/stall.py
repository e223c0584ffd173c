"""How long a hostile request holds the service's event loop: /healthz probed while it is read.

Two requests once stalled every other sender for seconds (docs/security.md):

    attributes  one MCP tool-call span whose resource holds a million attributes (about
                16 MB over OTLP/gRPC): the resource's service and tenant names are all the
                service reads of them
    json        100,000 spans in one OTLP/JSON body over OTLP/HTTP: decoded in a thread

A ``mcp-breaker serve`` process is started on free ports. For each request, a thread GETs
/healthz every 10 ms while the request is sent and answered; the worst probe is printed
beside the worst of as many probes sent with nothing else going on, in the same run (the
baseline), and as a ratio to it. A stalled loop shows as a worst probe about as long as
the request took to be answered.

Self-checks: each request is answered OK with no span rejected, and the receiver counted
every span it holds (``mcp_breaker_receiver_accepted_spans_total``).

    .venv/bin/python bench/stall.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
from hop_processes import (
    BENCH,
    LOOPBACK,
    Child,
    check_alive,
    scrape,
    start,
    stop,
    wait_grpc_ready,
    wait_http_ready,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from ports import free_port

RESOURCE_ATTRIBUTES = 1_000_000
JSON_SPANS = 100_000
PROBE_EVERY_S = 0.01
QUIET_PROBES = 50
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
ANSWER_TIMEOUT_S = 120.0  # a bound on waiting for a request's answer, not a measurement
EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
ACCEPTED = "mcp_breaker_receiver_accepted_spans_total"


def attributes_request() -> bytes:
    """One failing MCP tool-call span, its resource holding a million attributes."""
    now = time.time_ns()
    span = Span(
        name="mcp.tool.call",
        trace_id=(0x5EC0).to_bytes(16, "big"),
        span_id=(0x5EC1).to_bytes(8, "big"),
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=now - 10**9,
        end_time_unix_nano=now,
    )
    for key, value in {
        "mcp.tool.name": "payments__charge",
        "mcp.server.name": "payments",
        "mcp.tool.outcome": "failed",
        "mcp.tool.failure_class": "transport",
        "mcp.turn.id": "t1",
    }.items():
        span.attributes.append(KeyValue(key=key, value=AnyValue(string_value=value)))
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    attributes = resource_spans.resource.attributes
    attributes.append(KeyValue(key="service.name", value=AnyValue(string_value="harness")))
    attributes.extend(
        KeyValue(key=f"k{i}", value=AnyValue(string_value="v")) for i in range(RESOURCE_ATTRIBUTES)
    )
    resource_spans.scope_spans.add().spans.append(span)
    return request.SerializeToString()


def json_body() -> bytes:
    spans = [
        {
            "traceId": f"{index + 1:032x}",
            "spanId": f"{index + 1:016x}",
            "name": f"step {index}",
            "startTimeUnixNano": "1",
            "endTimeUnixNano": "2",
        }
        for index in range(JSON_SPANS)
    ]
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()


def probe_once(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=ANSWER_TIMEOUT_S) as response:
        response.read()
    return time.perf_counter() - started


def worst_probe_while(url: str, send: Callable[[], None]) -> tuple[float, float, int]:
    """The worst /healthz answer while ``send`` runs, how long ``send`` took, and how many
    probes were answered meanwhile."""
    answered: list[float] = []
    done = threading.Event()

    def probe() -> None:
        while not done.is_set():
            answered.append(probe_once(url))
            time.sleep(PROBE_EVERY_S)

    prober = threading.Thread(target=probe, name="probe")
    prober.start()
    started = time.perf_counter()
    try:
        send()
    finally:
        took = time.perf_counter() - started
        done.set()
        prober.join()
    return max(answered), took, len(answered)


def send_grpc(endpoint: str, body: bytes) -> None:
    options = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]
    with grpc.insecure_channel(endpoint, options=options) as channel:
        export = channel.unary_unary(EXPORT_METHOD)  # bytes in, bytes out
        answer = ExportTraceServiceResponse.FromString(export(body, timeout=ANSWER_TIMEOUT_S))
    if answer.partial_success.rejected_spans:
        raise RuntimeError(f"the gRPC request had spans rejected: {answer.partial_success}")


def send_json(url: str, body: bytes) -> None:
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=ANSWER_TIMEOUT_S) as response:
        answer = json.loads(response.read() or b"{}")
    if answer.get("partialSuccess", {}).get("rejectedSpans"):
        raise RuntimeError(f"the JSON request had spans rejected: {answer}")


@dataclass(frozen=True)
class Served:
    """``mcp-breaker serve`` running in front of a null next hop, and where to reach it."""

    process: Child
    otlp_grpc: str
    otlp_http: str
    healthz: str
    metrics_port: int


@contextlib.contextmanager
def served(name: str, *settings: str) -> Iterator[Served]:
    """The service on fresh loopback ports (its settings and these), forwarding to a null
    receiver; both ready when this yields, both stopped after."""
    grpc_port, http_port, metrics_port, sink_port = (free_port() for _ in range(4))
    every = [
        f"receivers.grpc.endpoint={LOOPBACK}:{grpc_port}",
        f"receivers.http.endpoint={LOOPBACK}:{http_port}",
        f"telemetry.metrics_endpoint={LOOPBACK}:{metrics_port}",
        f"advisories.endpoint={LOOPBACK}:{free_port()}",
        "advisories.tokens=bench-token=bench",
        f"forward.endpoint={LOOPBACK}:{sink_port}",
        *settings,
    ]
    argv = [sys.executable, "-m", "processor", "serve", "--log-level", "error"]
    argv += [arg for setting in every for arg in ("--set", setting)]
    healthz = f"http://{LOOPBACK}:{metrics_port}/healthz"
    with tempfile.TemporaryDirectory(prefix=f"mcp-breaker-{name}-") as workdir:
        sink_argv = [sys.executable, str(BENCH / "null_receiver.py"), "--port", str(sink_port)]
        sink = start("null-receiver", sink_argv, Path(workdir))  # the next hop
        serve = start("serve", argv, Path(workdir))
        try:
            wait_grpc_ready(sink, sink_port)
            wait_grpc_ready(serve, grpc_port)
            wait_http_ready(serve, healthz)
            yield Served(
                serve,
                f"{LOOPBACK}:{grpc_port}",
                f"http://{LOOPBACK}:{http_port}/v1/traces",
                healthz,
                metrics_port,
            )
        finally:
            stop(serve)
            stop(sink)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="each request this many times")
    args = parser.parse_args()

    print("building the requests...", flush=True)
    cases: dict[str, tuple[Callable[[], None], int]] = {}
    attributes_body, body = attributes_request(), json_body()
    sizes = {"attributes": len(attributes_body), "json": len(body)}

    with served("stall", f"receivers.grpc.max_recv_msg_bytes={MAX_MESSAGE_BYTES}") as hop:
        cases["attributes"] = (lambda: send_grpc(hop.otlp_grpc, attributes_body), 1)
        cases["json"] = (lambda: send_json(hop.otlp_http, body), JSON_SPANS)
        quiet = [probe_once(hop.healthz) for _ in range(QUIET_PROBES)]
        rows: dict[str, list[tuple[float, float, int]]] = {name: [] for name in cases}
        expected = 0
        for _ in range(args.repeats):
            for name, (send, spans) in cases.items():
                rows[name].append(worst_probe_while(hop.healthz, send))
                expected += spans
                check_alive(hop.process)
        accepted = scrape(hop.metrics_port)[ACCEPTED]

    baseline = max(quiet)
    print(f"\n/healthz answered alone: worst {baseline * 1000:.1f} ms of {QUIET_PROBES} "
          f"(median {statistics.median(quiet) * 1000:.1f} ms)")  # fmt: skip
    print(
        f"{'request':<12}{'bytes':>12}{'answered in, ms':>17}"
        f"{'worst probe meanwhile, ms':>28}{'x alone':>9}{'probes':>8}"
    )
    for name, runs in rows.items():
        worst = statistics.median(w for w, _, _ in runs)
        took = statistics.median(t for _, t, _ in runs)
        probes = min(n for _, _, n in runs)
        print(
            f"{name:<12}{sizes[name]:>12,}{took * 1000:>17.0f}{worst * 1000:>28.1f}"
            f"{worst / baseline:>9.0f}{probes:>8}"
        )
    print(f"(medians of {args.repeats}; probes: the fewest answered during one request)")
    ok = accepted == expected
    print(f"\nchecks: {'ok' if ok else 'FAILED'}: {accepted:,.0f} of {expected:,} spans accepted")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
