"""Roster health: a state per tool listing, the tools offered round by round, namespaces.

Two seeds drive the tables. sirens-echo #943: the tool surface fell from 86 tools to 0 at
rounds 9 and 11 of one turn, and 21 of 25 ``mcp.tools.list`` spans said ``reached: 0,
cached: true`` with nothing to tell a warm cache from servers backing off. Gitea-Tools'
namespace health: a namespace the host reports Connected is not necessarily attached to
the session's tool surface, and a tool snapshot taken before a namespace connected cannot
hold it. Listings are built by hand; the only clock is their span times.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from processor.classify.events import Dialect, ToolListing
from processor.classify.listing import listing_counts
from processor.config import RosterConfig
from processor.engines.roster import (
    Attachment,
    Collapse,
    ListingState,
    NamespaceHealth,
    RosterFinding,
    RosterHealth,
    listing_state,
    namespace_health,
)
from tests.engine_builders import at_ns, at_s, new_span_id, round_ns, trace_of

SEED_TURN = "1539078028959944794"
SEED_MINUTE = 66 + 36 / 60  # 01:06:36, the seed's Discord message
SEED_OFFERED = [(1, 86), (3, 86), (5, 86), (7, 86), (9, 0), (11, 0), (13, 86)]
OLD_INSTRUMENT = ("unavailable", "registered")  # what the old instrument never wrote

AUTHOR, REVIEWER, MERGER, TOOLS = "gitea-author", "gitea-reviewer", "gitea-merger", "gitea-tools"
ROLES = (AUTHOR, REVIEWER, MERGER, TOOLS)
SNAPSHOT_S = at_s(SEED_MINUTE)  # when the session's tool snapshot was taken, epoch seconds


def listing(
    model_round: int | None = None,
    *,
    turn: str = SEED_TURN,
    offered: int | None = None,
    **fields: Any,
) -> ToolListing:
    """One harness listing, a few seconds into the seed turn per round, lasting 50 ms."""
    start_ns = at_ns(SEED_MINUTE + (model_round or 0) * 0.1)
    return ToolListing(
        turn=turn,
        round=model_round,
        server=None,
        offered=offered,
        start_ns=start_ns,
        end_ns=start_ns + round_ns(0.05),
        trace_id=trace_of(turn),
        span_ids=(new_span_id(),),
        dialect=Dialect.HARNESS,
        **fields,
    )


def from_raw(raw: Mapping[str, Any], model_round: int | None = None) -> ToolListing:
    """A listing the way the classifier makes one: raw attributes checked by listing_counts."""
    fields, problems = listing_counts(raw)
    return listing(model_round, problems=problems, **fields)


def surface(
    offers: Sequence[tuple[int, int]], *, turn: str = SEED_TURN, roster: RosterHealth | None = None
) -> list[Collapse | None]:
    """The collapse each (round, offered) listing of one turn reports, in arrival order."""
    roster = roster if roster is not None else RosterHealth()
    return [roster.observe(listing(r, turn=turn, offered=n)).collapse for r, n in offers]


def distinct(collapses: Sequence[Collapse | None]) -> set[tuple[str, int]]:
    """The collapses among the findings, one per (turn, first round offered nothing)."""
    return {(c.turn, c.from_round) for c in collapses if c is not None}


# --- 1. a state per listing -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "state", "missing"),
    [
        (
            {"configured": 12, "listed": 0, "reached": 0, "cached": True},
            ListingState.AMBIGUOUS,
            OLD_INSTRUMENT,
        ),
        (
            {"configured": 11, "listed": 0, "reached": 0, "cached": True},
            ListingState.AMBIGUOUS,
            OLD_INSTRUMENT,
        ),
        ({"configured": 11, "listed": 11, "reached": 11, "cached": False}, ListingState.COLD, ()),
        ({"configured": 12, "listed": 12, "reached": 12, "cached": False}, ListingState.COLD, ()),
        (
            {"configured": 12, "reached": 0, "cached": True, "unavailable": 0, "registered": 12},
            ListingState.WARM,
            (),
        ),
        (
            {"configured": 11, "reached": 0, "cached": True, "unavailable": 0, "registered": 11},
            ListingState.WARM,
            (),
        ),
        (
            {"configured": 12, "reached": 0, "cached": True, "unavailable": 3, "registered": 9},
            ListingState.BACKOFF,
            (),
        ),
        (
            {"configured": 12, "reached": 9, "cached": False, "unavailable": 3, "registered": 9},
            ListingState.BACKOFF,
            (),
        ),
        ({"configured": 12, "listed": 9, "reached": 9, "cached": False}, ListingState.BACKOFF, ()),
        (
            {"configured": 12, "reached": 0, "cached": True, "unavailable": 0, "registered": 0},
            ListingState.COLLAPSED,
            (),
        ),
        (
            {"configured": 12, "reached": 12, "cached": False, "registered": 12, "offered": 0},
            ListingState.COLLAPSED,
            (),
        ),
        (
            {"configured": 12, "reached": 0, "cached": True, "unavailable": 12, "registered": 0},
            ListingState.COLLAPSED,
            (),
        ),
        ({"configured": 0, "registered": 0, "offered": 0}, ListingState.COLD, ()),
        ({"listed": 0, "reached": 0, "cached": True}, ListingState.UNKNOWN, ("configured",)),
        ({"offered": 0, "registered": 0}, ListingState.UNKNOWN, ("configured",)),
    ],
    ids=[
        "the old instrument's cache hit on 12 servers is ambiguous",
        "the old instrument's cache hit on 11 servers is ambiguous",
        "a cold listing that reached all 11 servers is cold",
        "a cold listing that reached all 12 servers is cold",
        "the fixed instrument's cache hit with 12 registered is warm",
        "the fixed instrument's cache hit with 11 registered is warm",
        "a cache hit with servers unavailable is backoff",
        "a cold listing with servers unavailable is backoff",
        "a cold listing that reached only some servers is backoff",
        "servers configured but none registered is collapsed",
        "servers configured but zero tools offered is collapsed",
        "collapsed wins over backoff when every server is unavailable",
        "nothing configured and nothing offered is not a collapse",
        "a listing without a configured count is unknown",
        "zero offered without a configured count is unknown, not collapsed",
    ],
)
def test_listing_state_from_its_defining_counts(
    counts: dict[str, Any], state: ListingState, missing: tuple[str, ...]
) -> None:
    """Each state from the counts that define it; ambiguity names what the instrument lacked."""
    assert listing_state(listing(1, **counts)) == (state, missing)


def test_the_engine_reports_the_listing_state_and_what_was_missing() -> None:
    """RosterHealth.observe carries the state and the missing attributes onto its finding."""
    seen = listing(1, configured=12, listed=0, reached=0, cached=True)
    finding = RosterHealth().observe(seen)
    assert finding == RosterFinding(
        listing=seen,
        state=ListingState.AMBIGUOUS,
        missing_attributes=OLD_INSTRUMENT,
        collapse=None,
        namespaces=None,
    )


# --- 2. the surface over a turn ---------------------------------------------------------------


def test_the_seed_turn_collapses_once_over_rounds_9_to_11_and_recovers_at_13() -> None:
    """86 tools at rounds 1-7, none at 9 and 11, 86 again at 13: one collapse, one recovery."""
    collapses = surface([*SEED_OFFERED, (15, 86)])
    opened = Collapse(turn=SEED_TURN, from_round=9, to_round=9, offered_before=86)
    extended = Collapse(turn=SEED_TURN, from_round=9, to_round=11, offered_before=86)
    recovered = Collapse(
        turn=SEED_TURN, from_round=9, to_round=11, offered_before=86, recovered_round=13
    )
    assert collapses == [None, None, None, None, opened, extended, recovered, None]
    assert distinct(collapses) == {(SEED_TURN, 9)}


@pytest.mark.parametrize(
    "arrival",
    [
        [1, 3, 5, 7, 9, 11, 13],
        [1, 3, 5, 9, 7, 11, 13],
        [1, 3, 5, 7, 11, 9, 13],
    ],
    ids=[
        "rounds that arrive in order",
        "round 7 arriving after round 9 is not a recovery",
        "round 9 arriving after round 11 still starts the collapse",
    ],
)
def test_listings_of_a_turn_arriving_out_of_order_make_the_same_one_collapse(
    arrival: list[int],
) -> None:
    """Spans arrive out of order and in batches: the turn still has one collapse, 9-11."""
    offered = dict(SEED_OFFERED)
    collapses = surface([(r, offered[r]) for r in arrival])
    reported = [c for c in collapses if c is not None]
    assert all(c.recovered_round is None or c.recovered_round > c.to_round for c in reported), (
        reported
    )
    # A round that has not arrived yet cannot be known: the collapse first seen at round
    # 11 is the same one, re-dated once round 9 arrives. What the turn adds up to is one.
    assert len({c.offered_before for c in reported}) == 1
    assert reported[-1] == Collapse(
        turn=SEED_TURN, from_round=9, to_round=11, offered_before=86, recovered_round=13
    )


@pytest.mark.parametrize(
    "offers",
    [
        [(1, 0), (3, 0), (5, 0), (7, 0)],
        [(1, 0), (3, 0), (5, 86), (7, 86)],
        [(1, 86), (3, 86), (5, 86)],
        [(1, 86), (3, 40), (5, 86), (7, 12)],
    ],
    ids=[
        "a turn that starts with no tools and stays so is not a mid-turn collapse",
        "a turn whose tools arrive late is not a collapse",
        "a steady roster never collapses",
        "a roster that shrinks but never empties is not a collapse by default",
    ],
)
def test_a_surface_that_never_falls_to_nothing_from_something_is_no_collapse(
    offers: list[tuple[int, int]],
) -> None:
    assert surface(offers) == [None] * len(offers)


def test_a_listing_without_an_offered_count_or_a_round_leaves_the_surface_alone() -> None:
    """The old instrument's cached listings (listed 0, no offered count) are not a collapse."""
    roster = RosterHealth()
    assert roster.observe(listing(1, offered=86)).collapse is None
    quiet = [
        listing(3, configured=12, listed=0, reached=0, cached=True),
        listing(None, offered=0),
    ]
    assert [roster.observe(q).collapse for q in quiet] == [None, None]
    later = roster.observe(listing(5, offered=86))
    assert later.collapse is None


def test_two_interleaved_turns_are_tracked_apart() -> None:
    """One turn's collapse is not the other's, whatever order their listings arrive in."""
    roster = RosterHealth()
    a, b = "turn-a", "turn-b"
    seen = [
        (a, 1, 86),
        (b, 1, 0),
        (a, 3, 86),
        (b, 3, 0),
        (a, 5, 0),
        (b, 5, 86),
        (a, 7, 0),
        (b, 7, 86),
        (a, 9, 86),
    ]
    collapses = [roster.observe(listing(r, turn=t, offered=n)).collapse for t, r, n in seen]
    assert distinct(collapses) == {(a, 5)}
    assert collapses[-1] == Collapse(
        turn=a, from_round=5, to_round=7, offered_before=86, recovered_round=9
    )
    assert [c for (t, _, _), c in zip(seen, collapses, strict=True) if t == b] == [None] * 4


def test_a_collapse_in_one_turn_is_not_recovered_by_another() -> None:
    """A full roster in turn B says nothing about turn A's empty one."""
    roster = RosterHealth()
    roster.observe(listing(1, turn="turn-a", offered=86))
    opened = roster.observe(listing(3, turn="turn-a", offered=0)).collapse
    assert opened is not None and opened.recovered_round is None
    assert roster.observe(listing(5, turn="turn-b", offered=86)).collapse is None
    still = roster.observe(listing(5, turn="turn-a", offered=0)).collapse
    assert still == Collapse(turn="turn-a", from_round=3, to_round=5, offered_before=86)


@pytest.mark.parametrize(
    ("fraction", "offers", "collapsed_at"),
    [
        (0.5, [(1, 86), (3, 30)], 3),
        (0.5, [(1, 86), (3, 50)], None),
        (0.5, [(1, 86), (3, 43)], 3),
        (0.5, [(1, 86), (3, 44)], None),
        (0.5, [(1, 86), (3, 60), (5, 40)], 5),
        (0.0, [(1, 86), (3, 1)], None),
        (0.0, [(1, 86), (3, 0)], 3),
    ],
    ids=[
        "at 0.5, 86 falling to 30 is a collapse",
        "at 0.5, 86 falling to 50 is not",
        "at 0.5, exactly half of the best is a collapse",
        "at 0.5, one more than half is not",
        "the fraction is of the turn's best, not of the round before",
        "by default one tool left is not a collapse",
        "by default no tools left is a collapse",
    ],
)
def test_collapse_fraction_sets_how_far_the_surface_must_fall(
    fraction: float, offers: list[tuple[int, int]], collapsed_at: int | None
) -> None:
    collapses = surface(offers, roster=RosterHealth(RosterConfig(collapse_fraction=fraction)))
    if collapsed_at is None:
        assert collapses == [None] * len(offers)
    else:
        assert collapses[-1] == Collapse(
            turn=SEED_TURN, from_round=collapsed_at, to_round=collapsed_at, offered_before=86
        )


def test_a_partial_collapse_recovers_once_above_the_fraction() -> None:
    """At 0.5: 86, 30, 40 (still at or under 43), then 50: rounds 3-5, recovered at 7."""
    collapses = surface(
        [(1, 86), (3, 30), (5, 40), (7, 50)],
        roster=RosterHealth(RosterConfig(collapse_fraction=0.5)),
    )
    assert collapses[-1] == Collapse(
        turn=SEED_TURN, from_round=3, to_round=5, offered_before=86, recovered_round=7
    )


def test_a_second_collapse_after_a_recovery_is_a_new_one() -> None:
    collapses = surface([(1, 86), (3, 0), (5, 86), (7, 0)])
    assert collapses[-1] == Collapse(turn=SEED_TURN, from_round=7, to_round=7, offered_before=86)
    assert distinct(collapses) == {(SEED_TURN, 3), (SEED_TURN, 7)}


def test_a_turn_is_forgotten_after_turn_idle_s_of_span_time() -> None:
    """The turn's best is span-time state: an hour later the same turn id starts afresh."""
    roster = RosterHealth(RosterConfig(turn_idle_s=600.0))
    roster.observe(listing(1, offered=86))
    much_later = listing(3, offered=0)
    end_ns = much_later.end_ns + round_ns(3600.0)
    much_later = replace(much_later, start_ns=end_ns - round_ns(0.05), end_ns=end_ns)
    assert roster.observe(much_later).collapse is None


# --- 3. namespaces: connected is not attached -------------------------------------------------


@pytest.mark.parametrize(
    ("connected", "attached", "required", "attachment", "missing"),
    [
        (
            (AUTHOR, REVIEWER),
            (AUTHOR,),
            None,
            Attachment.CONNECTED_BUT_NAMESPACES_MISSING,
            (REVIEWER,),
        ),
        (ROLES, ROLES, None, Attachment.NAMESPACES_ATTACHED, ()),
        ((AUTHOR,), (AUTHOR, TOOLS), None, Attachment.NAMESPACES_ATTACHED, ()),
        (
            (TOOLS, MERGER, REVIEWER, AUTHOR),
            (AUTHOR,),
            None,
            Attachment.CONNECTED_BUT_NAMESPACES_MISSING,
            (MERGER, REVIEWER, TOOLS),
        ),
        (
            (AUTHOR, REVIEWER),
            None,
            None,
            Attachment.CONNECTED_BUT_NAMESPACES_MISSING,
            (AUTHOR, REVIEWER),
        ),
        ((), (), None, Attachment.DISCONNECTED, ()),
        ((), None, None, Attachment.DISCONNECTED, ()),
        ((), (), (REVIEWER,), Attachment.DISCONNECTED, (REVIEWER,)),
        ((AUTHOR, REVIEWER), (AUTHOR,), (AUTHOR,), Attachment.NAMESPACES_ATTACHED, ()),
        (
            (AUTHOR,),
            (AUTHOR,),
            (MERGER,),
            Attachment.CONNECTED_BUT_NAMESPACES_MISSING,
            (MERGER,),
        ),
        (
            ROLES,
            (AUTHOR, MERGER),
            (REVIEWER, MERGER),
            Attachment.CONNECTED_BUT_NAMESPACES_MISSING,
            (REVIEWER,),
        ),
    ],
    ids=[
        "the seed: reviewer connected but not attached is missing",
        "every connected namespace attached is healthy",
        "an attached namespace the host did not list does not hurt",
        "missing namespaces are listed in sorted order",
        "connected with no attached list proves nothing attached",
        "nothing connected is disconnected",
        "nothing connected and no attached list is disconnected",
        "nothing connected still names the required namespaces missing",
        "required namespaces, all attached, override connected ones that are not",
        "a required namespace never connected is missing",
        "only the required namespaces that are unattached are missing",
    ],
)
def test_namespace_attachment_from_the_gitea_tools_seed(
    connected: tuple[str, ...],
    attached: tuple[str, ...] | None,
    required: tuple[str, ...] | None,
    attachment: Attachment,
    missing: tuple[str, ...],
) -> None:
    health = namespace_health(
        listing(
            1,
            namespaces_connected=connected,
            namespaces_attached=attached,
            namespaces_required=required,
        )
    )
    assert health is not None
    assert (health.attachment, health.missing) == (attachment, missing)


def test_a_listing_without_namespace_lists_has_no_namespace_health() -> None:
    assert namespace_health(listing(1, configured=12, reached=12, cached=False)) is None
    assert RosterHealth().observe(listing(1, configured=12)).namespaces is None


@pytest.mark.parametrize(
    ("snapshot_s", "connected_at", "late"),
    [
        (SNAPSHOT_S, ((AUTHOR, SNAPSHOT_S - 10), (REVIEWER, SNAPSHOT_S + 5)), (REVIEWER,)),
        (SNAPSHOT_S, ((REVIEWER, SNAPSHOT_S + 5), (AUTHOR, SNAPSHOT_S + 0.5)), (AUTHOR, REVIEWER)),
        (SNAPSHOT_S, ((AUTHOR, SNAPSHOT_S - 10), (REVIEWER, SNAPSHOT_S - 1)), ()),
        (SNAPSHOT_S, ((AUTHOR, SNAPSHOT_S),), ()),
        (None, ((REVIEWER, SNAPSHOT_S + 5),), ()),
        (SNAPSHOT_S, None, ()),
        (SNAPSHOT_S, (), ()),
    ],
    ids=[
        "a namespace connected after the snapshot is late, one before it is not",
        "every namespace connected after the snapshot is late, in sorted order",
        "namespaces all connected before the snapshot are no race",
        "a namespace connected at the very moment of the snapshot is not late",
        "without a snapshot time there is no race",
        "without connection times there is no race",
        "an empty map of connection times is no race",
    ],
)
def test_a_startup_ordering_race_names_the_namespaces_that_connected_late(
    snapshot_s: float | None,
    connected_at: tuple[tuple[str, float], ...] | None,
    late: tuple[str, ...],
) -> None:
    """A snapshot taken before a namespace connected cannot hold it, however healthy it looks."""
    health = namespace_health(
        listing(
            1,
            namespaces_connected=(AUTHOR, REVIEWER),
            namespaces_attached=(AUTHOR, REVIEWER),
            tool_snapshot_at_s=snapshot_s,
            namespaces_connected_at_s=connected_at,
        )
    )
    assert health is not None
    assert (health.startup_race, health.late) == (bool(late), late)


def test_the_race_and_the_missing_namespace_are_both_reported() -> None:
    """The multi-role parallel-connect case: reviewer connected late and is not attached."""
    finding = RosterHealth().observe(
        listing(
            1,
            namespaces_connected=(AUTHOR, REVIEWER),
            namespaces_attached=(AUTHOR,),
            tool_snapshot_at_s=SNAPSHOT_S,
            namespaces_connected_at_s=((AUTHOR, SNAPSHOT_S - 30), (REVIEWER, SNAPSHOT_S + 2)),
            probe_source="client_namespace",
        )
    )
    assert finding.namespaces == NamespaceHealth(
        attachment=Attachment.CONNECTED_BUT_NAMESPACES_MISSING,
        missing=(REVIEWER,),
        startup_race=True,
        late=(REVIEWER,),
        probe_proves=True,
    )


@pytest.mark.parametrize(
    ("probe_source", "proves"),
    [("client_namespace", True), ("offline_spawn", False), (None, None)],
    ids=[
        "a probe through the session's own client proves the namespace",
        "an offline spawn probe proves nothing about the session",
        "no recorded probe source is neither proof nor disproof",
    ],
)
def test_only_a_client_namespace_probe_proves_a_namespace(
    probe_source: str | None, proves: bool | None
) -> None:
    health = namespace_health(
        listing(
            1,
            namespaces_connected=(REVIEWER,),
            namespaces_attached=(REVIEWER,),
            probe_source=probe_source,
        )
    )
    assert health is not None
    assert health.probe_proves is proves


# --- 4. bad input: named in problems, never fatal, never a false collapse ---------------------


def roster_after_a_full_round() -> RosterHealth:
    """A roster that has seen 86 tools offered at round 1 of the seed turn."""
    roster = RosterHealth()
    assert roster.observe(listing(1, offered=86)).collapse is None
    return roster


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"configured": 12, "registered": 12, "offered": -1}, "offered"),
        ({"configured": 12, "registered": -3, "offered": 86}, "registered"),
        ({"configured": -12, "listed": 0, "reached": 0, "cached": True}, "configured"),
        ({"configured": 12, "reached": -1, "cached": True}, "reached"),
        ({"configured": 12, "unavailable": -2, "cached": True}, "unavailable"),
        ({"configured": 12, "registered": "0"}, "registered"),
        ({"configured": 12, "offered": "0"}, "offered"),
        ({"configured": 12, "offered": "lots"}, "offered"),
        ({"configured": "lots", "registered": 0}, "configured"),
        ({"configured": 12, "registered": 1.5}, "registered"),
        ({"configured": 12, "offered": 0.0}, "offered"),
        ({"configured": 12, "offered": True}, "offered"),
        ({"configured": 12, "registered": False}, "registered"),
        ({"configured": 12, "offered": False}, "offered"),
        ({"configured": True, "registered": 0}, "configured"),
        ({"configured": 12, "reached": 0, "cached": "yes"}, "cached"),
        ({"configured": 12, "registered": None}, "registered"),
        ({"configured": 12, "registered": [0]}, "registered"),
        ({"configured": 11, "listed": 86, "reached": 11, "cached": False}, "listed (86)"),
        ({"configured": 12, "mcp.namespaces.connected": AUTHOR}, "mcp.namespaces.connected"),
        ({"configured": 12, "mcp.namespaces.attached": [1, 2]}, "mcp.namespaces.attached"),
        ({"configured": 12, "mcp.namespaces.required": {REVIEWER: 1}}, "mcp.namespaces.required"),
        ({"configured": 12, "offered_names": "navigate"}, "offered_names"),
        ({"configured": 12, "mcp.namespaces.connected_at": 5}, "mcp.namespaces.connected_at"),
        ({"configured": 12, "mcp.namespaces.connected_at": "[1]"}, "mcp.namespaces.connected_at"),
        ({"configured": 12, "mcp.namespaces.connected_at": "{"}, "mcp.namespaces.connected_at"),
        (
            {"configured": 12, "mcp.namespaces.connected_at": [REVIEWER]},
            "mcp.namespaces.connected_at",
        ),
        (
            {"configured": 12, "mcp.namespaces.connected_at": {REVIEWER: "late"}},
            "mcp.namespaces.connected_at",
        ),
        (
            {"configured": 12, "mcp.namespaces.connected_at": {REVIEWER: True}},
            "mcp.namespaces.connected_at",
        ),
        (
            {"configured": 12, "mcp.session.tool_snapshot_at": "yesterday"},
            "mcp.session.tool_snapshot_at",
        ),
        ({"configured": 12, "mcp.namespaces.probe_source": "ide"}, "mcp.namespaces.probe_source"),
    ],
    ids=[
        "offered -1 is dropped",
        "a negative registered count is dropped",
        "a negative configured count is dropped",
        "a negative reached count is dropped",
        "a negative unavailable count is dropped",
        "registered as the string 0 is dropped",
        "offered as the string 0 is dropped",
        "offered lots is dropped",
        "configured lots is dropped",
        "a fractional registered count is dropped",
        "offered as the float 0.0 is dropped",
        "offered true is not a count",
        "registered false is not a zero",
        "offered false is not a zero",
        "configured true is not a count",
        "cached yes is not a boolean",
        "a null registered count is dropped",
        "a list for a count is dropped",
        "more listed than configured is flagged",
        "a string for the connected namespaces is not a list",
        "a list of ints for the attached namespaces is not a list of names",
        "an object for the required namespaces is not a list",
        "a string for the offered tool names is not a list",
        "a number for connected_at is not an object",
        "a JSON array string for connected_at is not an object",
        "broken JSON for connected_at is not an object",
        "a list for connected_at is not an object",
        "a connected_at time that is text is rejected",
        "a connected_at time that is a boolean is rejected",
        "a snapshot time that is text is rejected",
        "an unknown probe source is rejected",
    ],
)
def test_bad_listing_attributes_are_named_and_never_make_a_false_collapse(
    raw: dict[str, Any], named: str
) -> None:
    """Through listing_counts then the engine: no exception, a problem, no invented collapse."""
    bad = from_raw(raw, model_round=3)
    assert bad.problems, "a malformed attribute must be named in problems"
    assert any(named in problem for problem in bad.problems), bad.problems
    finding = roster_after_a_full_round().observe(bad)
    assert finding.state is not ListingState.COLLAPSED
    assert finding.collapse is None
    assert finding.namespaces is None or not finding.namespaces.startup_race


@pytest.mark.parametrize(
    "raw",
    [
        {"configured": 12, "listed": 0, "reached": 0, "cached": True},
        {"configured": 12, "reached": 0, "cached": True, "unavailable": 0, "registered": 12},
        {"configured": 11, "listed": 11, "reached": 11, "cached": False, "offered": 86},
        {
            "configured": 4,
            "mcp.namespaces.connected": list(ROLES),
            "mcp.namespaces.attached": [AUTHOR],
            "mcp.namespaces.connected_at": f'{{"{REVIEWER}": {SNAPSHOT_S + 5}}}',
            "mcp.session.tool_snapshot_at": SNAPSHOT_S,
            "mcp.namespaces.probe_source": "offline_spawn",
        },
        {"configured": 4, "mcp.namespaces.connected_at": {AUTHOR: SNAPSHOT_S}},
    ],
    ids=[
        "the old instrument's listing is well formed",
        "the fixed instrument's listing is well formed",
        "a cold listing with an offered count is well formed",
        "namespace lists, a JSON connected_at and a probe source are well formed",
        "connected_at as an object is well formed",
    ],
)
def test_well_formed_listing_attributes_raise_no_problems(raw: dict[str, Any]) -> None:
    fields, problems = listing_counts(raw)
    assert problems == ()
    assert set(fields) >= {"configured"}


def test_a_collapse_is_still_seen_through_listing_counts_when_the_counts_are_good() -> None:
    """The checks drop only bad values: a real 0 offered after 86 is still a collapse."""
    roster = roster_after_a_full_round()
    finding = roster.observe(from_raw({"configured": 12, "registered": 0, "offered": 0}, 3))
    assert finding.listing.problems == ()
    assert finding.state is ListingState.COLLAPSED
    assert finding.collapse == Collapse(turn=SEED_TURN, from_round=3, to_round=3, offered_before=86)


@pytest.mark.parametrize(
    "raw",
    [
        {"mcp.namespaces.attached": [AUTHOR, REVIEWER]},
        {"mcp.namespaces.connected": AUTHOR, "mcp.namespaces.attached": [AUTHOR, REVIEWER]},
        {"mcp.namespaces.connected": [1], "mcp.namespaces.attached": [AUTHOR, REVIEWER]},
    ],
    ids=[
        "namespaces attached with no connected list are not disconnected",
        "namespaces attached with a string for the connected list are not disconnected",
        "namespaces attached with ints for the connected list are not disconnected",
    ],
)
def test_a_session_with_namespaces_attached_is_never_called_disconnected(
    raw: dict[str, Any],
) -> None:
    """A namespace in the session's tool surface is connected, whatever the host list says.

    An absent or malformed ``connected`` list is unknown, not empty: it must not turn a
    session whose tool surface holds namespaces into ``disconnected`` (missing nothing).
    """
    finding = RosterHealth().observe(from_raw({"configured": 2, **raw}, model_round=1))
    health = finding.namespaces
    assert health is None or health.attachment is not Attachment.DISCONNECTED, health


def test_the_turns_collapses_are_read_in_round_order_whatever_the_arrival() -> None:
    """collapses() over all the rounds of the seed turn: exactly one, rounds 9-11."""
    from processor.engines.roster import collapses

    assert collapses(SEED_TURN, dict(SEED_OFFERED), 0.0) == [
        Collapse(turn=SEED_TURN, from_round=9, to_round=11, offered_before=86, recovered_round=13)
    ]
