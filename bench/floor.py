"""A floor for the in-flight stage: the least a pure-Python hop can do with the MCP spans of
the benchmark's payloads, to measure the stage against (bench/instructions.py).

It handles every MCP span of the ``mixed`` and ``harness`` payloads (bench/payload.py: the
mcp SDK's client and server halves of calls and listings, ``execute_tool`` spans, the client
library's ``mcp.tool.call`` and ``mcp.tools.list``) and nothing more general. What makes
it cheap is the shape of the data, not tricks:

- the request is decoded shallowly (upb, in C) through messages of our own whose scope
  spans, and whose spans, stay bytes; a scope whose bytes hold no marker is not decoded at
  all, and in one that does, only a span whose own bytes hold a marker is;
- a decoded span is read through a lean view (name, kind, status, attributes as key and
  string), and of its attributes only the few that say what the call was;
- what a span's name, kind and scope say (call or listing, the tool the name carries) is
  worked out once per distinct name; the tallies are dicts keyed by plain tuples;
- the annotation is appended to the span's bytes, already encoded: appending entries of a
  repeated field to a message's encoding is a valid protobuf merge, so the span need not
  be encoded again; only the scopes that hold an annotated span are encoded again.

No pairing, no turns, no state machines: this is the cost of reading and marking, the part
of the stage's work that no design can avoid. ``floor_product.py`` adds the least of the
product's work per call to it.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from payload_roles import may_be_mcp
from stringzilla import Str

# The byte strings every MCP span of these payloads holds (its name: "tools/…", "MCP send
# tools/…", "mcp.tool…", "execute_tool …"), as the stage's prefilter looks for them.
MARKERS = (b"mcp", b"tool")
ANNOTATION_KEY = "mcp.breaker.floor"  # what the floor writes on each MCP span it read
SPAN_KIND_CLIENT, SPAN_KIND_SERVER = 3, 2
STATUS_CODE_OK, STATUS_CODE_ERROR = 1, 2
# What a span is, from its name, kind and scope alone: (role, tool named by the name, side).
Shape = tuple[str, str, str]


def _shallow_messages() -> dict[str, Any]:
    """Our own descriptors over OTLP's field numbers: framing with the payload as bytes,
    and a lean span view. Fields they do not name are kept as they came (upb keeps unknown
    fields and encodes them again), so nothing is lost on the way through."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="bench/floor_shallow.proto", package="bench.floor", syntax="proto3"
    )
    label_repeated = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    kinds = {
        "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
        "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    }

    def message(name: str, *fields: tuple[str, int, str, bool]) -> None:
        described = proto.message_type.add(name=name)
        for field_name, number, kind, repeated in fields:
            field = described.field.add(name=field_name, number=number)
            if kind in kinds:
                field.type = kinds[kind]
            else:
                field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
                field.type_name = f".bench.floor.{kind}"
            if repeated:
                field.label = label_repeated

    message("Request", ("resource_spans", 1, "ResourceSpans", True))
    message("ResourceSpans", ("resource", 1, "bytes", False), ("scope_spans", 2, "bytes", True))
    message("ScopeSpans", ("scope", 1, "Scope", False), ("spans", 2, "bytes", True))
    message("Scope", ("name", 1, "string", False))
    message("Resource", ("attributes", 1, "Attribute", True))
    message(
        "SpanView",
        ("name", 5, "string", False),
        ("kind", 6, "int32", False),
        ("attributes", 9, "SpanView.AttributesEntry", True),
        ("status", 15, "Status", False),
    )
    # A KeyValue on the wire is a map entry (key 1, value 2): read as a map, the span's
    # attributes are looked up by key in C, and only the wanted ones become Python objects.
    entry = proto.message_type[-1].nested_type.add(name="AttributesEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=kinds["string"])
    entry.field.add(
        name="value",
        number=2,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
        type_name=".bench.floor.Value",
    )
    message("Attribute", ("key", 1, "string", False), ("value", 2, "Value", False))
    message("Value", ("string_value", 1, "string", False))
    message("Status", ("code", 3, "int32", False))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    file = pool.FindFileByName(proto.name)
    return {
        name: message_factory.GetMessageClass(file.message_types_by_name[name])
        for name in ("Request", "ScopeSpans", "Resource", "SpanView")
    }


_MESSAGES = _shallow_messages()
ShallowRequest = _MESSAGES["Request"]
ShallowScopeSpans = _MESSAGES["ScopeSpans"]
ResourceView = _MESSAGES["Resource"]
SpanView = _MESSAGES["SpanView"]


def may_hold_mcp(data: bytes) -> bool:
    """A SIMD search (StringZilla, a dependency of the service): ``bytes.__contains__``
    scans these requests at well under 1 GB/s, as slow as decoding them."""
    text = Str(data)  # a view of the bytes, not a copy
    return bool(text.contains(MARKERS[0]) or text.contains(MARKERS[1]))


def encoded_annotation(value: str) -> bytes:
    """Span field 9 (attributes) holding one KeyValue, as it is appended to a span's bytes."""
    attribute = KeyValue(key=ANNOTATION_KEY, value=AnyValue(string_value=value))
    return Span(attributes=[attribute]).SerializeToString()


def _shape(name: str, kind: int, scope: str) -> Shape:
    side = "client" if kind == SPAN_KIND_CLIENT or name.startswith("MCP send ") else "server"
    if name == "mcp.tool.call":
        return "call", "", "unspecified"
    if name == "mcp.tools.list" or name.endswith("tools/list"):
        return "listing", "", side
    if name.startswith("execute_tool "):
        return "call", name.removeprefix("execute_tool "), "unspecified"
    _, _, tool = name.partition("tools/call ")
    return ("call" if tool else "other"), tool, side


class Floor:
    """Reads and marks the MCP spans of one request at a time; keeps tallies across them.

    ``calls`` counts by (service, server, tool, outcome), ``listings`` by (service, server,
    side); ``mcp_spans`` is every span read as MCP (to check against the stage's count)."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, str, str, str], int] = {}
        self.listings: dict[tuple[str, str, str], int] = {}
        self.mcp_spans = 0
        self._shapes: dict[tuple[str, int, str], Shape] = {}
        self._annotations = {
            value: encoded_annotation(value) for value in ("ok", "failed", "unknown", "listing")
        }

    def __call__(self, payload: bytes) -> bytes:
        """The request to forward: the same bytes when it holds no MCP span."""
        if not may_hold_mcp(payload):
            return payload
        request = ShallowRequest.FromString(payload)
        touched = False
        for resource in request.resource_spans:
            service: str | None = None  # read only once one of its scopes holds MCP spans
            scopes = resource.scope_spans
            for index, scope_bytes in enumerate(scopes):
                if not may_hold_mcp(scope_bytes):
                    continue
                if service is None:
                    service = _service_name(resource.resource)
                scope = ShallowScopeSpans.FromString(scope_bytes)
                if self._mark_scope(scope, service):
                    scopes[index] = scope.SerializeToString()
                    touched = True
        return request.SerializeToString() if touched else payload

    def _mark_scope(self, scope: Message, service: str) -> bool:
        scope_name = scope.scope.name  # type: ignore[attr-defined]
        spans = scope.spans  # type: ignore[attr-defined]
        marked = False
        for index, span_bytes in enumerate(spans):
            if not may_hold_mcp(span_bytes):
                continue
            span = SpanView.FromString(span_bytes)
            name = span.name
            if not may_be_mcp(name, scope_name):
                continue
            annotation = self._read(span, name, scope_name, service)
            if annotation is not None:
                spans[index] = span_bytes + annotation
                marked = True
        return marked

    def _read(self, span: Any, name: str, scope_name: str, service: str) -> bytes | None:
        """Tally one MCP span; the encoded annotation to append to it."""
        key = (name, span.kind, scope_name)
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._shapes[key] = _shape(*key)
        role, named_tool, side = shape
        if role == "other":
            return None
        self.mcp_spans += 1
        # Of its attributes, only those that say what the call or listing was: the tool
        # (the mcp SDK's server half, execute_tool, the client library's convention), the
        # server, and the outcome.
        attributes = span.attributes
        server = _text(attributes, "mcp.server.name")
        if role == "listing":
            listing = (service, server, side)
            self.listings[listing] = self.listings.get(listing, 0) + 1
            return self._annotations["listing"]
        tool = (
            _text(attributes, "gen_ai.tool.name")
            or _text(attributes, "mcp.tool.name")
            or named_tool
        )
        code = span.status.code
        said = _text(attributes, "mcp.tool.outcome")
        if code == STATUS_CODE_ERROR or "error.type" in attributes:
            outcome = "failed"
        elif said in ("ok", "failed"):
            outcome = said
        elif code == STATUS_CODE_OK or side == "server":
            outcome = "ok"
        else:
            outcome = "unknown"  # the SDK's client half: only its server half tells
        call = (service, server, tool, outcome)
        self.calls[call] = self.calls.get(call, 0) + 1
        return self._annotations[outcome]


def _text(attributes: Any, key: str) -> str:
    value = attributes.get(key)
    return "" if value is None else str(value.string_value)


def _service_name(resource_bytes: bytes) -> str:
    for attribute in ResourceView.FromString(resource_bytes).attributes:
        if attribute.key == "service.name":
            return str(attribute.value.string_value)
    return ""


def check_output(received: bytes, forwarded: bytes) -> list[str]:
    """What is wrong with the floor's output for one request: it must decode as OTLP, hold
    the annotation on every MCP span and on no other, and be the request received once the
    annotations are taken off again."""
    sent = ExportTraceServiceRequest.FromString(received)
    out = ExportTraceServiceRequest.FromString(forwarded)
    problems = []
    annotated = unmarked = 0
    for resource in out.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                marks = [a for a in span.attributes if a.key == ANNOTATION_KEY]
                if may_be_mcp(span.name, scope.scope.name):
                    annotated += len(marks) == 1
                    unmarked += len(marks) != 1
                elif marks:
                    problems.append(f"a span that is not MCP annotated: {span.name!r}")
                kept = [a for a in span.attributes if a.key != ANNOTATION_KEY]
                del span.attributes[:]
                span.attributes.extend(kept)
    if unmarked:
        problems.append(f"{unmarked} MCP spans without exactly one annotation")
    if not annotated:
        problems.append("no MCP span annotated")
    if out != sent:
        problems.append("the output, annotations taken off, differs from the request")
    return problems
