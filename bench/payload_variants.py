"""The hop benchmark's synthetic payloads: ``plain``, ``mixed`` and ``harness``, one request
of 512 spans each (bench/payload.py describes them, and makes them templates sent fresh).
"""

from __future__ import annotations

from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from payload_spans import (
    NONCE_CHARS,
    ORDINARY,
    RESOURCE,
    SCOPES,
    SPANS_PER_REQUEST,
    SPANS_PER_TRACE,
    TABLES,
    TOOLS,
    Attributes,
    Counts,
    Rng,
    encode_request,
    has_marker,
    make_span,
    new_span_id,
    new_trace_id,
    ordinary_span,
)

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
    return make_span(
        rng, name, Span.SPAN_KIND_CLIENT, attributes, trace_id, parent_id, start, duration
    )


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
    return make_span(
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


def plain_or_mixed_request(variant: str, rng: Rng, base_ns: int) -> tuple[bytes, Counts]:
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
        trace_id, start = new_trace_id(rng), base_ns + trace * 7_000_000
        root = ordinary_span(rng, ORDINARY[0][0], trace_id, new_span_id(rng), start)
        agent[ORDINARY[0][1]].append(root)
        mcp_spans = {"pair": 2, "listing": 2, "lone": 1, "": 0}[unit]
        for child in range(SPANS_PER_TRACE - 1 - mcp_spans):
            make, scope = rng.choice(ORDINARY)
            offset = (child + 1) * 100_000
            agent[scope].append(ordinary_span(rng, make, trace_id, root.span_id, start + offset))
        if not unit:
            continue
        request_id += 1
        failed = rng.random() < TOOL_FAILURE_SHARE
        tool = rng.choice(TOOLS)
        at = start + 900_000
        if unit == "lone":  # its caller propagates context but records no span
            lone = _sdk_server(
                rng, "tools/call", tool, request_id, trace_id, new_span_id(rng), at, failed
            )
            tool_server.append(lone)
        else:
            method, tool = ("tools/call", tool) if unit == "pair" else ("tools/list", "")
            pair = _sdk_pair(rng, method, tool, request_id, trace_id, root.span_id, at, failed)
            agent[-1].append(pair[0])
            tool_server.append(pair[1])
        counts["mcp"] += mcp_spans
        counts["calls" if unit != "listing" else "listings"] += 1
    scopes = list(zip((*SCOPES, SDK_SCOPE), agent, strict=True))
    data = encode_request([(RESOURCE, scopes), (TOOL_SERVER_RESOURCE, [(SDK_SCOPE, tool_server)])])
    if variant == "plain" and has_marker(data):
        raise AssertionError("the plain payload holds an MCP marker")
    return data, Counts(SPANS_PER_REQUEST, counts["mcp"], counts["calls"], counts["listings"])


def _llm_round(rng: Rng, trace_id: bytes, parent_id: bytes, start: int) -> list[Span]:
    """One model call: the instrumentation's chat span and the HTTP request under it."""
    model = rng.choice(MODELS)
    input_tokens = rng.randrange(2_000, 60_000)
    chat = make_span(
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
    http = make_span(
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


def harness_request(rng: Rng, base_ns: int) -> tuple[bytes, Counts]:
    """16 turns of one agent, 32 spans each: see bench/payload.py's docstring."""
    scopes: list[list[Span]] = [[] for _ in HARNESS_SCOPES]
    counts = {"mcp": 0, "calls": 0, "listings": 0}
    for turn in range(SPANS_PER_REQUEST // HARNESS_SPANS_PER_TURN):
        trace_id, start = new_trace_id(rng), base_ns + turn * 4_000_000_000
        turn_id = f"{rng.getrandbits(64):016x}{'0' * NONCE_CHARS}"  # suffix: made per send
        root = make_span(
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
        listing = make_span(
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
                execute = make_span(
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
                call = make_span(
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
                make_span(
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
    data = encode_request([(HARNESS_RESOURCE, list(zip(HARNESS_SCOPES, scopes, strict=True)))])
    spans = sum(len(s) for s in scopes)
    assert spans == SPANS_PER_REQUEST, spans
    return data, Counts(spans, counts["mcp"], counts["calls"], counts["listings"])
