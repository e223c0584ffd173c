"""The path the stage labels a request with says what happened to it.

passthrough: no marker, forwarded as received. parsed: what made it a candidate (every
resource, scope and span holding a marker) decoded, and its possible MCP spans were
analysed. unreadable: it holds a marker, but a part holding one does not decode: forwarded
as received, not analysed. Issue 29's 185-byte request (a corrupt service.name holding the
markers) was labelled parsed.
"""

from __future__ import annotations

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.inflight.stage import Stage, StagePath
from processor.request.otlp import EXPORT_METHOD
from tests.classify_builders import make_request, make_span
from tests.fuzz_strategies import corrupt_service_name
from tests.support import CaptureCollector, ServiceThread, make_config, wait_until


def plain_request(service: str, scope: str) -> bytes:
    request = make_request(make_span("GET /orders/", span=7), service=service)
    request.resource_spans[0].scope_spans[0].scope.name = scope
    return bytes(request.SerializeToString())


def corrupt_length(payload: bytes, text: bytes) -> bytes:
    """``text``'s length byte set past the end of the message that holds it."""
    at = payload.index(bytes([len(text)]) + text)
    return payload[:at] + b"\x7f" + payload[at + 1 :]


def test_markers_in_a_resource_that_does_not_decode_make_it_unreadable() -> None:
    payload = corrupt_service_name()
    assert len(payload) == 185

    prepared = Stage().from_protobuf(payload)

    assert prepared.path is StagePath.UNREADABLE
    assert prepared.payload == payload
    assert prepared.span_count == 1 and prepared.rejected_spans == 0


def test_markers_in_a_scope_that_does_not_decode_make_it_unreadable() -> None:
    payload = corrupt_length(plain_request("orders", "fastmcp.client"), b"fastmcp.client")
    assert Stage().from_protobuf(payload).path is StagePath.UNREADABLE


def test_the_same_parts_decoding_are_parsed_and_without_markers_pass_through() -> None:
    assert Stage().open(plain_request("mcp-tool-gateway", "requests")).path is StagePath.PARSED
    assert Stage().open(plain_request("orders", "fastmcp.client")).path is StagePath.PARSED
    unmarked = corrupt_length(plain_request("orders", "requests"), b"orders")
    assert Stage().open(unmarked).path is StagePath.PASSTHROUGH


def test_a_corrupt_part_without_a_marker_leaves_an_mcp_request_parsed() -> None:
    """Spans without a marker are not decoded (docs/delivery.md: what that saves): a broken
    one beside an MCP span is the next hop's to judge, and the MCP span is analysed."""
    call = make_span("tools/call search", kind=Span.SPAN_KIND_CLIENT, span=1)
    request = make_request(call, make_span("GET /orders/", span=2), service="orders")
    payload = corrupt_length(request.SerializeToString(), b"GET /orders/")

    opened = Stage().open(payload)

    assert opened.path is StagePath.PARSED
    assert opened.request is not None
    read = opened.request.resource_spans
    assert [s.name for r in read for c in r.scope_spans for s in c.spans] == ["tools/call search"]


def test_the_service_counts_it_unreadable_and_forwards_it_as_it_came() -> None:
    hop = CaptureCollector().start()
    service = ServiceThread(make_config(f"forward.endpoint={hop.endpoint}"))
    try:
        payload = corrupt_service_name()
        with grpc.insecure_channel(service.grpc_endpoint) as channel:
            export = channel.unary_unary(
                EXPORT_METHOD, response_deserializer=ExportTraceServiceResponse.FromString
            )
            response = export(payload, timeout=20)
        assert response.partial_success.rejected_spans == 0
        requests = "mcp_breaker_stage_requests_total"
        assert service.metric(requests, path="unreadable") == 1
        assert service.metric(requests, path="parsed") == 0
        # As received: this next hop's decoder refuses it, byte for byte what was sent.
        wait_until(lambda: len(hop.refused) >= 1, what="the request at the next hop")
        assert hop.refused[0] == payload
        assert not hop.requests
    finally:
        service.stop()
        hop.stop()
