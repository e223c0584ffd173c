"""Pairing: how the halves and the layers of one call find each other.

The keys a half of a call is found by and those its other half would be found by (span
links across processes, else JSON-RPC request ids), the halves held for their other half,
what two sides' verdicts say together, and the counts of what pairing could not do
(docs/conventions.md, "Pairing and de-duplication"). What is held lives in deciding.py.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mcp_breaker_client.shared.verdict import FailureClass, Outcome, Verdict

from processor.classify.events import Side
from processor.classify.reading import Reading

_RANK = {Outcome.NEUTRAL: 3, Outcome.FAILED: 3, Outcome.OK: 1, Outcome.UNKNOWN: 0}


def more_informative(a: Verdict, b: Verdict) -> Verdict:
    """The verdict of a pair: a failure beats a success beats silence; a specific class
    beats the generic ``tool_error``."""
    if _RANK[a.outcome] != _RANK[b.outcome]:
        return a if _RANK[a.outcome] > _RANK[b.outcome] else b
    if a.failure_class is FailureClass.TOOL_ERROR and b.failure_class not in (
        None,
        a.failure_class,
    ):
        return b
    return a


PairKey = tuple[object, ...]
# The sides as plain strings, as the keys hold them: a tuple of strings and bytes is one
# the garbage collector stops tracking, where a Side in it would keep every key kept here
# in its sight.
_CLIENT_NAME, _SERVER_NAME = Side.CLIENT.value, Side.SERVER.value
_SERVER = Side.SERVER  # read once: on Python 3.11 an enum member read off its class is slow


@dataclass(slots=True)
class PairingStats:
    """Running counts of what pairing could not do, read by the metrics at scrape time."""

    unpaired: int = 0  # a half decided alone: its other half did not come in time
    pending_overflow: int = 0  # a half decided early: too many calls were held
    duplicate_spans: int = 0  # a span exported twice, dropped the second time
    malformed_listings: int = 0  # a listing with counts present but unreadable
    nested_spans: int = 0  # an SDK client span under a harness call span: counted once
    # A half held for its other half when its request was forwarded: the span went on with
    # its own outcome only; the call's decision reaches the metrics and advisories later.
    forwarded_pending: int = 0
    # A span whose times lay outside the arrival clock's bounds (classify.max_clock_skew_s,
    # max_span_age_s): read with its times moved inside them.
    clamped_times: int = 0
    # A name (tool, server, turn, session, tenant, harness) longer than classify.max_name_chars.
    cut_names: int = 0
    # With authenticated intake and span_tenant: match, a resource that named another
    # tenant than its sender's credentials: its spans were forwarded, not analysed.
    tenant_mismatches: int = 0


class SpanFate(enum.Enum):
    """What became of a call span whose call was not decided in its own request."""

    PENDING = "pending"  # held for its other half: forwarded before the call's decision
    ELSEWHERE = "elsewhere"  # its call is told by another span (its other half, a parent)


@dataclass(slots=True)
class Pending:
    """A half of a call held for its other half, or for a layer still to come."""

    reading: Reading
    verdict: Verdict
    offered: tuple[PairKey, ...]  # the keys this half is found by
    sought: tuple[PairKey, ...]  # the keys its other half would be found by
    arrived: float
    layers: tuple[Reading, ...] = ()  # the spans of other layers of the same call
    # A call whose both halves are in, held for the layer its client half is nested in
    # (which may name its server): what its server half said. ``verdict`` is then what
    # its client side said.
    server_verdict: Verdict | None = None


_PREFIX_SEPARATORS = frozenset("_-./:")


def same_names(a: str, b: str) -> bool:
    """Whether two spans can name the tool of one call: equal, either the other with a
    prefix ending in a separator (a toolset's: "billing_x", "x"), or either nameless."""
    if not a or not b or a == b:
        return True
    longer, shorter = (a, b) if len(a) > len(b) else (b, a)
    return longer.endswith(shorter) and longer[-len(shorter) - 1] in _PREFIX_SEPARATORS


def keys_of(reading: Reading) -> tuple[tuple[PairKey, ...], tuple[PairKey, ...]]:
    """A span on no side of the wire (a harness's, a framework's) is on the client's: a
    server half whose request it sent (no SDK span recorded between) names it as parent."""
    span = reading.span
    if reading.side is _SERVER:
        return _pairing_keys(reading, _SERVER_NAME, _CLIENT_NAME, span.parent_span_id)
    return _pairing_keys(reading, _CLIENT_NAME, _SERVER_NAME, span.span_id)


def group_keys(
    group: tuple[Reading, ...],
) -> tuple[tuple[PairKey, ...], tuple[PairKey, ...]]:
    """The pairing keys of a call's layers: a server half pairs with whichever client
    layer carried its request (the innermost, usually the SDK's)."""
    if len(group) == 1:
        return keys_of(group[0])
    offered: list[PairKey] = []
    sought: list[PairKey] = []
    for member in group:
        mine, theirs = keys_of(member)
        offered += mine
        sought += theirs
    return tuple(offered), tuple(sought)


def _pairing_keys(
    reading: Reading, mine: str, other: str, link: bytes
) -> tuple[tuple[PairKey, ...], tuple[PairKey, ...]]:
    """The keys under which this reading's half of its call is found (on side ``mine``),
    and those under which its other half is (on side ``other``).

    Each key names the side it belongs to, so two client halves that happen to share a
    request id are never taken for a pair; and the tenant, so that a span sent under one
    tenant's credentials, with another's trace and span ids, neither completes nor is
    absorbed into that tenant's call.
    """
    tenant, trace_id, request_id = reading.tenant, reading.span.trace_id, reading.request_id
    if request_id is None:
        if not link:
            return (), ()
        return (("span", mine, tenant, trace_id, link),), (("span", other, tenant, trace_id, link),)
    by_request = ("request", mine, tenant, trace_id, request_id, reading.tool)
    other_by_request = ("request", other, tenant, trace_id, request_id, reading.tool)
    if not link:
        return (by_request,), (other_by_request,)
    return (
        (("span", mine, tenant, trace_id, link), by_request),
        (("span", other, tenant, trace_id, link), other_by_request),
    )


def link_keys(offered: tuple[PairKey, ...]) -> tuple[PairKey, ...]:
    """The keys a call is absorbed by: its spans' links where it has any (request ids
    restart with every session, so another call may share this one's), else its keys."""
    links = tuple(key for key in offered if key[0] == "span")
    return links or offered


def either_verdict(a: Verdict | None, b: Verdict | None) -> Verdict | None:
    """What two spans of one side say together, either possibly silent (None)."""
    if a is None:
        return b
    return a if b is None else more_informative(a, b)
