"""Shared by every live capture client and tool server; runs inside the per-stack venvs.

Imports only the standard library and the OpenTelemetry SDK + OTLP/gRPC exporter, which
every ``requirements-<stack>.txt`` pins. The scripts sit beside this file, so running one as
``python tests/live/client_X.py`` puts this directory on ``sys.path``.
"""

from __future__ import annotations

import argparse
import atexit
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

HERE = Path(__file__).resolve().parent
SERVER_NAME = "live-tools-server"
TURN_SPAN = "capture.agent_turn"
TURN_ID_ATTR = "mcp.turn.id"

# The fixture's five calls, then the failed raising_tool call once more (a repeat).
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("ok_tool", {"city": "Paris", "days": 2}),
    ("raising_tool", {"path": "secret/file.txt"}),
    ("refusing_tool", {"target": "prod-db"}),
    ("protocol_error_tool", {"query": "q1"}),
    ("no_such_tool", {"x": 1}),
    ("raising_tool", {"path": "secret/file.txt"}),
]


def forecast(city: str, days: int = 1) -> str:
    return f"forecast for {city}: sunny for {days} day(s)"


def explode(path: str) -> None:
    raise RuntimeError(f"disk exploded while reading {path}")


def refusal(target: str) -> dict[str, str]:
    return {
        "_tag": "PolicyRefusalFailure",
        "code": "policy_denied",
        "message": f"refusing to modify {target}",
    }


PROTOCOL_ERROR_CODE = -32000


def protocol_error_message(query: str) -> str:
    return f"upstream unavailable for {query}"


def client_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run the live MCP capture scenario.")
    parser.add_argument("--endpoint", required=True, help="OTLP/gRPC host:port")
    parser.add_argument("--out", required=True, type=Path, help="where to write result.json")
    parser.add_argument("--turn-id", default=None, help="mcp.turn.id on the turn span")
    return parser.parse_args()


def server_endpoint() -> str:
    parser = argparse.ArgumentParser(description="Live MCP tool server (stdio).")
    parser.add_argument("--endpoint", required=True, help="OTLP/gRPC host:port")
    return str(parser.parse_args().endpoint)


def server_command(script: str, endpoint: str) -> tuple[str, list[str]]:
    """The command that launches a tool server beside this file with this interpreter."""
    return sys.executable, [str(HERE / script), "--endpoint", endpoint]


def span_processor(endpoint: str, *, simple: bool) -> SpanProcessor:
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True)
    return SimpleSpanProcessor(exporter) if simple else BatchSpanProcessor(exporter)


NO_TRACING = "none"  # as an endpoint: the process exports no spans at all


def install_tracing(
    service_name: str,
    endpoint: str,
    *,
    simple: bool,
    skip_scopes: frozenset[str] = frozenset(),
) -> TracerProvider:
    """A global TracerProvider exporting to ``endpoint``, shut down (flushed) at exit.

    Servers use ``simple=True``: each span leaves when it ends, so nothing is lost when the
    client closes stdin and the process is torn down. ``endpoint`` ``none``: no exporter.
    Spans of ``skip_scopes`` (instrumentation scopes) are not exported.
    """
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if endpoint != NO_TRACING:
        processor = span_processor(endpoint, simple=simple)
        if skip_scopes:
            processor = SkipScopes(processor, skip_scopes)
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    atexit.register(provider.shutdown)
    return provider


class SkipScopes(SpanProcessor):
    """Hands on every ended span but those of the given instrumentation scopes."""

    def __init__(self, inner: SpanProcessor, scopes: frozenset[str]) -> None:
        self._inner = inner
        self._scopes = scopes

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self._inner.on_start(span, parent_context)

    def on_end(self, span: Any) -> None:
        scope = span.instrumentation_scope
        if scope is None or scope.name not in self._scopes:
            self._inner.on_end(span)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


def observed(
    name: str,
    arguments: dict[str, Any],
    result: Any = None,
    error: BaseException | None = None,
) -> dict[str, Any]:
    """What the client saw for one call: the result envelope, or what was raised."""
    is_error = getattr(result, "isError", getattr(result, "is_error", None))
    content = getattr(result, "content", None) or []
    text = getattr(content[0], "text", None) if content else None
    raised = f"{type(error).__name__}: {error}" if error is not None else None
    return {
        "call": name,
        "arguments": arguments,
        "isError": is_error,
        "text": text,
        "raised": raised,
    }


async def run_turn(
    call: Callable[[str, dict[str, Any]], Awaitable[Any]],
    list_tools: Callable[[], Awaitable[list[str]]],
    turn_id: str | None,
) -> dict[str, Any]:
    """List tools and make every call of ``CALLS`` under one INTERNAL turn span."""
    tracer = trace.get_tracer("capture-harness")
    attributes = {TURN_ID_ATTR: turn_id} if turn_id else {}
    calls: list[dict[str, Any]] = []
    with tracer.start_as_current_span(
        TURN_SPAN, kind=trace.SpanKind.INTERNAL, attributes=attributes
    ) as turn:
        tools = await list_tools()
        for name, arguments in CALLS:
            try:
                calls.append(observed(name, arguments, result=await call(name, dict(arguments))))
            except Exception as error:
                calls.append(observed(name, arguments, error=error))
    return {
        "trace_id": format(turn.get_span_context().trace_id, "032x"),
        "turn_id": turn_id,
        "tools_listed": sorted(tools),
        "calls": calls,
    }


def write_result(path: Path, stack: str, result: dict[str, Any]) -> None:
    path.write_text(json.dumps({"stack": stack, **result}, indent=2, sort_keys=True))
