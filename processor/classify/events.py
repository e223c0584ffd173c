"""The normalized events classification produces: a tool call, or a tool listing.

Everything downstream (the breaker, roster health, metrics, advisories) reads these and
never a raw span. Raw arguments are not in here: only their fingerprint.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mcp_breaker_client.shared.cheap_dataclasses import builder, slot_init
from mcp_breaker_client.shared.verdict import FailureClass, Outcome, Verdict


class Dialect(enum.StrEnum):
    HARNESS = "harness"  # our convention: mcp.tool.call / mcp.tools.list
    SEMCONV = "semconv"  # OpenTelemetry MCP semantic conventions
    MCP_SDK = "mcp_sdk"  # the official mcp Python SDK 2.x (semconv plus its quirks)
    FASTMCP = "fastmcp"
    TRACELOOP = "traceloop"  # OpenLLMetry's opentelemetry-instrumentation-mcp
    LOGFIRE = "logfire"
    # Agent frameworks' own tool spans (frameworks.py): one span around each tool they run.
    GENAI = "genai"  # the OpenTelemetry GenAI conventions' execute_tool span, any writer
    PYDANTIC_AI = "pydantic_ai"
    STRANDS = "strands"
    OPENINFERENCE = "openinference"  # its TOOL span: OpenAI Agents, LangChain, LangGraph, ...
    VERCEL_AI = "vercel_ai"


class Side(enum.StrEnum):
    CLIENT = "client"  # the harness's view of the call
    SERVER = "server"  # the tool server's view
    UNSPECIFIED = "unspecified"  # one span tells the whole call (harness, traceloop)


@slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    turn: str  # mcp.turn.id (or a configured key), else the trace id in hex
    round: int | None
    server: str | None
    tool: str
    fingerprint: str | None  # None when no arguments were recorded; never a made-up one
    verdict: Verdict
    start_ns: int
    end_ns: int
    trace_id: bytes
    span_ids: tuple[bytes, ...]  # every span the call was read from
    dialect: Dialect
    harness: str = ""  # the calling process's service.name, when its resource names one
    tenant: str = ""  # from the resource attribute classify.tenant_attribute; "" = default
    # When the call was complete enough to decide (the pipeline's arrival clock, seconds):
    # how long after another call it arrived, for the breaker's reorder window.
    arrived_s: float = 0.0

    @property
    def outcome(self) -> Outcome:
        return self.verdict.outcome

    @property
    def failure_class(self) -> FailureClass | None:
        return self.verdict.failure_class


@slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolListing:
    turn: str
    round: int | None
    server: str | None
    configured: int | None = None
    listed: int | None = None
    reached: int | None = None
    cached: bool | None = None
    unavailable: int | None = None
    registered: int | None = None
    offered: int | None = None
    namespaces_connected: tuple[str, ...] | None = None
    namespaces_attached: tuple[str, ...] | None = None
    namespaces_required: tuple[str, ...] | None = None
    # When the session's tool snapshot was taken, and when each namespace connected
    # (epoch seconds): a namespace that connected later cannot be in the snapshot.
    tool_snapshot_at_s: float | None = None
    namespaces_connected_at_s: tuple[tuple[str, float], ...] | None = None
    # Where the health claim comes from: "client_namespace" (a call through the session's
    # own client) can prove a namespace works; "offline_spawn" cannot.
    probe_source: str | None = None
    offered_tools: tuple[str, ...] | None = None  # names, when the harness records them
    problems: tuple[str, ...] = ()  # attributes that were present but malformed
    start_ns: int
    end_ns: int
    trace_id: bytes
    span_ids: tuple[bytes, ...]
    dialect: Dialect
    harness: str = ""  # the listing process's service.name
    tenant: str = ""


Event = ToolCall | ToolListing


# The builders of the events, for classification: one is built per call and per listing.
build_tool_call = builder(ToolCall)
build_tool_listing = builder(ToolListing)
