"""The advisory benchmark's traffic: failing ``mcp.tool.call`` spans and how they are sent.

Each span is in our harness convention, of a turn of its own, alone in a request encoded
in advance; the ``Sender`` exports them from the calling thread with a raw
``TraceService/Export`` call, timing each.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

# A sibling module: bench/ is on sys.path when these files are run as scripts.
from advisories_service import CALL_TIMEOUT_S, CONNECT_TIMEOUT_S
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
WARMUP_EVENTS = 10
TOOL = "fetch_page"
ERROR = (
    "upstream MCP session is closed (reconnect also failed: reconnect upstream MCP "
    '"http://127.0.0.1:8931/mcp": sending "notifications/initialized": Bad Request)'
)
ARGUMENTS = json.dumps({"url": "https://artifacts.example.test/run/1539078028959944794"})
HARNESS = "advisory-bench-harness"
SERVERS = 20  # the spans name this many MCP servers in turn


@dataclass
class Event:
    """One failing call: its turn, its request (encoded), and what its export did."""

    turn: str
    server: str
    payload: bytes
    t0_ns: int = 0  # just before the Export call
    t1_ns: int = 0  # when it returned
    ok: bool = False
    error: str = ""


def _attribute(key: str, value: str | int) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def failed_span(
    turn: str,
    server: str,
    number: int,
    *,
    tool: str = TOOL,
    error: str = ERROR,
    arguments: str = ARGUMENTS,
    start_ns: int = 0,
) -> Span:
    """A failed ``mcp.tool.call`` span as our harness writes it."""
    start_ns = start_ns or time.time_ns()  # now: the block is in force for turn_idle_s from here
    span = Span(
        name="mcp.tool.call",
        trace_id=(0x5EED << 64 | number).to_bytes(16, "big"),
        span_id=(0xB0 << 48 | number).to_bytes(8, "big"),
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=start_ns,
        end_time_unix_nano=start_ns + 250_000_000,
    )
    span.attributes.extend(
        _attribute(key, value)
        for key, value in (
            ("mcp.tool.name", tool),
            ("mcp.server.name", server),
            ("mcp.tool.outcome", "failed"),
            ("mcp.tool.error", error),
            ("mcp.tool.arguments", arguments),
            ("mcp.turn.id", turn),
            ("mcp.turn.round", 1),
        )
    )
    return span


def export_request(spans: Sequence[Span]) -> bytes:
    """One Export request from our harness, encoded."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.append(_attribute("service.name", HARNESS))
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name, scope_spans.scope.version = "advisory-bench.harness", "1"
    scope_spans.spans.extend(spans)
    return request.SerializeToString()


def failing_call(label: str, index: int, number: int) -> Event:
    """A failed ``mcp.tool.call`` span, alone in its request."""
    turn, server = f"bench-{label}-turn-{index:05d}", f"bench-mcp-{number % SERVERS:02d}"
    return Event(turn, server, export_request([failed_span(turn, server, number)]))


class Numbering:
    def __init__(self) -> None:
        self._next = 1

    @property
    def made(self) -> int:
        return self._next - 1

    def take(self, count: int) -> int:
        """The first of ``count`` numbers for spans of their own."""
        first, self._next = self._next, self._next + count
        return first

    def events(self, label: str, count: int) -> list[Event]:
        first = self.take(count)
        return [failing_call(label, i, first + i) for i in range(count)]


class Sender:
    """Exports from the calling thread, one request at a time, on a channel of its own."""

    def __init__(self, target: str) -> None:
        self.channel = grpc.insecure_channel(target)
        grpc.channel_ready_future(self.channel).result(timeout=CONNECT_TIMEOUT_S)
        self._export = self.channel.unary_unary(
            EXPORT_METHOD,
            request_serializer=None,  # the requests are bytes already
            response_deserializer=ExportTraceServiceResponse.FromString,
        )

    def send(self, events: Sequence[Event], interval_s: float) -> None:
        """One span every ``interval_s`` (or right after the last one returned, if later)."""
        began = time.perf_counter()
        for i, event in enumerate(events):
            delay = began + i * interval_s - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            event.t0_ns = time.perf_counter_ns()
            try:
                response = self._export(event.payload, timeout=CALL_TIMEOUT_S)
                event.ok = not response.partial_success.rejected_spans
                event.error = "" if event.ok else "partial success: rejected"
            except grpc.RpcError as error:
                event.error = error.code().name
            event.t1_ns = time.perf_counter_ns()

    def close(self) -> None:
        self.channel.close()
