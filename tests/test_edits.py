"""A sparse request's edits (processor/request/edits.py): annotations go out as bytes appended
to the span's own, what one hook adds the next sees, and a change in place is encoded.

Through the stage as serve wires it (classify, breaker, annotate, strip), on requests the
tests build; test_sparse.py checks the same path against the whole-request one on
generated traffic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.config import ServiceConfig
from processor.config.forward import DEFAULT_STRIP_ATTRIBUTES, ForwardConfig
from processor.inflight.enrich import Annotation
from processor.inflight.stage import MCP_MARKERS, Stage
from processor.request.edits import SpanEdits
from processor.request.sparse import ShallowRequest, read_sparse
from processor.server import Service
from tests.otlp_builders import make_request, make_span
from tests.test_sparse import make_path

HARNESS_CALL = "mcp.tool.call"


def call_span(index: int, **attributes: str) -> Span:
    values = {"mcp.tool.name": "search", "mcp.server.name": "docs", "mcp.tool.outcome": "ok"}
    values.update(attributes)
    return make_span(HARNESS_CALL, index, kind=Span.SPAN_KIND_CLIENT, attributes=values)


def stage(strip: tuple[str, ...] = DEFAULT_STRIP_ATTRIBUTES) -> Stage:
    """The stage of ``serve``, as its configuration builds it."""
    return Service(ServiceConfig(forward=ForwardConfig(strip_attributes=strip))).stage


def spans_as_bytes(payload: bytes) -> list[bytes]:
    shallow: Any = ShallowRequest.FromString(payload)
    return [bytes(raw) for r in shallow.children for s in r.children for raw in s.spans]


def attributes(span: Span) -> dict[str, Any]:
    return {kv.key: kv.value for kv in span.attributes}


def test_an_annotated_span_goes_out_as_its_own_bytes_with_the_annotation_after() -> None:
    plain = make_span("GET /health", 9)
    call = call_span(1)
    # A field after the attributes: a span encoded again would put ours before it.
    call.events.add(name="progress", time_unix_nano=call.start_time_unix_nano)
    payload = make_request(plain, call).SerializeToString()
    came = spans_as_bytes(payload)

    out = stage().from_protobuf(payload).payload

    went = spans_as_bytes(out)
    assert went[0] == came[0]  # not an MCP span: its bytes untouched
    assert went[1].startswith(came[1]) and len(went[1]) > len(came[1])
    span = ExportTraceServiceRequest.FromString(out).resource_spans[0].scope_spans[0].spans[1]
    keys = [kv.key for kv in span.attributes]
    # The sender's first, in order; then ours.
    assert keys[:3] == ["mcp.tool.name", "mcp.server.name", "mcp.tool.outcome"]
    assert attributes(span)["mcp.breaker.outcome"].string_value == "ok"
    assert attributes(span)["mcp.breaker.state"].string_value == "closed"


def test_a_stripped_span_is_encoded_again_without_the_key_and_keeps_its_annotation() -> None:
    payload = make_request(call_span(1, **{"mcp.tool.arguments": '{"q": "salary 4711"}'}))
    out = stage().from_protobuf(payload.SerializeToString()).payload

    assert b"salary 4711" not in out
    span = ExportTraceServiceRequest.FromString(out).resource_spans[0].scope_spans[0].spans[0]
    assert "mcp.tool.arguments" not in attributes(span)
    assert attributes(span)["mcp.breaker.outcome"].string_value == "ok"
    assert len(attributes(span)["mcp.breaker.fingerprint"].string_value) == 32


def test_a_stripped_key_of_the_annotations_does_not_come_back() -> None:
    payload = make_request(call_span(1)).SerializeToString()
    out = stage(strip=("mcp.breaker.state",)).from_protobuf(payload).payload

    span = ExportTraceServiceRequest.FromString(out).resource_spans[0].scope_spans[0].spans[0]
    assert "mcp.breaker.state" not in attributes(span)
    assert attributes(span)["mcp.breaker.outcome"].string_value == "ok"


def test_a_key_the_span_holds_is_not_written_again() -> None:
    # A hop before this one annotated it already: its value stays, the rest is added.
    payload = make_request(call_span(1, **{"mcp.breaker.state": "from-upstream"}))
    out = stage().from_protobuf(payload.SerializeToString()).payload

    span = ExportTraceServiceRequest.FromString(out).resource_spans[0].scope_spans[0].spans[0]
    states = [kv.value.string_value for kv in span.attributes if kv.key == "mcp.breaker.state"]
    assert states == ["from-upstream"]
    assert attributes(span)["mcp.breaker.outcome"].string_value == "ok"


def test_what_one_edit_added_the_next_sees_and_a_change_in_place_is_encoded() -> None:
    first = Annotation({"mcp.breaker.outcome": "ok", "mcp.breaker.state": "closed"})
    second = Annotation({"mcp.breaker.state": "open", "mcp.breaker.pending": True})
    payload = make_request(call_span(1)).SerializeToString()
    sparse = read_sparse(payload, MCP_MARKERS)
    span = sparse.resource_spans[0].scope_spans[0].spans[0]
    edits = sparse.edits
    assert not edits and sparse.encode() == payload

    edits.add(span, first)
    assert set(edits.keys_added(span)) == {"mcp.breaker.outcome", "mcp.breaker.state"}
    edits.add(span, second)
    assert set(edits.keys_added(span)) == {
        "mcp.breaker.outcome",
        "mcp.breaker.state",
        "mcp.breaker.pending",
    }
    span.name = "mcp.tool.call renamed"
    edits.changed(span)
    edits.leave_out(frozenset({"mcp.breaker.pending"}))

    out = ExportTraceServiceRequest.FromString(sparse.encode())
    went = out.resource_spans[0].scope_spans[0].spans[0]
    assert went.name == "mcp.tool.call renamed"
    added = [(kv.key, kv.value.string_value) for kv in went.attributes][3:]
    # Both appended as they were added (enrich, not the edits, leaves out keys a span
    # holds); the key left out, from neither.
    assert added == [
        ("mcp.breaker.outcome", "ok"),
        ("mcp.breaker.state", "closed"),
        ("mcp.breaker.state", "open"),
    ]


def test_a_retried_span_goes_out_with_what_its_first_copy_was_given() -> None:
    payload = make_request(call_span(1)).SerializeToString()
    hop = stage()
    first = hop.from_protobuf(payload).payload
    again = hop.from_protobuf(payload).payload  # the exporter's retry: read once, not twice

    assert again == first
    span = ExportTraceServiceRequest.FromString(again).resource_spans[0].scope_spans[0].spans[0]
    assert attributes(span)["mcp.breaker.outcome"].string_value == "ok"


def test_edits_of_no_span_leave_the_request_as_it_came() -> None:
    other = make_span("tools/list", 2)  # decoded (its name may be MCP), read as nothing
    payload = make_request(other).SerializeToString()
    sparse = read_sparse(payload, MCP_MARKERS)
    edits: SpanEdits = sparse.edits
    edits.leave_out(frozenset({"mcp.tool.arguments"}))
    assert sparse.encode() is payload


# The payload keys of every dialect read: what an operator strips to keep arguments and
# results from the next hop.
PAYLOAD_KEYS = (
    "mcp.tool.arguments",
    "mcp.tool.result",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "input.value",
    "output.value",
)
CAPTURES = sorted(
    path
    for folder in ("frameworks", "real-spans")
    for path in (Path(__file__).resolve().parent / "fixtures" / folder).glob("*.otlp.bin")
)


def one_request_per_span(request: ExportTraceServiceRequest) -> list[ExportTraceServiceRequest]:
    """Each span of ``request`` alone, with its resource and scope: an exporter that sends
    each span as it ends."""
    alone = []
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                piece = ExportTraceServiceRequest()
                resource = piece.resource_spans.add(resource=resource_spans.resource)
                resource.scope_spans.add(scope=scope_spans.scope).spans.append(span)
                alone.append(piece)
    return alone


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda path: path.name.removesuffix(".otlp.bin"))
@pytest.mark.parametrize("order", ["as recorded", "a span a request, last first"])
def test_real_captures_go_out_as_the_whole_decode_sends_them(capture: Path, order: str) -> None:
    """The agent frameworks' runs (their scripted models) and the MCP SDKs' spans: every
    layer and both halves of each call, in one request or one span per request, the later
    first. What the sparse path forwards decodes as the whole-decode path's output; each MCP
    span is its received bytes with the annotation after them, unless the stripping
    changed it."""
    recorded = ExportTraceServiceRequest.FromString(capture.read_bytes())
    requests = [recorded] if order == "as recorded" else one_request_per_span(recorded)[::-1]
    config = ServiceConfig(forward=ForwardConfig(strip_attributes=PAYLOAD_KEYS))
    spliced = make_path(config, tenant_must_match=False)
    whole = make_path(config, tenant_must_match=False, walking=True)
    kept_bytes = 0  # MCP spans forwarded as their bytes with an annotation after them
    stripped_spans = 0  # and encoded again without their payload
    for request in requests:
        payload = request.SerializeToString()
        cut = spliced.stage.from_protobuf(payload)
        full = whole.stage.from_request(ExportTraceServiceRequest.FromString(payload))
        assert ExportTraceServiceRequest.FromString(cut.payload) == (
            ExportTraceServiceRequest.FromString(full.payload)
        )
        for came, went, span in zip(
            spans_as_bytes(payload), spans_as_bytes(cut.payload), spans_of(request), strict=True
        ):
            if went != came and set(PAYLOAD_KEYS) & {kv.key for kv in span.attributes}:
                # An MCP span that held a payload key (a span of another kind goes on as it
                # came): encoded again, without it.
                stripped_spans += 1
                assert not set(PAYLOAD_KEYS) & set(attributes(Span.FromString(went)))
            else:
                assert went.startswith(came)
                kept_bytes += went != came
    assert spliced.findings == whole.findings
    assert spliced.errors == whole.errors == []
    assert spliced.findings  # each capture holds calls or listings the analysis found
    assert kept_bytes + stripped_spans > 0


def spans_of(request: ExportTraceServiceRequest) -> list[Span]:
    return [s for r in request.resource_spans for sc in r.scope_spans for s in sc.spans]
