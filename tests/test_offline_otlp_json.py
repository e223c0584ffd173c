"""OTLP/JSON to protobuf: the same spans as protobuf's own JSON parser gives, and bad input
named by where it is."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from processor.errors import InvalidRequest
from processor.offline import otlp_json
from tests.otlp_builders import to_otlp_json
from tests.otlp_file import encode
from tests.sdk import RESOURCE


def sdk_spans() -> list[Any]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests", "1.0", attributes={"scope.attr": 1})
    with (
        tracer.start_as_current_span("parent") as parent,
        tracer.start_as_current_span(
            "tools/call search",
            kind=SpanKind.CLIENT,
            links=[Link(parent.get_span_context(), {"link.attr": "x"})],
        ) as span,
    ):
        span.set_attributes(
            {
                "s": "text",
                "b": True,
                "i": -(2**40),
                "d": 2.5,
                "ss": ["a", "b"],
                "ii": [1, 2],
                "bb": [True, False],
            }
        )
        span.add_event("retry", {"attempt": 2})
        span.set_status(Status(StatusCode.ERROR, "upstream unavailable"))
    provider.shutdown()
    return list(memory.get_finished_spans())


def protobuf_parse(document: dict[str, Any]) -> Span:
    converted = copy.deepcopy(document)
    for node in [converted, *converted.get("links", [])]:
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in node:
                node[key] = base64.b64encode(bytes.fromhex(node[key])).decode()
    return json_format.ParseDict(converted, Span())


def test_the_same_spans_as_protobufs_own_parser() -> None:
    document = to_otlp_json(encode(sdk_spans()))
    for resource_spans in document["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                assert otlp_json.span(span, "s") == protobuf_parse(span)
            scope = otlp_json.scope(scope_spans["scope"], "s")
            assert scope.name == "tests" and scope.attributes[0].value.int_value == 1
        assert (
            otlp_json.resource(resource_spans["resource"], "r")
            == encode(sdk_spans()).resource_spans[0].resource
        )


def test_values_protobuf_would_also_take() -> None:
    span = otlp_json.span(
        {
            "trace_id": "0af7651916cd43dd8448eb211c80319c",
            "kind": "SPAN_KIND_SERVER",
            "startTimeUnixNano": 5,
            "attributes": [
                {"key": "n", "value": {"intValue": 7}},
                {"key": "x", "value": {"doubleValue": "NaN"}},
                {"key": "raw", "value": {"bytesValue": "AAE="}},
                {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "k", "value": {}}]}}},
            ],
            "status": {"code": 2},
        },
        "s",
    )
    assert span.kind == Span.SPAN_KIND_SERVER and span.start_time_unix_nano == 5
    assert span.attributes[0].value.int_value == 7
    assert span.attributes[2].value.bytes_value == b"\x00\x01"
    assert span.attributes[3].value.kvlist_value.values[0].key == "k"
    assert span.status.code == 2


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"spanId": "xyz"}, "s.spanId: must be hex, got 'xyz'"),
        ({"startTimeUnixNano": "soon"}, "s.startTimeUnixNano: must be an integer, got 'soon'"),
        ({"endTimeUnixNano": -1}, "s.endTimeUnixNano: out of range"),
        ({"kind": "SPAN_KIND_NOPE"}, "s.kind: unknown value 'SPAN_KIND_NOPE'"),
        ({"name": 3}, "s.name: must be a string"),
        ({"attributes": {}}, "s.attributes: must be a list"),
        (
            {"attributes": [{"key": "a", "value": {"boolValue": "yes"}}]},
            "s.attributes[0].value.boolValue: must be true or false",
        ),
        ({"events": [{"timeUnixNano": True}]}, "s.events[0].timeUnixNano: must be an integer"),
        ({"status": "bad"}, "s.status: must be an object"),
    ],
)
def test_bad_fields_are_named(document: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        otlp_json.span(document, "s")
    assert str(caught.value) == message


def test_nesting_is_bounded() -> None:
    value: dict[str, Any] = {"stringValue": "deep"}
    for _ in range(otlp_json.MAX_DEPTH + 2):
        value = {"arrayValue": {"values": [value]}}
    with pytest.raises(InvalidRequest, match="nested deeper"):
        otlp_json.span({"attributes": [{"key": "a", "value": value}]}, "s")
