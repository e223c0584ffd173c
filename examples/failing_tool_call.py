"""One turn in which an MCP tool call fails three times, sent as OpenTelemetry spans to
localhost:4317 (or $OTEL_EXPORTER_OTLP_ENDPOINT). See docs/quickstart.md."""

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": "quickstart-harness"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))  # each span as it ends
tracer = provider.get_tracer("quickstart")
call = {
    "mcp.server.name": "playwright",
    "mcp.tool.name": "browser_navigate",
    "mcp.tool.arguments": '{"url": "https://example.test"}',
    "mcp.tool.outcome": "failed",
    "mcp.tool.error": "upstream MCP session is closed",
}
with tracer.start_as_current_span("agent turn") as turn:  # no mcp.turn.id: the trace is the turn
    for _ in range(3):  # the model asks for the same call again, and again
        tracer.start_span("mcp.tool.call", attributes=call).end()
provider.shutdown()
print(f"sent 3 failed calls, turn {turn.get_span_context().trace_id:032x}")
