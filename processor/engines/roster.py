"""Roster health: the tool surface the model was actually offered, from tool listings.

Pure, with span time passed in, like the breaker. Per listing it derives a state; per
turn it follows the tools offered round by round and reports a mid-turn collapse and its
recovery; per listing with namespace lists it tells attached from merely connected, and
spots a session snapshot taken before a namespace connected. Names and counts only.

Listing states (the sirens-echo seed: 21 of 25 listings said ``reached: 0, cached: true``,
and nobody could tell a warm cache from servers backing off):

    cold       every configured server was reached for this listing
    warm       served from cache, every server registered, none unavailable
    backoff    some servers unavailable (backing off), or not all reached
    collapsed  servers configured, but nothing registered or zero tools offered
    ambiguous  cached, nothing reached, and no ``unavailable``/``registered`` to tell warm
               from backoff: an old instrument; the missing attributes are named
    unknown    no ``configured`` count at all
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mcp_breaker_client.shared.cheap_dataclasses import slot_init

from processor.classify.events import ToolListing
from processor.config import RosterConfig
from processor.engines.bounded import IdleMap
from processor.engines.turns import NS_PER_S

PROBE_THAT_PROVES = "client_namespace"


class ListingState(enum.StrEnum):
    COLD = "cold"
    WARM = "warm"
    BACKOFF = "backoff"
    COLLAPSED = "collapsed"
    AMBIGUOUS = "ambiguous"
    UNKNOWN = "unknown"


class Attachment(enum.StrEnum):
    NAMESPACES_ATTACHED = "namespaces_attached"
    CONNECTED_BUT_NAMESPACES_MISSING = "connected_but_namespaces_missing"
    DISCONNECTED = "disconnected"


def listing_state(listing: ToolListing) -> tuple[ListingState, tuple[str, ...]]:
    """The state of one listing, and the attributes whose absence made it ambiguous."""
    configured = listing.configured
    if configured is None:
        return ListingState.UNKNOWN, ("configured",)
    if configured > 0 and (listing.registered == 0 or listing.offered == 0):
        return ListingState.COLLAPSED, ()
    if listing.unavailable:
        return ListingState.BACKOFF, ()
    if listing.cached:
        old_instrument = listing.registered is None and listing.unavailable is None
        if old_instrument and not listing.reached:
            return ListingState.AMBIGUOUS, ("unavailable", "registered")
        return ListingState.WARM, ()
    if listing.reached is not None and listing.reached < configured:
        return ListingState.BACKOFF, ()
    return ListingState.COLD, ()


@slot_init  # a cheaper constructor, as for the events: made per listing
@dataclass(frozen=True, slots=True, kw_only=True)
class Collapse:
    """The tools offered fell to (near) zero mid-turn; ``until_round`` once it recovered."""

    turn: str
    from_round: int  # the first round offered nothing
    to_round: int  # the last round offered nothing (so far)
    offered_before: int
    recovered_round: int | None = None


@slot_init  # a cheaper constructor, as for the events: made per listing
@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceHealth:
    attachment: Attachment
    missing: tuple[str, ...]  # required (else connected) but not attached
    startup_race: bool
    late: tuple[str, ...]  # connected after the session's tool snapshot was taken
    probe_proves: bool | None  # None when no probe source was recorded


@slot_init  # a cheaper constructor, as for the events: one per listing
@dataclass(frozen=True, slots=True, kw_only=True)
class RosterFinding:
    listing: ToolListing
    state: ListingState
    missing_attributes: tuple[str, ...]
    collapse: Collapse | None  # opened, extended or recovered by this listing
    namespaces: NamespaceHealth | None
    stale_tools: tuple[str, ...] = ()  # offered, though their breaker is open


def namespace_health(listing: ToolListing) -> NamespaceHealth | None:
    connected = listing.namespaces_connected
    attached = listing.namespaces_attached
    if connected is None and attached is None:
        return None
    if connected is None:
        if not attached:
            return None  # nothing said about what is connected, nothing attached: unknown
        connected = attached  # an attached namespace is connected, whatever else is
    connected_set, attached_set = set(connected), set(attached or ())
    wanted = listing.namespaces_required or tuple(connected)
    missing = tuple(sorted(n for n in wanted if n not in attached_set))
    if not connected_set:
        attachment = Attachment.DISCONNECTED
    elif missing:
        attachment = Attachment.CONNECTED_BUT_NAMESPACES_MISSING
    else:
        attachment = Attachment.NAMESPACES_ATTACHED
    late: tuple[str, ...] = ()
    snapshot = listing.tool_snapshot_at_s
    if snapshot is not None and listing.namespaces_connected_at_s:
        late = tuple(sorted(n for n, at in listing.namespaces_connected_at_s if at > snapshot))
    probe = None if listing.probe_source is None else listing.probe_source == PROBE_THAT_PROVES
    return NamespaceHealth(
        attachment=attachment,
        missing=missing,
        startup_race=bool(late),
        late=late,
        probe_proves=probe,
    )


MAX_ROUNDS_PER_TURN = 512  # rounds remembered per turn: the memory bound of a surface
MAX_OFFERED_NAMES = 2048  # tool names remembered per turn


@dataclass(slots=True)
class _Surface:
    offered: dict[int, int]  # round -> tools offered


class RosterHealth:
    def __init__(self, config: RosterConfig | None = None) -> None:
        self.config = config or RosterConfig()
        self._fraction = self.config.collapse_fraction
        self.clear()

    def clear(self) -> None:
        """Forget every listing: as new."""
        config = self.config
        self._turns: IdleMap[str, _Surface] = IdleMap(config.max_turns, config.turn_idle_s)
        self._offered: IdleMap[str, set[str]] = IdleMap(config.max_turns, config.turn_idle_s)

    def __len__(self) -> int:
        """Turns whose tool surface is kept."""
        return len(self._turns)

    def offered_in_turn(self, turn: str, tool: str, now_s: float) -> bool:
        """Did a listing of this turn offer ``tool``? (A call that then failed as an
        unknown tool means the roster the model saw was stale.)"""
        return tool in self._offered.touch(turn, now_s, set)

    def observe(self, listing: ToolListing) -> RosterFinding:
        state, missing = listing_state(listing)
        if listing.offered_tools:
            names = self._offered.touch(listing.turn, listing.end_ns / NS_PER_S, set)
            names.update(listing.offered_tools[: MAX_OFFERED_NAMES - len(names)])
        return RosterFinding(
            listing=listing,
            state=state,
            missing_attributes=missing,
            collapse=self._surface(listing),
            namespaces=namespace_health(listing),
        )

    def _surface(self, listing: ToolListing) -> Collapse | None:
        """The collapse this listing's round is in, or recovers; rounds, not arrivals,
        give the order, so listings of a turn may come in any order."""
        offered, round_ = listing.offered, listing.round
        if offered is None or round_ is None:
            return None
        surface = self._turns.touch(
            listing.turn, listing.end_ns / NS_PER_S, lambda: _Surface(offered={})
        )
        surface.offered[round_] = offered
        if len(surface.offered) > MAX_ROUNDS_PER_TURN:
            del surface.offered[min(surface.offered)]
        for collapse in collapses(listing.turn, surface.offered, self._fraction):
            inside = collapse.from_round <= round_ <= collapse.to_round
            if inside or collapse.recovered_round == round_:
                return collapse
        return None


def collapses(turn: str, offered: dict[int, int], fraction: float) -> list[Collapse]:
    """Every mid-turn collapse of a turn's surface, in round order."""
    found: list[Collapse] = []
    best = 0
    start = end = None
    for round_ in sorted(offered):
        count = offered[round_]
        if best > 0 and count <= best * fraction:
            start = round_ if start is None else start
            end = round_
            continue
        if start is not None and end is not None:
            found.append(
                Collapse(
                    turn=turn,
                    from_round=start,
                    to_round=end,
                    offered_before=best,
                    recovered_round=round_,
                )
            )
            start = end = None
        best = max(best, count)
    if start is not None and end is not None:
        found.append(Collapse(turn=turn, from_round=start, to_round=end, offered_before=best))
    return found
