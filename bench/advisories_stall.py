"""Part 2 of the advisory benchmark: one subscriber more that never reads.

The same as part 1 again, with one more subscriber whose stream is never read. The
others should not notice; the service should cut it off (its stream, read at last, ends
with RESOURCE_EXHAUSTED); every span should still be accepted. Spans keep coming after
``--events`` until the service's cut-off counter moves (or a cap).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

# Sibling modules: bench/ is on sys.path when these files are run as scripts.
from advisories_figures import SHORT, delivery, heading, line, row
from advisories_fleet import Fleet, Stream, delivered
from advisories_service import (
    METRIC_ACCEPTED,
    METRIC_CUT_OFF,
    METRIC_SUBSCRIBERS,
    Service,
    wait,
)
from advisories_spans import Numbering, Sender

STALL_EXTRA_BATCH = 20  # spans sent at a time while waiting for the stalled one to be cut
# A channel that keeps its HTTP/2 window at 64 KB: gRPC's default grows it (BDP probing)
# to a few MB, so a subscriber that never reads takes thousands of changes before the
# service's queue for it even starts to fill.
SMALL_WINDOW = (("grpc.http2.bdp_probe", 0),)


def run_stall(
    service: Service,
    fleet: Fleet,
    sender: Sender,
    healthy: Sequence[Stream],
    numbering: Numbering,
    args: argparse.Namespace,
) -> dict[str, Any]:
    cut_before = service.metric(METRIC_CUT_OFF)
    accepted_before = service.metric(METRIC_ACCEPTED)
    stalled = fleet.stall(() if args.stalled_bdp else SMALL_WINDOW)
    wait(
        lambda: service.metric(METRIC_SUBSCRIBERS) >= len(healthy) + 1,
        "the stalled subscriber to be registered",
    )
    had = min(len(s.got) for s in healthy)
    events = numbering.events("stall", args.events)
    sender.send(events, args.interval_s)
    cap = args.events + args.stall_extra_max
    while service.metric(METRIC_CUT_OFF) == cut_before and len(events) < cap:
        more = numbering.events(f"stall{len(events)}", STALL_EXTRA_BATCH)
        sender.send(more, args.interval_s)
        events += more
    delivered(healthy, had + sum(e.ok for e in events))
    figures = delivery(events, healthy)
    figures["extra_events"] = len(events) - args.events
    figures["server_cut_off"] = int(service.metric(METRIC_CUT_OFF) - cut_before)
    figures["server_accepted_spans"] = int(service.metric(METRIC_ACCEPTED) - accepted_before)
    figures["stalled"] = held = fleet.drain(stalled)
    # Where the cut fell: the service queues a change for a subscriber whose transport is
    # full, and cuts it at the first change that finds its queue full. What it read at
    # last is what the transport had taken (the last of it finished by the reading).
    cut_at = held["changes"] + args.subscriber_queue + 1 if figures["server_cut_off"] else None
    figures["cut_at"] = cut_at
    figures["before_cut"] = delivery(events[:cut_at], healthy)
    figures["after_cut"] = delivery(events[cut_at:] if cut_at else [], healthy)
    return figures


def report_stall(s: dict[str, Any], d: dict[str, Any], args: argparse.Namespace) -> None:
    """Part 2's figures next to part 1's (``d``), the same subscribers without the stall."""
    stalled = s["stalled"]
    heading(f"2. one stalled subscriber more, {s['events']} spans, ms", SHORT)
    before, after = s["before_cut"], s["after_cut"]
    row("healthy subscribers, no stall", d["every_ms"], SHORT)
    row("healthy subscribers, with the stall", s["every_ms"], SHORT)
    row(f"  spans 1-{before['events']}: until it was cut off", before["every_ms"], SHORT)
    row(f"  the {after['events']} spans after", after["every_ms"], SHORT)
    row("first subscriber, no stall", d["first_ms"], SHORT)
    row("first subscriber, with the stall", s["first_ms"], SHORT)
    row(f"  spans 1-{before['events']}: until it was cut off", before["first_ms"], SHORT)
    row("Export round trip, no stall", d["export_rtt_ms"], SHORT)
    row("Export round trip, with the stall", s["export_rtt_ms"], SHORT)
    row(f"  spans 1-{before['events']}: until it was cut off", before["export_rtt_ms"], SHORT)
    line(
        "changes delivered to healthy subscribers",
        f"{s['pairs']} of {s['events'] * s['subscribers']}",
    )
    line(
        "spans accepted during the stall (Export OK)",
        f"{s['exports_ok']} of {s['events']} (service counted {s['server_accepted_spans']})",
    )
    line(f"spans sent after the first {args.events}", s["extra_events"])
    line(
        "stalled subscriber's HTTP/2 window",
        "gRPC default (grows)" if args.stalled_bdp else "64 KB (BDP probing off)",
    )
    line("subscribers cut off (service counter)", s["server_cut_off"])
    snapshot = (
        f"a snapshot of {stalled['snapshot']} advisories ({stalled['snapshot_bytes']:,} bytes), "
        if stalled["snapshot"] is not None
        else "no snapshot, "
    )
    line(
        "stalled stream, read at last",
        f"{snapshot}{stalled['changes']} changes, then {stalled['ended']}",
    )
