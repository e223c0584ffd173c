"""OTLP records to the spans the analysis reads, each with the resource and scope it came in.

Every span of a record is counted, but only the spans the classifier would read further
(``classify.dialects.may_be_mcp``: the classifier's own first test, so the two cannot
drift apart) are decoded into protobuf and kept; the rest cost one name test. OTLP/JSON is
the protobuf JSON mapping with hex trace and span ids; field names are taken in
lowerCamelCase or as in the proto, integers as numbers or strings, as OTLP asks of
receivers (``otlp_json.py``). A record that is not a trace export raises
``InvalidRequest`` saying why.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.classify.dialects import may_be_mcp
from processor.errors import InvalidRequest
from processor.offline import otlp_json
from processor.offline.read import Encoding, Record


@dataclass(frozen=True, slots=True)
class Origin:
    """The resource and instrumentation scope a span was recorded under."""

    resource: Resource
    resource_schema_url: str
    scope: InstrumentationScope
    scope_schema_url: str


@dataclass(frozen=True, slots=True)
class Window:
    """Spans analysed: those that started in [since, until), span time in Unix ns."""

    since_ns: int | None = None
    until_ns: int | None = None

    def holds(self, start_ns: int) -> bool:
        return (self.since_ns is None or start_ns >= self.since_ns) and (
            self.until_ns is None or start_ns < self.until_ns
        )


Kept = tuple[int, Span, Origin]  # (end time in ns, the span, where it came from)


@dataclass(slots=True)
class Decoded:
    spans: int = 0  # every span in the record
    outside: int = 0  # spans the analysis would read, but outside the window
    latest_end_ns: int = -1  # the latest end time of any span in it; -1 when it has none
    kept: list[Kept] | None = None

    def keep(self, item: Kept) -> None:
        if self.kept is None:
            self.kept = []
        self.kept.append(item)


Gate = Callable[[str, str], bool]  # (span name, scope name)


def decode(record: Record, window: Window, gate: Gate = may_be_mcp) -> Decoded:
    if record.encoding is Encoding.JSON:
        return _from_json(record.data, window, gate)
    return _from_protobuf(record.data, window, gate)


# -- protobuf -------------------------------------------------------------------------------
def _from_protobuf(data: bytes, window: Window, gate: Gate) -> Decoded:
    try:
        request = ExportTraceServiceRequest.FromString(data)
    except DecodeError:
        raise InvalidRequest("not a protobuf ExportTraceServiceRequest") from None
    out = Decoded()
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            origin: Origin | None = None
            for span in scope_spans.spans:
                out.spans += 1
                end = span.end_time_unix_nano
                out.latest_end_ns = max(out.latest_end_ns, end)
                if not gate(span.name, scope_spans.scope.name):
                    continue
                if not window.holds(span.start_time_unix_nano):
                    out.outside += 1
                    continue
                if origin is None:
                    resource, scope = Resource(), InstrumentationScope()
                    resource.CopyFrom(resource_spans.resource)
                    scope.CopyFrom(scope_spans.scope)
                    origin = Origin(
                        resource, resource_spans.schema_url, scope, scope_spans.schema_url
                    )
                # A copy, so the span held for reordering does not keep the whole request.
                kept = Span()
                kept.CopyFrom(span)
                out.keep((end, kept, origin))
    return out


# -- OTLP/JSON ------------------------------------------------------------------------------
def _from_json(data: bytes, window: Window, gate: Gate) -> Decoded:
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise InvalidRequest(f"not valid JSON ({_first_line(error)})") from None
    if not isinstance(document, dict):
        raise InvalidRequest("not a JSON object")
    out = Decoded()
    for r, resource_spans in enumerate(_list(document, "resourceSpans", "resource_spans")):
        where = f"resourceSpans[{r}]"
        _object(resource_spans, where)
        for s, scope_spans in enumerate(_list(resource_spans, "scopeSpans", "scope_spans")):
            _object(scope_spans, f"{where}.scopeSpans[{s}]")
            origin: Origin | None = None
            scope = scope_spans.get("scope")
            scope_name = scope.get("name") if isinstance(scope, dict) else None
            scope_name = scope_name if isinstance(scope_name, str) else ""
            for n, span in enumerate(_list(scope_spans, "spans")):
                at = f"{where}.scopeSpans[{s}].spans[{n}]"
                _object(span, at)
                out.spans += 1
                end = _nanos(span, "endTimeUnixNano", "end_time_unix_nano", at)
                out.latest_end_ns = max(out.latest_end_ns, end)
                name = span.get("name", "")
                if not isinstance(name, str):
                    raise InvalidRequest(f"{at}.name: must be a string")
                if not gate(name, scope_name):
                    continue
                if not window.holds(_nanos(span, "startTimeUnixNano", "start_time_unix_nano", at)):
                    out.outside += 1
                    continue
                if origin is None:
                    origin = _origin(resource_spans, scope_spans, where)
                out.keep((end, otlp_json.span(span, at), origin))
    return out


def _origin(resource_spans: dict[str, Any], scope_spans: dict[str, Any], where: str) -> Origin:
    return Origin(
        otlp_json.resource(resource_spans.get("resource"), f"{where}.resource"),
        _text(resource_spans, "schemaUrl", "schema_url"),
        otlp_json.scope(scope_spans.get("scope"), f"{where}.scope"),
        _text(scope_spans, "schemaUrl", "schema_url"),
    )


def _list(document: dict[str, Any], *keys: str) -> list[Any]:
    for key in keys:
        if key in document:
            value = document[key]
            if value is None:
                return []
            if not isinstance(value, list):
                raise InvalidRequest(f"{key}: must be a list")
            return value
    return []


def _object(value: Any, at: str) -> None:
    if not isinstance(value, dict):
        raise InvalidRequest(f"{at}: must be an object")


def _nanos(document: dict[str, Any], key: str, alias: str, at: str) -> int:
    value = document.get(key, document.get(alias, 0))
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidRequest(f"{at}.{key}: must be an integer")
    try:
        nanos = int(value)
    except ValueError:
        raise InvalidRequest(f"{at}.{key}: must be an integer, got {str(value)[:40]!r}") from None
    if not 0 <= nanos < 2**64:
        raise InvalidRequest(f"{at}.{key}: out of range")
    return nanos


def _text(document: dict[str, Any], key: str, alias: str) -> str:
    value = document.get(key, document.get(alias, ""))
    return value if isinstance(value, str) else ""


def _first_line(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text[:200]
