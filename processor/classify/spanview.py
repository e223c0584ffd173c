"""A plain-Python view of one protobuf span: read once, only for spans that look like MCP.

Reading every attribute of a span costs about a microsecond per attribute in Python, so
nothing here is called for the other spans of a request. Values are bounded: a string
attribute is cut at MAX_STRING_CHARS, and JSON decoded only below ``result.MAX_JSON_CHARS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

MAX_STRING_CHARS = 64 * 1024  # longer values (huge tool outputs) are cut, not decoded
MAX_ARRAY_ITEMS = 1024
# Attributes read of one span, event, resource or key-value list, in the order sent: the
# work a sender can cause per span is bounded, marker or not. SDKs keep 128 by default
# (the OpenTelemetry attribute count limit); the ones past this are forwarded, not read.
MAX_ATTRIBUTES = 1024
MAX_EVENTS = 1024  # events of one span looked at for exceptions, likewise
EXCEPTION_EVENT = "exception"
_TEXTUAL = frozenset({str, int, float, bool})  # the values SpanView.texts holds, written out

AttributeValue = str | int | float | bool | bytes | list[Any] | dict[str, Any] | None
# The protobuf enum values, as module constants: read per MCP span.
SPAN_KIND_CLIENT: int = Span.SPAN_KIND_CLIENT
SPAN_KIND_SERVER: int = Span.SPAN_KIND_SERVER
STATUS_CODE_ERROR: int = Status.STATUS_CODE_ERROR
STATUS_CODE_OK: int = Status.STATUS_CODE_OK


# Not frozen: these are built for every MCP span, and a frozen dataclass costs about three
# times as much to build. Nothing keeps a reference to one past classification. Not
# keyword-only either, for view() to build it positionally (see there).
@dataclass(slots=True)
class SpanView:
    name: str
    kind: int
    status_code: int
    status_message: str
    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes
    start_ns: int
    end_ns: int
    attributes: Mapping[str, AttributeValue]
    # The same attributes as text, as a name or an id is read: a string as it is, a number
    # or a boolean written out, any other value (bytes, an array, a map) absent. Readers
    # look up several keys of every MCP span, most of them absent: a dict's lookup, where a
    # method of the view called per key cost several times as much.
    texts: Mapping[str, str]
    exceptions: tuple[tuple[str, str], ...]
    resource: Mapping[str, AttributeValue]
    scope: str = ""  # the instrumentation scope's name: which library wrote the span
    # How many attributes the span has, read or not: counted here, where its attributes
    # are at hand (the classifier's ``read`` wants it; each access to them costs).
    attribute_count: int = 0
    # The span's events as they came (protobuf), for the readers of frameworks that keep a
    # call's arguments and result in events (Strands); read only by those, on demand.
    events: Any = ()
    # The OTLP span flags: bits 8 and 9 say whether the parent is known to be remote (its
    # context came over the wire from another process), which the pairing reads.
    flags: int = 0

    @property
    def is_error(self) -> bool:
        return self.status_code == STATUS_CODE_ERROR

    @property
    def is_ok(self) -> bool:
        return self.status_code == STATUS_CODE_OK

    @property
    def is_client(self) -> bool:
        return self.kind == SPAN_KIND_CLIENT

    @property
    def is_server(self) -> bool:
        return self.kind == SPAN_KIND_SERVER


@dataclass(frozen=True, slots=True)
class Wanted:
    """The attribute keys worth decoding: the rest are skipped after reading their key."""

    keys: frozenset[str]
    prefixes: tuple[str, ...]

    def __contains__(self, key: str) -> bool:
        return key in self.keys or key.startswith(self.prefixes)


def view(
    span: Span,
    resource: Mapping[str, AttributeValue],
    scope: str = "",
    wanted: Wanted | None = None,
) -> SpanView:
    events = span.events
    status = span.status
    attributes = span.attributes
    found, texts = read_attributes_and_texts(attributes, wanted)
    # In field order, positionally: keyword arguments to a class cost three times as much
    # here (a dict is made of them on every call), and this runs for every MCP span.
    return SpanView(
        span.name,
        span.kind,
        status.code,
        status.message[:MAX_STRING_CHARS],
        span.trace_id,
        span.span_id,
        span.parent_span_id,
        span.start_time_unix_nano,
        span.end_time_unix_nano,
        found,
        texts,
        _exceptions(events) if events else (),
        resource,
        scope,
        len(attributes),
        events,
        span.flags,
    )


def event_attribute(events: Any, event_name: str, key: str) -> AttributeValue:
    """``key`` of the first event named ``event_name`` that has it, or None."""
    for event in events[:MAX_EVENTS]:
        if event.name == event_name:
            value = read_attributes(event.attributes).get(key)
            if value is not None:
                return value
    return None


def _exceptions(events: Any) -> tuple[tuple[str, str], ...]:
    return tuple(
        (str(attrs.get("exception.type", "")), str(attrs.get("exception.message", "")))
        for event in events[:MAX_EVENTS]
        if event.name == EXCEPTION_EVENT
        for attrs in (read_attributes(event.attributes),)
    )


def read_attributes(attributes: Any, wanted: Wanted | None = None) -> dict[str, AttributeValue]:
    if wanted is None:
        return {kv.key: _value(kv.value, 0) for kv in attributes[:MAX_ATTRIBUTES]}
    return read_attributes_and_texts(attributes, wanted)[0]


def read_attributes_and_texts(
    attributes: Any, wanted: Wanted | None
) -> tuple[dict[str, AttributeValue], dict[str, str]]:
    """The wanted attributes (every one, with ``wanted`` None), and the same as text
    (``SpanView.texts``)."""
    if wanted is None:
        every = read_attributes(attributes)
        return every, {k: str(v) for k, v in every.items() if v.__class__ in _TEXTUAL}
    # Sliced whatever the count: a protobuf repeated field has no iterator of its own, so a
    # loop over it indexes it until IndexError (an exception per loop), where its slice is
    # a list made in C. Looping over the slice costs about a quarter less for an MCP span.
    first = attributes[:MAX_ATTRIBUTES]
    # Decoding a value costs several times reading its key: only wanted values are decoded.
    # This loop runs for every attribute of every MCP span, where each Python call counts:
    # Wanted's test is spelled out, and a string, the usual value, is read in place (a
    # non-empty string_value can only be the oneof's string; anything else asks _value).
    keys, prefixes = wanted.keys, wanted.prefixes
    found: dict[str, AttributeValue] = {}
    texts: dict[str, str] = {}
    for kv in first:
        key = kv.key
        if key in keys or key.startswith(prefixes):
            value = kv.value
            text = value.string_value
            if text:
                if len(text) > MAX_STRING_CHARS:
                    text = text[:MAX_STRING_CHARS]
                found[key] = texts[key] = text
            else:
                decoded = found[key] = _value(value, 0)
                if decoded.__class__ in _TEXTUAL:
                    texts[key] = str(decoded)
    return found, texts


def _value(value: AnyValue, depth: int) -> AttributeValue:
    which = value.WhichOneof("value")
    if which == "string_value":
        return str(value.string_value[:MAX_STRING_CHARS])
    if which == "int_value":
        return int(value.int_value)
    if which == "bool_value":
        return bool(value.bool_value)
    if which == "double_value":
        return float(value.double_value)
    if depth >= 8:  # nested OTLP values deeper than this carry nothing we read
        return None
    if which == "array_value":
        return [_value(v, depth + 1) for v in value.array_value.values[:MAX_ARRAY_ITEMS]]
    if which == "kvlist_value":
        pairs = value.kvlist_value.values[:MAX_ATTRIBUTES]
        return {kv.key: _value(kv.value, depth + 1) for kv in pairs}
    if which == "bytes_value":
        return bytes(value.bytes_value[:MAX_STRING_CHARS])
    return None
