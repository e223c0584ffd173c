"""The events replicas share: what the engines consume, as compact JSON.

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


def encode(event: SharedEvent) -> bytes:
    return json.dumps(_encode(event), separators=(",", ":"), ensure_ascii=False).encode()


def decode(data: bytes) -> SharedEvent:
    try:
        document = json.loads(data)
        return _decode(document)
    except BadEvent:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise BadEvent(f"unreadable event: {type(error).__name__}") from None


def _encode(event: SharedEvent) -> dict[str, Any]:
    if isinstance(event, ToolCall):
        verdict = event.verdict
        return {
            "k": "call",
            "turn": event.turn,
            "round": event.round,
            "server": event.server,
            "tool": event.tool,
            "fp": event.fingerprint,
            "outcome": verdict.outcome.value,
            "class": verdict.failure_class.value if verdict.failure_class else None,
            "neutral": verdict.neutral_reason.value if verdict.neutral_reason else None,
            "origin": verdict.origin.value if verdict.origin else None,
            "excerpt": verdict.error_excerpt,
            "start": event.start_ns,
            "end": event.end_ns,
            "trace": event.trace_id.hex(),
            "spans": [span.hex() for span in event.span_ids],
            "dialect": event.dialect.value,
            "harness": event.harness,
            "tenant": event.tenant,
        }
    if isinstance(event, ToolListing):
        body = {name: getattr(event, name) for name in _LISTING_FIELDS}
        body.update(
            k="listing",
            trace=event.trace_id.hex(),
            spans=[span.hex() for span in event.span_ids],
            dialect=event.dialect.value,
        )
        return body
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


def _decode(document: dict[str, Any]) -> SharedEvent:
    kind = document["k"]
    if kind == "call":
        outcome = _OUTCOMES[document["outcome"]]
        if outcome is None:
            raise BadEvent("a call without an outcome")
        verdict = Verdict(
            outcome=outcome,
            failure_class=_FAILURE_CLASSES[document["class"]],
            neutral_reason=_NEUTRAL_REASONS[document["neutral"]],
            origin=_ORIGINS[document["origin"]],
            error_excerpt=str(document["excerpt"]),
        )
        return ToolCall(
            turn=str(document["turn"]),
            round=_int_or_none(document["round"]),
            server=document["server"],
            tool=str(document["tool"]),
            fingerprint=document["fp"],
            verdict=verdict,
            start_ns=int(document["start"]),
            end_ns=int(document["end"]),
            trace_id=bytes.fromhex(document["trace"]),
            span_ids=tuple(bytes.fromhex(s) for s in document["spans"]),
            dialect=_dialect(document["dialect"]),
            harness=str(document["harness"]),
            tenant=str(document["tenant"]),
        )
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
