"""The advisory benchmark: how long a failing span takes to reach every subscribed harness.

    .venv/bin/python bench/advisories.py            # 100 subscribers, 200 spans a run: ~2 min
    .venv/bin/python bench/advisories.py --quick    # 10 subscribers, 30 spans: a smoke test

The service runs as ``python -m processor serve`` in a process of its own, every port on
127.0.0.1 and chosen free, so the benchmark's threads do not share its GIL. This process
holds the subscribers (raw ``Advisories/Subscribe`` streams, each on a channel and a TCP
connection of its own, all read by one grpc.aio event loop in a thread) and, from its
main thread, sends the spans (a raw ``TraceService/Export`` call with a request encoded in
advance). The machine's cores are shared by both processes.

This file parses the flags and runs the parts in order; each part's module says what it
measures and how:

1. Delivery, from an Export to every subscriber (``advisories_delivery.py``).
2. A stalled subscriber, cut off while the others carry on (``advisories_stall.py``).
3. The ``Advisories/Check`` RPC next to the health Check (``advisories_check_rpc.py``).

Parts 4 and 5 use the harness side, ``clients/python``, as a harness would.

4. ``check()`` in the client library, on a serve process of its own
   (``advisories_client_check.py``).
5. From a failure in a harness to its mirror: what a user feels
   (``advisories_failure_to_mirror.py``).

The shared harness: the serve process (``advisories_service.py``), the failing spans and
their sender (``advisories_spans.py``), the subscribers (``advisories_fleet.py``), the
percentiles and the report's rows (``advisories_figures.py``), the summary and the checks
(``advisories_summary.py``).

Figures only: nothing here judges a time (the goal line states, and fails nothing). The
checks at the end are about correctness (every change delivered, every span accepted, the
stalled stream cut off, verdicts, the mirror's contents, every failure reaching it).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

# Sibling modules: bench/ is on sys.path when these files are run as scripts.
from advisories_check_rpc import report_checks, run_checks
from advisories_client_check import report_client_checks, run_client_checks
from advisories_delivery import report_delivery, run_delivery
from advisories_failure_to_mirror import report_harness, run_harness
from advisories_fleet import Fleet
from advisories_service import METRIC_CHANGES, start_service
from advisories_spans import Numbering, Sender
from advisories_stall import report_stall, run_stall
from advisories_summary import check, summary
from hop_processes import check_alive, stop_on_sigterm


def run_all(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str]]:
    with tempfile.TemporaryDirectory(prefix="advisory-bench-") as tmp, ExitStack() as stack:
        service = start_service(Path(tmp), stack, args)
        sender = Sender(service.otlp)
        stack.callback(sender.close)
        fleet = Fleet(service.advisories)
        stack.callback(fleet.close)  # before the service stops (last in, first out)
        numbering = Numbering()
        no_stall, healthy, events = run_delivery(service, fleet, sender, numbering, args)

        with_stall = run_stall(service, fleet, sender, healthy, numbering, args)
        fleet_ended = sorted({s.ended for s in healthy if s.ended})
        changes = int(service.metric(METRIC_CHANGES))
        fleet.close()  # Check runs with no stream open

        checks = run_checks(service, next(e for e in events if e.ok), args.checks)
        harness = run_harness(service, args)
        check_alive(service.child)
        results = {
            "delivery": no_stall,
            "stall": with_stall,
            "healthy_streams_ended": fleet_ended,
            "spans_sent": numbering.made,
            "changes_published": changes,
            "check": checks,
            "harness": harness,
        }
        stack.close()
        logs = {"serve": service.child.output.read_text(errors="replace").strip()}
        # Part 4 on a serve process of its own, once the first has stopped.
        results["client_check"], logs["serve-circuits"] = run_client_checks(Path(tmp), args)
    return results, logs


def report(results: dict[str, Any], args: argparse.Namespace, problems: list[str]) -> None:
    print(
        f"advisory benchmark: {args.subscribers} subscribers, {args.events} failing spans "
        f"{args.interval_ms:g} ms apart, advisories.subscriber_queue={args.subscriber_queue}"
    )
    print(
        "service: python -m processor serve in its own process; subscribers: one grpc.aio "
        f"loop in this process, a connection each; {os.cpu_count()} CPUs shared by both"
    )
    report_delivery(results["delivery"])
    report_stall(results["stall"], results["delivery"], args)
    report_checks(results["check"])
    report_client_checks(results["client_check"])
    report_harness(results["harness"])
    summary(results, problems)


# The sizes of a full run, and of --quick; a flag given on the command line wins.
FULL = {"subscribers": 100, "events": 200, "interval_ms": 100.0, "checks": 2000}
FULL |= {"subscriber_queue": 64, "stall_extra_max": 8000}
FULL |= {"mirror_turns": 300, "client_checks": 20000, "harness_events": 200, "batch_events": 10}
QUICK = {"subscribers": 10, "events": 30, "interval_ms": 20.0, "checks": 200}
QUICK |= {"subscriber_queue": 16, "stall_extra_max": 400}
QUICK |= {"mirror_turns": 60, "client_checks": 2000, "harness_events": 30, "batch_events": 5}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--subscribers", type=int, help="healthy subscribers (100)")
    parser.add_argument("--events", type=int, help="failing spans per run (200)")
    parser.add_argument("--interval-ms", type=float, help="between two spans (100)")
    parser.add_argument("--checks", type=int, help="Check calls of each kind (2000)")
    parser.add_argument(
        "--subscriber-queue",
        type=int,
        help="the service's advisories.subscriber_queue: changes held for one subscriber (64)",
    )
    parser.add_argument(
        "--stall-extra-max",
        type=int,
        help="spans sent after --events at most, until the stalled one is cut off (8000)",
    )
    parser.add_argument(
        "--stalled-bdp",
        action="store_true",
        help="give the stalled subscriber gRPC's default channel, whose window grows to a "
        "few MB: thousands of changes before the cut-off",
    )
    parser.add_argument(
        "--mirror-turns", type=int, help="part 4: turn blocks of a tool in the mirror (300)"
    )
    parser.add_argument(
        "--client-checks", type=int, help="part 4: check() calls of each kind (20000)"
    )
    parser.add_argument(
        "--harness-events",
        type=int,
        help="part 5: failures recorded by the harness, each run (200)",
    )
    parser.add_argument(
        "--batch-events",
        type=int,
        help="part 5: failures through the SDK's BatchSpanProcessor (10)",
    )
    parser.add_argument("--quick", action="store_true", help="small numbers: a smoke test")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every number here")
    parser.add_argument(
        "--set",
        dest="serve_settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra setting for the serve process (repeatable)",
    )
    args = parser.parse_args()
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    counts = (
        *("subscribers", "events", "checks", "subscriber_queue"),
        *("mirror_turns", "client_checks", "harness_events", "batch_events"),
    )
    if min(getattr(args, name) for name in counts) < 1:
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in counts)
        parser.error(f"{flags} must be positive")
    if args.interval_ms < 0 or args.stall_extra_max < 0:
        parser.error("--interval-ms and --stall-extra-max must not be negative")
    args.interval_s = args.interval_ms / 1000
    return args


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        results, logs = run_all(args)
    except RuntimeError as error:  # the service died or never answered: say so, with why
        print(f"advisory benchmark failed: {error}", file=sys.stderr)
        return 2
    problems = check(results, logs)
    report(results, args, problems)
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        document = {"settings": settings, "results": results, "problems": problems}
        args.json.write_text(json.dumps(document, indent=2, default=str) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
