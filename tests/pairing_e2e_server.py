"""An MCP tool server that exports its own spans, for tests/test_pairing_e2e.py.

The official ``mcp`` SDK 2.x ``MCPServer`` over stdio, in its own process, with the real
OpenTelemetry SDK as its global tracer provider: the SDK's server middleware writes a
``tools/call <tool>`` server span per call, its parent the caller's span (the trace context
the request carried in ``params._meta``), and it names no server. ``SPAN_PROCESSOR`` says
how they leave: ``simple`` (each span exported as it ends, before the reply is written) or
``batch`` (the SDK's batch span processor, every ``BATCH_DELAY_MS``). The spans go over
OTLP/gRPC to ``OTLP_ENDPOINT``; the batch is flushed when the session ends.

- ``get_weather`` works;
- ``fetch_invoice`` tries its billing backend, a port nothing listens on, and raises (the
  SDK answers with an ``isError`` result and marks its span ``error.type: tool_error``).

Every call first appends its tool's name to ``INVOCATIONS_FILE``.
"""

from __future__ import annotations

import os
import socket

from mcp.server.mcpserver import MCPServer
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

server = MCPServer("billing")


def invoked(tool: str) -> None:
    with open(os.environ["INVOCATIONS_FILE"], "a", encoding="utf-8") as invocations:
        invocations.write(f"{tool}\n")


@server.tool()
def get_weather(city: str) -> str:
    """The weather in a city."""
    invoked("get_weather")
    return f"sunny in {city}"


@server.tool()
def fetch_invoice(invoice_id: str) -> str:
    """An invoice from the billing backend."""
    invoked("fetch_invoice")
    try:
        with socket.create_connection(("127.0.0.1", int(os.environ["BILLING_PORT"])), timeout=5):
            pass
    except OSError as error:
        raise RuntimeError(f"billing backend unreachable: [Errno {error.errno}]") from None
    return f"invoice {invoice_id}"


def span_processor() -> SpanProcessor:
    exporter = OTLPSpanExporter(endpoint=os.environ["OTLP_ENDPOINT"], insecure=True, timeout=10)
    if os.environ["SPAN_PROCESSOR"] == "simple":
        return SimpleSpanProcessor(exporter)
    return BatchSpanProcessor(exporter, schedule_delay_millis=int(os.environ["BATCH_DELAY_MS"]))


if __name__ == "__main__":
    provider = TracerProvider(resource=Resource.create({"service.name": "billing-server"}))
    provider.add_span_processor(span_processor())
    trace.set_tracer_provider(provider)
    try:
        server.run("stdio")
    finally:
        provider.shutdown()  # what the batch still holds goes out before the process ends
