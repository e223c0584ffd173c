"""Pre-encoded OTLP trace exports for the hop benchmark.

Each request holds 512 spans from one service (one resource, three instrumentation scopes),
shaped like real traffic: HTTP server and client spans, database and cache calls, internal
work, each with 10-14 attributes. Two variants:

    mixed  about 15% MCP spans (two thirds ``tools/call <tool>``, one third ``tools/list``)
    plain  no MCP span, and none of the stage's marker bytes anywhere in the encoding, so the
           service takes its pass-through path

Run it to see what it builds: ``python bench/payload.py``.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans, Span, Status

VARIANTS = ("plain", "mixed")
SPANS_PER_REQUEST = 512
SPANS_PER_TRACE = 8
MCP_SHARE = 0.15
SEED = 20240611
# The byte strings the service's stage looks for (processor.stage.MCP_MARKERS), copied here
# so that the benchmark checks its own promise rather than trusting the code under test.
MARKERS = (b"mcp", b"MCP", b"tools/")

SCOPES = (
    ("opentelemetry.instrumentation.aiohttp_server", "0.48b0"),
    ("opentelemetry.instrumentation.sqlalchemy", "0.48b0"),
    ("agent.runtime", "1.4.2"),
)
RESOURCE = {
    "service.name": "checkout-agent",
    "service.version": "2.7.1",
    "service.namespace": "shop",
    "deployment.environment.name": "production",
    "host.name": "ip-10-0-12-34.ec2.internal",
    "process.pid": 4127,
    "telemetry.sdk.language": "python",
    "telemetry.sdk.version": "1.27.0",
}
ROUTES = ("/api/orders/{id}", "/api/cart", "/api/checkout", "/api/products", "/healthz")
TABLES = ("orders", "customers", "products", "payments", "inventory")
TOOLS = ("get_weather", "search_docs", "create_ticket", "read_file", "query_database")

Attributes = dict[str, Any]
Rng = random.Random
SpanMaker = Callable[[Rng], tuple[str, int, Attributes]]


def _value(value: Any) -> AnyValue:
    # bool before int: bool is a subclass of int.
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue(string_value=value)


def _attributes(values: Attributes) -> list[KeyValue]:
    return [KeyValue(key=key, value=_value(value)) for key, value in values.items()]


def _common(rng: Rng) -> Attributes:
    return {
        "thread.id": rng.randrange(1, 64),
        "code.function": rng.choice(("handle", "dispatch", "run", "execute")),
        "sampled.by.parent": rng.random() < 0.9,
        "app.cpu.fraction": round(rng.random(), 4),
    }


def _http_server(rng: Rng) -> tuple[str, int, Attributes]:
    route = rng.choice(ROUTES)
    method = rng.choice(("GET", "POST"))
    return (
        f"{method} {route}",
        Span.SPAN_KIND_SERVER,
        {
            "http.request.method": method,
            "http.route": route,
            "url.path": route.replace("{id}", str(rng.randrange(10**6))),
            "url.scheme": "https",
            "http.response.status_code": rng.choice((200, 200, 200, 201, 404, 500)),
            "server.address": "checkout.shop.internal",
            "server.port": 8443,
            "user_agent.original": "Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/128.0",
            **_common(rng),
        },
    )


def _http_client(rng: Rng) -> tuple[str, int, Attributes]:
    method = rng.choice(("GET", "POST", "PUT"))
    return (
        method,
        Span.SPAN_KIND_CLIENT,
        {
            "http.request.method": method,
            "url.full": f"https://payments.shop.internal/v2/charges/{rng.randrange(10**8)}",
            "server.address": "payments.shop.internal",
            "server.port": 443,
            "http.response.status_code": rng.choice((200, 200, 202, 503)),
            "network.protocol.version": "1.1",
            **_common(rng),
        },
    )


def _database(rng: Rng) -> tuple[str, int, Attributes]:
    table = rng.choice(TABLES)
    operation = rng.choice(("SELECT", "UPDATE", "INSERT"))
    return (
        f"{operation} {table}",
        Span.SPAN_KIND_CLIENT,
        {
            "db.system.name": "postgresql",
            "db.namespace": "shop",
            "db.collection.name": table,
            "db.operation.name": operation,
            "db.query.text": f"{operation} * FROM {table} WHERE id = $1",
            "server.address": "db-primary.shop.internal",
            "server.port": 5432,
            "db.response.returned_rows": rng.randrange(0, 200),
            **_common(rng),
        },
    )


def _cache(rng: Rng) -> tuple[str, int, Attributes]:
    command = rng.choice(("GET", "SET", "HGETALL"))
    return (
        command,
        Span.SPAN_KIND_CLIENT,
        {
            "db.system.name": "redis",
            "db.operation.name": command,
            "db.namespace": "0",
            "server.address": "cache.shop.internal",
            "server.port": 6379,
            "cache.hit": rng.random() < 0.8,
            **_common(rng),
        },
    )


def _internal(rng: Rng) -> tuple[str, int, Attributes]:
    return (
        rng.choice(("render_invoice", "price_cart", "apply_discounts")),
        Span.SPAN_KIND_INTERNAL,
        {
            "app.cart.items": rng.randrange(1, 30),
            "app.cart.total": round(rng.uniform(1, 900), 2),
            "app.currency": rng.choice(("EUR", "USD", "GBP")),
            "app.customer.tier": rng.choice(("free", "plus", "pro")),
            "app.retry": rng.random() < 0.05,
            "app.region": "eu-west-1",
            **_common(rng),
        },
    )


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
            **_common(rng),
        },
    )


# Ordinary span kinds and the scope (index into SCOPES) whose instrumentation emits them.
ORDINARY: tuple[tuple[SpanMaker, int], ...] = (
    (_http_server, 0),
    (_http_client, 0),
    (_database, 1),
    (_cache, 1),
    (_internal, 2),
)
MCP_SCOPE = 2


def has_marker(data: bytes) -> bool:
    return any(marker in data for marker in MARKERS)


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
        attributes=_attributes(attributes),
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
    resource_spans.resource.attributes.extend(_attributes(RESOURCE))
    resource_spans.scope_spans.extend(scopes)
    return request.SerializeToString()


def build_requests(variant: str, count: int = 8, seed: int = SEED) -> list[bytes]:
    """``count`` distinct requests, the same ones on every call with the same arguments."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown payload variant {variant!r}; choose from {VARIANTS}")
    rng = random.Random(f"{seed}-{variant}")
    requests = [build_request(variant, rng) for _ in range(count)]
    # The framing between spans could still join bytes into a marker; check the whole.
    if variant == "plain" and any(has_marker(request) for request in requests):
        raise AssertionError("the plain payload holds an MCP marker")
    return requests


def _describe() -> None:
    for variant in VARIANTS:
        requests = build_requests(variant)
        decoded = ExportTraceServiceRequest.FromString(requests[0])
        spans = [s for r in decoded.resource_spans for sc in r.scope_spans for s in sc.spans]
        mcp = sum(s.name.startswith("tools/") for s in spans)
        sizes = ", ".join(f"{len(r) / 1024:.0f}" for r in requests)
        print(
            f"{variant}: {len(requests)} requests of {len(spans)} spans ({mcp} MCP); KiB: {sizes}"
        )


if __name__ == "__main__":
    _describe()
