"""An encoded request read only as far as its MCP spans: those decoded, the rest left as bytes.

A request that holds an MCP marker is mostly other spans (HTTP, database, LLM calls), and
decoding all of them into Python objects and encoding them again costs more than the
naive parse-annotate-forward hop does in all. So the request is read through a shallow
message (in C, with upb) whose spans are plain bytes; each span's bytes are searched for
the markers, and only a span that holds one is decoded. Of those,
the ones whose name may be an MCP span (``may_be_mcp``) are handed to the analysis; after
it, each one the analysis annotated goes back in its place as its own bytes with the
annotation's appended (``edits.py``), and the scopes that hold one are encoded again
around their other spans, which never left their bytes. A request in which no span
changed is forwarded as the very bytes that came.

Checked here: the framing down to the span boundary (every span), that every resource,
scope and span holding a marker decodes, and the trace and span ids of each span decoded
(OTLP: 16 and 8 bytes, not all zero); a decoded span with bad ids is removed and counted.
The other spans are checked as the pass-through path checks them: by their framing, the
rest left to the next hop (docs/delivery.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.classify.dialects import may_be_mcp
from processor.errors import InvalidRequest, UnreadableSpan
from processor.request.edits import SpanEdits
from processor.request.release import let_go

try:  # a wheel for every common platform; where there is none, the plain scan answers
    from stringzilla import Str as _Text
except ImportError:  # pragma: no cover
    _Text = None


TRACE_ID_BYTES = 16
SPAN_ID_BYTES = 8
_ZERO_TRACE_ID = bytes(TRACE_ID_BYTES)
_ZERO_SPAN_ID = bytes(SPAN_ID_BYTES)


def _build_shallow_messages() -> dict[str, type[Message]]:
    """Messages with the OTLP request's framing and nothing else, the rest as bytes (fields
    they do not name, such as ``schema_url``, are kept as they came and encoded again):

        Request         resource spans, each a ResourceSpans down to ScopeSpans, each
                        holding its resource, its scope and its spans as bytes (the
                        forwarder counts, splits and halves requests through it)
        OuterRequest    resource spans, each its resource and its scope spans as bytes
        ScopeSpans      a scope spans' scope and spans as bytes
    """
    package = "mcp_breaker.internal.shallow"
    proto = descriptor_pb2.FileDescriptorProto(
        name="mcp_breaker/internal/shallow_trace.proto", package=package, syntax="proto3"
    )
    repeated = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    as_bytes, as_message = 12, 11  # TYPE_BYTES, TYPE_MESSAGE

    def children(message: descriptor_pb2.DescriptorProto, child: str, number: int) -> None:
        message.field.add(
            name="children",
            number=number,
            label=repeated,
            type=as_message,
            type_name=f".{package}.{child}",
        )

    scope = proto.message_type.add(name="ScopeSpans")
    _add_present_bytes(scope, "scope")
    scope.field.add(name="spans", number=2, label=repeated, type=as_bytes)
    resource = proto.message_type.add(name="ResourceSpans")
    _add_present_bytes(resource, "resource")
    children(resource, "ScopeSpans", 2)
    children(proto.message_type.add(name="Request"), "ResourceSpans", 1)
    outer_resource = proto.message_type.add(name="OuterResourceSpans")
    _add_present_bytes(outer_resource, "resource")
    outer_resource.field.add(name="scope_spans", number=2, label=repeated, type=as_bytes)
    children(proto.message_type.add(name="OuterRequest"), "OuterResourceSpans", 1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))
        for name in ("Request", "OuterRequest", "ScopeSpans")
    }


def _add_present_bytes(message: descriptor_pb2.DescriptorProto, name: str) -> None:
    """Field 1 as bytes that remember being sent (proto3 ``optional``): an empty resource
    or scope that came goes out again, so the request forwarded is the request received."""
    message.oneof_decl.add(name=f"_{name}")
    message.field.add(
        name=name,
        number=1,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        type=12,  # TYPE_BYTES
        oneof_index=len(message.oneof_decl) - 1,
        proto3_optional=True,
    )


_SHALLOW = _build_shallow_messages()
ShallowRequest = _SHALLOW["Request"]
_OuterRequest = _SHALLOW["OuterRequest"]
_ShallowScope = _SHALLOW["ScopeSpans"]


def may_hold(payload: bytes, markers: Sequence[bytes]) -> bool:
    """Does any marker occur in these bytes? StringZilla's SIMD substring search answers in
    about 25 ns per span of a realistic request here, against about 500 ns for
    ``bytes.__contains__``; it reads the bytes in place, no copy."""
    if _Text is None:
        return any(marker in payload for marker in markers)
    find = _Text(payload).find
    for marker in markers:  # noqa: SIM110 (a generator costs more than the search)
        if find(marker) >= 0:
            return True
    return False


def valid_ids(trace_id: bytes, span_id: bytes) -> bool:
    return (
        len(trace_id) == TRACE_ID_BYTES
        and len(span_id) == SPAN_ID_BYTES
        and trace_id != _ZERO_TRACE_ID
        and span_id != _ZERO_SPAN_ID
    )


@dataclass(slots=True)
class SparseScope:
    scope: InstrumentationScope
    spans: list[Span]  # the decoded spans that may be MCP spans, in the order sent
    slots: list[int]  # where each sits among its scope's spans


@dataclass(slots=True)
class SparseResource:
    resource: Resource
    scope_spans: list[SparseScope] = field(default_factory=list)


@dataclass(slots=True)
class _Opened:
    """A scope spans whose spans were read one by one: where it goes back, and what
    changes in it (its decoded spans, and the ones rejected for their ids)."""

    outer: Any  # the OuterResourceSpans it sits in
    index: int  # its place there
    shallow: Any  # the ScopeSpans, spans as bytes
    read: SparseScope | None  # its possible MCP spans, if any
    rejected: list[int]  # places of spans with invalid ids, ascending


@dataclass(slots=True)
class SparseRequest:
    """Read as an ``ExportTraceServiceRequest`` is read (``resource_spans``, each one's
    ``resource`` and ``scope_spans``, each of those ``scope`` and ``spans``), but holding
    only the spans that may be MCP spans; ``encode`` gives the whole request back.

    Its decoded spans are changed through ``edits`` (``processor/request/edits.py``): a
    hook appends attributes there, and says there when it changed a span in place."""

    resource_spans: list[SparseResource]
    span_count: int  # spans in the request as it came
    rejected: int  # decoded spans with invalid ids: removed as the request is encoded
    outer: Any
    opened: list[_Opened]
    original: bytes
    edits: SpanEdits = field(default_factory=SpanEdits)

    def encode(self) -> bytes:
        """The request with each decoded span as the analysis left it: only the spans it
        edited, and the scopes that hold them, are encoded again."""
        edits = self.edits
        if not edits and not self.rejected:
            return self.original
        touched = False
        for opened in self.opened:
            encoded = opened.shallow.spans
            changed = bool(opened.rejected)
            if edits and opened.read is not None:
                for slot, span in zip(opened.read.slots, opened.read.spans, strict=True):
                    came = encoded[slot]
                    goes = edits.encode(span, came)
                    if goes is not came:
                        encoded[slot] = goes
                        changed = True
            for slot in reversed(opened.rejected):
                del encoded[slot]
            if changed:
                opened.outer.scope_spans[opened.index] = opened.shallow.SerializeToString()
                touched = True
        if not touched:
            return self.original
        return bytes(self.outer.SerializeToString())

    def let_go(self) -> None:
        """Once encoded: the decoded spans let go a slice at a time (``release``)."""
        for resource in self.resource_spans:
            for scope in resource.scope_spans:
                let_go(scope.spans)
        self.edits.clear()


RequestSpans = ExportTraceServiceRequest | SparseRequest
"""What the analysis reads: a request decoded whole (OTLP/JSON, the offline report), or
one read only as far as its possible MCP spans; both are walked as resource_spans ->
scope_spans -> spans."""


def read_sparse(payload: bytes, markers: Sequence[bytes]) -> SparseRequest:
    """The request's possible MCP spans, decoded; raises InvalidRequest when its framing is
    broken and UnreadableSpan when a span, scope or resource holding a marker does not
    decode.

    Spans are looked at one by one only in a scope spans that holds a marker: SDKs batch
    spans by instrumentation scope, so an MCP library's spans sit together, and the
    scopes of the other libraries are only counted, in C.
    """
    outer: Any = _parse(_OuterRequest, payload)
    resources: list[SparseResource] = []
    opened: list[_Opened] = []
    span_count = rejected = 0
    for outer_resource in outer.children:
        sparse: SparseResource | None = None
        # A resource or scope that holds a marker is decoded even when none of its spans
        # is read: the request is analysed only if what made it a candidate decodes, else
        # it is unreadable (forwarded as received, and labelled so), never "parsed".
        resource: Resource | None = _decode_marked(Resource, outer_resource.resource, markers)
        for index, raw_scope in enumerate(outer_resource.scope_spans):
            shallow: Any = _parse(_ShallowScope, raw_scope)
            encoded = shallow.spans
            span_count += len(encoded)
            if not may_hold(raw_scope, markers):
                continue
            spans: list[Span] = []
            slots: list[int] = []
            bad: list[int] = []
            # Decoded now if it holds a marker, else for the first span read.
            scope: InstrumentationScope | None = _decode_marked(
                InstrumentationScope, shallow.scope, markers
            )
            for slot, raw in enumerate(encoded):
                if not may_hold(raw, markers):
                    continue
                span = _decode(Span, raw)
                if scope is None:
                    scope = _decode(InstrumentationScope, shallow.scope)
                if not valid_ids(span.trace_id, span.span_id):
                    bad.append(slot)
                elif may_be_mcp(span.name, scope.name):
                    spans.append(span)
                    slots.append(slot)
            read = None
            if spans:
                assert scope is not None  # decoded with the first of them
                if sparse is None:
                    if resource is None:
                        resource = _decode(Resource, outer_resource.resource)
                    sparse = SparseResource(resource)
                    resources.append(sparse)
                read = SparseScope(scope, spans, slots)
                sparse.scope_spans.append(read)
            if read is not None or bad:
                opened.append(_Opened(outer_resource, index, shallow, read, bad))
                rejected += len(bad)
    return SparseRequest(resources, span_count, rejected, outer, opened, payload)


def _parse(kind: Any, raw: bytes) -> Any:
    try:
        return kind.FromString(raw)
    except DecodeError:
        raise InvalidRequest("request body is not a valid ExportTraceServiceRequest") from None


def _decode_marked(kind: Any, raw: bytes, markers: Sequence[bytes]) -> Any:
    """``raw`` decoded if it holds a marker (raises UnreadableSpan), else None."""
    return _decode(kind, raw) if raw and may_hold(raw, markers) else None


def _decode(kind: Any, raw: bytes) -> Any:
    try:
        return kind.FromString(raw)
    except DecodeError:
        raise UnreadableSpan from None
