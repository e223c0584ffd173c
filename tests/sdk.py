"""The real OpenTelemetry SDK as a client: emit spans through its OTLP exporters."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

RESOURCE = Resource.create({"service.name": "harness-under-test", "deployment.environment": "ci"})


def record_spans(
    count: int, *, mcp_every: int = 0, scope: str = "tests.harness"
) -> list[ReadableSpan]:
    """Spans made by the real SDK; every ``mcp_every``-th is an MCP tool call span."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer(scope, "1.2.3")
    with tracer.start_as_current_span("agent turn", kind=SpanKind.INTERNAL) as root:
        root.set_attribute("turn.index", 1)
        for i in range(count - 1):
            if mcp_every and i % mcp_every == 0:
                with tracer.start_as_current_span(
                    "tools/call browser_navigate", kind=SpanKind.CLIENT
                ) as span:
                    span.set_attribute("mcp.method.name", "tools/call")
                    span.set_attribute("gen_ai.tool.name", "browser_navigate")
                    span.set_status(Status(StatusCode.ERROR, "upstream MCP session is closed"))
            else:
                with tracer.start_as_current_span(f"step {i}") as span:
                    span.set_attribute("step", i)
                    span.set_attribute("ratio", i / 3)
                    span.set_attribute("ok", i % 2 == 0)
                    span.add_event("tick", {"n": i})
    provider.shutdown()
    return list(memory.get_finished_spans())


def export_grpc(
    endpoint: str, spans: list[ReadableSpan], *, gzip: bool = False
) -> SpanExportResult:
    from opentelemetry.exporter.otlp.proto.grpc.exporter import Compression

    exporter = GrpcSpanExporter(
        endpoint=endpoint,
        insecure=True,
        compression=Compression.Gzip if gzip else Compression.NoCompression,
        timeout=30,
    )
    try:
        return exporter.export(spans)
    finally:
        exporter.shutdown()


def export_http(url: str, spans: list[ReadableSpan], *, gzip: bool = False) -> SpanExportResult:
    from opentelemetry.exporter.otlp.proto.http import Compression

    exporter = HttpSpanExporter(
        endpoint=url,
        compression=Compression.Gzip if gzip else Compression.NoCompression,
        timeout=30,
    )
    try:
        return exporter.export(spans)
    finally:
        exporter.shutdown()
