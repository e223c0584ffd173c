"""Roster health over the recorded listings: what the roster engine said of each.

Listing states (with the attributes an ambiguous one lacked), mid-turn collapses (one per
turn and first round, as its latest finding told it), namespaces connected but not
attached, session snapshots taken before a namespace connected, and stale rosters (a
listing offering a tool whose breaker was open; a call failing as an unknown tool its
turn had been offered). Each with the listings or calls behind it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from processor.engines.breaker import CallDecision
from processor.engines.roster import Collapse, ListingState, RosterFinding
from processor.offline.figures import Count, Rows, bump, name


def _by_listings(row: dict[str, Any]) -> int:
    return -int(row["listings"]["count"])


MAX_COLLAPSES_PER_TURN = 8


@dataclass(slots=True)
class _Collapses:
    spans: Count
    by_round: dict[int, Collapse] = field(default_factory=dict)


class RosterTally:
    def __init__(self, *, cap: int, max_rows: int) -> None:
        self._cap = cap
        self.listings = 0
        self.states: dict[str, Count] = {}
        self.missing_attributes: dict[str, int] = {}
        self.collapses: Rows[tuple[str, str, str], _Collapses] = Rows(
            max_rows, lambda _: _Collapses(Count(cap))
        )
        # (harness, server, attachment, missing namespaces)
        self.namespaces: Rows[tuple[str, str, str, tuple[str, ...]], Count] = Rows(
            max_rows, lambda _: Count(cap)
        )
        self.races: Rows[tuple[str, str, tuple[str, ...]], Count] = Rows(
            max_rows, lambda _: Count(cap)
        )
        self.stale_listings = Count(cap)
        self.stale_tools: Rows[str, list[int]] = Rows(max_rows, lambda _: [0])
        self.stale_calls = Count(cap)

    def listing(self, finding: RosterFinding) -> None:
        listing = finding.listing
        trace, span = listing.trace_id, listing.span_ids[0]
        self.listings += 1
        state = self.states.get(finding.state.value)
        if state is None:
            state = self.states[finding.state.value] = Count(self._cap)
        state.add(trace, span)
        if finding.state is ListingState.AMBIGUOUS and finding.missing_attributes:
            bump(self.missing_attributes, ",".join(finding.missing_attributes))
        collapse = finding.collapse
        if collapse is not None:
            row = self.collapses.at((listing.tenant, listing.harness, collapse.turn))
            row.spans.add(trace, span)
            for first in [
                f
                for f, c in row.by_round.items()
                if c.from_round <= collapse.to_round and collapse.from_round <= c.to_round
            ]:
                del row.by_round[first]
            if len(row.by_round) < MAX_COLLAPSES_PER_TURN:
                row.by_round[collapse.from_round] = collapse
        health = finding.namespaces
        server = listing.server or ""
        if health is not None and (
            health.missing or health.attachment.value != "namespaces_attached"
        ):
            key = (listing.harness, server, health.attachment.value, health.missing)
            self.namespaces.at(key).add(trace, span)
        if health is not None and health.startup_race:
            self.races.at((listing.harness, server, health.late)).add(trace, span)
        if finding.stale_tools:
            self.stale_listings.add(trace, span)
            for tool in finding.stale_tools:
                self.stale_tools.at(tool)[0] += 1

    def decision(self, decision: CallDecision) -> None:
        if decision.stale_roster:
            call = decision.call
            self.stale_calls.add(call.trace_id, call.span_ids[0])

    def to_json(self) -> dict[str, Any]:
        order = [s.value for s in ListingState]
        states = sorted(self.states.items(), key=lambda kv: (-kv[1].n, order.index(kv[0])))
        collapses: list[dict[str, Any]] = []
        for (tenant, harness, turn), row in self.collapses.items():
            for _, c in sorted(row.by_round.items()):
                collapses.append(
                    {
                        "turn": name(turn),
                        "tenant": name(tenant),
                        "harness": name(harness),
                        "from_round": c.from_round,
                        "to_round": c.to_round,
                        "rounds": c.to_round - c.from_round + 1,
                        "recovered_round": c.recovered_round,
                        "offered_before": c.offered_before,
                        "listings": row.spans.to_json(seconds=False),
                    }
                )
        collapses.sort(key=lambda c: (-c["rounds"], c["recovered_round"] is not None))
        return {
            "listings": self.listings,
            "states": {state: count.to_json(seconds=False) for state, count in states},
            "ambiguous_missing_attributes": dict(self.missing_attributes),
            "collapses": collapses,
            "namespaces_missing": sorted(
                (
                    {
                        "harness": name(harness),
                        "server": name(server),
                        "attachment": attachment,
                        "missing": [name(n) for n in missing],
                        "listings": count.to_json(seconds=False),
                    }
                    for (harness, server, attachment, missing), count in self.namespaces.items()
                ),
                key=_by_listings,
            ),
            "startup_races": sorted(
                (
                    {
                        "harness": name(harness),
                        "server": name(server),
                        "late_namespaces": [name(n) for n in late],
                        "listings": count.to_json(seconds=False),
                    }
                    for (harness, server, late), count in self.races.items()
                ),
                key=_by_listings,
            ),
            "stale": {
                "listings_offering_open_tools": self.stale_listings.to_json(seconds=False),
                "tools": {
                    name(tool): n[0]
                    for tool, n in sorted(self.stale_tools.items(), key=lambda kv: -kv[1][0])
                },
                "unknown_tool_after_offer": self.stale_calls.to_json(seconds=False),
            },
        }
