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
checks), and ``decode`` refuses what it cannot read with ``BadEvent``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any

from processor.classify.events import (
    Dialect,
    FailureClass,
    FailureOrigin,
    NeutralReason,
    Outcome,
    ToolCall,
    ToolListing,
    Verdict,
)
from processor.engines.circuit import CircuitKey, Scope, State
from processor.errors import BadEvent


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


def decode(data: bytes) -> SharedEvent:
    try:
        document = json.loads(data)
        if isinstance(document, list):
            return _decode_items(document)
        return _decode(document)
    except BadEvent:
        raise
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as error:
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


def _decode_items(items: list[Any]) -> SharedEvent:
    """A call or a listing as an array (``encode``), read as its object would be."""
    kind = items[0]
    if kind == _CALL:
        return _call(items[1:])
    if kind == _LISTING:
        names = (*_LISTING_FIELDS, "trace", "spans", "dialect")
        if len(items) != len(names) + 1:
            raise BadEvent(f"a listing of {len(items)} items")
        return _decode(dict(zip(("k", *names), items, strict=True)))
    raise BadEvent(f"unknown event kind {str(kind)[:20]!r}")


def _decode(document: dict[str, Any]) -> SharedEvent:
    kind = document["k"]
    if kind == "call":
        return _call([document[name] for name in _CALL_FIELDS])
    if kind == "listing":
        values = {name: document[name] for name in _LISTING_FIELDS}
        for name in _LISTING_TUPLES:
            if values[name] is not None:
                values[name] = tuple(values[name])
        if values["namespaces_connected_at_s"] is not None:
            values["namespaces_connected_at_s"] = tuple(
                (str(name), float(at)) for name, at in values["namespaces_connected_at_s"]
            )
        for name in ("offered_tools", "problems"):
            if values[name] is not None:
                values[name] = tuple(values[name])
        return ToolListing(
            **values,
            trace_id=bytes.fromhex(document["trace"]),
            span_ids=tuple(bytes.fromhex(s) for s in document["spans"]),
            dialect=_dialect(document["dialect"]),
        )
    if kind == "force":
        target = State(document["target"])
        if target not in (State.FORCED_OPEN, State.FORCED_CLOSED):
            raise BadEvent(f"force to {target.value}")
        return Force(
            key=_circuit(document),
            target=target,
            until_s=float(document["until"]),
            reason=str(document["reason"]),
            at_s=float(document["at"]),
        )
    if kind == "release":
        return Release(
            key=_circuit(document), reason=str(document["reason"]), at_s=float(document["at"])
        )
    if kind == "tick":
        return Tick()
    raise BadEvent(f"unknown event kind {str(kind)[:20]!r}")


def _call(fields: list[Any]) -> ToolCall:
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
        error_excerpt=str(excerpt),
    )
    return ToolCall(
        turn=str(turn),
        round=_int_or_none(round_),
        server=server,
        tool=str(tool),
        fingerprint=fingerprint,
        verdict=verdict,
        start_ns=int(start),
        end_ns=int(end),
        trace_id=bytes.fromhex(trace),
        span_ids=tuple(bytes.fromhex(s) for s in spans),
        dialect=_dialect(dialect),
        harness=str(harness),
        tenant=str(tenant),
    )


def _key(key: CircuitKey) -> dict[str, str]:
    return {"scope": key.scope.value, "name": key.name, "tenant": key.tenant}


def _circuit(document: dict[str, Any]) -> CircuitKey:
    return CircuitKey(Scope(document["scope"]), str(document["name"]), str(document["tenant"]))


def _dialect(value: Any) -> Dialect:
    dialect: Dialect | None = _DIALECTS[value]
    if dialect is None:
        raise BadEvent("an event without a dialect")
    return dialect


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)
