"""The floor with the product's least work: what a one-shape stage could cost at best.

``bench/floor.py`` reads and marks the MCP spans of the benchmark's payloads and does
nothing else (no pairing, no turns, no state machines), so the stage can never come near
it. This adds, in the floor's own style (tuples and dicts, one lean read of each span,
annotations appended as encoded bytes), the least of what the stage must do with each call
before it can annotate it, for these payloads' shapes only:

- recognise a span exported twice (a bounded memory of span ids);
- join the layers of one call told in one request: a call span whose parent is a call
  span of the same tool (``execute_tool`` over the SDK's client span over its server
  span) is a layer of its parent's call, so the SDK's server half nested in its client
  half pairs with it here;
- hold a client half that cannot tell the outcome alone (the SDK's) for its server half
  in a later request, keyed by trace and JSON-RPC request id;
- the call's verdict (status, ``error.type``, the harness's own outcome), server, turn
  (``mcp.turn.id``, else the trace), and the fingerprint of what its arguments record;
- a turn's block (a failed call's tool and fingerprint) and a circuit per server and
  tool (calls, consecutive failures, closed or open);
- the decision's annotation (a few values, encoded once per shape) on every span of the
  call, and a counter per server, tool, outcome and dead call.

It leaves out what the stage does beyond that: other dialects, hidden failures in result
text, exception events, the reorder window, probes and time, the roster, tenants, name
limits, the advisories. So it is a lower bound for a redesign, not a design: it says how
much of the stage's cost is the work itself and how much the shape of its data.

    .venv/bin/python bench/instructions.py   (the row "floor+product")
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from floor import (
    STATUS_CODE_ERROR,
    STATUS_CODE_OK,
    ShallowRequest,
    ShallowScopeSpans,
    _service_name,
    _shape,
    _text,
    may_hold_mcp,
)
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from payload_roles import may_be_mcp

MAX_KEPT = 100_000  # entries of each memory (seen spans, held halves, decided pairs)
CONSECUTIVE_FAILURES = 3  # a circuit opens at this many failures in a row
# A call as read, before it is decided: [span id, parent id, side, tool, server, outcome,
# request id, turn, arguments, trace id, where its bytes sit (scope, slot, bytes)].
SPAN_ID, PARENT, SIDE, TOOL, SERVER, OUTCOME, REQUEST_ID, TURN, ARGUMENTS, TRACE, PLACE = range(11)
# Which outcome says more, when a call's layers disagree.
_WEIGHT = {"unknown": 0, "ok": 1, "failed": 2}


def _lean_span_view() -> Any:
    """The floor's lean span, with the ids the pairing and the memories need."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="bench/floor_product.proto", package="bench.floor_product", syntax="proto3"
    )
    kind = descriptor_pb2.FieldDescriptorProto
    span = proto.message_type.add(name="SpanView")
    for name, number, type_ in (
        ("trace_id", 1, kind.TYPE_BYTES),
        ("span_id", 2, kind.TYPE_BYTES),
        ("parent_span_id", 4, kind.TYPE_BYTES),
        ("name", 5, kind.TYPE_STRING),
        ("kind", 6, kind.TYPE_INT32),
    ):
        span.field.add(name=name, number=number, type=type_)
    span.field.add(
        name="attributes",
        number=9,
        type=kind.TYPE_MESSAGE,
        label=kind.LABEL_REPEATED,
        type_name=".bench.floor_product.SpanView.AttributesEntry",
    )
    entry = span.nested_type.add(name="AttributesEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=kind.TYPE_STRING)
    entry.field.add(
        name="value", number=2, type=kind.TYPE_MESSAGE, type_name=".bench.floor_product.Value"
    )
    span.field.add(
        name="status", number=15, type=kind.TYPE_MESSAGE, type_name=".bench.floor_product.Status"
    )
    proto.message_type.add(name="Value").field.add(
        name="string_value", number=1, type=kind.TYPE_STRING
    )
    proto.message_type.add(name="Status").field.add(name="code", number=3, type=kind.TYPE_INT32)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    described = pool.FindMessageTypeByName("bench.floor_product.SpanView")
    return message_factory.GetMessageClass(described)


SpanView = _lean_span_view()


def encoded(values: dict[str, str]) -> bytes:
    """Span field 9 holding these attributes, as it is appended to a span's bytes."""
    attributes = [
        KeyValue(key=f"mcp.breaker.{key}", value=AnyValue(string_value=value))
        for key, value in values.items()
    ]
    return Span(attributes=attributes).SerializeToString()


def _remember(memory: dict[Any, float], key: Any, now: float) -> None:
    memory[key] = now
    if len(memory) > MAX_KEPT:
        del memory[next(iter(memory))]  # the oldest: dicts keep insertion order


class ProductFloor:
    """One request at a time; the memories, circuits and tallies across requests.

    It walks the request and reads each span as ``Floor`` does, with those lines repeated
    here rather than factored out of it: a function call more per span in the floor moved
    its own figure by 2% (46.9 k -> 48.0 k instructions per MCP span), and the floor is the
    yardstick. What differs is that every call span of a request is read before any is
    decided (the layers of one call join across scopes)."""

    def __init__(self) -> None:
        self.now = 0.0  # the arrival clock: a millisecond a request
        self.mcp_spans = self.call_spans = self.decided_spans = self.duplicates = 0
        self.seen: dict[bytes, float] = {}
        self.held: dict[tuple[bytes, str], list[Any]] = {}  # a half waiting for its other
        self.paired: dict[tuple[bytes, str], float] = {}  # halves whose call was decided
        self.circuits: dict[tuple[str, str], list[int]] = {}  # [open, calls, in a row]
        self.blocks: dict[tuple[str, str, str], float] = {}  # (turn, tool, fingerprint)
        self.decided: dict[tuple[str, str, str, bool], int] = {}
        self.listings: dict[tuple[str, str, str], int] = {}
        self._shapes: dict[tuple[str, int, str], tuple[str, str, str]] = {}
        self._decisions: dict[tuple[str, int, bool, str], bytes] = {}
        self._listing = encoded({"listing": "read"})

    @property
    def held_spans(self) -> int:
        return sum(len(group) for group in self.held.values())

    def __call__(self, payload: bytes) -> bytes:
        """The request to forward: the same bytes when it holds no MCP span."""
        self.now += 0.001
        if not may_hold_mcp(payload):
            return payload
        request = ShallowRequest.FromString(payload)
        touched: list[tuple[Any, int, Any]] = []  # (its scope spans, place, scope)
        calls: list[list[Any]] = []
        for resource in request.resource_spans:
            service: str | None = None
            scopes = resource.scope_spans
            for index, scope_bytes in enumerate(scopes):
                if not may_hold_mcp(scope_bytes):
                    continue
                if service is None:
                    service = _service_name(resource.resource)
                scope = ShallowScopeSpans.FromString(scope_bytes)
                if self._read_scope(scope, service, calls):
                    touched.append((scopes, index, scope))
        if calls:
            self._decide(calls)
        if not touched:
            return payload
        for scopes, index, scope in touched:
            scopes[index] = scope.SerializeToString()
        return request.SerializeToString()

    def _read_scope(self, scope: Any, service: str, calls: list[list[Any]]) -> bool:
        scope_name = scope.scope.name
        spans = scope.spans
        read = False
        for slot, span_bytes in enumerate(spans):
            if not may_hold_mcp(span_bytes):
                continue
            span = SpanView.FromString(span_bytes)
            name = span.name
            if not may_be_mcp(name, scope_name):
                continue
            key = (name, span.kind, scope_name)
            shape = self._shapes.get(key)
            if shape is None:
                shape = self._shapes[key] = _shape(*key)
            role, named_tool, side = shape
            if role == "other":
                continue
            self.mcp_spans += 1
            span_id = span.span_id
            if span_id in self.seen:
                self.duplicates += 1
                continue
            _remember(self.seen, span_id, self.now)
            read = True
            attributes = span.attributes
            server = _text(attributes, "mcp.server.name")
            if role == "listing":
                listing = (service, server, side)
                self.listings[listing] = self.listings.get(listing, 0) + 1
                spans[slot] = span_bytes + self._listing
                continue
            code = span.status.code
            said = _text(attributes, "mcp.tool.outcome")
            if code == STATUS_CODE_ERROR or "error.type" in attributes:
                outcome = "failed"
            elif said in ("ok", "failed"):
                outcome = said
            elif code == STATUS_CODE_OK or side == "server":
                outcome = "ok"
            else:
                outcome = "unknown"  # the SDK's client half: its server half tells
            self.call_spans += 1
            calls.append(
                [
                    span_id,
                    span.parent_span_id,
                    side,
                    _text(attributes, "gen_ai.tool.name")
                    or _text(attributes, "mcp.tool.name")
                    or named_tool,
                    server,
                    outcome,
                    _text(attributes, "jsonrpc.request.id"),
                    _text(attributes, "mcp.turn.id"),
                    _text(attributes, "mcp.tool.args_hash"),
                    span.trace_id,
                    (spans, slot, span_bytes),
                ]
            )
        return read

    def _decide(self, calls: list[list[Any]]) -> None:
        """The request's calls: layers joined to their outermost call span, then each call
        paired (or held), judged by its turn and circuit, and annotated on every span."""
        by_span = {call[SPAN_ID]: call for call in calls}
        groups: dict[bytes, list[list[Any]]] = {}
        for call in calls:
            root, hops = call, 0
            parent = by_span.get(root[PARENT])
            while parent is not None and parent[TOOL] == root[TOOL] and hops < 8:
                root, hops = parent, hops + 1
                parent = by_span.get(root[PARENT])
            groups.setdefault(root[SPAN_ID], []).append(call)
        for group in groups.values():
            self._call(group)

    def _call(self, group: list[list[Any]]) -> None:
        outcome, server, request_id, turn, arguments, sides = _told(group)
        first, told = group[0], len(group)
        if "client" in sides or "server" in sides:  # the SDK's halves: both here, or held
            pair = (first[TRACE], request_id)
            other = self.held.pop(pair, None)
            if other is not None:  # its spans went on with the request they came in
                outcome, server, _, turn, arguments, _ = _told(other + group)
                told += len(other)
            elif "server" not in sides and outcome == "unknown":
                if pair not in self.paired:
                    self.held[pair] = group
                    if len(self.held) > MAX_KEPT:
                        del self.held[next(iter(self.held))]
                return  # forwarded with the outcome it says alone (the floor's "unknown")
            _remember(self.paired, pair, self.now)
        tool = first[TOOL]
        fingerprint = (
            hashlib.sha256(f"{server}\0{tool}\0{json.dumps(arguments)}".encode()).hexdigest()[:16]
            if arguments
            else ""
        )
        turn = turn or first[TRACE].hex()
        block = (turn, tool, fingerprint)
        circuit = self.circuits.get((server, tool))
        if circuit is None:
            circuit = self.circuits[(server, tool)] = [0, 0, 0]
        was_open = circuit[0]
        dead = bool(was_open) or block in self.blocks
        circuit[1] += 1
        if outcome == "failed":
            circuit[2] += 1
            self.blocks[block] = self.now
            if circuit[2] >= CONSECUTIVE_FAILURES:
                circuit[0] = 1
        elif outcome == "ok":
            circuit[2] = 0
        tally = (server, tool, outcome, dead)
        self.decided[tally] = self.decided.get(tally, 0) + 1
        annotation = self._decision((outcome, was_open, dead, fingerprint))
        for call in group:
            spans, slot, span_bytes = call[PLACE]
            spans[slot] = span_bytes + annotation
        self.decided_spans += told

    def _decision(self, shape: tuple[str, int, bool, str]) -> bytes:
        annotation = self._decisions.get(shape)
        if annotation is None:
            outcome, was_open, dead, fingerprint = shape
            values = {
                "outcome": outcome,
                "state": "open" if was_open else "closed",
                "dead_call": str(dead).lower(),
            }
            if fingerprint:
                values["fingerprint"] = fingerprint
            annotation = self._decisions[shape] = encoded(values)
        return annotation


def _told(calls: list[list[Any]]) -> tuple[str, str, str, str, str, set[str]]:
    """What the spans of one call say together: the outcome that says most, and the first
    server, request id, turn and arguments any of them names; and the sides they tell."""
    outcome, server, request_id, turn, arguments, sides = "unknown", "", "", "", "", set()
    for call in calls:
        if _WEIGHT[call[OUTCOME]] > _WEIGHT[outcome]:
            outcome = call[OUTCOME]
        server = server or call[SERVER]
        request_id = request_id or call[REQUEST_ID]
        turn = turn or call[TURN]
        arguments = arguments or call[ARGUMENTS]
        sides.add(call[SIDE])
    return outcome, server, request_id, turn, arguments, sides


def check_output(received: bytes) -> list[str]:
    """What is wrong with a fresh ProductFloor's output for one request: it must decode as
    OTLP, with a decision on every call span it decided and on no other span."""
    floor = ProductFloor()
    forwarded = floor(received)
    out = ExportTraceServiceRequest.FromString(forwarded)
    decided = sum(
        1
        for resource in out.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
        if any(attribute.key == "mcp.breaker.outcome" for attribute in span.attributes)
    )
    if decided != floor.decided_spans or not decided:
        return [f"{decided} spans carry a decision, {floor.decided_spans} were decided"]
    return []
