"""OTLP trace exports for the hop benchmark, and a cheap way to send them fresh.

Every request holds 512 spans. Four variants (``VARIANTS``), built once as templates:

    plain    one service's traffic (HTTP server and client spans, database and cache
             calls, internal work, 10-14 attributes each), no MCP span, and none of the
             stage's marker bytes anywhere in the encoding: the pass-through path
    mixed    the same traffic with about 15% MCP spans, as an upstream collector batches
             them: mcp SDK tool calls whose client half (the agent's process) and server
             half (the tool server's process, a second resource, the client span as its
             parent) come in the same request; server halves whose client is not
             instrumented, alone; tools/list listings, client and server halves
    harness  every request from one agent process: turns with LLM spans (gen_ai.*), the
             HTTP client spans under them, gen_ai execute_tool spans over mcp SDK calls to
             an in-process MCP server (both halves), a call and a listing in the client
             library's own convention (mcp.tool.call, mcp.tools.list), SDK listings
    frameworks   the agent runs recorded from the real frameworks (tests/fixtures/frameworks:
             pydantic-ai, the OpenAI Agents SDK, Strands, LangGraph, the Vercel AI SDK 6
             and 7; each 6 tool calls), whole runs as many as fit, their ids and times
             new, the rest of the spans ordinary traffic

In each, every MCP call is decided in its own request: both halves are there, or the half
that is there decides alone (a server half; a harness span), as in the captures of
tests/fixtures/real-spans.

``Fresh`` sends a template as a new request each time: the byte offsets of every trace
and span id, every span time and every turn id are found once (``Template``); per send a
random key is XOR-ed into the ids (the same key for a span id and the parent ids that
name it, so links hold), the times are moved to just before now, and the turn ids get a
new suffix. Template ids have the top bit of every byte set and keys have it clear, so a
fresh id never spells a marker (ASCII) and the plain variant stays on its path.

``build_requests`` is the older generator (the same 8 requests on every call: ``plain``
and a ``mixed`` whose MCP spans are client halves alone). bench/classify.py, offline.py,
bulk_traces.py and delivery.py's in-process part still read it, so their published
figures stay comparable; the hop benchmark does not.

Run it to see what it builds: ``python bench/payload.py``.
"""

from __future__ import annotations

import functools
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans, Span, Status

LEGACY_VARIANTS = ("plain", "mixed")  # build_requests
VARIANTS = ("plain", "mixed", "harness", "frameworks")  # build_templates, Fresh
SPANS_PER_REQUEST = 512
SPANS_PER_TRACE = 8
MCP_SHARE = 0.15
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
    if variant not in LEGACY_VARIANTS:
        raise ValueError(f"unknown payload variant {variant!r}; choose from {LEGACY_VARIANTS}")
    rng = random.Random(f"{seed}-{variant}")
    requests = [build_request(variant, rng) for _ in range(count)]
    # The framing between spans could still join bytes into a marker; check the whole.
    if variant == "plain" and any(has_marker(request) for request in requests):
        raise AssertionError("the plain payload holds an MCP marker")
    return requests


# -- the hop benchmark's payloads: templates sent fresh every time ---------------------------

TEMPLATES_PER_VARIANT = 8
TRACES_PER_REQUEST = SPANS_PER_REQUEST // SPANS_PER_TRACE
PROTOCOL_VERSION = "2025-11-25"
# Tool calls that fail: a tool failing thrice in a row opens its circuit (and the calls to it
# are dead calls for minutes of span time, as the breaker is configured by default).
TOOL_FAILURE_SHARE = 0.02
SDK_SCOPE = ("mcp-python-sdk", "")  # the official mcp SDK's own spans, as captured
# mixed: MCP units among the 64 traces of 8 spans (77 MCP spans: 15.0%)
MIXED_CALL_PAIRS, MIXED_LONE_CALLS, MIXED_LISTING_PAIRS = 24, 9, 10
TOOL_SERVER_RESOURCE = {
    "service.name": "catalog-api",
    "service.version": "0.9.3",
    "deployment.environment.name": "production",
    "host.name": "ip-10-0-14-7.ec2.internal",
    "process.pid": 981,
    "telemetry.sdk.language": "python",
    "telemetry.sdk.version": "1.27.0",
}
# harness: 16 turns of 32 spans from one agent process
HARNESS_SPANS_PER_TURN = 32
HARNESS_ROUNDS = 6
HARNESS_RESOURCE = {
    "service.name": "coding-agent",
    "service.version": "0.14.2",
    "deployment.environment.name": "production",
    "host.name": "dev-box-17",
    "process.pid": 52817,
    "process.runtime.name": "cpython",
    "telemetry.sdk.language": "python",
    "telemetry.sdk.version": "1.27.0",
}
HARNESS_SCOPES = (
    ("agent.harness", "1.3.0"),
    ("opentelemetry.instrumentation.anthropic", "0.40.14"),
    ("opentelemetry.instrumentation.httpx", "0.48b0"),
    SDK_SCOPE,
    ("mcp-breaker.client", "0.1.0"),
)
AGENT, LLM, HTTPX, SDK, BREAKER_CLIENT = range(len(HARNESS_SCOPES))
HARNESS_SDK_TOOLS = ("read_file", "search_docs", "run_tests", "write_file")
HARNESS_TOOLS = ("github__search_issues", "github__get_pull_request", "linear__create_issue")
MODELS = ("claude-sonnet-4-5", "claude-haiku-4-5")
# String attributes whose value ends in a 16-character hex part made new on every send:
# the turn, as the harness names it (the breaker keeps state per turn).
NONCE_KEYS = frozenset({"mcp.turn.id", "gen_ai.conversation.id"})
NONCE_CHARS = 16
# Span times are moved by a multiple of this (about 1 ms) to end just before now.
TIME_QUANTUM_NS = 1 << 20
TEMPLATE_BASE_NS = 1_718_000_000_000_000_000

# The span fields and attribute structure the template walker reads (the OTLP protos).
_TRACE_ID, _SPAN_ID, _PARENT_ID, _START, _END, _ATTRIBUTES = 1, 2, 4, 7, 8, 9


@dataclass(frozen=True)
class Counts:
    """What one request holds, to check a hop's work against."""

    spans: int
    mcp_spans: int
    calls: int  # tool calls it completes (both halves here, or one that decides alone)
    listings: int  # listings it completes (client-side listing spans)


# What the naive hop (bench/naive_hop.py) writes on each MCP span it finds, and how it finds
# them: the span-name test mcp-breaker makes first (processor.classify.dialects.may_be_mcp),
# copied so that the benchmark does not import the code under test.
NAIVE_ATTRIBUTE = "bench.naive_hop.seen"
_MCP_NAME_PREFIXES = ("mcp.tool", "tools/", "MCP ", "execute_tool ", "ai.toolCall")
_MCP_NAME_SUFFIXES = (".tool", ".mcp")


def may_be_mcp(name: str, scope: str = "") -> bool:
    return (
        name.startswith(_MCP_NAME_PREFIXES)
        or name.endswith(_MCP_NAME_SUFFIXES)
        or scope.startswith("openinference")  # its tool spans are named after their tool
    )


def span_role(name: str, kind: int = Span.SPAN_KIND_SERVER, tool_kind: bool = False) -> str | None:
    """What a span of these payloads is to mcp-breaker: ``call`` (every span of a tool call
    is annotated with ``mcp.breaker.*``), ``listing`` (a client-side listing, annotated with
    ``mcp.roster.*``), ``server-listing`` (a server's listing span: read, not annotated), or
    None (not MCP). ``tool_kind``: the span says ``openinference.span.kind = TOOL`` (it is
    named after its tool); ``kind``: a ``tools/list`` span is fastmcp's client's or a
    server's."""
    if (
        tool_kind
        or name in ("mcp.tool.call", "ai.toolCall")
        or name.startswith(("MCP send tools/call", "tools/call", "execute_tool "))
    ):
        return "call"
    if name in ("mcp.tools.list", "MCP send tools/list"):
        return "listing"
    if name == "tools/list":
        return "listing" if kind == Span.SPAN_KIND_CLIENT else "server-listing"
    return None


def is_tool_kind(span: Span) -> bool:
    return any(
        kv.key == "openinference.span.kind" and kv.value.string_value == "TOOL"
        for kv in span.attributes
    )


def _tid(rng: Rng) -> bytes:
    """A trace id whose every byte has its top bit set (see Fresh)."""
    return bytes(b | 0x80 for b in rng.randbytes(16))


def _sid(rng: Rng) -> bytes:
    return bytes(b | 0x80 for b in rng.randbytes(8))


def _make(
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
        span_id=_sid(rng),
        parent_span_id=parent_id,
        name=name,
        kind=kind,  # type: ignore[arg-type]
        start_time_unix_nano=start_ns,
        end_time_unix_nano=start_ns + duration_ns,
        attributes=_attributes(attributes),
        status=Status(code=status, message=message),  # type: ignore[arg-type]
    )


def _ordinary(rng: Rng, make: SpanMaker, trace_id: bytes, parent_id: bytes, start: int) -> Span:
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
        span = _make(rng, name, kind, attributes, trace_id, parent_id, start, duration, code)
        if not has_marker(span.SerializeToString()):
            return span


def _sdk_pair(
    rng: Rng,
    method: str,
    tool: str,
    request_id: int,
    trace_id: bytes,
    parent_id: bytes,
    start: int,
    failed: bool,
) -> tuple[Span, Span]:
    """The mcp SDK's client and server spans of one request (mcp 2.x, as captured)."""
    client = _sdk_client(rng, method, tool, request_id, trace_id, parent_id, start)
    server = _sdk_server(rng, method, tool, request_id, trace_id, client.span_id, start, failed)
    return client, server


def _sdk_client(
    rng: Rng,
    method: str,
    tool: str,
    request_id: int,
    trace_id: bytes,
    parent_id: bytes,
    start: int,
) -> Span:
    name = f"MCP send {method} {tool}".rstrip()
    attributes = {"jsonrpc.request.id": str(request_id), "mcp.method.name": method}
    duration = rng.randrange(2_000_000, 90_000_000)
    # The SDK leaves its client span UNSET, failed or not: only the server half tells.
    return _make(rng, name, Span.SPAN_KIND_CLIENT, attributes, trace_id, parent_id, start, duration)


def _sdk_server(
    rng: Rng,
    method: str,
    tool: str,
    request_id: int,
    trace_id: bytes,
    parent_id: bytes,
    start: int,
    failed: bool,
) -> Span:
    attributes: Attributes = {}
    if tool:
        attributes |= {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    attributes |= {
        "jsonrpc.request.id": str(request_id),
        "mcp.method.name": method,
        "mcp.protocol.version": PROTOCOL_VERSION,
    }
    code = Status.STATUS_CODE_UNSET
    if failed:
        attributes["error.type"] = "tool_error"
        code = Status.STATUS_CODE_ERROR
    name = f"{method} {tool}".rstrip()
    duration = rng.randrange(500_000, 60_000_000)
    return _make(
        rng,
        name,
        Span.SPAN_KIND_SERVER,
        attributes,
        trace_id,
        parent_id,
        start + 1_000_000,
        duration,
        code,
    )


def _request(resources: list[tuple[Attributes, list[tuple[tuple[str, str], list[Span]]]]]) -> bytes:
    request = ExportTraceServiceRequest()
    for resource, scopes in resources:
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.extend(_attributes(resource))
        for (name, version), spans in scopes:
            if spans:
                scope_spans = resource_spans.scope_spans.add()
                scope_spans.scope.name, scope_spans.scope.version = name, version
                scope_spans.spans.extend(spans)
    return request.SerializeToString()


def _plain_or_mixed(variant: str, rng: Rng, base_ns: int) -> tuple[bytes, Counts]:
    """Traces of 8 spans (a local root under an upstream service, 7 children); in
    ``mixed``, 43 of the 64 carry an MCP unit: a call pair, a lone server half, a listing."""
    units = [""] * TRACES_PER_REQUEST
    if variant == "mixed":
        mcp = ["pair"] * MIXED_CALL_PAIRS + ["lone"] * MIXED_LONE_CALLS
        mcp += ["listing"] * MIXED_LISTING_PAIRS
        units = mcp + [""] * (TRACES_PER_REQUEST - len(mcp))
        rng.shuffle(units)
    agent: list[list[Span]] = [[] for _ in (*SCOPES, SDK_SCOPE)]
    tool_server: list[Span] = []
    request_id = 0
    counts = {"mcp": 0, "calls": 0, "listings": 0}
    for trace, unit in enumerate(units):
        trace_id, start = _tid(rng), base_ns + trace * 7_000_000
        root = _ordinary(rng, ORDINARY[0][0], trace_id, _sid(rng), start)
        agent[ORDINARY[0][1]].append(root)
        mcp_spans = {"pair": 2, "listing": 2, "lone": 1, "": 0}[unit]
        for child in range(SPANS_PER_TRACE - 1 - mcp_spans):
            make, scope = rng.choice(ORDINARY)
            offset = (child + 1) * 100_000
            agent[scope].append(_ordinary(rng, make, trace_id, root.span_id, start + offset))
        if not unit:
            continue
        request_id += 1
        failed = rng.random() < TOOL_FAILURE_SHARE
        tool = rng.choice(TOOLS)
        at = start + 900_000
        if unit == "lone":  # its caller propagates context but records no span
            lone = _sdk_server(rng, "tools/call", tool, request_id, trace_id, _sid(rng), at, failed)
            tool_server.append(lone)
        else:
            method, tool = ("tools/call", tool) if unit == "pair" else ("tools/list", "")
            pair = _sdk_pair(rng, method, tool, request_id, trace_id, root.span_id, at, failed)
            agent[-1].append(pair[0])
            tool_server.append(pair[1])
        counts["mcp"] += mcp_spans
        counts["calls" if unit != "listing" else "listings"] += 1
    scopes = list(zip((*SCOPES, SDK_SCOPE), agent, strict=True))
    data = _request([(RESOURCE, scopes), (TOOL_SERVER_RESOURCE, [(SDK_SCOPE, tool_server)])])
    if variant == "plain" and has_marker(data):
        raise AssertionError("the plain payload holds an MCP marker")
    return data, Counts(SPANS_PER_REQUEST, counts["mcp"], counts["calls"], counts["listings"])


def _llm_round(rng: Rng, trace_id: bytes, parent_id: bytes, start: int) -> list[Span]:
    """One model call: the instrumentation's chat span and the HTTP request under it."""
    model = rng.choice(MODELS)
    input_tokens = rng.randrange(2_000, 60_000)
    chat = _make(
        rng,
        f"chat {model}",
        Span.SPAN_KIND_CLIENT,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "anthropic",
            "gen_ai.request.model": model,
            "gen_ai.request.max_tokens": 8192,
            "gen_ai.request.temperature": 1.0,
            "gen_ai.response.model": f"{model}-20250929",
            "gen_ai.response.id": f"msg_{rng.getrandbits(96):024x}",
            "gen_ai.response.finish_reasons": rng.choice(("tool_use", "end_turn")),
            "gen_ai.usage.input_tokens": input_tokens,
            "gen_ai.usage.output_tokens": rng.randrange(20, 2_000),
            "gen_ai.usage.cache_read.input_tokens": input_tokens * 9 // 10,
            "server.address": "api.anthropic.com",
            "server.port": 443,
        },
        trace_id,
        parent_id,
        start,
        rng.randrange(300_000_000, 450_000_000),
        Status.STATUS_CODE_OK,
    )
    http = _make(
        rng,
        "POST",
        Span.SPAN_KIND_CLIENT,
        {
            "http.request.method": "POST",
            "url.full": "https://api.anthropic.com/v1/messages",
            "server.address": "api.anthropic.com",
            "server.port": 443,
            "network.protocol.version": "1.1",
            "http.request.body.size": rng.randrange(8_000, 240_000),
            "http.response.body.size": rng.randrange(400, 9_000),
            "http.response.status_code": 200,
        },
        trace_id,
        chat.span_id,
        start + 1_000_000,
        rng.randrange(250_000_000, 290_000_000),
    )
    return [chat, http]


def _harness(rng: Rng, base_ns: int) -> tuple[bytes, Counts]:
    """16 turns of one agent, 32 spans each: see the module's docstring."""
    scopes: list[list[Span]] = [[] for _ in HARNESS_SCOPES]
    counts = {"mcp": 0, "calls": 0, "listings": 0}
    for turn in range(SPANS_PER_REQUEST // HARNESS_SPANS_PER_TURN):
        trace_id, start = _tid(rng), base_ns + turn * 4_000_000_000
        turn_id = f"{rng.getrandbits(64):016x}{'0' * NONCE_CHARS}"  # suffix: made per send
        root = _make(
            rng,
            "invoke_agent coding-agent",
            Span.SPAN_KIND_INTERNAL,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "coding-agent",
                "gen_ai.provider.name": "anthropic",
                "gen_ai.conversation.id": f"{rng.getrandbits(64):016x}{'0' * NONCE_CHARS}",
            },
            trace_id,
            b"",
            start,
            3_600_000_000,
        )
        scopes[AGENT].append(root)
        listing = _make(
            rng,
            "mcp.tools.list",
            Span.SPAN_KIND_INTERNAL,
            {
                "mcp.turn.id": turn_id,
                "mcp.turn.round": 0,
                "mcp.tools.configured": 3,
                "mcp.tools.listed": 3,
                "mcp.tools.reached": 0,
                "mcp.tools.cached": True,
                "mcp.tools.unavailable": 0,
                "mcp.tools.registered": 3,
                "mcp.tools.offered": len(HARNESS_TOOLS) + len(HARNESS_SDK_TOOLS),
            },
            trace_id,
            root.span_id,
            start + 1_000_000,
            2_000_000,
        )
        scopes[BREAKER_CLIENT].append(listing)
        request_id = 1
        client, server = _sdk_pair(
            rng, "tools/list", "", request_id, trace_id, root.span_id, start + 4_000_000, False
        )
        scopes[SDK] += (client, server)
        for round_ in range(HARNESS_ROUNDS):
            at = start + 10_000_000 + round_ * 560_000_000
            scopes[LLM].append((llm := _llm_round(rng, trace_id, root.span_id, at))[0])
            scopes[HTTPX].append(llm[1])
            at += 460_000_000
            failed = rng.random() < TOOL_FAILURE_SHARE
            if round_ < len(HARNESS_SDK_TOOLS):  # the model asked for an in-process tool
                tool = HARNESS_SDK_TOOLS[round_]
                execute = _make(
                    rng,
                    f"execute_tool {tool}",
                    Span.SPAN_KIND_INTERNAL,
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": tool,
                        "gen_ai.tool.type": "function",
                        "gen_ai.tool.call.id": f"toolu_{rng.getrandbits(96):024x}",
                    },
                    trace_id,
                    root.span_id,
                    at,
                    95_000_000,
                )
                request_id += 1
                client, server = _sdk_pair(
                    rng, "tools/call", tool, request_id, trace_id, execute.span_id, at, failed
                )
                scopes[AGENT].append(execute)
                scopes[SDK] += (client, server)
            elif round_ == len(HARNESS_SDK_TOOLS):  # a remote tool, through the client library
                tool = rng.choice(HARNESS_TOOLS)
                attributes: Attributes = {
                    "mcp.tool.name": tool,
                    "mcp.server.name": tool.partition("__")[0],
                    "mcp.turn.id": turn_id,
                    "mcp.turn.round": round_ + 1,
                    "mcp.tool.args_hash": f"{rng.getrandbits(256):064x}",
                    "mcp.tool.outcome": "failed" if failed else "ok",
                }
                code = Status.STATUS_CODE_OK
                if failed:
                    attributes["mcp.tool.error"] = "upstream MCP session is closed"
                    attributes["error.type"] = "McpError"
                    code = Status.STATUS_CODE_ERROR
                call = _make(
                    rng,
                    "mcp.tool.call",
                    Span.SPAN_KIND_INTERNAL,
                    attributes,
                    trace_id,
                    root.span_id,
                    at,
                    80_000_000,
                    code,
                )
                scopes[BREAKER_CLIENT].append(call)
        for page in range(3):  # a web fetch the agent made itself
            scopes[HTTPX].append(
                _make(
                    rng,
                    "GET",
                    Span.SPAN_KIND_CLIENT,
                    {
                        "http.request.method": "GET",
                        "url.full": f"https://docs.python.org/3/library/{rng.choice(TABLES)}.html",
                        "server.address": "docs.python.org",
                        "server.port": 443,
                        "http.response.status_code": rng.choice((200, 200, 200, 404)),
                        "http.response.body.size": rng.randrange(4_000, 90_000),
                    },
                    trace_id,
                    root.span_id,
                    start + 3_400_000_000 + page * 20_000_000,
                    rng.randrange(20_000_000, 150_000_000),
                )
            )
        counts["mcp"] += 1 + 2 + 3 * len(HARNESS_SDK_TOOLS) + 1  # execute_tool: a layer
        counts["calls"] += len(HARNESS_SDK_TOOLS) + 1
        counts["listings"] += 2
    data = _request([(HARNESS_RESOURCE, list(zip(HARNESS_SCOPES, scopes, strict=True)))])
    spans = sum(len(s) for s in scopes)
    assert spans == SPANS_PER_REQUEST, spans
    return data, Counts(spans, counts["mcp"], counts["calls"], counts["listings"])


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """The fields of the message in data[start:end]: (number, value start, value end)."""
    pos = start
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, after = _varint(data, pos)
        elif wire_type == 1:
            after = pos + 8
        elif wire_type == 2:
            length, pos = _varint(data, pos)
            after = pos + length
        elif wire_type == 5:
            after = pos + 4
        else:
            raise ValueError(f"wire type {wire_type} at {pos}")
        yield number, pos, after
        pos = after


def _children(data: bytes, start: int, end: int, number: int) -> Iterator[tuple[int, int]]:
    return ((s, e) for n, s, e in _fields(data, start, end) if n == number)


@dataclass
class Template:
    """An encoded request and where, in its bytes, its ids, times and turn ids are."""

    variant: str
    data: bytes
    counts: Counts
    array: np.ndarray = field(init=False, repr=False)
    trace_slots: np.ndarray = field(init=False, repr=False)  # (n, 16) byte offsets
    span_slots: np.ndarray = field(init=False, repr=False)  # (n, 8): span and parent ids
    time_slots: np.ndarray = field(init=False, repr=False)  # (n, 8)
    times: np.ndarray = field(init=False, repr=False)  # (n,) int64, the template's times
    nonce_slots: np.ndarray = field(init=False, repr=False)  # (n, 16)

    def __post_init__(self) -> None:
        data = self.data
        found: dict[str, list[int]] = {"trace": [], "span": [], "time": [], "nonce": []}
        times = []
        for resource in _children(data, 0, len(data), 1):
            for scope in _children(data, *resource, 2):
                for span in _children(data, *scope, 2):
                    for number, start, end in _fields(data, *span):
                        if number == _TRACE_ID:
                            assert end - start == 16
                            found["trace"].append(start)
                        elif number in (_SPAN_ID, _PARENT_ID) and end > start:
                            assert end - start == 8
                            found["span"].append(start)
                        elif number in (_START, _END):
                            found["time"].append(start)
                            times.append(int.from_bytes(data[start:end], "little"))
                        elif number == _ATTRIBUTES and self._nonce_key(start, end):
                            value = next(_children(data, start, end, 2))  # the AnyValue
                            string = next(_children(data, *value, 1))
                            found["nonce"].append(string[1] - NONCE_CHARS)

        def slots(starts: list[int], width: int) -> np.ndarray:
            return (np.array(starts, np.intp).reshape(-1, 1) + np.arange(width)).astype(np.intp)

        self.array = np.frombuffer(data, np.uint8)
        self.trace_slots = slots(found["trace"], 16)
        self.span_slots = slots(found["span"], 8)
        self.time_slots = slots(found["time"], 8)
        self.times = np.array(times, np.int64)
        self.nonce_slots = slots(found["nonce"], NONCE_CHARS)
        if len(found["trace"]) != self.counts.spans:
            raise AssertionError(f"{len(found['trace'])} trace ids for {self.counts.spans} spans")
        if int(self.array[self.trace_slots].min()) < 0x80 or (
            self.span_slots.size and int(self.array[self.span_slots].min()) < 0x80
        ):
            raise AssertionError("an id byte without its top bit: a fresh id could spell a marker")

    def _nonce_key(self, start: int, end: int) -> bool:
        key = next(_children(self.data, start, end, 1), None)
        return key is not None and self.data[key[0] : key[1]].decode() in NONCE_KEYS


# The frameworks payload: the agent runs recorded from the real frameworks (one run each:
# 6 tool calls, 5 of them failures, tests/live/frameworks_common.py), as many whole runs
# as fit, the rest of the 512 spans ordinary traffic. Listings per run, as the captures
# record them (tests/test_classify_frameworks.py checks the same figures).
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


def _frameworks(rng: Rng, base_ns: int) -> tuple[bytes, Counts]:
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
        trace_id, start = _tid(rng), at
        root = _ordinary(rng, ORDINARY[0][0], trace_id, _sid(rng), start)
        filler[ORDINARY[0][1]].append(root)
        for child in range(min(SPANS_PER_TRACE, SPANS_PER_REQUEST - spans) - 1):
            make, scope = rng.choice(ORDINARY)
            offset = (child + 1) * 100_000
            filler[scope].append(_ordinary(rng, make, trace_id, root.span_id, start + offset))
        spans += min(SPANS_PER_TRACE, SPANS_PER_REQUEST - spans)
        at += 7_000_000
    extra = ExportTraceServiceRequest.FromString(
        _request([(RESOURCE, list(zip(SCOPES, filler, strict=True)))])
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
                span.trace_id = new(span.trace_id, _tid)
                span.span_id = new(span.span_id, _sid)
                if span.parent_span_id:
                    span.parent_span_id = new(span.parent_span_id, _sid)
                span.start_time_unix_nano += shift
                span.end_time_unix_nano += shift
                del span.links[:]  # a link names a span of another trace, not rewritten
    return max(s.end_time_unix_nano for s in every) + shift


def build_templates(
    variant: str, count: int = TEMPLATES_PER_VARIANT, seed: int = SEED
) -> list[Template]:
    """``count`` distinct requests of ``variant``, the same on every call."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown payload variant {variant!r}; choose from {VARIANTS}")
    rng = random.Random(f"{seed}-fresh-{variant}")
    templates = []
    for index in range(count):
        base_ns = TEMPLATE_BASE_NS + index * 100 * 10**9
        if variant == "harness":
            data, counts = _harness(rng, base_ns)
        elif variant == "frameworks":
            data, counts = _frameworks(rng, base_ns)
        else:
            data, counts = _plain_or_mixed(variant, rng, base_ns)
        templates.append(Template(variant, data, counts))
    return templates


class Fresh:
    """New requests from templates: fresh trace and span ids, times just before now, new
    turn ids; nothing else changes (see the module's docstring). About 60-70 µs of CPU a
    request of 512 spans here; ``render_s`` adds it up, for the load generator to report."""

    def __init__(self, templates: list[Template], clock: Callable[[], int] = time.time_ns):
        self.templates = templates
        self._clock = clock
        # The plain variant must stay marker-free: shifted times are checked (ids cannot
        # spell one, see Template).
        self._check_times = templates[0].variant == "plain"
        self.render_s = 0.0

    def render(self, template: Template) -> bytes:
        started = time.thread_time()  # this thread's CPU: not gRPC's own threads
        buf = template.array.copy()
        key = np.frombuffer(os.urandom(24), np.uint8) & 0x7F
        buf[template.trace_slots] ^= key[:16]
        buf[template.span_slots] ^= key[16:]
        if template.nonce_slots.size:
            nonce = np.frombuffer(os.urandom(NONCE_CHARS // 2).hex().encode(), np.uint8)
            buf[template.nonce_slots] = nonce
        latest = self._clock() - 10**9  # every span ended a second ago or before
        delta = (latest - int(template.times.max())) // TIME_QUANTUM_NS * TIME_QUANTUM_NS
        while True:
            shifted = (template.times + delta).astype("<i8").view(np.uint8)
            if not (self._check_times and has_marker(shifted.tobytes())):
                break
            delta -= TIME_QUANTUM_NS  # a millisecond earlier spells something else
        buf[template.time_slots] = shifted.reshape(-1, 8)
        data = buf.tobytes()
        self.render_s += time.thread_time() - started
        return data


def _describe() -> None:
    for variant in VARIANTS:
        templates = build_templates(variant)
        fresh = Fresh(templates)
        first = ExportTraceServiceRequest.FromString(fresh.render(templates[0]))
        again = ExportTraceServiceRequest.FromString(fresh.render(templates[0]))
        spans = [s for r in first.resource_spans for sc in r.scope_spans for s in sc.spans]
        other = [s for r in again.resource_spans for sc in r.scope_spans for s in sc.spans]
        roles: dict[str | None, int] = {}
        for span in spans:
            role = span_role(span.name, span.kind, is_tool_kind(span))
            roles[role] = roles.get(role, 0) + 1
        sizes = ", ".join(f"{len(t.data) / 1024:.0f}" for t in templates)
        shared = {s.span_id for s in spans} & {s.span_id for s in other}
        print(
            f"{variant}: {len(templates)} templates of {len(spans)} spans, {templates[0].counts}"
            f"; roles {roles}; KiB: {sizes}; span ids shared by two sends: {len(shared)}"
        )
    fresh = Fresh(build_templates("mixed"))
    started = time.perf_counter()
    for _ in range(500):
        fresh.render(fresh.templates[0])
    print(f"render: {(time.perf_counter() - started) / 500 * 1e6:.0f} µs per request")


if __name__ == "__main__":
    _describe()
