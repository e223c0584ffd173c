"""forward.strip_attributes: payload attributes leave MCP spans after mcp-breaker read them.

The hook on its own, then the running service between the real OpenTelemetry SDK and a
real gRPC next hop.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from processor.inflight.stage import Stage
from processor.inflight.strip import StripAfter
from processor.request.sender import Sender
from processor.server import Service
from tests.sdk import RESOURCE, export_grpc
from tests.support import CaptureCollector, ServiceThread, make_config, wait_until

ARGUMENTS = '{"url": "https://intranet.example.test/payroll?employee=4711"}'
HIDDEN_FAILURE = '{"_tag": "OrchestratorMcpFailure", "code": "UPSTREAM_DOWN"}'


def attributes(span: Span) -> dict[str, str]:
    return {kv.key: kv.value.string_value or str(kv.value.bool_value) for kv in span.attributes}


def request_with(*spans: tuple[str, dict[str, str]]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for i, (name, values) in enumerate(spans, 1):
        span = scope.spans.add(name=name, trace_id=bytes(range(1, 17)))
        span.span_id = i.to_bytes(8, "big")
        for key, value in values.items():
            span.attributes.add(key=key).value.string_value = value
    return request


def spans_of(request: ExportTraceServiceRequest) -> list[Span]:
    return [s for r in request.resource_spans for sc in r.scope_spans for s in sc.spans]


KEYS = ("mcp.tool.arguments", "mcp.tool.result")
PAYLOAD = {"mcp.tool.arguments": ARGUMENTS, "mcp.tool.result": "{}", "keep": "x"}


class TestTheHook:
    def test_strips_the_mcp_spans_the_analysis_found_and_only_those(self) -> None:
        request = request_with(
            ("mcp.tool.call", dict(PAYLOAD)),
            ("tools/call navigate", dict(PAYLOAD)),
            ("GET /payroll", dict(PAYLOAD)),  # not an MCP span: forwarded as it came
        )
        call, semconv, other = spans_of(request)
        analysed: list[ExportTraceServiceRequest] = []
        hook = StripAfter(lambda r, _: analysed.append(r), lambda: [call, semconv], KEYS)
        hook(request, Sender())
        assert analysed == [request]  # the analysis ran first, on the whole request
        assert attributes(call) == attributes(semconv) == {"keep": "x"}
        assert attributes(other) == PAYLOAD

    def test_what_the_classifier_read_spares_only_the_spans_without_the_keys(self) -> None:
        """Classifier.read says which keys a span holds; a span said to hold none of them is
        left alone (here it does hold one, so leaving it shows that it was trusted), and
        keys the classifier does not read are looked for in every span all the same."""
        request = request_with(("mcp.tool.call", dict(PAYLOAD)), ("tools/call x", dict(PAYLOAD)))
        holds, said_not_to = spans_of(request)
        read = {
            holds.span_id: (3, {"mcp.tool.arguments": ARGUMENTS}),
            said_not_to.span_id: (3, {"mcp.tool.name": "x"}),
        }
        StripAfter(lambda r, _: None, lambda: [holds, said_not_to], KEYS, lambda: read)(
            request, Sender()
        )
        assert attributes(holds) == {"keep": "x"}
        assert attributes(said_not_to) == PAYLOAD

        unread = request_with(("mcp.tool.call", {"llm.prompts": "secret", "keep": "x"}))
        (span,) = spans_of(unread)
        nothing_read = {span.span_id: (2, {})}
        StripAfter(lambda r, _: None, lambda: [span], ["llm.prompts"], lambda: nothing_read)(
            unread, Sender()
        )
        assert attributes(span) == {"keep": "x"}

    def test_when_the_analysis_fails_every_mcp_named_span_is_stripped(self) -> None:
        """A privacy setting must not depend on the analysis working."""

        def broken(request: ExportTraceServiceRequest, sender: Sender) -> None:
            raise RuntimeError("a bug in classification")

        request = request_with(
            ("mcp.tool.call", dict(PAYLOAD)),
            ("tools/call navigate", dict(PAYLOAD)),
            ("MCP send tools/call navigate", dict(PAYLOAD)),
            ("navigate.tool", dict(PAYLOAD)),
            ("GET /payroll", dict(PAYLOAD)),
        )
        errors: list[int] = []
        stage = Stage(
            (StripAfter(broken, lambda: [], KEYS),), on_hook_error=lambda: errors.append(1)
        )
        prepared = stage.from_request(request)
        *mcp, other = spans_of(ExportTraceServiceRequest.FromString(prepared.payload))
        assert errors == [1]  # still counted and logged as an analysis failure
        assert [attributes(s) for s in mcp] == [{"keep": "x"}] * 4
        assert attributes(other) == PAYLOAD

    @pytest.mark.parametrize("path", ["protobuf", "decoded whole"])
    def test_spans_of_one_request_that_share_an_id_are_all_stripped(self, path: str) -> None:
        # A sender's bug or a forgery: three call spans with one span id, in two traces.
        request = request_with(*[("mcp.tool.call", {**PAYLOAD, "mcp.tool.name": "t"})] * 3)
        spans = spans_of(request)
        for span in spans:
            span.span_id = bytes(range(11, 19))
        spans[1].trace_id = bytes(range(2, 18))
        stage = Service(make_config()).stage
        if path == "protobuf":
            prepared = stage.from_protobuf(request.SerializeToString())
        else:
            prepared = stage.from_request(request)

        assert ARGUMENTS.encode() not in prepared.payload
        forwarded = spans_of(ExportTraceServiceRequest.FromString(prepared.payload))
        assert len(forwarded) == 3
        assert all(attributes(s)["keep"] == "x" for s in forwarded)
        assert not any("mcp.tool.arguments" in attributes(s) for s in forwarded)


def harness_spans() -> list[ReadableSpan]:
    """One MCP tool call whose result hides a failure, and a plain span beside it."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.harness")
    with tracer.start_as_current_span("agent turn"):
        with tracer.start_as_current_span("mcp.tool.call", kind=SpanKind.CLIENT) as call:
            call.set_attribute("mcp.tool.name", "browser_navigate")
            call.set_attribute("mcp.server.name", "playwright")
            call.set_attribute("mcp.tool.outcome", "ok")
            call.set_attribute("mcp.tool.is_error", False)
            call.set_attribute("mcp.tool.arguments", ARGUMENTS)
            call.set_attribute("mcp.tool.result", HIDDEN_FAILURE)
        with tracer.start_as_current_span("render answer") as plain:
            plain.set_attribute("mcp.tool.result", "a key of ours on a span that is not MCP")
    provider.shutdown()
    return list(memory.get_finished_spans())


@pytest.fixture
def next_hop() -> Iterator[CaptureCollector]:
    collector = CaptureCollector().start()
    yield collector
    collector.stop()


def forwarded(next_hop: CaptureCollector, *overrides: str) -> dict[str, dict[str, str]]:
    """Send the harness's spans through the service; what reached the next hop, by name."""
    service = ServiceThread(make_config(f"forward.endpoint={next_hop.endpoint}", *overrides))
    try:
        spans = harness_spans()
        assert export_grpc(service.grpc_endpoint, spans) is SpanExportResult.SUCCESS
        wait_until(lambda: next_hop.span_count() == len(spans), what="spans at the next hop")
    finally:
        service.stop()
    return {span.name: attributes(span) for span in next_hop.spans()}


class TestThroughTheService:
    def test_by_default_arguments_and_result_are_read_then_removed(
        self, next_hop: CaptureCollector
    ) -> None:
        spans = forwarded(next_hop)
        call = spans["mcp.tool.call"]
        assert "mcp.tool.arguments" not in call and "mcp.tool.result" not in call
        sent = b"".join(r.SerializeToString() for r in next_hop.requests)
        assert b"employee=4711" not in sent and b"UPSTREAM_DOWN" not in sent
        # ...after mcp-breaker read them: the hidden failure, and the call's fingerprint.
        assert call["mcp.breaker.outcome"] == "failed"
        assert call["mcp.breaker.failure_class"] == "hidden"
        assert len(call["mcp.breaker.fingerprint"]) == 32
        assert call["mcp.tool.name"] == "browser_navigate"
        # A span that is not an MCP span is forwarded as it came.
        assert spans["render answer"]["mcp.tool.result"].startswith("a key of ours")

    def test_an_empty_list_forwards_every_span_as_it_came(self, next_hop: CaptureCollector) -> None:
        call = forwarded(next_hop, "forward.strip_attributes=")["mcp.tool.call"]
        assert call["mcp.tool.arguments"] == ARGUMENTS
        assert call["mcp.tool.result"] == HIDDEN_FAILURE
        assert call["mcp.breaker.failure_class"] == "hidden"
        sent = b"".join(r.SerializeToString() for r in next_hop.requests)
        assert b"employee=4711" in sent  # the check above can see them when they are there

    def test_other_keys_can_be_listed(self, next_hop: CaptureCollector) -> None:
        call = forwarded(
            next_hop, "forward.strip_attributes=mcp.tool.arguments,mcp.breaker.fingerprint"
        )["mcp.tool.call"]
        assert "mcp.tool.arguments" not in call and "mcp.breaker.fingerprint" not in call
        assert call["mcp.tool.result"] == HIDDEN_FAILURE
