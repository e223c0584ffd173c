"""Shared by the classification tests: OTLP spans built by hand, and a Classifier run on them.

``make_span`` takes plain Python attribute values (str, int, float, bool, bytes, lists,
dicts) and writes them as the matching ``AnyValue``; ``classify_all`` runs requests through
one Classifier at a fixed fake time and then expires everything still held, so a test sees
every event the spans lead to.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_breaker_client.shared.verdict import FailureClass, NeutralReason, Outcome
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from processor.classify.classifier import Classifier
from processor.classify.events import Dialect, Event, ToolCall, ToolListing
from processor.config import ClassifyConfig

CLIENT = Span.SPAN_KIND_CLIENT
SERVER = Span.SPAN_KIND_SERVER
INTERNAL = Span.SPAN_KIND_INTERNAL

UNSET = Status.STATUS_CODE_UNSET
OK_STATUS = Status.STATUS_CODE_OK
ERROR = Status.STATUS_CODE_ERROR

START_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z: a fixed span time, not the clock
LATER = 1e9  # a fake time far past any pairing wait


def trace_id(n: int = 1) -> bytes:
    """A valid 16-byte trace id, distinct per n."""
    return (0x7E57_0000_0000 + n).to_bytes(16, "big")


def span_id(n: int = 1) -> bytes:
    """A valid 8-byte span id, distinct per n."""
    return (0x5A4E_0000 + n).to_bytes(8, "big")


def any_value(value: Any) -> AnyValue:
    """The AnyValue of a plain Python value; None is an AnyValue with nothing set."""
    if isinstance(value, AnyValue):
        return value
    if value is None:
        return AnyValue()
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, Mapping):
        result = AnyValue()
        result.kvlist_value.values.extend(key_values(value))
        return result
    if isinstance(value, Sequence):
        result = AnyValue()
        result.array_value.values.extend(any_value(v) for v in value)
        return result
    raise TypeError(f"no AnyValue for {type(value).__name__}")


def key_values(attributes: Mapping[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=key, value=any_value(value)) for key, value in attributes.items()]


def make_span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    kind: int = INTERNAL,
    status: int = UNSET,
    message: str = "",
    exceptions: Iterable[tuple[str, str]] = (),
    trace: int = 1,
    span: int = 1,
    parent: int | None = None,
) -> Span:
    """One span; ``exceptions`` are (exception.type, exception.message) event pairs."""
    built = Span(
        name=name,
        trace_id=trace_id(trace),
        span_id=span_id(span),
        parent_span_id=b"" if parent is None else span_id(parent),
        kind=kind,
        start_time_unix_nano=START_NS + span * 1_000,
        end_time_unix_nano=START_NS + span * 1_000 + 500_000,
    )
    built.status.code = status
    built.status.message = message
    built.attributes.extend(key_values(attributes or {}))
    for index, (kind_, text) in enumerate(exceptions):
        event = built.events.add(name="exception", time_unix_nano=START_NS + index)
        event.attributes.extend(key_values({"exception.type": kind_, "exception.message": text}))
    return built


def make_request(*spans: Span, service: str = "classify-tests") -> ExportTraceServiceRequest:
    """One resource, one scope, the given spans."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.extend(key_values({"service.name": service}))
    resource_spans.scope_spans.add().spans.extend(spans)
    return request


def classify_all(
    *batches: Span | ExportTraceServiceRequest | Sequence[Span],
    config: ClassifyConfig | None = None,
) -> list[Event]:
    """Every event the batches lead to: each classified at time 0, then all expired."""
    classifier = Classifier(config)
    events: list[Event] = []
    for batch in batches:
        events += classifier.classify(as_request(batch), now=0.0)
    return events + classifier.expire(now=LATER)


def as_request(
    batch: Span | ExportTraceServiceRequest | Sequence[Span],
) -> ExportTraceServiceRequest:
    if isinstance(batch, ExportTraceServiceRequest):
        return batch
    if isinstance(batch, Span):
        return make_request(batch)
    return make_request(*batch)


def calls_in(events: Iterable[Event]) -> list[ToolCall]:
    return [e for e in events if isinstance(e, ToolCall)]


def listings_in(events: Iterable[Event]) -> list[ToolListing]:
    return [e for e in events if isinstance(e, ToolListing)]


def only_call(events: Sequence[Event]) -> ToolCall:
    """The one event, which must be a tool call."""
    assert len(events) == 1, f"expected one event, got {events}"
    (call,) = events
    assert isinstance(call, ToolCall), f"expected a tool call, got {call}"
    return call


def only_listing(events: Sequence[Event]) -> ToolListing:
    """The one event, which must be a tool listing."""
    assert len(events) == 1, f"expected one event, got {events}"
    (listing,) = events
    assert isinstance(listing, ToolListing), f"expected a tool listing, got {listing}"
    return listing


def as_json(value: Any) -> str:
    return json.dumps(value)


@dataclass(frozen=True, kw_only=True)
class CallFacts:
    """The facts of a ToolCall a table row states, compared with == for a readable diff."""

    tool: str
    server: str | None
    outcome: Outcome
    failure_class: FailureClass | None = None
    neutral_reason: NeutralReason | None = None
    dialect: Dialect
    fingerprinted: bool = False

    @classmethod
    def of(cls, call: ToolCall) -> CallFacts:
        return cls(
            tool=call.tool,
            server=call.server,
            outcome=call.outcome,
            failure_class=call.failure_class,
            neutral_reason=call.verdict.neutral_reason,
            dialect=call.dialect,
            fingerprinted=call.fingerprint is not None,
        )
