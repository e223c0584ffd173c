"""The OTLP/gRPC receiver, over real gRPC, against the real service and a real next hop."""

from __future__ import annotations

import gzip
import itertools
import threading
from collections.abc import Callable, Iterator

import grpc
import pytest
from google.rpc import code_pb2, error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.sdk.trace.export import SpanExportResult

from processor.forward.senders import retry_info_s
from processor.inflight.stage import may_hold_mcp
from tests.otlp_builders import (
    ACCEPTED_SPANS,
    EXPORT_METHOD,
    GARBAGE,
    RECEIVER_REQUESTS,
    REJECTED_SPANS,
    STAGE_REQUESTS,
    TRACE_SERVICE,
    annotations_view,
    make_request,
    make_span,
    mcp_request,
    padded_request,
    plain_request,
    received_view,
    record_mcp_spans,
    record_plain_spans,
    sdk_view,
    span_names,
    truncated,
)
from tests.sdk import export_grpc
from tests.support import CaptureCollector, ServiceThread, make_config, wait_until

TIMEOUT_S = 20.0
LIMIT = 64 * 1024
PATHS = ("passthrough", "parsed")

StartService = Callable[..., ServiceThread]


@pytest.fixture
def start_service(next_hop: CaptureCollector) -> Iterator[StartService]:
    services: list[ServiceThread] = []

    def start(*overrides: str) -> ServiceThread:
        config = make_config(f"forward.endpoint={next_hop.endpoint}", *overrides)
        service = ServiceThread(config)
        services.append(service)
        return service

    yield start
    for service in services:
        service.stop()


def export_raw(
    endpoint: str, payload: bytes, *, compression: grpc.Compression | None = None
) -> bytes:
    """Export as bytes, with no serializer, so any payload can be sent."""
    with grpc.insecure_channel(endpoint) as channel:
        export = channel.unary_unary(EXPORT_METHOD)
        return bytes(export(payload, timeout=TIMEOUT_S, compression=compression))


def export_typed(endpoint: str, request: ExportTraceServiceRequest) -> ExportTraceServiceResponse:
    with grpc.insecure_channel(endpoint) as channel:
        export = channel.unary_unary(
            EXPORT_METHOD,
            request_serializer=ExportTraceServiceRequest.SerializeToString,
            response_deserializer=ExportTraceServiceResponse.FromString,
        )
        return export(request, timeout=TIMEOUT_S)


def rejected_call(
    endpoint: str, payload: bytes, *, compression: grpc.Compression | None = None
) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        export_raw(endpoint, payload, compression=compression)
    return caught.value


def assert_still_serving(service: ServiceThread, next_hop: CaptureCollector) -> None:
    """A good request from a new sender is answered with success and delivered."""
    before = next_hop.span_count()
    request = plain_request(900, 2)
    assert export_typed(service.grpc_endpoint, request) == ExportTraceServiceResponse()
    wait_until(lambda: next_hop.span_count() >= before + 2, TIMEOUT_S, "the good request")
    assert {"step 900", "step 901"} <= set(span_names(list(next_hop.requests)))


def health_status(endpoint: str, service_name: str) -> int:
    with grpc.insecure_channel(endpoint) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest(service=service_name)
        return int(stub.Check(request, timeout=TIMEOUT_S).status)


# --- spans from the real SDK ----------------------------------------------------------------


@pytest.mark.parametrize("use_gzip", [False, True], ids=["identity", "gzip"])
@pytest.mark.parametrize("path", PATHS)
def test_sdk_export_arrives_intact(
    start_service: StartService, next_hop: CaptureCollector, path: str, use_gzip: bool
) -> None:
    service = start_service()
    spans = record_plain_spans(7) if path == "passthrough" else record_mcp_spans(7)

    result = export_grpc(service.grpc_endpoint, spans, gzip=use_gzip)

    assert result is SpanExportResult.SUCCESS
    wait_until(lambda: next_hop.span_count() >= len(spans), TIMEOUT_S, "spans at the next hop")
    expected = sdk_view(spans)
    assert len(expected) == 7
    assert received_view(list(next_hop.requests)) == expected
    # Every MCP call span says how it ended, even one held for its other half.
    mcp_ids = {sid for sid, span in expected.items() if span["name"].startswith("tools/")}
    annotated = annotations_view(list(next_hop.requests))
    assert set(annotated) == mcp_ids
    assert all(a["mcp.breaker.outcome"] == ("string", "failed") for a in annotated.values())
    other_path = next(p for p in PATHS if p != path)
    assert service.metric(STAGE_REQUESTS, path=path) == 1
    assert service.metric(STAGE_REQUESTS, path=other_path) == 0
    assert service.metric(ACCEPTED_SPANS, transport="grpc") == len(spans)


# --- empty and undecodable requests ---------------------------------------------------------


@pytest.mark.parametrize(
    "request_message",
    [
        pytest.param(ExportTraceServiceRequest(), id="no-resource-spans"),
        pytest.param(
            ExportTraceServiceRequest(
                resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(), ScopeSpans()])]
            ),
            id="scopes-without-spans",
        ),
    ],
)
def test_empty_request_succeeds(
    start_service: StartService,
    next_hop: CaptureCollector,
    request_message: ExportTraceServiceRequest,
) -> None:
    service = start_service()

    answer = export_raw(service.grpc_endpoint, request_message.SerializeToString())

    assert answer == b""
    response = ExportTraceServiceResponse.FromString(answer)
    assert not response.HasField("partial_success")
    assert service.metric(RECEIVER_REQUESTS, transport="grpc", outcome="success") == 1
    assert service.metric(ACCEPTED_SPANS, transport="grpc") == 0
    assert next_hop.attempts == 0


UNDECODABLE = [
    pytest.param(GARBAGE, False, id="garbage"),
    pytest.param(b"\xff\xff\xff tools/call mcp", True, id="garbage-with-mcp-marker"),
    pytest.param(truncated(plain_request(0, 3).SerializeToString()), False, id="truncated"),
    pytest.param(truncated(mcp_request(0, 3).SerializeToString()), True, id="truncated-mcp"),
]


@pytest.mark.parametrize(("payload", "has_marker"), UNDECODABLE)
def test_undecodable_request_is_invalid_argument_with_bad_request_detail(
    start_service: StartService, next_hop: CaptureCollector, payload: bytes, has_marker: bool
) -> None:
    assert may_hold_mcp(payload) is has_marker  # both stage paths are covered
    service = start_service()

    error = rejected_call(service.grpc_endpoint, payload)

    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error.details()
    keys = [key for key, _ in error.trailing_metadata() or ()]
    assert "grpc-status-details-bin" in keys
    status = rpc_status.from_call(error)  # also checks it matches the call's code and message
    assert status is not None
    assert status.code == code_pb2.INVALID_ARGUMENT
    assert len(status.details) == 1
    assert status.details[0].Is(error_details_pb2.BadRequest.DESCRIPTOR)
    bad_request = error_details_pb2.BadRequest()
    status.details[0].Unpack(bad_request)
    assert bad_request.field_violations
    assert all(violation.description for violation in bad_request.field_violations)
    assert service.metric(RECEIVER_REQUESTS, transport="grpc", outcome="invalid") == 1
    assert service.metric(ACCEPTED_SPANS, transport="grpc") == 0
    assert_still_serving(service, next_hop)


# --- size limits ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "compression"),
    [
        pytest.param(padded_request(2 * LIMIT), None, id="over-limit"),
        pytest.param(padded_request(2 * LIMIT), grpc.Compression.Gzip, id="over-limit-gzip"),
        pytest.param(padded_request(64 * LIMIT), grpc.Compression.Gzip, id="gzip-bomb"),
    ],
)
def test_request_over_the_limit_is_resource_exhausted(
    start_service: StartService,
    next_hop: CaptureCollector,
    payload: bytes,
    compression: grpc.Compression | None,
) -> None:
    if compression is not None:
        assert len(gzip.compress(payload)) < LIMIT // 4  # small on the wire, big inside
    service = start_service(f"receivers.grpc.max_recv_msg_bytes={LIMIT}")

    error = rejected_call(service.grpc_endpoint, payload, compression=compression)

    assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert service.metric(ACCEPTED_SPANS, transport="grpc") == 0
    assert service.metric(STAGE_REQUESTS, path="passthrough") == 0
    assert service.metric(STAGE_REQUESTS, path="parsed") == 0
    assert_still_serving(service, next_hop)


def test_an_export_over_max_concurrent_rpcs_is_told_to_retry(
    start_service: StartService, next_hop: CaptureCollector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """UNAVAILABLE with RetryInfo, which every OTLP exporter retries; not gRPC's own
    RESOURCE_EXHAUSTED without a delay, which the Collector's exporter drops."""
    service = start_service("receivers.grpc.max_concurrent_rpcs=1")
    stage = service.service.stage
    opening, release = threading.Event(), threading.Event()
    open_request = stage.open

    def held(payload: bytes) -> object:  # over 1 MiB: opened in a worker thread
        opening.set()
        release.wait(TIMEOUT_S)
        return open_request(payload)

    monkeypatch.setattr(stage, "open", held)
    answers: list[bytes] = []
    big = padded_request(2 * 1024 * 1024)
    first = threading.Thread(target=lambda: answers.append(export_raw(service.grpc_endpoint, big)))
    first.start()
    try:
        assert opening.wait(TIMEOUT_S), "the first export was never opened"
        error = rejected_call(service.grpc_endpoint, plain_request(1, 1).SerializeToString())
        assert error.code() is grpc.StatusCode.UNAVAILABLE
        assert "receivers.grpc.max_concurrent_rpcs" in (error.details() or "")
        assert retry_info_s(error.trailing_metadata()) == 1.0
    finally:
        release.set()
        first.join(TIMEOUT_S)
    assert answers == [b""]  # the export in progress went through
    assert service.metric(RECEIVER_REQUESTS, transport="grpc", outcome="refused") == 1
    assert_still_serving(service, next_hop)


@pytest.mark.parametrize("compression", [None, grpc.Compression.Gzip], ids=["identity", "gzip"])
def test_request_under_the_limit_arrives(
    start_service: StartService, next_hop: CaptureCollector, compression: grpc.Compression | None
) -> None:
    service = start_service(f"receivers.grpc.max_recv_msg_bytes={LIMIT}")
    payload = padded_request(LIMIT // 2)

    assert export_raw(service.grpc_endpoint, payload, compression=compression) == b""

    wait_until(lambda: next_hop.span_count() == 1, TIMEOUT_S, "the padded span")
    assert next_hop.requests[0].SerializeToString() == payload


# --- partial success ------------------------------------------------------------------------


def test_spans_with_invalid_ids_are_rejected_as_partial_success(
    start_service: StartService, next_hop: CaptureCollector
) -> None:
    """The ids of every span that is decoded (it may be an MCP span) are checked; spans
    that stay bytes are checked as the pass-through path checks them, by their framing."""
    service = start_service()
    valid = [
        make_span("tools/call search", 1, kind=Span.SPAN_KIND_CLIENT),
        make_span("valid step", 2),
        make_span("valid in second resource", 3),
    ]
    invalid = [
        make_span("tools/call empty trace id", 4, trace_id=b""),
        make_span("mcp.tool.call all-zero span id", 5, span_id=bytes(8)),
        make_span("tools/list all-zero trace id", 6, trace_id=bytes(16)),
        make_span("MCP send tools/call short span id", 7, span_id=b"\x01\x02\x03\x04"),
    ]
    # No marker in it: not decoded, so forwarded as it came, as on the pass-through path.
    unread = make_span("plain step", 8, span_id=bytes(8))
    request = make_request(valid[0], invalid[0], valid[1], invalid[1], unread)
    request.resource_spans.extend(
        make_request(invalid[2], valid[2], invalid[3], service_name="second").resource_spans
    )
    assert may_hold_mcp(request.SerializeToString())

    response = export_typed(service.grpc_endpoint, request)

    assert response.partial_success.rejected_spans == len(invalid)
    assert response.partial_success.error_message
    forwarded = [*valid, unread]
    wait_until(lambda: next_hop.span_count() >= len(forwarded), TIMEOUT_S, "the valid spans")
    received = received_view(list(next_hop.requests))
    assert {span_id: (item["trace_id"], item["name"]) for span_id, item in received.items()} == {
        span.span_id: (span.trace_id, span.name) for span in forwarded
    }
    assert received[valid[2].span_id]["resource"]["service.name"] == ("string", "second")
    assert service.metric(REJECTED_SPANS, transport="grpc") == len(invalid)
    assert service.metric(ACCEPTED_SPANS, transport="grpc") == len(forwarded)
    assert service.metric(STAGE_REQUESTS, path="parsed") == 1


# --- one bad sender does not hurt the others ------------------------------------------------


def test_flood_of_bad_requests_does_not_disturb_a_good_sender(
    start_service: StartService, next_hop: CaptureCollector
) -> None:
    service = start_service(f"receivers.grpc.max_recv_msg_bytes={LIMIT}")
    endpoint = service.grpc_endpoint
    bad_payloads = [payload for payload, _ in (p.values for p in UNDECODABLE)]
    stop = threading.Event()
    lock = threading.Lock()
    codes: list[grpc.StatusCode] = []

    def flood() -> None:
        with grpc.insecure_channel(endpoint) as channel:
            export = channel.unary_unary(EXPORT_METHOD)
            for payload in itertools.cycle(bad_payloads):
                if stop.is_set():
                    return
                try:
                    export(payload, timeout=TIMEOUT_S)
                    code = grpc.StatusCode.OK
                except grpc.RpcError as error:
                    code = error.code()
                with lock:
                    codes.append(code)

    flooders = [threading.Thread(target=flood, daemon=True) for _ in range(3)]
    for thread in flooders:
        thread.start()
    try:
        wait_until(lambda: len(codes) >= 30, TIMEOUT_S, "the flood to start")
        flooded_before = len(codes)
        expected_ids: set[bytes] = set()
        with grpc.insecure_channel(endpoint) as channel:
            export = channel.unary_unary(
                EXPORT_METHOD,
                request_serializer=ExportTraceServiceRequest.SerializeToString,
                response_deserializer=ExportTraceServiceResponse.FromString,
            )
            for n in range(40):
                build = mcp_request if n % 2 else plain_request
                request = build(n * 4, 4)
                assert export(request, timeout=TIMEOUT_S) == ExportTraceServiceResponse()
                expected_ids |= set(received_view([request]))
        sdk_spans = record_mcp_spans(5)
        assert export_grpc(endpoint, sdk_spans) is SpanExportResult.SUCCESS
        expected_ids |= set(sdk_view(sdk_spans))
        assert len(codes) > flooded_before, "the flood ran while the good sender sent"
        assert all(thread.is_alive() for thread in flooders)
    finally:
        stop.set()
        for thread in flooders:
            thread.join(TIMEOUT_S)

    assert set(codes) == {grpc.StatusCode.INVALID_ARGUMENT}
    assert service.metric(RECEIVER_REQUESTS, transport="grpc", outcome="invalid") == len(codes)
    assert service.metric(RECEIVER_REQUESTS, transport="grpc", outcome="success") == 41
    wait_until(lambda: next_hop.span_count() >= len(expected_ids), TIMEOUT_S, "every good span")
    assert set(received_view(list(next_hop.requests))) == expected_ids
    assert health_status(endpoint, "") == health_pb2.HealthCheckResponse.SERVING
    assert_still_serving(service, next_hop)


# --- health ---------------------------------------------------------------------------------


@pytest.mark.parametrize("service_name", ["", TRACE_SERVICE], ids=["server", "trace-service"])
def test_health_service_answers_serving(start_service: StartService, service_name: str) -> None:
    service = start_service()

    status = health_status(service.grpc_endpoint, service_name)

    assert status == health_pb2.HealthCheckResponse.SERVING


def test_health_service_does_not_know_other_services(start_service: StartService) -> None:
    service = start_service()

    with pytest.raises(grpc.RpcError) as caught:
        health_status(service.grpc_endpoint, "no.such.Service")

    assert caught.value.code() is grpc.StatusCode.NOT_FOUND
