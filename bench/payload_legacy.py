"""The older generator of benchmark requests: ``build_requests``.

The same 8 requests on every call: ``plain`` and a ``mixed`` whose MCP spans (about 15%)
are client halves alone. bench/classify.py, offline.py, bulk_traces.py and delivery.py's
in-process part still read it, so their published figures stay comparable; the hop
benchmark does not (bench/payload.py).
"""

from __future__ import annotations

import functools
import random

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans, Span, Status
from payload_spans import (
    ORDINARY,
    RESOURCE,
    SCOPES,
    SEED,
    SPANS_PER_REQUEST,
    SPANS_PER_TRACE,
    TOOLS,
    Attributes,
    Rng,
    SpanMaker,
    common_attributes,
    encode_attributes,
    has_marker,
)

LEGACY_VARIANTS = ("plain", "mixed")  # build_requests
MCP_SHARE = 0.15


def _mcp(method: str, rng: Rng) -> tuple[str, int, Attributes]:
    attributes: Attributes = {"mcp.method.name": method}
    name = method
    if method == "tools/call":
        tool = rng.choice(TOOLS)
        name = f"tools/call {tool}"
        attributes["gen_ai.tool.name"] = tool
    return (
        name,
        Span.SPAN_KIND_CLIENT,
        {
            **attributes,
            "mcp.session.id": f"{rng.getrandbits(128):032x}",
            "jsonrpc.request.id": str(rng.randrange(1, 10**5)),
            "network.transport": "tcp",
            "server.address": "tools.shop.internal",
            "server.port": 8931,
            "mcp.protocol.version": "2025-06-18",
            **common_attributes(rng),
        },
    )


MCP_SCOPE = 2


def _span(rng: Rng, make: SpanMaker, trace_id: bytes, parent_id: bytes, start_ns: int) -> Span:
    name, kind, attributes = make(rng)
    failed = rng.random() < 0.03
    if failed:
        attributes["error.type"] = "TimeoutError"
        attributes["exception.message"] = f"no answer within {rng.randrange(1, 30)}s"
    return Span(
        trace_id=trace_id,
        span_id=rng.randbytes(8),
        parent_span_id=parent_id,
        name=name,
        kind=kind,  # type: ignore[arg-type]
        start_time_unix_nano=start_ns,
        end_time_unix_nano=start_ns + rng.randrange(50_000, 400_000_000),
        attributes=encode_attributes(attributes),
        status=Status(code=Status.STATUS_CODE_ERROR if failed else Status.STATUS_CODE_OK),
    )


def _kinds(variant: str, rng: Rng) -> list[str]:
    """One entry per span: "tools/call", "tools/list" or "" (ordinary), shuffled."""
    mcp = round(SPANS_PER_REQUEST * MCP_SHARE) if variant == "mixed" else 0
    calls = round(mcp * 2 / 3)
    kinds = ["tools/call"] * calls + ["tools/list"] * (mcp - calls)
    kinds += [""] * (SPANS_PER_REQUEST - mcp)
    rng.shuffle(kinds)
    return kinds


def build_request(variant: str, rng: Rng) -> bytes:
    scopes = [ScopeSpans() for _ in SCOPES]
    for (name, version), scope in zip(SCOPES, scopes, strict=True):
        scope.scope.name, scope.scope.version = name, version
    start_ns = 1_718_000_000_000_000_000 + rng.randrange(10**12)
    trace_id = parent_id = b""
    for index, kind in enumerate(_kinds(variant, rng)):
        if index % SPANS_PER_TRACE == 0:  # a new trace, continued from an upstream service
            trace_id, parent_id = rng.randbytes(16), rng.randbytes(8)
        make: SpanMaker
        if kind:
            make, scope_index = functools.partial(_mcp, kind), MCP_SCOPE
        else:
            make, scope_index = rng.choice(ORDINARY)
        while True:
            # Random ids and numbers can spell a marker by chance; a plain span that does is
            # drawn again, or the plain variant would not take the pass-through path.
            span = _span(rng, make, trace_id, parent_id, start_ns + index * 1_000_000)
            if variant == "mixed" or not has_marker(span.SerializeToString()):
                break
        if index % SPANS_PER_TRACE == 0:
            parent_id = span.span_id  # the rest of the trace hangs off its local root
        scopes[scope_index].spans.append(span)

    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.extend(encode_attributes(RESOURCE))
    resource_spans.scope_spans.extend(scopes)
    return request.SerializeToString()


def build_requests(variant: str, count: int = 8, seed: int = SEED) -> list[bytes]:
    """``count`` distinct requests, the same ones on every call with the same arguments."""
    if variant not in LEGACY_VARIANTS:
        raise ValueError(f"unknown payload variant {variant!r}; choose from {LEGACY_VARIANTS}")
    rng = random.Random(f"{seed}-{variant}")
    requests = [build_request(variant, rng) for _ in range(count)]
    # The framing between spans could still join bytes into a marker; check the whole.
    if variant == "plain" and any(has_marker(request) for request in requests):
        raise AssertionError("the plain payload holds an MCP marker")
    return requests
