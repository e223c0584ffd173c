"""Hypothesis strategies for the fuzz (tests/test_fuzz.py): hostile but well-typed OTLP.

A ``Scenario`` is a few export requests from a few tenants, with the arrival clock's steps
between them. Its spans are MCP tool calls and tool listings in every dialect the
classifier reads (processor/classify/dialects.py: the harness convention, semconv with
fastmcp and the mcp SDK, Traceloop, Logfire), mixed with plain spans, where:

- tool, server, turn, harness and tenant names come from a small pool per scenario (so
  calls repeat and circuits open), and may hold control characters, ``|``, ``/``, ``__``,
  or be empty or 100 KB long;
- times are anything a uint64 holds: 0, 2**64-1, the issue-14 value, start after end;
- status codes and span kinds are any int32, ids are reused (duplicates) or invalid;
- every attribute may be missing, of another type than the dialect writes, or JSON that is
  nested, huge, truncated, holds integers past a float or lone surrogates (``\\ud800``),
  or is not JSON at all;
- result bodies are MCP envelopes, typed failures, wrappers, and random nested JSON.

Bytes-level strategies (raw bytes, mutations of a valid encoding, OTLP/JSON documents
with random leaves) feed the decoders. Nothing here reads the wall clock.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.classify_builders import key_values

Draw = Callable[[st.SearchStrategy[Any]], Any]
Spans = st.SearchStrategy[tuple[str, dict[str, Any]]]  # a span's name and attributes

START_S = 1_767_225_600.0  # 2026-01-01T00:00:00Z: where the fake arrival clock starts
START_NS = int(START_S) * 1_000_000_000
U64_MAX = 2**64 - 1
I64_MAX = 2**63 - 1
ISSUE_14_END_NS = 17216481514400226216  # the end time of issue 14's span (ValueError)
INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
INT64 = st.integers(min_value=-(2**63), max_value=I64_MAX)

# --- names and text ----------------------------------------------------------------------

CONTROL = st.text(st.characters(max_codepoint=0x1F), min_size=1, max_size=4)
SPECIAL_NAMES = st.sampled_from(
    ["", " ", "a__b", "__", "x__", "__y", "srv/tool", "/", "|", "a|b|c", "tools/call",
     "mcp.tool.call", "-", "\x00", "\n", "\r\nforged: line", "é", "🙂", "\u202e", "\ufeff"]
)  # fmt: skip


def huge(min_chars: int = 1_000, max_chars: int = 100_000) -> st.SearchStrategy[str]:
    """A long string: a short piece (maybe with control characters) repeated."""
    piece = st.one_of(st.text(min_size=1, max_size=6), CONTROL)
    return st.tuples(piece, st.integers(min_chars, max_chars)).map(
        lambda t: (t[0] * (t[1] // len(t[0]) + 1))[: t[1]]
    )


# Lone surrogates: no protobuf string holds one, but JSON text does ("\ud800"), and many
# names and texts are read out of JSON attributes (Traceloop's input, Logfire's request,
# every result body). Python values here; json.dumps writes them as escapes.
SURROGATES = st.sampled_from(["\ud800", "\udfff", "a\udc00b", "\udbff\udbff", "x\ud83d"])

NAME = st.one_of(
    st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True),
    SPECIAL_NAMES,
    st.text(max_size=24),
    st.tuples(st.text(max_size=6), CONTROL, st.text(max_size=6)).map("".join),
    huge(),
)

FAILURE_WORDS = st.sampled_from(
    ["upstream MCP session is closed", "Connection refused", "request timed out", "503",
     "Unknown tool: x", "tool foo not found", "user declined", "permission denied",
     "cancelled", "interrupted", "deadline exceeded", "broken pipe", "EOF", "error",
     "Traceback (most recent call last):", "password=hunter2 token=sk-abc", ""]
)  # fmt: skip
TEXT = st.one_of(st.text(max_size=40), FAILURE_WORDS, CONTROL, huge(max_chars=70_000))

# --- values ------------------------------------------------------------------------------

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**63, 10**400, -(10**400)]),
    st.floats(allow_nan=False),  # NaN and the infinities go in as text below
    st.text(max_size=20),
    FAILURE_WORDS,
    SURROGATES,
)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


def deep_json(depth: int, kind: str) -> str:
    return "[" * depth + "]" * depth if kind == "array" else '{"a":' * depth + "1" + "}" * depth


def json_text(values: st.SearchStrategy[Any] = JSON_VALUES) -> st.SearchStrategy[str]:
    """JSON text: well-formed, cut short, deep, huge, non-standard, or not JSON."""
    dumped = values.map(lambda v: json.dumps(v, allow_nan=True))
    return st.one_of(
        dumped,
        dumped,
        dumped.flatmap(lambda s: st.integers(0, len(s)).map(lambda n: s[:n])),  # truncated
        st.tuples(st.integers(1, 5_000), st.sampled_from(["array", "object"])).map(
            lambda t: deep_json(*t)
        ),
        st.sampled_from(["NaN", "-Infinity", '{"a": NaN}', "1" * 5_000, "{", "", "null"]),
        huge(max_chars=70_000).map(json.dumps),  # a JSON string over the decode cap
        st.text(max_size=30),
    )


SCALARS = st.one_of(
    st.none(), st.text(max_size=30), INT64, st.floats(), st.booleans(), st.binary(max_size=16)
)
ANY_VALUE: st.SearchStrategy[Any] = st.recursive(
    st.one_of(SCALARS, SCALARS, huge(max_chars=20_000)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=6,
)


def typed(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Usually the type the dialect writes; sometimes any other AnyValue."""
    return st.one_of(strategy, strategy, strategy, ANY_VALUE)


def result_body() -> st.SearchStrategy[Any]:
    """A tool's result: an MCP envelope, a typed failure, a wrapper, or anything."""
    content = st.lists(
        st.fixed_dictionaries(
            {"type": st.sampled_from(["text", "image", "resource", ""])},
            optional={"text": st.one_of(TEXT, SURROGATES), "data": st.text(max_size=10)},
        ),
        max_size=3,
    )
    envelope = st.fixed_dictionaries(
        {},
        optional={
            "content": st.one_of(content, JSON_VALUES),
            "isError": st.one_of(st.booleans(), JSON_VALUES),
            "structuredContent": st.one_of(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "_tag": st.sampled_from(["NotFoundFailure", "TimeoutError", "Ok"]),
                        "error": JSON_VALUES,
                        "ok": JSON_VALUES,
                        "message": TEXT,
                    },
                ),
                JSON_VALUES,
            ),
        },
    )
    return st.recursive(
        st.one_of(envelope, JSON_VALUES, TEXT),
        lambda inner: st.fixed_dictionaries(
            {"result": st.one_of(inner, inner.map(lambda v: json.dumps(v, default=repr)))},
            optional={"is_error": JSON_VALUES},
        ),
        max_leaves=3,
    )


def as_json_or_value(body: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A body as a span carries it: JSON text (mostly), or the structure, or anything."""
    return st.one_of(body.map(lambda v: json.dumps(v, default=repr)), body, json_text(), ANY_VALUE)


# --- spans -------------------------------------------------------------------------------

TIMES = st.one_of(
    st.sampled_from(
        [0, 1, START_NS, I64_MAX, I64_MAX + 1, U64_MAX, ISSUE_14_END_NS, 10**18, 4 * 10**18]
    ),
    st.integers(START_NS - 10**13, START_NS + 10**13),  # around the arrival clock
    st.integers(0, U64_MAX),
)
STATUS_CODES = st.one_of(st.sampled_from([0, 1, 2]), INT32)
KINDS = st.one_of(st.sampled_from([1, 2, 3, 0]), INT32)


@dataclass(frozen=True)
class Pools:
    """What the spans of one scenario draw their names and ids from."""

    tools: tuple[str, ...]
    servers: tuple[str, ...]
    turns: tuple[str, ...]
    tenants: tuple[str, ...]
    harnesses: tuple[str, ...]
    trace_ids: tuple[bytes, ...]
    span_ids: tuple[bytes, ...]


def _id(size: int, seed: int) -> bytes:
    return (0x3C00 + seed).to_bytes(size, "big")


INVALID_TRACE_IDS = st.sampled_from([b"", bytes(16), b"\x01" * 15, b"\x01" * 17])
INVALID_SPAN_IDS = st.sampled_from([b"", bytes(8), b"\x02" * 7, b"\x02" * 9])


@st.composite
def pools(draw: Draw) -> Pools:
    def some(strategy: st.SearchStrategy[Any], most: int) -> tuple[Any, ...]:
        return tuple(draw(st.lists(strategy, min_size=1, max_size=most)))

    trace_count = draw(st.integers(1, 3))
    span_count = draw(st.integers(2, 8))
    return Pools(
        tools=some(NAME, 4),
        servers=some(NAME, 3),
        turns=some(NAME, 3),
        tenants=some(st.one_of(st.just(""), NAME), 3),
        harnesses=some(NAME, 2),
        trace_ids=tuple(_id(16, n) for n in range(trace_count)),
        span_ids=tuple(_id(8, n) for n in range(span_count)),
    )


def _pick(pool: tuple[Any, ...], fresh: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """From the pool (so that names repeat), now and then something new."""
    return st.one_of(st.sampled_from(pool), st.sampled_from(pool), st.sampled_from(pool), fresh)


def json_name(pool: tuple[str, ...]) -> st.SearchStrategy[Any]:
    """A name as a JSON document inside an attribute holds it: maybe a lone surrogate."""
    return st.one_of(typed(_pick(pool, NAME)), SURROGATES)


def optional(**attributes: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Attributes of which any may be missing."""
    return st.fixed_dictionaries({}, optional=attributes)


def _common(p: Pools) -> dict[str, st.SearchStrategy[Any]]:
    """What any MCP span may carry besides its dialect's own attributes."""
    return {
        "mcp.turn.id": typed(_pick(p.turns, NAME)),
        "mcp.turn.round": typed(st.one_of(st.integers(-2, 5), INT64)),
        "mcp.session.id": typed(st.sampled_from(["s1", "s2", ""])),
        "jsonrpc.request.id": typed(st.one_of(st.integers(0, 3), st.text(max_size=3))),
        "error.type": typed(st.one_of(FAILURE_WORDS, st.sampled_from(["tool_error", "x"]))),
    }


def harness_call(p: Pools) -> Spans:
    attributes = optional(
        **_common(p),
        **{
            "mcp.tool.name": typed(_pick(p.tools, NAME)),
            "mcp.server.name": typed(_pick(p.servers, NAME)),
            "mcp.tool.arguments": as_json_or_value(JSON_VALUES),
            "mcp.tool.args_hash": typed(st.text(max_size=64)),
            "mcp.tool.result": as_json_or_value(result_body()),
            "mcp.tool.is_error": typed(st.one_of(st.booleans(), st.sampled_from(["true", "x"]))),
            "mcp.tool.outcome": typed(
                st.sampled_from(["ok", "failed", "error", "declined", "cancelled", "?", ""])
            ),
            "mcp.tool.failure_class": typed(
                st.sampled_from(["transport", "timeout", "unknown_tool", "hidden", "nope"])
            ),
            "mcp.tool.error": typed(TEXT),
            "mcp.breaker.refused": typed(st.booleans()),
        },
    )
    return attributes.map(lambda a: ("mcp.tool.call", a))


def harness_listing(p: Pools) -> Spans:
    count = typed(st.one_of(st.integers(0, 5), INT64))
    names = typed(st.lists(_pick(p.tools, NAME), max_size=4))
    connected_at = st.one_of(
        st.dictionaries(
            _pick(p.servers, NAME), st.one_of(JSON_SCALARS, st.floats()), max_size=3
        ).map(json.dumps),
        json_text(),
        ANY_VALUE,
    )
    attributes = optional(
        **_common(p),
        **{f"mcp.tools.{name}": count for name in ("configured", "listed", "reached", "offered")},
        **{
            "mcp.server.name": typed(_pick(p.servers, NAME)),
            "mcp.tools.cached": typed(st.booleans()),
            "mcp.tools.offered_names": names,
            "mcp.namespaces.connected": names,
            "mcp.namespaces.connected_at": connected_at,
            "mcp.namespaces.probe_source": typed(
                st.sampled_from(["client_namespace", "offline_spawn", "?"])
            ),
            "mcp.session.tool_snapshot_at": typed(st.one_of(INT64, st.floats())),
        },
    )
    return attributes.map(lambda a: ("mcp.tools.list", a))


def semconv(p: Pools) -> Spans:
    @st.composite
    def build(draw: Draw) -> tuple[str, dict[str, Any]]:
        method = draw(st.sampled_from(["tools/call", "tools/list"]))
        tool = draw(_pick(p.tools, NAME))
        name = draw(
            st.sampled_from(
                [f"{method} {tool}", f"MCP send {method} {tool}", method, f"MCP {method}"]
            )
        )
        attributes = draw(
            optional(
                **_common(p),
                **{
                    "gen_ai.tool.name": typed(_pick(p.tools, NAME)),
                    "mcp.server.name": typed(_pick(p.servers, NAME)),
                    "fastmcp.server.name": typed(_pick(p.servers, NAME)),
                    "gen_ai.tool.call.arguments": as_json_or_value(JSON_VALUES),
                    "gen_ai.tool.call.result": as_json_or_value(result_body()),
                    "rpc.response.status_code": typed(
                        st.sampled_from(["-32601", "-32602", "-32001", "0", "--1", "1" * 20])
                    ),
                    "rpc.jsonrpc.error_code": typed(st.integers(-32700, -32000).map(str)),
                },
            )
        )
        attributes["mcp.method.name"] = draw(typed(st.just(method)))
        return name, attributes

    return build()


def traceloop(p: Pools) -> Spans:
    @st.composite
    def build(draw: Draw) -> tuple[str, dict[str, Any]]:
        if draw(st.booleans()):
            output = st.fixed_dictionaries({}, optional={"tools": typed(st.lists(NAME))})
            attributes = draw(
                optional(**_common(p), **{"traceloop.entity.output": as_json_or_value(output)})
            )
            return "tools/list.mcp", attributes
        tool = draw(_pick(p.tools, NAME))
        given = st.fixed_dictionaries(
            {}, optional={"tool_name": json_name(p.tools), "arguments": JSON_VALUES}
        )
        attributes = draw(
            optional(
                **_common(p),
                **{
                    "traceloop.entity.name": typed(_pick(p.tools, NAME)),
                    "traceloop.entity.input": as_json_or_value(given),
                    "traceloop.entity.output": as_json_or_value(result_body()),
                },
            )
        )
        attributes["traceloop.span.kind"] = draw(typed(st.just("tool")))
        return f"{tool}.tool", attributes

    return build()


def logfire(p: Pools) -> Spans:
    @st.composite
    def build(draw: Draw) -> tuple[str, dict[str, Any]]:
        method = draw(st.sampled_from(["tools/call", "tools/list", "other"]))
        tool = draw(_pick(p.tools, NAME))
        params = st.fixed_dictionaries(
            {}, optional={"name": json_name(p.tools), "arguments": JSON_VALUES}
        )
        request = st.fixed_dictionaries(
            {},
            optional={
                "method": typed(st.just(method)),
                "params": st.one_of(params, JSON_VALUES),
                "id": JSON_VALUES,
            },
        )
        attributes = draw(
            optional(
                **_common(p),
                request=as_json_or_value(request),
                response=as_json_or_value(result_body()),
            )
        )
        return f"MCP request: {method} {tool}", attributes

    return build()


def plain(p: Pools) -> Spans:
    """A span no dialect reads (most traffic), or one whose name only looks like MCP."""
    name = st.one_of(st.text(max_size=20), st.sampled_from(["mcp.tool", "MCP x", "x.tool"]))
    return st.tuples(name, optional(note=ANY_VALUE))


DIALECTS = (
    harness_call,
    harness_call,
    harness_listing,
    semconv,
    semconv,
    traceloop,
    logfire,
    plain,
)


def attribute_values(value: Any) -> Any:
    """As an OTLP AnyValue can hold it: an integer beyond int64 as its text, a lone
    surrogate as its escape."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not -(2**63) <= value <= I64_MAX:
        return str(value)
    if isinstance(value, str):  # a lone surrogate: as JSON would escape it
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, Mapping):
        return {attribute_values(str(k)): attribute_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [attribute_values(v) for v in value]
    return value


@dataclass(frozen=True)
class SpanSpec:
    name: str
    attributes: Mapping[str, Any]
    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes
    kind: int
    start_ns: int
    end_ns: int
    status_code: int
    status_message: str
    exceptions: tuple[tuple[Any, Any], ...]

    def build(self) -> Span:
        span = Span(
            name=self.name,
            trace_id=self.trace_id,
            span_id=self.span_id,
            parent_span_id=self.parent_span_id,
            kind=self.kind,  # type: ignore[arg-type]  # any int32: an open enum
            start_time_unix_nano=self.start_ns,
            end_time_unix_nano=self.end_ns,
        )
        span.status.code = self.status_code  # type: ignore[assignment]
        span.status.message = self.status_message
        span.attributes.extend(key_values(attribute_values(self.attributes)))
        for kind, message in self.exceptions:
            event = span.events.add(name="exception", time_unix_nano=self.start_ns)
            exception = {"exception.type": kind, "exception.message": message}
            event.attributes.extend(key_values(attribute_values(exception)))
        return span


@st.composite
def span_specs(draw: Draw, p: Pools) -> SpanSpec:
    dialect = draw(st.sampled_from(DIALECTS))
    name, attributes = draw(dialect(p))
    start = draw(TIMES)
    # Mostly a sane duration after the start; else any time at all (start > end too).
    end = draw(st.one_of(st.integers(0, 10**10).map(lambda d: min(start + d, U64_MAX)), TIMES))
    return SpanSpec(
        name=name,
        attributes=attributes,
        trace_id=draw(_pick(p.trace_ids, INVALID_TRACE_IDS)),
        span_id=draw(_pick(p.span_ids, INVALID_SPAN_IDS)),
        parent_span_id=draw(st.one_of(st.just(b""), st.sampled_from(p.span_ids), st.binary())),
        kind=draw(KINDS),
        start_ns=start,
        end_ns=end,
        status_code=draw(STATUS_CODES),
        status_message=draw(st.one_of(st.just(""), TEXT)),
        exceptions=tuple(draw(st.lists(st.tuples(typed(FAILURE_WORDS), typed(TEXT)), max_size=2))),
    )


@dataclass(frozen=True)
class ScopeSpec:
    name: str
    spans: tuple[SpanSpec, ...]


@dataclass(frozen=True)
class ResourceSpec:
    attributes: Mapping[str, Any]
    scopes: tuple[ScopeSpec, ...]


@dataclass(frozen=True)
class RequestSpec:
    resources: tuple[ResourceSpec, ...]
    route: str  # "protobuf" (gRPC, OTLP/HTTP protobuf), "json" (OTLP/HTTP JSON)
    advance_s: float  # how far the arrival clock moves before this request
    tenant: str | None  # what the sender authenticated as (processor.request.sender.Sender)

    def build(self) -> ExportTraceServiceRequest:
        request = ExportTraceServiceRequest()
        for resource in self.resources:
            resource_spans = request.resource_spans.add()
            attributes = attribute_values(resource.attributes)
            resource_spans.resource.attributes.extend(key_values(attributes))
            for scope in resource.scopes:
                scope_spans = resource_spans.scope_spans.add()
                scope_spans.scope.name = scope.name
                scope_spans.spans.extend(s.build() for s in scope.spans)
        return request

    @property
    def span_count(self) -> int:
        return sum(len(s.spans) for r in self.resources for s in r.scopes)


@dataclass(frozen=True)
class Scenario:
    pools: Pools
    requests: tuple[RequestSpec, ...]
    sensitive: bool  # a breaker that opens on the first failure, small bounds everywhere
    final_advance_s: float = 0.0
    flush: bool = False
    tenant_must_match: bool = False  # receivers.span_tenant: match (pipeline.py)


ADVANCE_S = st.one_of(
    st.sampled_from([0.0, 0.5, 3.0, 61.0, 3_601.0, 86_400.0 * 30]),
    st.floats(0, 10_000, allow_nan=False),
)


@st.composite
def resource_specs(draw: Draw, p: Pools) -> ResourceSpec:
    attributes = draw(
        optional(
            **{
                "tenant.id": typed(_pick(p.tenants, NAME)),
                "service.name": typed(_pick(p.harnesses, NAME)),
            }
        )
    )
    scopes = draw(
        st.lists(
            st.builds(
                ScopeSpec,
                name=st.one_of(st.sampled_from(["fastmcp", "mcp-python-sdk", ""]), NAME),
                spans=st.lists(span_specs(p), max_size=5).map(tuple),
            ),
            min_size=0,
            max_size=2,
        )
    )
    return ResourceSpec(attributes, tuple(scopes))


@st.composite
def request_specs(draw: Draw, p: Pools) -> RequestSpec:
    resources = tuple(draw(st.lists(resource_specs(p), min_size=1, max_size=2)))
    return RequestSpec(
        resources=resources,
        route=draw(st.sampled_from(["protobuf", "protobuf", "json"])),
        advance_s=draw(ADVANCE_S),
        tenant=draw(st.one_of(st.none(), st.sampled_from(p.tenants))),
    )


@st.composite
def scenarios(draw: Draw) -> Scenario:
    p = draw(pools())
    requests = draw(st.lists(request_specs(p), min_size=1, max_size=4))
    # Now and then an exporter's retry: the same request again.
    if draw(st.booleans()):
        requests.append(draw(st.sampled_from(requests)))
    return Scenario(
        pools=p,
        requests=tuple(requests),
        sensitive=draw(st.booleans()),
        final_advance_s=draw(ADVANCE_S),
        flush=draw(st.booleans()),
        tenant_must_match=draw(st.booleans()),
    )


# --- bytes -------------------------------------------------------------------------------

MARKERS = st.sampled_from([b"mcp", b"tools/", b"mcp.tool.call", b""])


JSON_BODIES = st.one_of(
    json_text(),
    st.dictionaries(st.one_of(st.text(max_size=8), SURROGATES), JSON_VALUES, max_size=3).map(
        json.dumps
    ),
    st.sampled_from(['{"resourceSpans": [{"scopeSpans": [{"spans": [{}]}]}]}', '{"\\ud800": 1}']),
).map(lambda text: text.encode("utf-8", "surrogatepass"))


@st.composite
def raw_payloads(draw: Draw) -> bytes:
    """Random bytes (or a JSON document: the OTLP/JSON decoder gets them all too), now and
    then with an MCP marker inside (the parsed path)."""
    data: bytes = draw(st.one_of(st.binary(max_size=512), JSON_BODIES))
    marker: bytes = draw(MARKERS)
    at = draw(st.integers(0, len(data)))
    return data[:at] + marker + data[at:]


MUTATIONS = st.sampled_from(["flip", "delete", "insert", "duplicate", "truncate", "append"])


@st.composite
def mutated(draw: Draw, payload: bytes) -> bytes:
    """A valid encoding with a few byte-level edits (each may or may not break it)."""
    data = bytearray(payload)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(MUTATIONS)
        at = draw(st.integers(0, len(data)))
        if op == "flip" and data:
            at = min(at, len(data) - 1)
            data[at] ^= draw(st.integers(1, 255))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "duplicate":
            data[at:at] = data[at : at + draw(st.integers(1, 64))]
        elif op == "truncate":
            del data[at:]
        else:  # a valid request appended: encoded requests concatenate
            data += payload
    return bytes(data)


def json_leaves(document: Any, draw: Draw) -> Any:
    """The document with some leaves (and some whole subtrees) replaced by random JSON."""
    if draw(st.integers(0, 9)) == 0:
        return draw(JSON_VALUES)
    if isinstance(document, dict):
        return {k: json_leaves(v, draw) for k, v in document.items()}
    if isinstance(document, list):
        return [json_leaves(v, draw) for v in document]
    return document


# --- kept inputs -----------------------------------------------------------------------------


def corrupt_service_name() -> bytes:
    """Issue 29's shape (185 bytes, found by fuzzing): a request whose only markers, b"mcp"
    and b"tool", are in its resource's service.name, whose string length is corrupt (127,
    past the end of its value), around one plain HTTP span. Its framing down to the spans
    holds; the resource does not decode, and neither does the request."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.extend(
        key_values({"service.name": "mcp-tool-gateway", "telemetry.sdk.language": "python"})
    )
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = "opentelemetry.instrumentation.requests"
    scope_spans.spans.add(  # a plain span: no marker in it
        trace_id=bytes(range(1, 17)),
        span_id=bytes(range(1, 9)),
        name="GET /orders/",
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=START_NS,
        end_time_unix_nano=START_NS + 250_000_000,
    )
    payload = request.SerializeToString()
    length = payload.index(b"\x10mcp-tool-gateway")  # the string's length, 16
    return payload[:length] + b"\x7f" + payload[length + 1 :]
