"""Requests larger than the next hop takes are cut between resources, scopes and spans."""

from __future__ import annotations

import random

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from processor.inflight.stage import count_spans_shallow, halve_request, split_request


def big_request(seed: int, resources: int = 3, scopes: int = 2, spans: int = 300) -> bytes:
    rng = random.Random(seed)
    request = ExportTraceServiceRequest()
    for r in range(resources):
        resource_spans = request.resource_spans.add(schema_url=f"https://schema/{r}")
        resource_spans.resource.attributes.add(key="service.name").value.string_value = f"svc{r}"
        for s in range(scopes):
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.name = f"scope{s}"
            for i in range(spans):
                span = scope_spans.spans.add(
                    name=f"op {i}", trace_id=rng.randbytes(16), span_id=rng.randbytes(8)
                )
                span.attributes.add(key="blob").value.string_value = "x" * rng.randint(10, 4000)
    return bytes(request.SerializeToString())


@pytest.mark.parametrize("seed", range(5))
def test_pieces_fit_and_keep_every_span_with_its_resource_and_scope(seed: int) -> None:
    payload = big_request(seed)
    limit = 128 * 1024
    pieces = split_request(payload, limit)
    assert len(pieces) > 1
    assert all(len(piece) <= limit for piece, _ in pieces)
    seen: list[tuple[str, str, bytes]] = []
    for piece, count in pieces:
        request = ExportTraceServiceRequest.FromString(piece)
        found = [
            (r.resource.attributes[0].value.string_value, s.scope.name, span.span_id)
            for r in request.resource_spans
            for s in r.scope_spans
            for span in s.spans
        ]
        assert len(found) == count
        assert all(r.schema_url.startswith("https://schema/") for r in request.resource_spans)
        seen += found
    original = ExportTraceServiceRequest.FromString(payload)
    assert seen == [
        (r.resource.attributes[0].value.string_value, s.scope.name, span.span_id)
        for r in original.resource_spans
        for s in r.scope_spans
        for span in s.spans
    ]


def test_a_request_under_the_limit_is_left_as_it_is() -> None:
    payload = big_request(0, resources=1, scopes=1, spans=3)
    assert split_request(payload, len(payload)) == [(payload, count_spans_shallow(payload))]


def test_a_span_bigger_than_the_limit_goes_alone() -> None:
    payload = big_request(1, resources=1, scopes=1, spans=4)
    pieces = split_request(payload, 1000)  # every span is over 10 bytes of blob... or more
    assert sum(count for _, count in pieces) == 4
    assert all(count >= 1 for _, count in pieces)


@pytest.mark.parametrize("seed", range(3))
def test_halving_keeps_every_span_in_order_with_its_resource_and_scope(seed: int) -> None:
    """What isolation splits a refused request with: half the spans each, none decoded."""
    payload = big_request(seed, resources=2, scopes=3, spans=7)

    def described(data: bytes) -> list[tuple[str, str, bytes]]:
        request = ExportTraceServiceRequest.FromString(data)
        return [
            (r.resource.attributes[0].value.string_value, s.scope.name, span.span_id)
            for r in request.resource_spans
            for s in r.scope_spans
            for span in s.spans
        ]

    (first, first_count), (second, second_count) = halve_request(payload)
    assert (first_count, second_count) == (21, 21)
    assert described(first) + described(second) == described(payload)
    assert [count_spans_shallow(first), count_spans_shallow(second)] == [21, 21]


def test_a_lone_span_cannot_be_halved() -> None:
    payload = big_request(0, resources=1, scopes=1, spans=1)
    assert halve_request(payload) == [(payload, 1)]
