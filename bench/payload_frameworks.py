"""The frameworks payload: the agent runs recorded from the real frameworks (one run each:
6 tool calls, 5 of them failures, tests/live/frameworks_common.py), as many whole runs as
fit, the rest of the 512 spans ordinary traffic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from payload_roles import may_be_mcp
from payload_spans import (
    ORDINARY,
    RESOURCE,
    SCOPES,
    SPANS_PER_REQUEST,
    SPANS_PER_TRACE,
    Counts,
    Rng,
    encode_request,
    new_span_id,
    new_trace_id,
    ordinary_span,
)

# Listings per run, as the captures record them (tests/test_classify_frameworks.py checks
# the same figures).
CAPTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "frameworks"
FRAMEWORK_RUNS = (
    "pydantic_ai",
    "openai_agents",
    "strands",
    "langgraph",
    "vercel_ai6",
    "vercel_ai7",
)
CALLS_PER_RUN = 6
LISTINGS_PER_RUN = {"pydantic_ai": 1, "openai_agents": 7, "strands": 1}


@functools.cache
def _capture(name: str) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest.FromString((CAPTURES / f"{name}.otlp.bin").read_bytes())


def _read_spans(request: ExportTraceServiceRequest) -> int:
    """The spans of a run that mcp-breaker's span test lets through (``may_be_mcp``)."""
    return sum(
        may_be_mcp(span.name, scope.scope.name)
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    )


def frameworks_request(rng: Rng, base_ns: int) -> tuple[bytes, Counts]:
    request = ExportTraceServiceRequest()
    runs = list(FRAMEWORK_RUNS)
    rng.shuffle(runs)
    spans = mcp = calls = listings = 0
    at = base_ns
    for index in range(SPANS_PER_REQUEST):
        name = runs[index % len(runs)]
        run = _capture(name)
        count = sum(len(s.spans) for r in run.resource_spans for s in r.scope_spans)
        if spans + count > SPANS_PER_REQUEST - SPANS_PER_TRACE:
            break
        at = _add_run(request, run, rng, at) + 1_000_000
        spans, mcp = spans + count, mcp + _read_spans(run)
        calls, listings = calls + CALLS_PER_RUN, listings + LISTINGS_PER_RUN.get(name, 0)
    filler: list[list[Span]] = [[] for _ in SCOPES]
    while spans < SPANS_PER_REQUEST:
        trace_id, start = new_trace_id(rng), at
        root = ordinary_span(rng, ORDINARY[0][0], trace_id, new_span_id(rng), start)
        filler[ORDINARY[0][1]].append(root)
        for child in range(min(SPANS_PER_TRACE, SPANS_PER_REQUEST - spans) - 1):
            make, scope = rng.choice(ORDINARY)
            offset = (child + 1) * 100_000
            filler[scope].append(ordinary_span(rng, make, trace_id, root.span_id, start + offset))
        spans += min(SPANS_PER_TRACE, SPANS_PER_REQUEST - spans)
        at += 7_000_000
    extra = ExportTraceServiceRequest.FromString(
        encode_request([(RESOURCE, list(zip(SCOPES, filler, strict=True)))])
    )
    request.resource_spans.extend(extra.resource_spans)
    return request.SerializeToString(), Counts(spans, mcp, calls, listings)


def _add_run(
    request: ExportTraceServiceRequest, run: ExportTraceServiceRequest, rng: Rng, at: int
) -> int:
    """A copy of ``run`` in ``request``: new trace and span ids (a parent keeps naming its
    child's parent), its times moved to begin at ``at``; the time its last span ends."""
    ids: dict[bytes, bytes] = {}

    def new(old: bytes, make: Callable[[Rng], bytes]) -> bytes:
        if old not in ids:
            ids[old] = make(rng)
        return ids[old]

    every = [s for r in run.resource_spans for sc in r.scope_spans for s in sc.spans]
    shift = at - min(s.start_time_unix_nano for s in every)
    for resource_spans in run.resource_spans:
        copy = request.resource_spans.add()
        copy.CopyFrom(resource_spans)
        for scope_spans in copy.scope_spans:
            for span in scope_spans.spans:
                span.trace_id = new(span.trace_id, new_trace_id)
                span.span_id = new(span.span_id, new_span_id)
                if span.parent_span_id:
                    span.parent_span_id = new(span.parent_span_id, new_span_id)
                span.start_time_unix_nano += shift
                span.end_time_unix_nano += shift
                del span.links[:]  # a link names a span of another trace, not rewritten
    return max(s.end_time_unix_nano for s in every) + shift
