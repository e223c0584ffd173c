"""Every sentence a model reads in place of a tool's answer, in one place.

A model acts on these, so each is written as a person would tell it: which tool, on which
MCP server; one sentence that says what to do; times as a length ("for about 5 minutes"),
never a clock time, since a model knows neither the time now nor the time zone; the
recorded error (already redacted) last, in parentheses, where its own punctuation cannot
break the instruction; and exactly one period at the end.

docs/breaker.md's table "What the model reads" shows each of them; the TypeScript client
(``clients/typescript/src/mcp.ts``) writes the two it makes alone word for word the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

_MINUTE_S = 60.0
_HOUR_S = 3600.0
_DAY_S = 86400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Subject:
    """What is out, as a sentence names it, and the words that stand for it after."""

    name: str  # "`fetch_invoice` on MCP server `billing`"
    them: str  # "it", or "its tools" for a whole server


def tool_subject(tool: str, server: str = "") -> Subject:
    """One tool; its server named when the call named one (``server`` empty: it did not)."""
    if server:
        return Subject(name=f"`{tool}` on MCP server `{server}`", them="it")
    return Subject(name=f"`{tool}`", them="it")


def server_subject(server: str, tool: str = "") -> Subject:
    """A whole server, out with every tool it has; ``tool``: the call that was refused."""
    among = f", `{tool}` among them" if tool else ""
    return Subject(name=f"MCP server `{server}` (all its tools{among})", them="its tools")


def about(seconds: float) -> str:
    """A length as a person says it: "about 8 seconds", "about 5 minutes", "about 2 hours"."""
    if not math.isfinite(seconds) or seconds >= 3650 * _DAY_S:
        return "a long time"
    if seconds < 1:
        return "less than a second"
    # Each unit up to where rounding would name the next one (36 hours still reads well).
    for unit_s, up_to_s, one, many in (
        (1.0, 59.5, "a second", "seconds"),
        (_MINUTE_S, 59.5 * _MINUTE_S, "a minute", "minutes"),
        (_HOUR_S, 36 * _HOUR_S, "an hour", "hours"),
    ):
        if seconds < up_to_s:
            count = round(seconds / unit_s)
            return f"about {one}" if count <= 1 else f"about {count} {many}"
    days = round(seconds / _DAY_S)
    return "about a day" if days <= 1 else f"about {days} days"


def _error(why: str) -> str:
    """The recorded error as the sentence's last words: one period is the sentence's own."""
    why = why.strip().rstrip(" .")
    return f" (the error: {why})" if why else ""


def _failed(calls: int, failures: int) -> str:
    if failures >= calls:
        return "its last call failed" if calls <= 1 else f"its last {calls} calls failed"
    return f"{failures} of its last {calls} calls failed"


def circuit_open(subject: Subject, *, why: str, calls: int, failures: int, for_s: float) -> str:
    """A circuit opened by failures: out for the open period, then a call may test it."""
    them = subject.them
    counts = _failed(calls, failures)
    why = why.strip().rstrip(" .")
    evidence = f" ({counts}: {why})" if why else f" ({counts})"
    return (
        f"{subject.name} is unavailable for {about(for_s)}, so do not call {them} before "
        f"then; answer what you can without {them}{evidence}."
    )


def circuit_forced_open(subject: Subject, *, reason: str, for_s: float | None) -> str:
    """An operator switched it off (``mcp-breaker force-open``), for a time or until released."""
    them = subject.them
    how_long, until = (
        (f" for {about(for_s)}", "before then") if for_s is not None else ("", "again this turn")
    )
    reason = reason.strip().rstrip(" .")
    given = f" (the reason given: {reason})" if reason else ""
    return (
        f"{subject.name} has been switched off by an operator{how_long}, so do not call "
        f"{them} {until}; answer what you can without {them}{given}."
    )


def circuit_failing(subject: Subject, *, why: str) -> str:
    """Refused with no end the breaker can name (it has been failing; nothing more known)."""
    them = subject.them
    return (
        f"{subject.name} is unavailable, so do not call {them} again this turn; answer what "
        f"you can without {them}{_error(why)}."
    )


def probe_in_flight(subject: Subject) -> str:
    """Half-open, and the one call allowed to test it is out: every other caller waits."""
    them = subject.them
    return (
        f"{subject.name} is recovering from failures and another call is testing it now, "
        f"so do not call {them} again this turn; answer what you can without {them}."
    )


def turn_tool_blocked(subject: Subject, *, why: str) -> str:
    """The tool failed in this turn in a way that will not change before the turn ends."""
    return (
        f"{subject.name} is unavailable for the rest of this turn, so do not call it again; "
        f"answer what you can without it{_error(why) or ' (it failed)'}."
    )


def turn_call_blocked(subject: Subject, *, why: str) -> str:
    """This exact call (same arguments) failed in this turn; other arguments may work."""
    return (
        f"This exact call to {subject.name} already failed in this turn, so do not repeat "
        f"it; change the arguments or answer without it{_error(why) or ' (it failed)'}."
    )


def refused_without_message(subject: Subject, *, cause: str) -> str:
    """A client's words when an advisory refused a call and carried no message of its own."""
    return (
        f"{subject.name} is unavailable right now, so do not call it again this turn; "
        f"answer what you can without it{_error(cause)}."
    )


def roster_collapsed(*, offered_before: int, rounds: str) -> str:
    """The harness's tool list fell to none mid-turn while its servers are configured."""
    return (
        f"The tools offered in this turn fell from {offered_before} to none in {rounds} while "
        f"their servers are still configured, so list the tools again (tools/list) before "
        f"the next model request; do not tell the user the tools are gone."
    )
