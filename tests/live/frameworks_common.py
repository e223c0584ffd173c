"""The agent-framework scenario, shared by every framework's capture client.

Runs inside the per-framework venvs (``.venv-live-<framework>``): the standard library and
the OpenTelemetry SDK + OTLP/gRPC exporter only, which every ``requirements-<framework>.txt``
pins. The framework's own scripted test model makes the calls of ``PLAN``, one per model
round, against ``server_frameworks.py`` over stdio, then answers in text; nothing here is
an LLM.

The plan is the issue's: 6 calls, 5 failed (3 transport, 2 hidden), 3 repeats of a failure
that the breaker calls dead within the turn.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SERVER_NAME = "billing"  # the MCP server's own name (its initialize result)
SERVER_SCRIPT = HERE / "server_frameworks.py"

HEALTHY_TOOL = "get_weather"
DEAD_TOOL = "fetch_invoice"  # its backend refuses connections: a transport failure
HIDDEN_TOOL = "lookup_order"  # isError false around {"ok": false, "error": {...}}

# (tool, arguments), one per model round, in order.
PLAN: list[tuple[str, dict[str, Any]]] = [
    (HEALTHY_TOOL, {"city": "Paris"}),
    (DEAD_TOOL, {"invoice_id": "INV-1"}),
    (DEAD_TOOL, {"invoice_id": "INV-1"}),  # dead: the same call again
    (HIDDEN_TOOL, {"order_id": "A-1"}),
    (HIDDEN_TOOL, {"order_id": "A-1"}),  # dead: the same call again
    (DEAD_TOOL, {"invoice_id": "INV-2"}),  # dead: a transport failure blocks the whole tool
]
FINAL_TEXT = "Paris is sunny; the invoice and the order could not be fetched."

# What each call is, for the tests: (outcome, failure class, dead repeat).
EXPECTED: list[tuple[str, str | None, bool]] = [
    ("ok", None, False),
    ("failed", "transport", False),
    ("failed", "transport", True),
    ("failed", "hidden", False),
    ("failed", "hidden", True),
    ("failed", "transport", True),
]

# What the tools answer.
REFUSED_MESSAGE = "Connection refused: billing backend at 10.20.30.40:5432"
HIDDEN_BODY: dict[str, Any] = {
    "ok": False,
    "error": {"code": "UPSTREAM_TIMEOUT", "message": "order service did not answer in 30s"},
}


def weather(city: str) -> str:
    return f"Sunny in {city}, 21 C"


def client_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run the framework capture scenario.")
    parser.add_argument("--endpoint", required=True, help="OTLP/gRPC host:port, or 'none'")
    parser.add_argument("--out", required=True, type=Path, help="where to write result.json")
    parser.add_argument(
        "--simple",
        action="store_true",
        help="export each span as it ends (SimpleSpanProcessor), not in batches",
    )
    return parser.parse_args()


def server_command() -> tuple[str, list[str]]:
    """The stdio command of the tool server, run by this very interpreter."""
    return sys.executable, [str(SERVER_SCRIPT)]


def install_tracing(service_name: str, endpoint: str, *, simple: bool) -> Any:
    """A TracerProvider exporting over OTLP/gRPC to ``endpoint``, set as the global one.

    Returned so that a framework that takes its own provider can be given it; the caller
    shuts it down (flushes) before it writes its result.
    """
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if endpoint != "none":
        exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True)
        processor = SimpleSpanProcessor(exporter) if simple else BatchSpanProcessor(exporter)
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider


def write_result(
    path: Path,
    framework: str,
    *,
    trace_ids: list[str],
    calls: list[dict[str, Any]],
    final: str,
    versions: dict[str, str],
) -> None:
    """What the run saw: the trace ids of its agent runs (hex), what each tool call
    returned as the framework handed it to the model, the final answer, package versions."""
    import json

    path.write_text(
        json.dumps(
            {
                "framework": framework,
                "trace_ids": trace_ids,
                "calls": calls,
                "final": final,
                "versions": versions,
            },
            indent=2,
            sort_keys=True,
        )
    )


def versions(*packages: str) -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in packages}
