"""Shared by the receiver tests: OTLP requests built by hand, and one comparable view of spans.

``sdk_view`` describes spans as the OpenTelemetry SDK recorded them; ``received_view``
describes what a next hop received, without the ``mcp.breaker.*`` / ``mcp.roster.*``
attributes the hop adds (``annotations_view`` has those). Both map span id to a plain
dict, so a test compares the two with ``==`` and pytest shows the difference field by
field.
"""

from __future__ import annotations

import base64
import gzip
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from opentelemetry.sdk.trace import ReadableSpan

from processor.inflight.stage import may_hold_mcp
from tests.sdk import record_spans

TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
EXPORT_METHOD = f"/{TRACE_SERVICE}/Export"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"

STAGE_REQUESTS = "mcp_breaker_stage_requests_total"
RECEIVER_REQUESTS = "mcp_breaker_receiver_requests_total"
ACCEPTED_SPANS = "mcp_breaker_receiver_accepted_spans_total"
REJECTED_SPANS = "mcp_breaker_receiver_rejected_spans_total"

GARBAGE = b"\xff\xff\xff\xff this is not protobuf"

_ID_KEYS = ("traceId", "spanId", "parentSpanId")


# --- building requests --------------------------------------------------------------------


def span_ids(index: int) -> tuple[bytes, bytes]:
    """A valid (trace id, span id) pair, distinct per index, free of MCP marker bytes."""
    return (0x0A00 + index).to_bytes(16, "big"), (0x0B00 + index).to_bytes(8, "big")


def make_span(
    name: str,
    index: int = 0,
    *,
    trace_id: bytes | None = None,
    span_id: bytes | None = None,
    parent_span_id: bytes = b"",
    kind: int = Span.SPAN_KIND_INTERNAL,
    attributes: Mapping[str, str] | None = None,
) -> Span:
    default_trace, default_span = span_ids(index)
    span = Span(
        name=name,
        trace_id=default_trace if trace_id is None else trace_id,
        span_id=default_span if span_id is None else span_id,
        parent_span_id=parent_span_id,
        kind=kind,
        start_time_unix_nano=1_700_000_000_000_000_000 + index,
        end_time_unix_nano=1_700_000_000_000_500_000 + index,
    )
    for key, value in (attributes or {}).items():
        span.attributes.append(KeyValue(key=key, value=AnyValue(string_value=value)))
    return span


def make_request(
    *spans: Span, service_name: str = "receiver-tests", scope_name: str = "tests.receive"
) -> ExportTraceServiceRequest:
    """One resource, one scope, the given spans."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.append(
        KeyValue(key="service.name", value=AnyValue(string_value=service_name))
    )
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = scope_name
    scope_spans.scope.version = "0.0.1"
    scope_spans.spans.extend(spans)
    return request


def plain_request(first_index: int, count: int) -> ExportTraceServiceRequest:
    """Spans with no MCP marker anywhere: the pass-through path."""
    indexes = range(first_index, first_index + count)
    return make_request(*(make_span(f"step {i}", i) for i in indexes))


def mcp_request(first_index: int, count: int) -> ExportTraceServiceRequest:
    """The first span is an MCP tool call: the parsed path."""
    spans = [make_span("tools/call search", first_index, kind=Span.SPAN_KIND_CLIENT)]
    spans += [make_span(f"step {i}", i) for i in range(first_index + 1, first_index + count)]
    return make_request(*spans)


def padded_request(min_bytes: int) -> bytes:
    """A valid request of at least ``min_bytes`` that gzip shrinks to almost nothing."""
    span = make_span("padded", 0, attributes={"padding": "a" * min_bytes})
    payload = make_request(span).SerializeToString()
    assert len(payload) >= min_bytes
    return payload


def truncated(payload: bytes) -> bytes:
    """Cut inside the outermost length-delimited field, so the framing is broken."""
    return payload[: len(payload) // 2]


def gzip_members(*payloads: bytes) -> bytes:
    """A gzip file of one member per payload (RFC 1952 section 2.2)."""
    return b"".join(gzip.compress(payload) for payload in payloads)


def to_otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP/JSON: protobuf's JSON mapping, with hex ids and integer enums."""
    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    _base64_ids_to_hex(document)
    return document


def _base64_ids_to_hex(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _base64_ids_to_hex(value)
    elif isinstance(node, list):
        for item in node:
            _base64_ids_to_hex(item)


# --- spans from the SDK -------------------------------------------------------------------


def _encoded(spans: list[ReadableSpan]) -> bytes:
    return bytes(encode_spans(spans).SerializeToString())


def record_plain_spans(count: int) -> list[ReadableSpan]:
    """SDK spans whose encoding holds no MCP marker, not even by chance in a random id."""
    for _ in range(50):
        spans = record_spans(count)
        if not may_hold_mcp(_encoded(spans)):
            return spans
    raise AssertionError("could not record spans free of MCP markers")


def record_mcp_spans(count: int) -> list[ReadableSpan]:
    spans = record_spans(count, mcp_every=2)
    assert may_hold_mcp(_encoded(spans))
    assert any(span.name.startswith("tools/") for span in spans)
    return spans


# --- one view of spans, from either side --------------------------------------------------


def _typed(value: Any) -> tuple[str, Any]:
    """A Python attribute value tagged with its OTLP type, so True and 1 stay different."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("double", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, bytes):
        return ("bytes", value)
    if isinstance(value, (tuple, list)):
        return ("array", tuple(_typed(item) for item in value))
    raise TypeError(f"unexpected attribute value {value!r}")


def _typed_any(value: AnyValue) -> tuple[str, Any]:
    which = value.WhichOneof("value")
    if which == "array_value":
        return ("array", tuple(_typed_any(item) for item in value.array_value.values))
    if which == "kvlist_value":
        return ("kvlist", _attributes(value.kvlist_value.values))
    if which is None:
        return ("empty", None)
    return (which.removesuffix("_value"), getattr(value, which))


def _attributes(key_values: Iterable[KeyValue]) -> dict[str, tuple[str, Any]]:
    result: dict[str, tuple[str, Any]] = {}
    for key_value in key_values:
        assert key_value.key not in result, f"duplicate attribute {key_value.key!r}"
        result[key_value.key] = _typed_any(key_value.value)
    return result


def sdk_view(spans: Iterable[ReadableSpan]) -> dict[bytes, dict[str, Any]]:
    view: dict[bytes, dict[str, Any]] = {}
    for span in spans:
        context = span.context
        assert context is not None
        span_id = context.span_id.to_bytes(8, "big")
        scope = span.instrumentation_scope
        assert scope is not None
        view[span_id] = {
            "trace_id": context.trace_id.to_bytes(16, "big"),
            "parent_span_id": span.parent.span_id.to_bytes(8, "big") if span.parent else b"",
            "name": span.name,
            "kind": Span.SpanKind.Value(f"SPAN_KIND_{span.kind.name}"),
            "start": span.start_time,
            "end": span.end_time,
            "attributes": {key: _typed(value) for key, value in (span.attributes or {}).items()},
            "events": [
                (
                    event.name,
                    event.timestamp,
                    {key: _typed(value) for key, value in (event.attributes or {}).items()},
                )
                for event in span.events
            ],
            "status": (
                Status.StatusCode.Value(f"STATUS_CODE_{span.status.status_code.name}"),
                span.status.description or "",
            ),
            "resource": {key: _typed(value) for key, value in span.resource.attributes.items()},
            "scope": (scope.name, scope.version or ""),
        }
    return view


ANNOTATION_PREFIXES = ("mcp.breaker.", "mcp.roster.")


def annotations_view(
    requests: Iterable[ExportTraceServiceRequest],
) -> dict[bytes, dict[str, tuple[str, Any]]]:
    """The attributes the hop added, per span id (spans without any left out)."""
    view: dict[bytes, dict[str, tuple[str, Any]]] = {}
    for request in requests:
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    added = {
                        key: value
                        for key, value in _attributes(span.attributes).items()
                        if key.startswith(ANNOTATION_PREFIXES)
                    }
                    if added:
                        view[span.span_id] = added
    return view


def received_view(requests: Iterable[ExportTraceServiceRequest]) -> dict[bytes, dict[str, Any]]:
    """What the next hop received, as sent (the hop's own annotations aside); a span
    delivered twice fails here."""
    view: dict[bytes, dict[str, Any]] = {}
    for request in requests:
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                scope = (scope_spans.scope.name, scope_spans.scope.version)
                for span in scope_spans.spans:
                    assert span.span_id not in view, f"span {span.span_id.hex()} delivered twice"
                    view[span.span_id] = {
                        "trace_id": span.trace_id,
                        "parent_span_id": span.parent_span_id,
                        "name": span.name,
                        "kind": span.kind,
                        "start": span.start_time_unix_nano,
                        "end": span.end_time_unix_nano,
                        "attributes": {
                            key: value
                            for key, value in _attributes(span.attributes).items()
                            if not key.startswith(ANNOTATION_PREFIXES)
                        },
                        "events": [
                            (event.name, event.time_unix_nano, _attributes(event.attributes))
                            for event in span.events
                        ],
                        "status": (span.status.code, span.status.message),
                        "resource": resource,
                        "scope": scope,
                    }
    return view


def span_names(requests: Iterable[ExportTraceServiceRequest]) -> list[str]:
    return sorted(
        span.name
        for request in requests
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    )
