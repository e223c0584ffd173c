"""The OTLP/HTTP receiver, over real HTTP, against the real service and a real next hop."""

from __future__ import annotations

import gc
import gzip
import itertools
import json
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.trace.export import SpanExportResult

from processor.offloop import ANALYSIS_SWITCH_S, DEFERRED_OLD_THRESHOLD
from processor.receive import http
from processor.receive.codec import request_from_json
from tests.otlp_builders import (
    ACCEPTED_SPANS,
    GARBAGE,
    JSON,
    PROTOBUF,
    RECEIVER_REQUESTS,
    REJECTED_SPANS,
    STAGE_REQUESTS,
    annotations_view,
    gzip_members,
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
    to_otlp_json,
    truncated,
)
from tests.sdk import export_http
from tests.support import CaptureCollector, ServiceThread, make_config, wait_until

TIMEOUT_S = 20.0
LIMIT = 64 * 1024
PATHS = ("passthrough", "parsed")

StartService = Callable[..., ServiceThread]

# OTLP/JSON as a client would write it by hand: hex ids, integer enums, int64 as strings,
# and fields this receiver has never heard of, which it must ignore.
TRACE_ID_HEX = "5b8efff798038103d269b633813fc60c"
ROOT_ID_HEX = "eee19b7ec3c1b174"
CHILD_ID_HEX = "eee19b7ec3c1b175"
HANDWRITTEN_JSON = """
{
  "resourceSpans": [
    {
      "resource": {
        "attributes": [{"key": "service.name", "value": {"stringValue": "json-client"}}]
      },
      "someFutureField": {"nested": [1, 2, 3]},
      "scopeSpans": [
        {
          "scope": {"name": "json.scope", "version": "0.9.0"},
          "spans": [
            {
              "traceId": "5b8efff798038103d269b633813fc60c",
              "spanId": "eee19b7ec3c1b174",
              "name": "tools/call search",
              "kind": 3,
              "startTimeUnixNano": "1700000000000000000",
              "endTimeUnixNano": "1700000000500000000",
              "attributes": [
                {"key": "mcp.method.name", "value": {"stringValue": "tools/call"}},
                {"key": "retries", "value": {"intValue": "3"}},
                {"key": "cached", "value": {"boolValue": false}}
              ],
              "events": [
                {"timeUnixNano": "1700000000100000000", "name": "request sent",
                 "attributes": [{"key": "bytes", "value": {"intValue": 120}}]}
              ],
              "status": {"code": 2, "message": "tool failed"},
              "unknownSpanField": {"ignored": true}
            },
            {
              "traceId": "5b8efff798038103d269b633813fc60c",
              "spanId": "eee19b7ec3c1b175",
              "parentSpanId": "eee19b7ec3c1b174",
              "name": "child",
              "kind": 1,
              "startTimeUnixNano": 1700000000200000000,
              "endTimeUnixNano": "1700000000300000000"
            }
          ]
        }
      ]
    }
  ]
}
"""


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


def post(
    url: str,
    body: Any,
    content_type: str | None = PROTOBUF,
    encoding: str | None = None,
    session: requests.Session | None = None,
) -> requests.Response:
    headers = {}
    if content_type is not None:
        headers["Content-Type"] = content_type
    if encoding is not None:
        headers["Content-Encoding"] = encoding
    send = session.post if session is not None else requests.post
    return send(url, data=body, headers=headers, timeout=TIMEOUT_S)


def media_type(response: requests.Response) -> str:
    return response.headers.get("Content-Type", "").split(";")[0].strip()


def error_status(response: requests.Response, reply_type: str) -> status_pb2.Status:
    """The google.rpc.Status body, in the encoding of the request."""
    assert media_type(response) == reply_type
    if reply_type == JSON:
        return json_format.Parse(response.content, status_pb2.Status())
    return status_pb2.Status.FromString(response.content)


def json_body(request: ExportTraceServiceRequest) -> bytes:
    return json.dumps(to_otlp_json(request)).encode()


def assert_still_serving(service: ServiceThread, next_hop: CaptureCollector) -> None:
    """A good request from a new sender is answered with success and delivered."""
    before = next_hop.span_count()
    response = post(service.http_url, plain_request(900, 2).SerializeToString())
    assert response.status_code == 200
    assert ExportTraceServiceResponse.FromString(response.content) == ExportTraceServiceResponse()
    wait_until(lambda: next_hop.span_count() >= before + 2, TIMEOUT_S, "the good request")
    assert {"step 900", "step 901"} <= set(span_names(list(next_hop.requests)))


# --- spans from the real SDK ----------------------------------------------------------------


@pytest.mark.parametrize("use_gzip", [False, True], ids=["identity", "gzip"])
@pytest.mark.parametrize("path", PATHS)
def test_sdk_export_arrives_intact(
    start_service: StartService, next_hop: CaptureCollector, path: str, use_gzip: bool
) -> None:
    service = start_service()
    spans = record_plain_spans(7) if path == "passthrough" else record_mcp_spans(7)

    result = export_http(service.http_url, spans, gzip=use_gzip)

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
    assert service.metric(ACCEPTED_SPANS, transport="http") == len(spans)


# --- OTLP/JSON ------------------------------------------------------------------------------


@pytest.mark.parametrize("use_gzip", [False, True], ids=["identity", "gzip"])
def test_handwritten_otlp_json_arrives_with_binary_ids(
    start_service: StartService, next_hop: CaptureCollector, use_gzip: bool
) -> None:
    service = start_service()
    body = HANDWRITTEN_JSON.encode()

    response = post(
        service.http_url,
        gzip.compress(body) if use_gzip else body,
        JSON,
        encoding="gzip" if use_gzip else None,
    )

    assert response.status_code == 200, response.text
    assert media_type(response) == JSON
    assert response.json() == {}
    wait_until(lambda: next_hop.span_count() >= 2, TIMEOUT_S, "the JSON spans")
    received = received_view(list(next_hop.requests))
    root_id, child_id = bytes.fromhex(ROOT_ID_HEX), bytes.fromhex(CHILD_ID_HEX)
    assert set(received) == {root_id, child_id}
    root, child = received[root_id], received[child_id]
    assert root["trace_id"] == child["trace_id"] == bytes.fromhex(TRACE_ID_HEX)
    assert root["parent_span_id"] == b""
    assert child["parent_span_id"] == root_id
    assert (root["name"], root["kind"]) == ("tools/call search", Span.SPAN_KIND_CLIENT)
    assert (child["name"], child["kind"]) == ("child", Span.SPAN_KIND_INTERNAL)
    assert (root["start"], root["end"]) == (1_700_000_000_000_000_000, 1_700_000_000_500_000_000)
    assert (child["start"], child["end"]) == (1_700_000_000_200_000_000, 1_700_000_000_300_000_000)
    assert root["attributes"] == {
        "mcp.method.name": ("string", "tools/call"),
        "retries": ("int", 3),
        "cached": ("bool", False),
    }
    assert root["events"] == [("request sent", 1_700_000_000_100_000_000, {"bytes": ("int", 120)})]
    assert root["status"] == (2, "tool failed")
    assert root["resource"] == {"service.name": ("string", "json-client")}
    assert root["scope"] == ("json.scope", "0.9.0")
    assert service.metric(ACCEPTED_SPANS, transport="http") == 2


@pytest.mark.parametrize(
    ("content_type", "reply_type", "encode"),
    [
        pytest.param(
            PROTOBUF, PROTOBUF, ExportTraceServiceRequest.SerializeToString, id="protobuf"
        ),
        pytest.param(JSON, JSON, json_body, id="json"),
        pytest.param("application/json; charset=utf-8", JSON, json_body, id="json-charset"),
    ],
)
def test_response_is_in_the_request_encoding(
    start_service: StartService,
    next_hop: CaptureCollector,
    content_type: str,
    reply_type: str,
    encode: Callable[[ExportTraceServiceRequest], bytes],
) -> None:
    service = start_service()
    request = mcp_request(0, 3)

    response = post(service.http_url, encode(request), content_type)

    assert response.status_code == 200, response.text
    assert media_type(response) == reply_type
    if reply_type == PROTOBUF:
        assert ExportTraceServiceResponse.FromString(response.content) == (
            ExportTraceServiceResponse()
        )
    else:
        assert response.json() == {}
    wait_until(lambda: next_hop.span_count() >= 3, TIMEOUT_S, "the spans")
    assert received_view(list(next_hop.requests)) == received_view([request])


# --- bad input ------------------------------------------------------------------------------


def _json_with(change: Callable[[dict[str, Any]], None]) -> bytes:
    document = to_otlp_json(mcp_request(0, 2))
    change(document)
    return json.dumps(document).encode()


def _first_span(document: dict[str, Any]) -> dict[str, Any]:
    span: dict[str, Any] = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    return span


def _nested(depth: int) -> bytes:
    return ('{"resourceSpans": ' + '{"a": ' * depth + "1" + "}" * depth + "}").encode()


def _chunks(payload: bytes, size: int = 8192) -> Iterator[bytes]:
    for start in range(0, len(payload), size):
        yield payload[start : start + size]


GOOD_PROTOBUF = mcp_request(0, 3).SerializeToString()
GOOD_JSON = json_body(mcp_request(0, 3))
BAD_INPUTS = [
    # id, body (or a zero-argument factory for one-shot bodies), content type, encoding,
    # HTTP status, google.rpc code in the body, body encoding
    ("garbage-protobuf", GARBAGE, PROTOBUF, None, 400, code_pb2.INVALID_ARGUMENT, PROTOBUF),
    (
        "truncated-protobuf",
        truncated(plain_request(0, 3).SerializeToString()),
        PROTOBUF,
        None,
        400,
        code_pb2.INVALID_ARGUMENT,
        PROTOBUF,
    ),
    (
        "truncated-protobuf-mcp",
        truncated(GOOD_PROTOBUF),
        PROTOBUF,
        None,
        400,
        code_pb2.INVALID_ARGUMENT,
        PROTOBUF,
    ),
    (
        "malformed-json",
        b'{"resourceSpans": [{"scopeSpans": [',
        JSON,
        None,
        400,
        code_pb2.INVALID_ARGUMENT,
        JSON,
    ),
    ("json-array", b"[1, 2, 3]", JSON, None, 400, code_pb2.INVALID_ARGUMENT, JSON),
    ("json-string", b'"resourceSpans"', JSON, None, 400, code_pb2.INVALID_ARGUMENT, JSON),
    (
        "json-invalid-hex-trace-id",
        _json_with(lambda d: _first_span(d).update(traceId="zz" * 16)),
        JSON,
        None,
        400,
        code_pb2.INVALID_ARGUMENT,
        JSON,
    ),
    (
        "json-odd-length-span-id",
        _json_with(lambda d: _first_span(d).update(spanId="abc")),
        JSON,
        None,
        400,
        code_pb2.INVALID_ARGUMENT,
        JSON,
    ),
    (
        "json-wrong-shape",
        b'{"resourceSpans": "not a list"}',
        JSON,
        None,
        400,
        code_pb2.INVALID_ARGUMENT,
        JSON,
    ),
    (
        "json-bad-int64",
        _json_with(lambda d: _first_span(d).update(startTimeUnixNano="soon")),
        JSON,
        None,
        400,
        code_pb2.INVALID_ARGUMENT,
        JSON,
    ),
    ("json-too-deep", _nested(100), JSON, None, 400, code_pb2.INVALID_ARGUMENT, JSON),
    (
        "json-deep-under-limit",
        b'{"a": ' + b"[" * 20_000 + b"]" * 20_000 + b"}",
        JSON,
        None,
        400,
        code_pb2.INVALID_ARGUMENT,
        JSON,
    ),
    (
        "wrong-content-type",
        GOOD_PROTOBUF,
        "text/plain",
        None,
        415,
        code_pb2.INVALID_ARGUMENT,
        PROTOBUF,
    ),
    ("no-content-type", GOOD_PROTOBUF, None, None, 415, code_pb2.INVALID_ARGUMENT, PROTOBUF),
    (
        "content-encoding-br",
        GOOD_PROTOBUF,
        PROTOBUF,
        "br",
        415,
        code_pb2.INVALID_ARGUMENT,
        PROTOBUF,
    ),
    (
        "content-encoding-deflate-json",
        GOOD_JSON,
        JSON,
        "deflate",
        415,
        code_pb2.INVALID_ARGUMENT,
        JSON,
    ),
    (
        "over-limit",
        padded_request(2 * LIMIT),
        PROTOBUF,
        None,
        413,
        code_pb2.RESOURCE_EXHAUSTED,
        PROTOBUF,
    ),
    (
        "over-limit-chunked",
        lambda: _chunks(padded_request(2 * LIMIT)),
        PROTOBUF,
        None,
        413,
        code_pb2.RESOURCE_EXHAUSTED,
        PROTOBUF,
    ),
    (
        "over-limit-json",
        json_body(make_request(make_span("padded", attributes={"pad": "a" * 2 * LIMIT}))),
        JSON,
        None,
        413,
        code_pb2.RESOURCE_EXHAUSTED,
        JSON,
    ),
    (
        "gzip-bomb",
        gzip.compress(padded_request(64 * LIMIT)),
        PROTOBUF,
        "gzip",
        413,
        code_pb2.RESOURCE_EXHAUSTED,
        PROTOBUF,
    ),
    (
        "gzip-bomb-json",
        gzip.compress(
            json_body(make_request(make_span("padded", attributes={"pad": "a" * 64 * LIMIT})))
        ),
        JSON,
        "gzip",
        413,
        code_pb2.RESOURCE_EXHAUSTED,
        JSON,
    ),
    (
        "invalid-gzip",
        b"this was never gzip",
        PROTOBUF,
        "gzip",
        400,
        code_pb2.INVALID_ARGUMENT,
        PROTOBUF,
    ),
    (
        "truncated-gzip",
        truncated(gzip.compress(GOOD_PROTOBUF)),
        PROTOBUF,
        "gzip",
        400,
        code_pb2.INVALID_ARGUMENT,
        PROTOBUF,
    ),
    (
        "gzip-without-trailer",
        gzip.compress(GOOD_PROTOBUF)[:-8],
        PROTOBUF,
        "gzip",
        400,
        code_pb2.INVALID_ARGUMENT,
        PROTOBUF,
    ),
    (
        "truncated-gzip-json",
        truncated(gzip.compress(GOOD_JSON)),
        JSON,
        "gzip",
        400,
        code_pb2.INVALID_ARGUMENT,
        JSON,
    ),
    (
        "gzip-of-garbage",
        gzip.compress(GARBAGE),
        PROTOBUF,
        "gzip",
        400,
        code_pb2.INVALID_ARGUMENT,
        PROTOBUF,
    ),
]


def _body(case_body: Any) -> Any:
    return case_body() if callable(case_body) else case_body


@pytest.mark.parametrize(
    ("body", "content_type", "encoding", "http_status", "rpc_code", "reply_type"),
    [pytest.param(*case[1:], id=case[0]) for case in BAD_INPUTS],
)
def test_bad_input_is_refused_and_the_service_keeps_serving(
    start_service: StartService,
    next_hop: CaptureCollector,
    body: Any,
    content_type: str | None,
    encoding: str | None,
    http_status: int,
    rpc_code: int,
    reply_type: str,
) -> None:
    if encoding == "gzip" and http_status == 413:  # a bomb: under the limit on the wire only
        assert len(body) < LIMIT // 4
        assert len(gzip.decompress(body)) > 16 * LIMIT
    service = start_service(f"receivers.http.max_body_bytes={LIMIT}")

    response = post(service.http_url, _body(body), content_type, encoding)

    assert response.status_code == http_status, response.content[:300]
    status = error_status(response, reply_type)
    assert status.code == rpc_code
    assert status.message
    assert service.metric(RECEIVER_REQUESTS, transport="http", outcome="invalid") == 1
    assert service.metric(ACCEPTED_SPANS, transport="http") == 0
    assert_still_serving(service, next_hop)


@pytest.mark.parametrize(
    "members",
    [
        pytest.param((plain_request(0, 2), plain_request(2, 2)), id="passthrough"),
        pytest.param((mcp_request(0, 2), plain_request(2, 3)), id="parsed"),
    ],
)
def test_multi_member_gzip_body_delivers_every_member(
    start_service: StartService,
    next_hop: CaptureCollector,
    members: tuple[ExportTraceServiceRequest, ...],
) -> None:
    """RFC 1952 2.2: a gzip file is a series of members; it decompresses to their concatenation.

    Concatenated protobuf messages merge, so the body is one request holding every span.
    """
    service = start_service()
    body = gzip_members(*(member.SerializeToString() for member in members))
    expected = received_view(members)

    response = post(service.http_url, body, PROTOBUF, encoding="gzip")

    assert response.status_code == 200, response.content[:300]
    assert service.metric(ACCEPTED_SPANS, transport="http") == len(expected)
    wait_until(lambda: next_hop.span_count() >= len(expected), TIMEOUT_S, "every member")
    assert received_view(list(next_hop.requests)) == expected


# --- partial success ------------------------------------------------------------------------


def _with_invalid_ids() -> tuple[ExportTraceServiceRequest, list[Span], int]:
    valid = [
        make_span("tools/call search", 1, kind=Span.SPAN_KIND_CLIENT),
        make_span("valid step", 2),
        make_span("valid in second resource", 3),
    ]
    # Named as MCP spans: in protobuf only the spans that may be MCP spans are decoded and
    # have their ids checked (OTLP/JSON is decoded whole and checks every span).
    invalid = [
        make_span("tools/call empty trace id", 4, trace_id=b""),
        make_span("tools/call all-zero span id", 5, span_id=bytes(8)),
        make_span("tools/list all-zero trace id", 6, trace_id=bytes(16)),
    ]
    request = make_request(valid[0], invalid[0], valid[1])
    request.resource_spans.extend(
        make_request(invalid[1], valid[2], invalid[2], service_name="second").resource_spans
    )
    return request, valid, len(invalid)


def _json_with_explicit_empty_ids(request: ExportTraceServiceRequest) -> bytes:
    document = to_otlp_json(request)
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                span.setdefault("traceId", "")  # protobuf's mapping leaves empty bytes out
                span.setdefault("spanId", "")
    assert '"traceId": ""' in json.dumps(document)
    return json.dumps(document).encode()


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_spans_with_invalid_ids_are_rejected_as_partial_success(
    start_service: StartService, next_hop: CaptureCollector, encoding: str
) -> None:
    service = start_service()
    request, valid, rejected = _with_invalid_ids()

    if encoding == "protobuf":
        response = post(service.http_url, request.SerializeToString(), PROTOBUF)
        assert response.status_code == 200, response.content[:300]
        assert media_type(response) == PROTOBUF
        partial = ExportTraceServiceResponse.FromString(response.content).partial_success
        rejected_spans, error_message = partial.rejected_spans, partial.error_message
    else:
        response = post(service.http_url, _json_with_explicit_empty_ids(request), JSON)
        assert response.status_code == 200, response.text
        assert media_type(response) == JSON
        partial_json = response.json()["partialSuccess"]
        # int64 is a decimal string in protobuf's JSON mapping; accept a number too.
        rejected_spans = int(partial_json["rejectedSpans"])
        error_message = partial_json["errorMessage"]

    assert rejected_spans == rejected
    assert error_message
    wait_until(lambda: next_hop.span_count() >= len(valid), TIMEOUT_S, "the valid spans")
    received = received_view(list(next_hop.requests))
    assert {span_id: (item["trace_id"], item["name"]) for span_id, item in received.items()} == {
        span.span_id: (span.trace_id, span.name) for span in valid
    }
    assert received[valid[2].span_id]["resource"]["service.name"] == ("string", "second")
    assert service.metric(REJECTED_SPANS, transport="http") == rejected
    assert service.metric(ACCEPTED_SPANS, transport="http") == len(valid)


# --- one bad sender does not hurt the others ------------------------------------------------


FLOOD_CASES = [case for case in BAD_INPUTS if not callable(case[1]) and len(case[1]) < LIMIT]


def test_flood_of_bad_requests_does_not_disturb_a_good_sender(
    start_service: StartService, next_hop: CaptureCollector
) -> None:
    service = start_service(f"receivers.http.max_body_bytes={LIMIT}")
    url = service.http_url
    stop = threading.Event()
    lock = threading.Lock()
    answers: list[tuple[str, int]] = []
    assert len(FLOOD_CASES) >= 10

    def flood() -> None:
        with requests.Session() as session:
            for case in itertools.cycle(FLOOD_CASES):
                if stop.is_set():
                    return
                name, body, content_type, encoding = case[:4]
                response = post(url, body, content_type, encoding, session=session)
                with lock:
                    answers.append((name, response.status_code))

    flooders = [threading.Thread(target=flood, daemon=True) for _ in range(3)]
    for thread in flooders:
        thread.start()
    try:
        wait_until(lambda: len(answers) >= 30, TIMEOUT_S, "the flood to start")
        flooded_before = len(answers)
        expected: dict[bytes, dict[str, Any]] = {}
        with requests.Session() as session:
            for n in range(40):
                request = (mcp_request if n % 2 else plain_request)(n * 4, 4)
                if n % 3 == 0:
                    response = post(url, json_body(request), JSON, session=session)
                    assert (response.status_code, response.json()) == (200, {})
                else:
                    response = post(url, request.SerializeToString(), session=session)
                    assert response.status_code == 200
                    assert response.content == b""
                expected |= received_view([request])
        sdk_spans = record_plain_spans(5)
        assert export_http(url, sdk_spans, gzip=True) is SpanExportResult.SUCCESS
        assert len(answers) > flooded_before, "the flood ran while the good sender sent"
        assert all(thread.is_alive() for thread in flooders)
    finally:
        stop.set()
        for thread in flooders:
            thread.join(TIMEOUT_S)

    expected_status = {case[0]: case[4] for case in FLOOD_CASES}
    assert [(name, code) for name, code in answers if code != expected_status[name]] == []
    assert service.metric(RECEIVER_REQUESTS, transport="http", outcome="invalid") == len(answers)
    assert service.metric(RECEIVER_REQUESTS, transport="http", outcome="success") == 41
    good_ids = set(expected) | set(sdk_view(sdk_spans))
    wait_until(lambda: next_hop.span_count() >= len(good_ids), TIMEOUT_S, "every good span")
    received = received_view(list(next_hop.requests))
    assert set(received) == good_ids
    assert {span_id: received[span_id] for span_id in expected} == expected
    healthz = requests.get(f"{service.telemetry_url}/healthz", timeout=TIMEOUT_S)
    assert healthz.status_code == 200
    assert_still_serving(service, next_hop)


def test_a_large_json_body_is_decoded_at_the_shorter_switch_interval(
    start_service: StartService, next_hop: CaptureCollector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decoded in a thread, protobuf's JSON mapping being Python: the loop waits a switch
    interval for each of its turns meanwhile, as while a request is analysed."""
    intervals: list[float] = []
    old_thresholds: list[int] = []

    def decode(body: bytes) -> Any:
        intervals.append(sys.getswitchinterval())
        old_thresholds.append(gc.get_threshold()[2])
        return request_from_json(body)

    monkeypatch.setattr(http, "request_from_json", decode)
    service = start_service()
    document = json.loads(HANDWRITTEN_JSON)
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["attributes"].append(
        {"key": "padding", "value": {"stringValue": "x" * http.OFFLOAD_BYTES}}
    )
    small = post(service.http_url, HANDWRITTEN_JSON.encode(), JSON)
    large = post(service.http_url, json.dumps(document).encode(), JSON)

    assert small.status_code == large.status_code == 200, large.text
    before = sys.getswitchinterval()
    assert intervals == [before, ANALYSIS_SWITCH_S] and before > ANALYSIS_SWITCH_S
    # No full collection while it is decoded: the collector's setting as before after it.
    assert old_thresholds == [gc.get_threshold()[2], DEFERRED_OLD_THRESHOLD]
    wait_until(lambda: next_hop.span_count() >= 4, TIMEOUT_S, "both bodies' spans")
