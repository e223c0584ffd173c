"""The breaker: turn blocks within a turn, circuits per tool and per server across turns."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mcp_breaker_client.shared.turns import (
    DEFAULT_MAX_BLOCKS_PER_TURN,
    DEFAULT_TURN_IDLE_S,
    TurnKey,
)

from processor.config.checks import not_positive

DEFAULT_TURN_KEY = "cause"  # transport/timeout block the tool; other failures the call
DEFAULT_MAX_TURNS = 50_000
DEFAULT_CLOCK_SKEW_S = 5.0  # spans from different hosts may disagree by this much
# Agent tool calls come minutes apart, not milliseconds: an hour of history per key.
DEFAULT_WINDOW_S = 3600.0
DEFAULT_MAX_WINDOW_CALLS = 100  # per key: the memory bound of the window
DEFAULT_MIN_CALLS = 3
DEFAULT_FAILURE_RATIO = 1.0  # "only failures", as the sirens-echo seed asks
DEFAULT_CONSECUTIVE_FAILURES = 3
DEFAULT_OPEN_BASE_S = 300.0
DEFAULT_OPEN_MULTIPLIER = 2.0
DEFAULT_OPEN_MAX_S = 3600.0
DEFAULT_OPEN_JITTER = 0.1  # each open period is drawn from [d*(1-j), d*(1+j)]
DEFAULT_PROBE_PERMITS = 1
DEFAULT_PROBE_LEASE_S = 120.0
DEFAULT_MAX_CIRCUITS = 10_000
DEFAULT_BLAST_RADIUS_RATIO = 0.5  # more than this share of a server's tools open: it is out
DEFAULT_BLAST_RADIUS_MIN_TOOLS = 2
# A failure that arrives late can still revise the calls decided this long before it (arrival
# time): one BatchSpanProcessor delay (5 s) on each side of a client/server pair, and more.
DEFAULT_REORDER_WINDOW_S = 10.0
DEFAULT_REORDER_MAX_CALLS = 10_000  # calls held for revision, across all turns


class Rule(enum.StrEnum):
    """The breaker's rules, each of which can be put in shadow mode on its own."""

    TURN_CALL = "turn_call"  # within a turn, per identical call
    TURN_TOOL = "turn_tool"  # within a turn, per tool
    TOOL = "tool"  # across turns, per tool
    SERVER = "server"  # across turns, per server


@dataclass(frozen=True, kw_only=True)
class BreakerConfig:
    """Within a turn: one failure per key. Across turns: a circuit per tool and per server."""

    turn_key: TurnKey = TurnKey.CAUSE
    turn_idle_s: float = DEFAULT_TURN_IDLE_S
    max_turns: int = DEFAULT_MAX_TURNS
    max_blocks_per_turn: int = DEFAULT_MAX_BLOCKS_PER_TURN
    clock_skew_s: float = DEFAULT_CLOCK_SKEW_S
    window_s: float = DEFAULT_WINDOW_S
    max_window_calls: int = DEFAULT_MAX_WINDOW_CALLS
    min_calls: int = DEFAULT_MIN_CALLS
    failure_ratio: float = DEFAULT_FAILURE_RATIO
    # Zero turns the fast path off.
    consecutive_failures: int = DEFAULT_CONSECUTIVE_FAILURES
    open_base_s: float = DEFAULT_OPEN_BASE_S
    open_multiplier: float = DEFAULT_OPEN_MULTIPLIER
    open_max_s: float = DEFAULT_OPEN_MAX_S
    open_jitter: float = DEFAULT_OPEN_JITTER
    probe_permits: int = DEFAULT_PROBE_PERMITS
    probe_lease_s: float = DEFAULT_PROBE_LEASE_S
    max_circuits: int = DEFAULT_MAX_CIRCUITS
    # More than this share of a server's tools (at least blast_radius_min_tools known)
    # open at once: the server circuit opens too.
    blast_radius_ratio: float = DEFAULT_BLAST_RADIUS_RATIO
    blast_radius_min_tools: int = DEFAULT_BLAST_RADIUS_MIN_TOOLS
    # Spans out of order: a late failure revises the calls decided this long before it.
    reorder_window_s: float = DEFAULT_REORDER_WINDOW_S
    reorder_max_calls: int = DEFAULT_REORDER_MAX_CALLS
    # Decide and annotate, but mark every decision not enforced.
    shadow: bool = False
    shadow_rules: tuple[str, ...] = ()

    def validate(self, prefix: str) -> list[str]:
        problems = not_positive(
            prefix,
            self,
            "turn_idle_s",
            "window_s",
            "open_base_s",
            "probe_lease_s",
            "max_turns",
            "max_blocks_per_turn",
            "max_window_calls",
            "min_calls",
            "probe_permits",
            "max_circuits",
            "blast_radius_min_tools",
            "reorder_max_calls",
        )
        if self.reorder_window_s < 0:
            problems.append(
                f"{prefix}.reorder_window_s: must not be negative, got {self.reorder_window_s}"
            )
        if self.clock_skew_s < 0:
            problems.append(f"{prefix}.clock_skew_s: must not be negative, got {self.clock_skew_s}")
        if not 0 < self.failure_ratio <= 1:
            problems.append(f"{prefix}.failure_ratio: must be in (0, 1], got {self.failure_ratio}")
        if self.consecutive_failures < 0:
            problems.append(
                f"{prefix}.consecutive_failures: must be zero (off) or positive, "
                f"got {self.consecutive_failures}"
            )
        if self.open_multiplier < 1:
            problems.append(
                f"{prefix}.open_multiplier: must be at least 1, got {self.open_multiplier}"
            )
        if self.open_max_s < self.open_base_s:
            problems.append(
                f"{prefix}.open_max_s: must be at least open_base_s ({self.open_base_s}), "
                f"got {self.open_max_s}"
            )
        if not 0 <= self.open_jitter < 1:
            problems.append(f"{prefix}.open_jitter: must be in [0, 1), got {self.open_jitter}")
        if not 0 <= self.blast_radius_ratio < 1:
            problems.append(
                f"{prefix}.blast_radius_ratio: must be in [0, 1), got {self.blast_radius_ratio}"
            )
        rules = {r.value for r in Rule}
        for rule in self.shadow_rules:
            if rule not in rules:
                problems.append(
                    f"{prefix}.shadow_rules: unknown rule {rule!r}; "
                    f"choose from {', '.join(sorted(rules))}"
                )
        return problems
