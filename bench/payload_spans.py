"""The spans the benchmark payloads are made of, and their encoding.

One service's traffic: its scopes, resource, routes, tables and tools, and its ordinary
spans drawn at random (HTTP server and client, database and cache calls, internal work,
10-14 attributes each); the stage's marker bytes that a plain payload must not hold; and
the pieces the hop benchmark's templates are built from (bench/payload.py): ids with the
top bit of every byte set, a span, a request of resources and scopes, the turn ids made
new on every send, and ``Counts``, what a request holds.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

SPANS_PER_REQUEST = 512
SPANS_PER_TRACE = 8
SEED = 20240611
# The byte strings the service's stage looks for (processor.inflight.stage.MCP_MARKERS), copied here
# so that the benchmark checks its own promise rather than trusting the code under test.
MARKERS = (b"mcp", b"MCP", b"tool")

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


def encode_attributes(values: Attributes) -> list[KeyValue]:
    return [KeyValue(key=key, value=_value(value)) for key, value in values.items()]


def common_attributes(rng: Rng) -> Attributes:
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
            **common_attributes(rng),
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
            **common_attributes(rng),
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
            **common_attributes(rng),
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
            **common_attributes(rng),
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
            **common_attributes(rng),
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


def has_marker(data: bytes) -> bool:
    return any(marker in data for marker in MARKERS)


# String attributes whose value ends in a 16-character hex part made new on every send:
# the turn, as the harness names it (the breaker keeps state per turn).
NONCE_KEYS = frozenset({"mcp.turn.id", "gen_ai.conversation.id"})
NONCE_CHARS = 16


@dataclass(frozen=True)
class Counts:
    """What one request holds, to check a hop's work against."""

    spans: int
    mcp_spans: int
    calls: int  # tool calls it completes (both halves here, or one that decides alone)
    listings: int  # listings it completes (client-side listing spans)


def new_trace_id(rng: Rng) -> bytes:
    """A trace id whose every byte has its top bit set (see payload.Fresh)."""
    return bytes(b | 0x80 for b in rng.randbytes(16))


def new_span_id(rng: Rng) -> bytes:
    return bytes(b | 0x80 for b in rng.randbytes(8))


def make_span(
    rng: Rng,
    name: str,
    kind: int,
    attributes: Attributes,
    trace_id: bytes,
    parent_id: bytes,
    start_ns: int,
    duration_ns: int,
    status: int = Status.STATUS_CODE_UNSET,
    message: str = "",
) -> Span:
    return Span(
        trace_id=trace_id,
        span_id=new_span_id(rng),
        parent_span_id=parent_id,
        name=name,
        kind=kind,  # type: ignore[arg-type]
        start_time_unix_nano=start_ns,
        end_time_unix_nano=start_ns + duration_ns,
        attributes=encode_attributes(attributes),
        status=Status(code=status, message=message),  # type: ignore[arg-type]
    )


def ordinary_span(rng: Rng, make: SpanMaker, trace_id: bytes, parent_id: bytes, start: int) -> Span:
    """An ordinary span as the legacy payload draws it; drawn again while its encoding holds
    a marker by chance (a random number can spell one)."""
    while True:
        name, kind, attributes = make(rng)
        failed = rng.random() < 0.03
        if failed:
            attributes["error.type"] = "TimeoutError"
            attributes["exception.message"] = f"no answer within {rng.randrange(1, 30)}s"
        code = Status.STATUS_CODE_ERROR if failed else Status.STATUS_CODE_OK
        duration = rng.randrange(50_000, 400_000_000)
        span = make_span(rng, name, kind, attributes, trace_id, parent_id, start, duration, code)
        if not has_marker(span.SerializeToString()):
            return span


def encode_request(
    resources: list[tuple[Attributes, list[tuple[tuple[str, str], list[Span]]]]],
) -> bytes:
    request = ExportTraceServiceRequest()
    for resource, scopes in resources:
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.extend(encode_attributes(resource))
        for (name, version), spans in scopes:
            if spans:
                scope_spans = resource_spans.scope_spans.add()
                scope_spans.scope.name, scope_spans.scope.version = name, version
                scope_spans.spans.extend(spans)
    return request.SerializeToString()
