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
what an honest replica writes (``validate.Bounds``: a time past the stream's clock, a name
longer than the receiver keeps, a float that is not finite, JSON too big or too deep to be
ours, a field of the wrong type; ``validate.py`` checks each field). An entry refused is
skipped and counted, never applied: every replica refuses it alike, so none of them keeps
a state the wire cannot carry.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from mcp_breaker_client.shared.compact_json import compact_encoder
from mcp_breaker_client.shared.verdict import Verdict

from processor.classify.events import (
    ToolCall,
    ToolListing,
    build_tool_call,
    build_tool_listing,
)
from processor.engines.circuit import CircuitKey, Scope, State
from processor.engines.turns import NS_PER_S
from processor.errors import BadEvent
from processor.state import validate
from processor.state.validate import (
    BOUNDS,
    MAX_DEPTH,
    MAX_FORCE_S,
    MAX_PAYLOAD_BYTES,
    MAX_TIME_NS,
    Bounds,
    Limits,
)


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

_LISTING_FIELDS = tuple(
    f.name for f in fields(ToolListing) if f.name not in ("trace_id", "span_ids", "dialect")
)


_JSON = compact_encoder(sort_keys=False)  # one C encoder, built once: see compact_json
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
        return _JSON(_encode(event)).encode()
    return _JSON(items).encode()


def decode(data: bytes, *, at_s: float | None = None, bounds: Bounds = BOUNDS) -> SharedEvent:
    """The event in ``data``, appended at ``at_s`` on the stream's clock (None: not known,
    and then only MAX_TIME_NS bounds its times), or BadEvent. A call arrives at ``at_s``."""
    if len(data) > MAX_PAYLOAD_BYTES:
        raise BadEvent(f"an event of {len(data)} bytes")
    if validate.too_deep(data):
        raise BadEvent(f"JSON nested deeper than {MAX_DEPTH} levels")
    latest_ns = MAX_TIME_NS
    if at_s is not None:
        latest_ns = min(latest_ns, int((at_s + 2 * bounds.clock_skew_s) * NS_PER_S))
    limits = Limits(bounds.name_chars, latest_ns, latest_ns / NS_PER_S, at_s or 0.0)
    try:
        document = validate.JSON_IN.decode(data.decode("utf-8"))
        if type(document) is list:
            return _decode_items(document, limits)
        if type(document) is dict:
            return _decode(document, limits)
        raise BadEvent(f"an event that is a {type(document).__name__}")
    except BadEvent:
        raise
    except Exception as error:  # whatever the JSON held: never a reason to stop reading
        raise BadEvent(f"unreadable event: {type(error).__name__}") from None


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


def _decode_items(items: list[Any], limits: Limits) -> SharedEvent:
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


def _decode(document: dict[str, Any], limits: Limits) -> SharedEvent:
    kind = document["k"]
    if kind == "call":
        return _call([document[name] for name in _CALL_FIELDS], limits)
    if kind == "listing":
        return _listing(document, limits)
    if kind == "force":
        target = State(document["target"])
        if target not in (State.FORCED_OPEN, State.FORCED_CLOSED):
            raise BadEvent(f"force to {target.value}")
        at_s = validate.seconds(document["at"], limits.latest_s)
        return Force(
            key=_circuit(document),
            target=target,
            until_s=validate.seconds(document["until"], at_s + MAX_FORCE_S),
            reason=validate.text(document["reason"]),
            at_s=at_s,
        )
    if kind == "release":
        return Release(
            key=_circuit(document),
            reason=validate.text(document["reason"]),
            at_s=validate.seconds(document["at"], limits.latest_s),
        )
    if kind == "tick":
        return Tick()
    raise BadEvent(f"unknown event kind {str(kind)[:20]!r}")


def _call(fields: list[Any], limits: Limits) -> ToolCall:
    """A call from its fields in ``_CALL_FIELDS`` order (ValueError if there are not so
    many, KeyError for an unknown enum value: both BadEvent in ``decode``)."""
    (turn, round_, server, tool, fingerprint, outcome, failure, neutral, origin, excerpt,
     start, end, trace, spans, dialect, harness, tenant) = fields  # fmt: skip
    known_outcome = validate.OUTCOMES[outcome]
    if known_outcome is None:
        raise BadEvent("a call without an outcome")
    verdict = Verdict(
        outcome=known_outcome,
        failure_class=validate.FAILURE_CLASSES[failure],
        neutral_reason=validate.NEUTRAL_REASONS[neutral],
        origin=validate.ORIGINS[origin],
        error_excerpt=validate.text(excerpt),
    )
    return build_tool_call(
        turn=validate.name(turn, limits),
        round=validate.turn_round(round_, limits),
        server=validate.optional_name(server, limits),
        tool=validate.name(tool, limits),
        fingerprint=validate.optional_name(fingerprint, limits),
        verdict=verdict,
        start_ns=validate.time(start, limits),
        end_ns=validate.time(end, limits),
        trace_id=validate.trace_id(trace),
        span_ids=validate.span_ids(spans),
        dialect=validate.dialect(dialect),
        harness=validate.name(harness, limits),
        tenant=validate.name(tenant, limits),
        arrived_s=limits.arrived_s,
    )


def _listing(document: dict[str, Any], limits: Limits) -> ToolListing:
    values: dict[str, Any] = {}
    for name, read in validate.LISTING_READERS.items():
        try:
            values[name] = read(document[name], limits)
        except BadEvent as error:
            raise BadEvent(f"a listing's {name}: {error}") from None
    return build_tool_listing(
        **values,
        trace_id=validate.trace_id(document["trace"]),
        span_ids=validate.span_ids(document["spans"]),
        dialect=validate.dialect(document["dialect"]),
    )


def _key(key: CircuitKey) -> dict[str, str]:
    return {"scope": key.scope.value, "name": key.name, "tenant": key.tenant}


def _circuit(document: dict[str, Any]) -> CircuitKey:
    name, tenant = validate.text(document["name"]), validate.text(document["tenant"])
    return CircuitKey(Scope(document["scope"]), name, tenant)
