"""How a call ended, in the words both sides use: the outcome, the failure's class and
origin, the reason a call was neutral, and the verdict that carries them.

The service judges spans into verdicts; a harness running this client judges its own
calls into the same verdicts (``outcome.judge``), so both count a call alike.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mcp_breaker_client.shared.cheap_dataclasses import slot_init


class Outcome(enum.StrEnum):
    OK = "ok"
    FAILED = "failed"
    NEUTRAL = "neutral"  # the user or the harness stopped it: neither failure nor success
    UNKNOWN = "unknown"  # no outcome signal at all: never guessed


class FailureClass(enum.StrEnum):
    TRANSPORT = "transport"  # session closed, connection refused/reset, upstream unavailable
    TIMEOUT = "timeout"
    TOOL_ERROR = "tool_error"  # the tool ran and reported failure
    PROTOCOL = "protocol"  # a JSON-RPC error such as -32602 invalid params
    UNKNOWN_TOOL = "unknown_tool"  # -32601, "tool not found"
    HIDDEN = "hidden"  # isError false around a typed failure body


# Read once, for ``Verdict.decisive``, which every call asks: on Python 3.11 an enum member
# read off its class costs some 60 ns, a module name 10.
_UNKNOWN = Outcome.UNKNOWN


class FailureOrigin(enum.StrEnum):
    """Who a failure is evidence about: the server's session, or the tool alone."""

    # The MCP server never answered (the connection or session is gone), or a proxy in
    # front of it said its upstream MCP session is gone: evidence about the whole server.
    SESSION = "session"
    NO_ANSWER = "no_answer"  # timed out waiting for the server: the tool may just be slow
    TOOL = "tool"  # the server answered: the tool ran (or was refused) and reported failure


class NeutralReason(enum.StrEnum):
    DECLINED = "declined"  # the user refused permission
    DISMISSED = "dismissed"  # the user dismissed a question
    CANCELLED = "cancelled"  # the harness interrupted the call
    # The harness did not make the call because an mcp-breaker advisory said the tool was
    # out (its span says mcp.breaker.refused): a dead call spared.
    REFUSED_BY_ADVISORY = "refused_by_advisory"


@slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """What a span (or a pair of spans) says about how a call ended."""

    outcome: Outcome
    failure_class: FailureClass | None = None
    neutral_reason: NeutralReason | None = None
    origin: FailureOrigin | None = None  # for failures: what the failure is evidence about
    error_excerpt: str = ""  # redacted, length-capped; built only for failures and neutrals

    @property
    def decisive(self) -> bool:
        return self.outcome is not _UNKNOWN


UNKNOWN_VERDICT = Verdict(outcome=Outcome.UNKNOWN)
