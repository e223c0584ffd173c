"""Part 1 of the advisory benchmark, delivery: from an Export to every subscriber's read.

``--events`` failing ``mcp.tool.call`` spans in our harness convention, each of its own
turn, ``--interval-ms`` apart, one request each. Each opens a within-turn block, and the
service pushes one ``turn_tool`` change per span (across-turn circuits are set never to
open, so that is the only change; the run checks it). Latency: from just before the
Export call to the moment a subscriber reads the change naming that turn; over every
(subscriber, event) pair, and for the first subscriber to get each event. Baselines, same
run: the Export round trip, with and without subscribers; and CPU per span of the service
and of this process. The default spacing (100 ms) keeps one span's fan-out from
overlapping the next: on a small machine, pushing one change to 100 subscribers takes the
service about 25 ms of CPU, so at 20 ms apart the figures measure a queue, not a delivery.
"""

from __future__ import annotations

import argparse
from typing import Any

# Sibling modules: bench/ is on sys.path when these files are run as scripts.
from advisories_figures import ALL, delivery, heading, line, quantiles, row
from advisories_fleet import Fleet, Stream, delivered
from advisories_service import Service, cpu, cpu_per_span
from advisories_spans import WARMUP_EVENTS, Event, Numbering, Sender

BASELINE_EVENTS = 50  # at most: spans sent before anyone subscribes


def run_delivery(
    service: Service,
    fleet: Fleet,
    sender: Sender,
    numbering: Numbering,
    args: argparse.Namespace,
) -> tuple[dict[str, Any], list[Stream], list[Event]]:
    """Part 1: its figures, the healthy subscribers it opened, and the spans it timed."""
    sender.send(numbering.events("warmup", WARMUP_EVENTS), args.interval_s)
    alone = numbering.events("alone", min(args.events, BASELINE_EVENTS))
    before = cpu(service)
    sender.send(alone, args.interval_s)
    alone_cpu = cpu_per_span(before, cpu(service), len(alone))

    healthy = fleet.subscribe(args.subscribers, "healthy")
    warmup = numbering.events("warmup2", WARMUP_EVENTS)
    sender.send(warmup, args.interval_s)
    delivered(healthy, sum(e.ok for e in warmup))
    events = numbering.events("run", args.events)
    before = cpu(service)
    sender.send(events, args.interval_s)
    delivered(healthy, sum(e.ok for e in (*warmup, *events)))
    run_cpu = cpu_per_span(before, cpu(service), len(events))
    no_stall = delivery(events, healthy)
    no_stall["cpu"] = run_cpu
    no_stall["alone"] = {
        "events": len(alone),
        "exports_ok": sum(e.ok for e in alone),
        "export_rtt_ms": quantiles([(e.t1_ns - e.t0_ns) / 1e6 for e in alone]),
        "cpu": alone_cpu,
    }
    return no_stall, healthy, events


def report_delivery(d: dict[str, Any]) -> None:
    alone = d["alone"]
    per_subscriber = (d["cpu"]["service_ms"] - alone["cpu"]["service_ms"]) / d["subscribers"]
    heading("1. delivery latency, ms, from just before Export", ALL)
    row(
        f"Export round trip, no subscriber ({d['alone']['events']} spans)",
        alone["export_rtt_ms"],
        ALL,
    )
    row("Export round trip (baseline)", d["export_rtt_ms"], ALL)
    row("every subscriber, every event", d["every_ms"], ALL)
    row("every subscriber, after Export returned", d["after_return_ms"], ALL)
    row("first subscriber of each event", d["first_ms"], ALL)
    row("last subscriber of each event", d["last_ms"], ALL)
    line("changes delivered", f"{d['pairs']} of {d['events'] * d['subscribers']}")
    line("service CPU per span, no subscriber", f"{alone['cpu']['service_ms']:.2f} ms")
    line(
        f"service CPU per span, {d['subscribers']} subscribers",
        f"{d['cpu']['service_ms']:.2f} ms ({per_subscriber:.3f} ms more per subscriber)",
    )
    line("this process's CPU per span (the reading)", f"{d['cpu']['bench_ms']:.2f} ms")
