"""What a replica takes from the shared stream: every field checked against what an honest
replica writes.

The stream is written by every replica and read by every other, so a reader trusts none of
it: ``Bounds`` are the receiver's limits, which an honest replica's events are within, and
each reader here takes what JSON gave (exact types: a bool is not a count, a float not a
time) and refuses with ``BadEvent`` what no replica writes: a time past the stream's clock,
a name longer than the receiver keeps, a float that is not finite, JSON too big or too deep
to be ours (``too_deep``, checked before the parser recurses), a NaN or an infinity
(``JSON_IN`` refuses them). ``events.decode`` assembles the events from these.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from mcp_breaker_client.shared.verdict import FailureClass, FailureOrigin, NeutralReason, Outcome

from processor.classify.dialects import MAX_LAYERS
from processor.classify.events import Dialect
from processor.classify.listing import (
    COUNT_FIELDS,
    MAX_NAMESPACE_CHARS,
    MAX_NAMESPACES,
    PROBE_SOURCES,
)
from processor.config import ClassifyConfig
from processor.config.classify import DEFAULT_MAX_CLOCK_SKEW_S, DEFAULT_MAX_NAME_CHARS
from processor.errors import BadEvent
from processor.request.sparse import SPAN_ID_BYTES, TRACE_ID_BYTES

# What an honest replica can write, and so all a reader takes; the limits of the receiver
# and of the admin API, which bound what a replica's engines consume, bound it too.
# The largest entry is a listing at its bounds: four lists of MAX_NAMESPACES names of
# MAX_NAMESPACE_CHARS (and their connection times), under 1 MB at six bytes a character
# (a control character's JSON escape). Checked before the JSON is parsed.
MAX_PAYLOAD_BYTES = 2 * 1024 * 1024
MAX_DEPTH = 8  # a listing's namespaces_connected_at_s, [[name, at], ...], is 3 deep
# No time later than this, ~2116: every deadline the engines compute from a time (an open
# period, a turn's idle time, a force) stays within the wire's int64 of nanoseconds.
MAX_TIME_NS = 2**62
MAX_INT = 2**63 - 1  # a round or a count: OTLP's int64 attributes
# An excerpt (redacted to 300 characters), an operator's reason, or a circuit's name and
# tenant in a force (the admin API takes names of 512 characters; a circuit is two).
MAX_TEXT_CHARS = 2048
MAX_SPAN_IDS = 4 * MAX_LAYERS  # a call's spans: both halves, each with its layers
MAX_PROBLEMS = 64  # a listing's malformed attributes, named (a dozen fields can be)
# admin.MAX_FORCE_S, the longest force the admin API takes (not imported: admin imports
# this module through the events; a test holds the two equal).
MAX_FORCE_S = 7 * 24 * 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Bounds:
    """The receiver's limits, which an honest replica's events are within."""

    # classify.max_name_chars: a tool, server, turn, harness or tenant name is cut to it.
    name_chars: int = DEFAULT_MAX_NAME_CHARS
    # classify.max_clock_skew_s: no span time is later than the receiving replica's clock
    # plus this. A reader allows it twice past the stream's clock: once for the sender's
    # clock, once for the replica's against Redis's.
    clock_skew_s: float = DEFAULT_MAX_CLOCK_SKEW_S

    @classmethod
    def of(cls, config: ClassifyConfig) -> Bounds:
        return cls(name_chars=config.max_name_chars, clock_skew_s=config.max_clock_skew_s)


BOUNDS = Bounds()


class Limits:
    """One decode's bounds (a plain class: a frozen dataclass costs a microsecond to make,
    and one is made per event)."""

    __slots__ = ("arrived_s", "latest_ns", "latest_s", "name_chars")

    def __init__(
        self, name_chars: int, latest_ns: int, latest_s: float, arrived_s: float = 0.0
    ) -> None:
        self.name_chars, self.latest_ns, self.latest_s = name_chars, latest_ns, latest_s
        # A call read from the stream arrives at its entry's time (the reorder window
        # compares arrivals): set as it is built, not replaced after.
        self.arrived_s = arrived_s


def _refuse_constant(name: str) -> Any:
    raise BadEvent(f"{name} in an event")  # NaN, Infinity: no honest replica writes them


JSON_IN = json.JSONDecoder(parse_constant=_refuse_constant)
# A string, its escapes included: the brackets inside one do not nest.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_INNERMOST = re.compile(rb"\[\]|\{\}")
_OPENINGS_IN_A_ROW = re.compile(rb"[\[{]{%d}" % (MAX_DEPTH + 1))


def too_deep(data: bytes) -> bool:
    """Nested deeper than MAX_DEPTH, before the parser recurses into it. Outside strings
    only the brackets are kept, and the innermost pairs taken away MAX_DEPTH times: what
    is left was deeper (or does not pair up, which no JSON does). Each step runs in C."""
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return False  # it cannot be deeper than it has openings: nearly every event
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    if _OPENINGS_IN_A_ROW.search(brackets):
        return True  # the usual attack, found in one scan
    for _ in range(MAX_DEPTH):
        brackets = _INNERMOST.sub(b"", brackets)
        if not brackets:
            return False
    return True


def _by_value(kind: Any) -> dict[Any, Any]:
    """An enum's members by value, None for None: a dict lookup costs a fraction of calling
    the enum, and every event of the stream is decoded on every replica. An unknown value
    is a KeyError, which ``decode`` turns into BadEvent as the enum's ValueError was."""
    return {None: None, **{member.value: member for member in kind}}


OUTCOMES = _by_value(Outcome)
FAILURE_CLASSES = _by_value(FailureClass)
NEUTRAL_REASONS = _by_value(NeutralReason)
ORIGINS = _by_value(FailureOrigin)
_DIALECTS = _by_value(Dialect)


# -- a field at a time: each takes what JSON gave (exact types: a bool is not a count, a
# float not a time) and refuses what no replica writes. ------------------------------------
def name(value: Any, limits: Limits) -> str:
    if type(value) is not str or len(value) > limits.name_chars or not _utf8(value):
        raise BadEvent("not a name (or longer than classify.max_name_chars)")
    return value


def optional_name(value: Any, limits: Limits) -> str | None:
    return None if value is None else name(value, limits)


def text(value: Any) -> str:
    if type(value) is not str or len(value) > MAX_TEXT_CHARS or not _utf8(value):
        raise BadEvent(f"not a text of at most {MAX_TEXT_CHARS} characters")
    return value


def _utf8(text: str) -> bool:
    """JSON's escapes can spell a lone surrogate, which no wire can carry (protobuf refuses
    to encode it); the receiver never passes one on (identity.encodable)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def time(value: Any, limits: Limits) -> int:
    """Nanoseconds, no later than the stream's clock allows."""
    if type(value) is not int or not 0 <= value <= limits.latest_ns:
        raise BadEvent("a time that is not one, or later than the stream's clock allows")
    return value


def seconds(value: Any, latest_s: float) -> float:
    # Compared before float(): an integer of hundreds of digits, a NaN and an infinity
    # all fail the comparison, none reaches a conversion that could raise.
    if type(value) not in (int, float) or not 0 <= value <= latest_s:
        raise BadEvent("seconds that are not a time, or later than the stream's clock allows")
    return float(value)


def turn_round(value: Any, limits: Limits) -> int | None:
    if value is None:
        return None
    if type(value) is not int or not -MAX_INT - 1 <= value <= MAX_INT:
        raise BadEvent("a round that is not an int64")
    return value


def _count(value: Any, limits: Limits) -> int | None:
    if value is None:
        return None
    if type(value) is not int or not 0 <= value <= MAX_INT:
        raise BadEvent("a count that is not one")
    return value


def _flag(value: Any, limits: Limits) -> bool | None:
    if value is not None and type(value) is not bool:
        raise BadEvent("not true or false")
    return value


def _finite(value: Any, limits: Limits) -> float | None:
    """Epoch seconds a harness reported: any finite number (compared, never sent on)."""
    if value is None:
        return None
    if type(value) not in (int, float) or not -MAX_INT <= value <= MAX_INT:
        raise BadEvent("not a finite number")
    return float(value)


def _namespaces(value: Any, limits: Limits) -> tuple[str, ...] | None:
    """Names as classify.listing keeps them: MAX_NAMESPACES of MAX_NAMESPACE_CHARS."""
    if value is None:
        return None
    if type(value) is not list or len(value) > MAX_NAMESPACES:
        raise BadEvent(f"not a list of at most {MAX_NAMESPACES} names")
    for name in value:
        if type(name) is not str or len(name) > MAX_NAMESPACE_CHARS or not _utf8(name):
            raise BadEvent(f"a name of more than {MAX_NAMESPACE_CHARS} characters")
    return tuple(value)


def _connected_at(value: Any, limits: Limits) -> tuple[tuple[str, float], ...] | None:
    if value is None:
        return None
    if type(value) is not list or len(value) > MAX_NAMESPACES:
        raise BadEvent(f"not a list of at most {MAX_NAMESPACES} pairs")
    pairs = []
    for pair in value:
        if type(pair) is not list or len(pair) != 2:
            raise BadEvent("not a pair of a name and seconds")
        name, at = pair
        (name,) = _namespaces([name], limits) or ()
        seconds = _finite(at, limits)
        if seconds is None:
            raise BadEvent("a namespace without its time")
        pairs.append((name, seconds))
    return tuple(pairs)


def _probe_source(value: Any, limits: Limits) -> str | None:
    if value is not None and value not in PROBE_SOURCES:
        raise BadEvent(f"a probe source not among {', '.join(PROBE_SOURCES)}")
    return None if value is None else str(value)


def _problems(value: Any, limits: Limits) -> tuple[str, ...] | None:
    if value is None:
        return None
    if type(value) is not list or len(value) > MAX_PROBLEMS:
        raise BadEvent(f"not a list of at most {MAX_PROBLEMS} problems")
    return tuple(text(problem) for problem in value)


_LISTING_TUPLES = ("namespaces_connected", "namespaces_attached", "namespaces_required")
# A listing's fields, each with its reader (the trace, spans and dialect apart).
LISTING_READERS = {
    "turn": name,
    "round": turn_round,
    "server": optional_name,
    **dict.fromkeys(COUNT_FIELDS, _count),
    "cached": _flag,
    **dict.fromkeys(_LISTING_TUPLES, _namespaces),
    "tool_snapshot_at_s": _finite,
    "namespaces_connected_at_s": _connected_at,
    "probe_source": _probe_source,
    "offered_tools": _namespaces,
    "problems": _problems,
    "start_ns": time,
    "end_ns": time,
    "harness": name,
    "tenant": name,
}


def trace_id(value: Any) -> bytes:
    if type(value) is not str or len(value) != 2 * TRACE_ID_BYTES:
        raise BadEvent("not a trace id")
    return bytes.fromhex(value)  # not hex: ValueError, BadEvent in decode


def span_ids(value: Any) -> tuple[bytes, ...]:
    if type(value) is not list or len(value) > MAX_SPAN_IDS:
        raise BadEvent(f"not a list of at most {MAX_SPAN_IDS} span ids")
    ids = []
    for span in value:
        if type(span) is not str or len(span) != 2 * SPAN_ID_BYTES:
            raise BadEvent("not a span id")
        ids.append(bytes.fromhex(span))
    return tuple(ids)


def dialect(value: Any) -> Dialect:
    dialect: Dialect | None = _DIALECTS[value]
    if dialect is None:
        raise BadEvent("an event without a dialect")
    return dialect
