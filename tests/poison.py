"""Requests from named senders, and the bad ones a strict next hop refuses.

A strict next hop (rotel, or ``CaptureCollector(strict=True)``) refuses a whole export when
one span in it does not decode: a string with invalid UTF-8, or attribute values nested
deeper than its decoder's limit (100 messages for upb and prost; each level of a nested
``kvlist_value`` is three). Both are built here as bytes, since the protobuf runtime would
refuse to build them as messages.
"""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

TRACE_ID = bytes(range(1, 17))
PLACEHOLDER = "XXXX"  # replaced in the encoding, byte for byte


def span_id(index: int) -> bytes:
    return (index + 1).to_bytes(8, "big")


def sender_request(service: str, first: int, count: int, *, name: str = "step") -> bytes:
    """``count`` valid spans (ids ``first`` on) from a resource named ``service``."""
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    resource.resource.attributes.add(key="service.name", value=AnyValue(string_value=service))
    scope = resource.scope_spans.add()
    scope.scope.name = "tests.poison"
    for index in range(first, first + count):
        span = scope.spans.add(name=f"{name} {index}", trace_id=TRACE_ID, span_id=span_id(index))
        span.start_time_unix_nano = 1_700_000_000_000_000_000 + index
        span.end_time_unix_nano = span.start_time_unix_nano + 1000
        span.attributes.add(key="index", value=AnyValue(int_value=index))
    return bytes(request.SerializeToString())


def invalid_utf8_request(service: str, index: int, *, valid_around: int = 0) -> bytes:
    """One span whose name is not UTF-8 (``valid_around`` valid spans before and after it)."""
    request = ExportTraceServiceRequest.FromString(
        sender_request(service, index - valid_around, 2 * valid_around + 1)
    )
    scope = request.resource_spans[0].scope_spans[0]
    bad = scope.spans[valid_around]
    bad.name = PLACEHOLDER
    del bad.attributes[:]
    encoded = bytes(request.SerializeToString())
    assert encoded.count(PLACEHOLDER.encode()) == 1
    return encoded.replace(PLACEHOLDER.encode(), b"\xff\xfe\xfd\xfc")


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field: ``tag`` is (number << 3) | 2."""
    return bytes([tag]) + _varint(len(payload)) + payload


def too_deep_request(service: str, index: int, depth: int = 40) -> bytes:
    """One span with an attribute value nested ``depth`` kvlists deep (3 messages each)."""
    value = _field(0x0A, b"leaf")  # AnyValue.string_value
    for _ in range(depth):
        key_value = _field(0x0A, b"k") + _field(0x12, value)  # KeyValue {key, value}
        value = _field(0x32, _field(0x0A, key_value))  # AnyValue.kvlist_value {values}
    attribute = _field(0x0A, b"nested") + _field(0x12, value)
    span = (
        _field(0x0A, TRACE_ID)  # trace_id
        + _field(0x12, span_id(index))  # span_id
        + _field(0x2A, b"deep")  # name
        + _field(0x4A, attribute)  # attributes
    )
    resource = _field(
        0x0A,  # Resource.attributes
        _field(0x0A, b"service.name") + _field(0x12, _field(0x0A, service.encode())),
    )
    resource_spans = _field(0x0A, resource) + _field(0x12, _field(0x12, span))
    return _field(0x0A, resource_spans)
