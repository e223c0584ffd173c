"""The events replicas share: what the engines consume, as compact JSON.

Calls and listings, nearly all of the stream, are JSON arrays whose positions are the
fields (``_CALL``, ``_LISTING``): every replica encodes its own and decodes every other's,
and an array costs half an object both ways. The rare operator events and ticks are
objects. A call or listing written as an object, as replicas before the arrays wrote them,
is still read (in a rolling upgrade, an older replica cannot read the arrays: it counts
them unreadable and skips them until it is replaced).

A replica shares the *inputs* of its engines, never their state: a tool call's verdict (a
``ToolCall``, which holds only a fingerprint of the arguments and a redacted excerpt of
the error, never the raw arguments), a tool listing, an operator's force or release, and
a tick that marks the stream's time. Every replica applies every event, in stream order,
to its own pure engines, so they come to the same circuits.

Plain functions, no I/O: ``encode`` and ``decode`` are exact inverses (a property test
checks), and ``decode`` refuses what it cannot read with ``BadEvent``: anything that is not
what an honest replica writes (``Bounds``: a time past the stream's clock, a name longer
than the receiver keeps, a float that is not finite, JSON too big or too deep to be ours,
a field of the wrong type). An entry refused is skipped and counted, never applied: every
replica refuses it alike, so none of them keeps a state the wire cannot carry.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from typing import Any

from mcp_breaker_client.shared.verdict import (
    FailureClass,
    FailureOrigin,
    NeutralReason,
    Outcome,
    Verdict,
)

from processor.classify.dialects import MAX_LAYERS
from processor.classify.events import Dialect, ToolCall, ToolListing
from processor.classify.listing import (
    COUNT_FIELDS,
    MAX_NAMESPACE_CHARS,
    MAX_NAMESPACES,
    PROBE_SOURCES,
)
from processor.config import ClassifyConfig
from processor.config.classify import DEFAULT_MAX_CLOCK_SKEW_S, DEFAULT_MAX_NAME_CHARS
from processor.engines.circuit import CircuitKey, Scope, State
from processor.engines.turns import NS_PER_S
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
# this module through the advisory service; a test holds the two equal).
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Force:
    """An operator forced a circuit open or closed until ``until_s``."""

    key: CircuitKey
    target: State  # FORCED_OPEN or FORCED_CLOSED
    until_s: float
    reason: str
    at_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    """An operator released a forced circuit."""

    key: CircuitKey
    reason: str
    at_s: float


@dataclass(frozen=True, slots=True)
class Tick:
    """The stream's time moved on: expiry runs at it, on every replica alike."""


SharedEvent = ToolCall | ToolListing | Force | Release | Tick

_LISTING_TUPLES = ("namespaces_connected", "namespaces_attached", "namespaces_required")
_LISTING_FIELDS = tuple(
    f.name for f in fields(ToolListing) if f.name not in ("trace_id", "span_ids", "dialect")
)


_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
# The first item of an array names its kind; the rest are a call's fields in this order
# (the keys of the object form), or a listing's (_LISTING_FIELDS, trace, spans, dialect).
_CALL = "call"
_LISTING = "listing"
_CALL_FIELDS = (
    *("turn", "round", "server", "tool", "fp", "outcome", "class", "neutral", "origin"),
    *("excerpt", "start", "end", "trace", "spans", "dialect", "harness", "tenant"),
)


def encode(event: SharedEvent) -> bytes:
    if isinstance(event, ToolCall):
        verdict = event.verdict
        failure, neutral, origin = verdict.failure_class, verdict.neutral_reason, verdict.origin
        items: list[Any] = [
            _CALL,
            event.turn,
            event.round,
            event.server,
            event.tool,
            event.fingerprint,
            verdict.outcome.value,
            failure.value if failure is not None else None,
            neutral.value if neutral is not None else None,
            origin.value if origin is not None else None,
            verdict.error_excerpt,
            event.start_ns,
            event.end_ns,
            event.trace_id.hex(),
            [span.hex() for span in event.span_ids],
            event.dialect.value,
            event.harness,
            event.tenant,
        ]
    elif isinstance(event, ToolListing):
        items = [_LISTING, *(getattr(event, name) for name in _LISTING_FIELDS)]
        items += [event.trace_id.hex(), [span.hex() for span in event.span_ids]]
        items.append(event.dialect.value)
    else:
        return _JSON.encode(_encode(event)).encode()
    return _JSON.encode(items).encode()


def decode(data: bytes, *, at_s: float | None = None, bounds: Bounds = BOUNDS) -> SharedEvent:
    """The event in ``data``, appended at ``at_s`` on the stream's clock (None: not known,
    and then only MAX_TIME_NS bounds its times), or BadEvent."""
    if len(data) > MAX_PAYLOAD_BYTES:
        raise BadEvent(f"an event of {len(data)} bytes")
    if _too_deep(data):
        raise BadEvent(f"JSON nested deeper than {MAX_DEPTH} levels")
    latest_ns = MAX_TIME_NS
    if at_s is not None:
        latest_ns = min(latest_ns, int((at_s + 2 * bounds.clock_skew_s) * NS_PER_S))
    limits = _Limits(bounds.name_chars, latest_ns, latest_ns / NS_PER_S)
    try:
        document = _JSON_IN.decode(data.decode("utf-8"))
        if type(document) is list:
            return _decode_items(document, limits)
        if type(document) is dict:
            return _decode(document, limits)
        raise BadEvent(f"an event that is a {type(document).__name__}")
    except BadEvent:
        raise
    except Exception as error:  # whatever the JSON held: never a reason to stop reading
        raise BadEvent(f"unreadable event: {type(error).__name__}") from None


class _Limits:
    """One decode's bounds (a plain class: a frozen dataclass costs a microsecond to make,
    and one is made per event)."""

    __slots__ = ("latest_ns", "latest_s", "name_chars")

    def __init__(self, name_chars: int, latest_ns: int, latest_s: float) -> None:
        self.name_chars, self.latest_ns, self.latest_s = name_chars, latest_ns, latest_s


def _refuse_constant(name: str) -> Any:
    raise BadEvent(f"{name} in an event")  # NaN, Infinity: no honest replica writes them


_JSON_IN = json.JSONDecoder(parse_constant=_refuse_constant)
# A string, its escapes included: the brackets inside one do not nest.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_INNERMOST = re.compile(rb"\[\]|\{\}")
_OPENINGS_IN_A_ROW = re.compile(rb"[\[{]{%d}" % (MAX_DEPTH + 1))


def _too_deep(data: bytes) -> bool:
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


def _encode(event: Force | Release | Tick) -> dict[str, Any]:
    """The rare events, as objects."""
    if isinstance(event, Force):
        return {
            "k": "force",
            **_key(event.key),
            "target": event.target.value,
            "until": event.until_s,
            "reason": event.reason,
            "at": event.at_s,
        }
    if isinstance(event, Release):
        return {"k": "release", **_key(event.key), "reason": event.reason, "at": event.at_s}
    return {"k": "tick"}


def _by_value(kind: Any) -> dict[Any, Any]:
    """An enum's members by value, None for None: a dict lookup costs a fraction of calling
    the enum, and every event of the stream is decoded on every replica. An unknown value
    is a KeyError, which ``decode`` turns into BadEvent as the enum's ValueError was."""
    return {None: None, **{member.value: member for member in kind}}


_OUTCOMES = _by_value(Outcome)
_FAILURE_CLASSES = _by_value(FailureClass)
_NEUTRAL_REASONS = _by_value(NeutralReason)
_ORIGINS = _by_value(FailureOrigin)
_DIALECTS = _by_value(Dialect)


def _decode_items(items: list[Any], limits: _Limits) -> SharedEvent:
    """A call or a listing as an array (``encode``), read as its object would be."""
    kind = items[0]
    if kind == _CALL:
        return _call(items[1:], limits)
    if kind == _LISTING:
        names = (*_LISTING_FIELDS, "trace", "spans", "dialect")
        if len(items) != len(names) + 1:
            raise BadEvent(f"a listing of {len(items)} items")
        return _listing(dict(zip(names, items[1:], strict=True)), limits)
    raise BadEvent(f"unknown event kind {str(kind)[:20]!r}")


def _decode(document: dict[str, Any], limits: _Limits) -> SharedEvent:
    kind = document["k"]
    if kind == "call":
        return _call([document[name] for name in _CALL_FIELDS], limits)
    if kind == "listing":
        return _listing(document, limits)
    if kind == "force":
        target = State(document["target"])
        if target not in (State.FORCED_OPEN, State.FORCED_CLOSED):
            raise BadEvent(f"force to {target.value}")
        at_s = _seconds(document["at"], limits.latest_s)
        return Force(
            key=_circuit(document),
            target=target,
            until_s=_seconds(document["until"], at_s + MAX_FORCE_S),
            reason=_text(document["reason"]),
            at_s=at_s,
        )
    if kind == "release":
        return Release(
            key=_circuit(document),
            reason=_text(document["reason"]),
            at_s=_seconds(document["at"], limits.latest_s),
        )
    if kind == "tick":
        return Tick()
    raise BadEvent(f"unknown event kind {str(kind)[:20]!r}")


def _call(fields: list[Any], limits: _Limits) -> ToolCall:
    """A call from its fields in ``_CALL_FIELDS`` order (ValueError if there are not so
    many, KeyError for an unknown enum value: both BadEvent in ``decode``)."""
    (turn, round_, server, tool, fingerprint, outcome, failure, neutral, origin, excerpt,
     start, end, trace, spans, dialect, harness, tenant) = fields  # fmt: skip
    known_outcome = _OUTCOMES[outcome]
    if known_outcome is None:
        raise BadEvent("a call without an outcome")
    verdict = Verdict(
        outcome=known_outcome,
        failure_class=_FAILURE_CLASSES[failure],
        neutral_reason=_NEUTRAL_REASONS[neutral],
        origin=_ORIGINS[origin],
        error_excerpt=_text(excerpt),
    )
    return ToolCall(
        turn=_name(turn, limits),
        round=_round(round_, limits),
        server=_optional_name(server, limits),
        tool=_name(tool, limits),
        fingerprint=_optional_name(fingerprint, limits),
        verdict=verdict,
        start_ns=_time(start, limits),
        end_ns=_time(end, limits),
        trace_id=_trace_id(trace),
        span_ids=_span_ids(spans),
        dialect=_dialect(dialect),
        harness=_name(harness, limits),
        tenant=_name(tenant, limits),
    )


def _listing(document: dict[str, Any], limits: _Limits) -> ToolListing:
    values: dict[str, Any] = {}
    for name, read in _LISTING_READ.items():
        try:
            values[name] = read(document[name], limits)
        except BadEvent as error:
            raise BadEvent(f"a listing's {name}: {error}") from None
    return ToolListing(
        **values,
        trace_id=_trace_id(document["trace"]),
        span_ids=_span_ids(document["spans"]),
        dialect=_dialect(document["dialect"]),
    )


# -- a field at a time: each takes what JSON gave (exact types: a bool is not a count, a
# float not a time) and refuses what no replica writes. ------------------------------------
def _name(value: Any, limits: _Limits) -> str:
    if type(value) is not str or len(value) > limits.name_chars or not _utf8(value):
        raise BadEvent("not a name (or longer than classify.max_name_chars)")
    return value


def _optional_name(value: Any, limits: _Limits) -> str | None:
    return None if value is None else _name(value, limits)


def _text(value: Any) -> str:
    if type(value) is not str or len(value) > MAX_TEXT_CHARS or not _utf8(value):
        raise BadEvent(f"not a text of at most {MAX_TEXT_CHARS} characters")
    return value


def _utf8(text: str) -> bool:
    """JSON's escapes can spell a lone surrogate, which no wire can carry (protobuf refuses
    to encode it); the receiver never passes one on (classifier.encodable)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _time(value: Any, limits: _Limits) -> int:
    """Nanoseconds, no later than the stream's clock allows."""
    if type(value) is not int or not 0 <= value <= limits.latest_ns:
        raise BadEvent("a time that is not one, or later than the stream's clock allows")
    return value


def _seconds(value: Any, latest_s: float) -> float:
    # Compared before float(): an integer of hundreds of digits, a NaN and an infinity
    # all fail the comparison, none reaches a conversion that could raise.
    if type(value) not in (int, float) or not 0 <= value <= latest_s:
        raise BadEvent("seconds that are not a time, or later than the stream's clock allows")
    return float(value)


def _round(value: Any, limits: _Limits) -> int | None:
    if value is None:
        return None
    if type(value) is not int or not -MAX_INT - 1 <= value <= MAX_INT:
        raise BadEvent("a round that is not an int64")
    return value


def _count(value: Any, limits: _Limits) -> int | None:
    if value is None:
        return None
    if type(value) is not int or not 0 <= value <= MAX_INT:
        raise BadEvent("a count that is not one")
    return value


def _flag(value: Any, limits: _Limits) -> bool | None:
    if value is not None and type(value) is not bool:
        raise BadEvent("not true or false")
    return value


def _finite(value: Any, limits: _Limits) -> float | None:
    """Epoch seconds a harness reported: any finite number (compared, never sent on)."""
    if value is None:
        return None
    if type(value) not in (int, float) or not -MAX_INT <= value <= MAX_INT:
        raise BadEvent("not a finite number")
    return float(value)


def _namespaces(value: Any, limits: _Limits) -> tuple[str, ...] | None:
    """Names as classify.listing keeps them: MAX_NAMESPACES of MAX_NAMESPACE_CHARS."""
    if value is None:
        return None
    if type(value) is not list or len(value) > MAX_NAMESPACES:
        raise BadEvent(f"not a list of at most {MAX_NAMESPACES} names")
    for name in value:
        if type(name) is not str or len(name) > MAX_NAMESPACE_CHARS or not _utf8(name):
            raise BadEvent(f"a name of more than {MAX_NAMESPACE_CHARS} characters")
    return tuple(value)


def _connected_at(value: Any, limits: _Limits) -> tuple[tuple[str, float], ...] | None:
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


def _probe_source(value: Any, limits: _Limits) -> str | None:
    if value is not None and value not in PROBE_SOURCES:
        raise BadEvent(f"a probe source not among {', '.join(PROBE_SOURCES)}")
    return None if value is None else str(value)


def _problems(value: Any, limits: _Limits) -> tuple[str, ...] | None:
    if value is None:
        return None
    if type(value) is not list or len(value) > MAX_PROBLEMS:
        raise BadEvent(f"not a list of at most {MAX_PROBLEMS} problems")
    return tuple(_text(problem) for problem in value)


_LISTING_READ = {
    "turn": _name,
    "round": _round,
    "server": _optional_name,
    **dict.fromkeys(COUNT_FIELDS, _count),
    "cached": _flag,
    **dict.fromkeys(_LISTING_TUPLES, _namespaces),
    "tool_snapshot_at_s": _finite,
    "namespaces_connected_at_s": _connected_at,
    "probe_source": _probe_source,
    "offered_tools": _namespaces,
    "problems": _problems,
    "start_ns": _time,
    "end_ns": _time,
    "harness": _name,
    "tenant": _name,
}


def _trace_id(value: Any) -> bytes:
    if type(value) is not str or len(value) != 2 * TRACE_ID_BYTES:
        raise BadEvent("not a trace id")
    return bytes.fromhex(value)  # not hex: ValueError, BadEvent in decode


def _span_ids(value: Any) -> tuple[bytes, ...]:
    if type(value) is not list or len(value) > MAX_SPAN_IDS:
        raise BadEvent(f"not a list of at most {MAX_SPAN_IDS} span ids")
    ids = []
    for span in value:
        if type(span) is not str or len(span) != 2 * SPAN_ID_BYTES:
            raise BadEvent("not a span id")
        ids.append(bytes.fromhex(span))
    return tuple(ids)


def _key(key: CircuitKey) -> dict[str, str]:
    return {"scope": key.scope.value, "name": key.name, "tenant": key.tenant}


def _circuit(document: dict[str, Any]) -> CircuitKey:
    name, tenant = _text(document["name"]), _text(document["tenant"])
    return CircuitKey(Scope(document["scope"]), name, tenant)


def _dialect(value: Any) -> Dialect:
    dialect: Dialect | None = _DIALECTS[value]
    if dialect is None:
        raise BadEvent("an event without a dialect")
    return dialect
