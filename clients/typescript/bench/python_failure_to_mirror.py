"""The Python client's failure → mirror latency, for the TypeScript benchmark to compare.

    python python_failure_to_mirror.py OTLP_TARGET ADVISORIES_TARGET EVENTS INTERVAL_MS LABEL

Against a service already running (the TypeScript benchmark's), a harness set up as
docs/advisories.md sets one up (the OpenTelemetry SDK, ``PromptToolSpanProcessor`` and the
OTLP/gRPC exporter; an ``AdvisoryClient`` subscribed with the harness's name) records
EVENTS failing calls INTERVAL_MS apart, each in a turn of its own, with part 5 of
``bench/advisories.py`` (``failures_to_mirror``: t0 just after ``failed(...)``, t1 when
``client.check`` first says DENY). Prints one JSON object: the latencies in ms.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from advisories import (  # noqa: E402
    CALL_TIMEOUT_S,
    CONNECT_TIMEOUT_S,
    HARNESS_WAIT_S,
    failures_to_mirror,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402

from mcp_breaker_client import AdvisoryClient, ClientConfig  # noqa: E402
from mcp_breaker_client.tracing import PromptToolSpanProcessor  # noqa: E402

HARNESS = "ts-bench-python-harness"


def main(otlp: str, advisories: str, events: int, interval_ms: float, label: str) -> int:
    client = AdvisoryClient(
        advisories, harness=HARNESS, config=ClientConfig(subscriber_name=f"{HARNESS}-{label}")
    )
    exporter = OTLPSpanExporter(endpoint=otlp, insecure=True, timeout=CALL_TIMEOUT_S)
    provider = TracerProvider(resource=Resource.create({"service.name": HARNESS}))
    provider.add_span_processor(PromptToolSpanProcessor(exporter))
    try:
        if not client.wait_until_synced(CONNECT_TIMEOUT_S):
            print(json.dumps({"error": f"never synced: {client.failure or 'no stream'}"}))
            return 1
        tracer = provider.get_tracer(HARNESS)
        run = failures_to_mirror(
            tracer, client, f"py-{label}", events, interval_ms / 1000, HARNESS_WAIT_S
        )
        latencies = [(f.t1_ns - f.t0_ns) / 1e6 for f in run["failures"] if f.t1_ns]
        print(json.dumps({"events": events, "latencies_ms": latencies, "poll_ms": run["poll_ms"]}))
        return 0
    finally:
        provider.shutdown()
        client.close()


if __name__ == "__main__":
    otlp_target, advisories_target, count, interval, name = sys.argv[1:6]
    sys.exit(main(otlp_target, advisories_target, int(count), float(interval), name))
