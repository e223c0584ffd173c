"""Smoke tests of the live capture harness: the real SDKs, real OTLP/gRPC, both processes.

Per stack: the client and the stdio tool server both export spans; each of the six calls
has a client span and a server span (found the way that stack's dialect spells them) in the
turn's trace; and the client observed what the fixture in tests/fixtures/real-spans did.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.live import harness
from tests.live.capture_common import CALLS, TURN_ID_ATTR, TURN_SPAN
from tests.support import CaptureCollector, wait_until

pytestmark = [pytest.mark.live, pytest.mark.timeout(900), pytest.mark.usefixtures("live_venvs")]

EXPECTED = Counter(name for name, _ in CALLS)
Attrs = dict[str, Any]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def _attrs(span: Span) -> Attrs:
    return {kv.key: _value(kv.value) for kv in span.attributes}


def _last_word(prefix: str) -> Callable[[Span, Attrs], str | None]:
    return lambda span, _: span.name.rsplit(" ", 1)[1] if span.name.startswith(prefix) else None


def _semconv_tool(kind: int) -> Callable[[Span, Attrs], str | None]:
    def tool(span: Span, attrs: Attrs) -> str | None:
        if span.kind != kind or attrs.get("mcp.method.name") != "tools/call":
            return None
        return attrs.get("gen_ai.tool.name")

    return tool


def _logfire_server_tool(span: Span, attrs: Attrs) -> str | None:
    if span.name != "MCP server handle request: tools/call":
        return None
    return str(json.loads(attrs["request"])["params"]["name"])


def _traceloop_client_tool(span: Span, attrs: Attrs) -> str | None:
    return (
        attrs.get("traceloop.entity.name") if attrs.get("traceloop.span.kind") == "tool" else None
    )


def _traceloop_server_tool(span: Span, attrs: Attrs) -> str | None:
    # OpenLLMetry's server spans never name the tool: "" defers to the client span above.
    return "" if span.name == "ResponseStreamWriter" else None


ToolOf = Callable[[Span, Attrs], str | None]
# Per stack: the tool a client span calls, and the tool a server span handles (None: neither).
DIALECTS: dict[str, tuple[ToolOf, ToolOf]] = {
    "mcp2": (_last_word("MCP send tools/call "), _semconv_tool(Span.SPAN_KIND_SERVER)),
    "fastmcp3": (_semconv_tool(Span.SPAN_KIND_CLIENT), _semconv_tool(Span.SPAN_KIND_SERVER)),
    "traceloop": (_traceloop_client_tool, _traceloop_server_tool),
    "logfire": (_last_word("MCP request: tools/call "), _logfire_server_tool),
}


class Capture:
    """The spans that arrived, by process, with the call spans found per dialect.

    A server call span counts when it descends (across the process boundary) from one of the
    client's call spans: ``server_calls`` holds (span, tool it names, tool the client called).
    """

    def __init__(self, collector: CaptureCollector, stack: str) -> None:
        self.by_service: dict[str, list[Span]] = {}
        for request in collector.requests[:]:
            for resource in request.resource_spans:
                service = next(
                    _value(kv.value)
                    for kv in resource.resource.attributes
                    if kv.key == "service.name"
                )
                for scope in resource.scope_spans:
                    self.by_service.setdefault(service, []).extend(scope.spans)
        self.client = self.by_service.get(f"live-{stack}-client", [])
        self.server = self.by_service.get(f"live-{stack}-server", [])
        client_tool, server_tool = DIALECTS[stack]
        self.client_calls = {
            s.span_id: (s, t) for s in self.client if (t := client_tool(s, _attrs(s)))
        }
        self.server_calls: list[tuple[Span, str, str]] = []
        by_id = {s.span_id: s for s in [*self.client, *self.server]}
        for span in self.server:
            own = server_tool(span, _attrs(span))
            parent = by_id.get(span.parent_span_id)
            while parent is not None and parent.span_id not in self.client_calls:
                parent = by_id.get(parent.parent_span_id)
            if own is not None and parent is not None:
                called = self.client_calls[parent.span_id][1]
                self.server_calls.append((span, own or called, called))

    def complete(self) -> bool:
        tools = Counter(called for _, _, called in self.server_calls)
        return len(self.client_calls) == len(CALLS) and tools == EXPECTED


@pytest.fixture
def collector() -> Iterator[CaptureCollector]:
    collector = CaptureCollector().start()
    yield collector
    collector.stop()


def _failed(observed: dict[str, Any]) -> bool:
    return observed["isError"] is True or observed["raised"] is not None


@pytest.mark.parametrize("stack", harness.STACKS)
def test_live_capture(stack: str, collector: CaptureCollector) -> None:
    turn_id = f"turn-{stack}"
    result = harness.run_capture(stack, collector.endpoint, turn_id=turn_id)

    wait_until(lambda: Capture(collector, stack).complete(), timeout_s=30, what="call spans")
    capture = Capture(collector, stack)
    assert {f"live-{stack}-client", f"live-{stack}-server"} <= set(capture.by_service)

    # Every call span, client and server side, in the turn's trace; the turn carries its id.
    (turn,) = [span for span in capture.client if span.name == TURN_SPAN]
    assert turn.kind == Span.SPAN_KIND_INTERNAL
    assert turn.trace_id.hex() == result["trace_id"]
    assert _attrs(turn)[TURN_ID_ATTR] == turn_id
    assert Counter(tool for _, tool in capture.client_calls.values()) == EXPECTED
    assert all(own == called for _, own, called in capture.server_calls)
    call_spans = [span for span, _ in capture.client_calls.values()]
    call_spans += [span for span, _, _ in capture.server_calls]
    assert {span.trace_id.hex() for span in call_spans} == {result["trace_id"]}

    # What the client saw, with the fixture's semantics.
    assert result["turn_id"] == turn_id
    assert result["tools_listed"] == sorted(EXPECTED.keys() - {"no_such_tool"})
    seen = result["calls"]
    assert [(c["call"], c["arguments"]) for c in seen] == [(n, a) for n, a in CALLS]
    ok, raising, refusing, protocol, missing, repeat = seen
    assert ok["isError"] is False and ok["text"] == "forecast for Paris: sunny for 2 day(s)"
    assert _failed(raising) and _failed(repeat)
    assert refusing["isError"] is False and "PolicyRefusalFailure" in refusing["text"]
    assert _failed(protocol)
    assert "upstream unavailable for q1" in (protocol["raised"] or protocol["text"])
    if stack == "mcp2":  # only SDK 2.x lets a tool's JSON-RPC error reach the client as one
        assert protocol["raised"] == "MCPError: upstream unavailable for q1"
    assert _failed(missing)
