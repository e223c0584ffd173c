"""Record a framework's capture into tests/fixtures/frameworks/, for the fast suite.

    .venv/bin/python -m tests.live.record pydantic_ai

runs ``client_<framework>.py`` in its venv against a real gRPC OTLP receiver and writes
what arrived as one ``ExportTraceServiceRequest`` (``<framework>.otlp.bin``, the requests'
resource spans in arrival order) beside what the client saw (``<framework>.result.json``).
"""

from __future__ import annotations

import argparse
import json
import re
import time

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.live import harness
from tests.support import CaptureCollector

FIXTURES = harness.REPO / "tests" / "fixtures" / "frameworks"
# A stack trace names the files of this machine; a fixture keeps only the part past them.
_LOCAL_PATH = re.compile(r"/[^\s\"':]*?/(site-packages|tests/live)/")


def scrub_paths(request: ExportTraceServiceRequest) -> None:
    """Cut this machine's paths out of every string a span holds (stack traces)."""

    def clean(text: str) -> str:
        return _LOCAL_PATH.sub(r"<\1>/", text).replace(str(harness.REPO), "<repo>")

    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                span.status.message = clean(span.status.message)
                for holder in (span, *span.events):
                    for attribute in holder.attributes:
                        if attribute.value.HasField("string_value"):
                            attribute.value.string_value = clean(attribute.value.string_value)


def record(framework: str, *, name: str | None = None, simple: bool = False) -> None:
    collector = CaptureCollector().start()
    try:
        result = harness.run_framework(framework, collector.endpoint, simple=simple)
        time.sleep(1.0)  # the last export's answer may still be on its way back
        merged = ExportTraceServiceRequest()
        for request in collector.requests:
            merged.resource_spans.extend(request.resource_spans)
        scrub_paths(merged)
    finally:
        collector.stop()
    FIXTURES.mkdir(parents=True, exist_ok=True)
    stem = name or framework
    (FIXTURES / f"{stem}.otlp.bin").write_bytes(merged.SerializeToString())
    (FIXTURES / f"{stem}.result.json").write_text(json.dumps(result, indent=2, sort_keys=True))
    spans = sum(len(s.spans) for r in merged.resource_spans for s in r.scope_spans)
    print(f"{stem}: {spans} spans in {len(collector.requests)} requests")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("framework", choices=harness.FRAMEWORKS)
    parser.add_argument("--name", help="the fixture's file stem (default: the framework)")
    parser.add_argument("--simple", action="store_true", help="SimpleSpanProcessor export")
    args = parser.parse_args()
    record(args.framework, name=args.name, simple=args.simple)


if __name__ == "__main__":
    main()
