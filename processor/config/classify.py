"""Classification: how MCP spans are read, paired into calls and told apart by tenant."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from processor.config.checks import not_positive

DEFAULT_TURN_KEYS = ("mcp.turn.id",)  # span attributes naming the turn; else the trace id
DEFAULT_ROUND_KEYS = ("mcp.turn.round",)
# Seconds. The two halves of a call are exported by two processes (the agent, the MCP
# server), each through the OpenTelemetry SDK's batch span processor, which sends every
# 5 s by default: one half can arrive up to that much after the other, and a shorter wait
# (the Collector's servicegraph connector holds 2 s) decides calls alone, as unknown,
# whose server half was on its way. Only an undecided half waits; its span is not held.
DEFAULT_PAIR_WAIT_S = 10.0
DEFAULT_MAX_PENDING_CALLS = 10_000
DEFAULT_MAX_SEEN_SPANS = 200_000
DEFAULT_SEEN_TTL_S = 600.0  # an exporter's retry of the same spans comes within minutes
# MCP spans whose annotations are remembered for a later copy: about 600 bytes each.
DEFAULT_MAX_ANNOTATED_SPANS = 20_000
DEFAULT_MAX_SESSIONS = 10_000
DEFAULT_TENANT_ATTRIBUTE = "tenant.id"
# A span's times come from its sender: no later than our clock plus this, so a span from
# the future cannot set a deadline, a window or a wire timestamp (counted when moved).
DEFAULT_MAX_CLOCK_SKEW_S = 300.0
# Tool, server, turn, tenant and harness names are cut to this many characters before they
# are stored, labelled or sent: memory per key is bounded in bytes, not only in keys.
DEFAULT_MAX_NAME_CHARS = 256


@dataclass(frozen=True, kw_only=True)
class ClassifyConfig:
    """Reading MCP spans: turn keys, pairing of client and server spans, identity."""

    turn_keys: tuple[str, ...] = DEFAULT_TURN_KEYS
    round_keys: tuple[str, ...] = DEFAULT_ROUND_KEYS
    # How long the undecided half of a call waits for its other half before it is decided
    # alone (the mcp SDK 2.x client span says nothing about the outcome; its server span does).
    pair_wait_s: float = DEFAULT_PAIR_WAIT_S
    max_pending_calls: int = DEFAULT_MAX_PENDING_CALLS
    # Spans already read are remembered this long, so a span exported twice counts once.
    max_seen_spans: int = DEFAULT_MAX_SEEN_SPANS
    seen_ttl_s: float = DEFAULT_SEEN_TTL_S
    # A span's second copy goes out with the first copy's mcp.breaker.* attributes while
    # it is among this many (and within seen_ttl_s); past that, bare.
    max_annotated_spans: int = DEFAULT_MAX_ANNOTATED_SPANS
    max_sessions: int = DEFAULT_MAX_SESSIONS
    # The last resort for naming a call's server: tool name -> server name.
    tool_servers: dict[str, str] = field(default_factory=dict)
    # Regular expressions over a result's text that mark a failure hidden under isError false.
    hidden_failure_patterns: tuple[str, ...] = ()
    # The resource attribute naming the tenant a harness belongs to: circuits, turn blocks
    # and advisories are kept apart per tenant. Spans without it belong to no tenant ("").
    tenant_attribute: str = DEFAULT_TENANT_ATTRIBUTE
    max_clock_skew_s: float = DEFAULT_MAX_CLOCK_SKEW_S
    max_name_chars: int = DEFAULT_MAX_NAME_CHARS

    def validate(self, prefix: str) -> list[str]:
        problems = not_positive(
            prefix,
            self,
            "max_clock_skew_s",
            "max_name_chars",
            "pair_wait_s",
            "seen_ttl_s",
            "max_pending_calls",
            "max_seen_spans",
            "max_annotated_spans",
            "max_sessions",
        )
        if not self.turn_keys:
            problems.append(f"{prefix}.turn_keys: must name at least one attribute")
        for pattern in self.hidden_failure_patterns:
            try:
                re.compile(pattern)
            except re.error as error:
                problems.append(
                    f"{prefix}.hidden_failure_patterns: {pattern!r} is not a valid regular "
                    f"expression ({error})"
                )
        return problems
