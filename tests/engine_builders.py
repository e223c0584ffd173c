"""Shared by the engine tests: ToolCall events built by hand, on a fake clock in span time.

Times are minutes past midnight UTC of the sirens-echo seed's day (2026-08-18), so a
message that prints a clock reads like the seed. Nothing here reads the wall clock.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

from mcp_breaker_client.shared.fingerprint import fingerprint
from mcp_breaker_client.shared.verdict import FailureClass, NeutralReason, Outcome, Verdict

from processor.classify.events import Dialect, ToolCall

DAY_S = 1_787_011_200  # 2026-08-18T00:00:00Z, the seed's day: a fixed span time, not the clock
NS_PER_S = 1_000_000_000
NO_ARGUMENTS = object()  # a call that recorded no arguments, so has no fingerprint

_span_ids = itertools.count(1)


def at_s(minutes: float) -> float:
    """Span time in seconds, ``minutes`` past midnight of the seed's day."""
    return DAY_S + minutes * 60


def at_ns(minutes: float) -> int:
    return round(at_s(minutes) * NS_PER_S)


def new_span_id() -> bytes:
    """A fresh 8-byte span id, unique within the test session."""
    return (0x5EED_0000_0000 + next(_span_ids)).to_bytes(8, "big")


def trace_of(turn: str) -> bytes:
    """The 16-byte trace id of a turn: one trace per turn."""
    return hashlib.sha256(turn.encode()).digest()[:16]


def tool_call(
    minute: float,
    *,
    turn: str = "turn-1",
    tool: str = "search",
    server: str | None = "web",
    arguments: Any = None,
    outcome: Outcome = Outcome.OK,
    failure_class: FailureClass | None = None,
    neutral_reason: NeutralReason | None = None,
    excerpt: str = "",
    duration_s: float = 2.0,
    model_round: int | None = None,
    tenant: str = "",
    harness: str = "",
) -> ToolCall:
    """One call that starts ``minute`` minutes into the day and lasts ``duration_s``."""
    if arguments is None:
        arguments = {"q": "default"}
    fp = None if arguments is NO_ARGUMENTS else fingerprint(server, tool, arguments)
    start_ns = at_ns(minute)
    return ToolCall(
        turn=turn,
        round=model_round,
        server=server,
        tool=tool,
        fingerprint=fp,
        verdict=Verdict(
            outcome=outcome,
            failure_class=failure_class,
            neutral_reason=neutral_reason,
            error_excerpt=excerpt,
        ),
        start_ns=start_ns,
        end_ns=start_ns + round_ns(duration_s),
        trace_id=trace_of(turn),
        span_ids=(new_span_id(),),
        dialect=Dialect.HARNESS,
        tenant=tenant,
        harness=harness,
    )


def failed(minute: float, failure_class: FailureClass, **kwargs: Any) -> ToolCall:
    """A failed call of the given class; the excerpt defaults to a short redacted text."""
    kwargs.setdefault("excerpt", f"{failure_class.value} failure")
    return tool_call(minute, outcome=Outcome.FAILED, failure_class=failure_class, **kwargs)


def declined(minute: float, **kwargs: Any) -> ToolCall:
    """A call the user refused permission for: neutral."""
    return tool_call(
        minute, outcome=Outcome.NEUTRAL, neutral_reason=NeutralReason.DECLINED, **kwargs
    )


def round_ns(seconds: float) -> int:
    return round(seconds * NS_PER_S)
