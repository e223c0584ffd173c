"""The end of the advisory benchmark's report: every part's headline figures, and the checks.

The checks are about correctness, never time: every change delivered, every span
accepted, the stalled stream cut off, verdicts, the mirror's contents, every failure
reaching it, and nothing unexpected in the services' logs.
"""

from __future__ import annotations

from typing import Any

# Sibling modules: bench/ is on sys.path when these files are run as scripts.
from advisories_failure_to_mirror import GOAL_P99_MS, goal
from advisories_figures import line
from advisories_service import EXPECTED_LOG


def summary(results: dict[str, Any], problems: list[str]) -> None:
    d, s, c = results["delivery"], results["stall"], results["check"]
    k, h = results["client_check"], results["harness"]
    stalled = s["stalled"]
    alone, fanout, batch = h["alone"], h["fanout"], h["batch"]
    every, rtt, first, after = (
        d["every_ms"],
        d["export_rtt_ms"],
        d["first_ms"],
        d["after_return_ms"],
    )
    stall_every, until_cut = s["every_ms"], s["before_cut"]["every_ms"]
    print("\nsummary (p50 / p99, ms)")
    line("Export round trip", f"{rtt['p50']:.2f} / {rtt['p99']:.2f}")
    line("delivery, every subscriber", f"{every['p50']:.2f} / {every['p99']:.2f}")
    line("delivery after Export returned (RTT + this)", f"{after['p50']:.2f} / {after['p99']:.2f}")
    line("delivery, first subscriber", f"{first['p50']:.2f} / {first['p99']:.2f}")
    line(
        "delivery with a stalled subscriber", f"{stall_every['p50']:.2f} / {stall_every['p99']:.2f}"
    )
    line("  until it was cut off", f"{until_cut['p50']:.2f} / {until_cut['p99']:.2f}")
    line("stalled subscriber's stream ended", stalled["ended"])
    line("spans accepted during the stall", f"{s['exports_ok']} of {s['events']}")
    line("Check, DENY", f"{c['deny_ms']['p50']:.2f} / {c['deny_ms']['p99']:.2f}")
    line("Check, ALLOW", f"{c['allow_ms']['p50']:.2f} / {c['allow_ms']['p99']:.2f}")
    line("health Check (baseline)", f"{c['health_ms']['p50']:.2f} / {c['health_ms']['p99']:.2f}")
    for case, label in (("turn_block", "turn block (DENY)"), ("exact_call", "exact call (ALLOW)")):
        figures = k[f"client_{case}_us"]
        line(f"client.check, {label}, µs", f"{figures['p50']:.2f} / {figures['p99']:.2f}")
    for label, run in (
        ("failure to mirror, only this subscriber", alone),
        ("failure to mirror, with the fan-out", fanout),
        ("failure to mirror, BatchSpanProcessor", batch),
    ):
        figures = run["latency_ms"]
        line(label, f"{figures['p50']:.2f} / {figures['p99']:.2f}")
    line(f"p99 < {GOAL_P99_MS:g} ms on loopback (the goal)", goal(h))
    print("checks: " + ("ok" if not problems else "\n  - ".join(["FAILED", *problems])))


def check(results: dict[str, Any], logs: dict[str, str]) -> list[str]:
    """What would make the figures meaningless, or is a fault in the service or client."""
    problems = []
    d, s, c = results["delivery"], results["stall"], results["check"]
    for what, figures in (("run 1", d), ("the stall run", s)):
        if figures["exports_ok"] != figures["events"]:
            problems.append(
                f"{what}: {figures['events'] - figures['exports_ok']} exports failed "
                f"{figures['export_errors']}"
            )
        if figures["missing"]:
            problems.append(f"{what}: {figures['missing']} changes never reached a subscriber")
    if d["alone"]["exports_ok"] != d["alone"]["events"]:
        problems.append("spans sent with no subscriber: some exports failed")
    if s["server_accepted_spans"] != s["events"]:
        problems.append(f"the stall run: the service accepted {s['server_accepted_spans']} spans")
    if s["stalled"]["ended"] != "RESOURCE_EXHAUSTED":
        problems.append(f"the stalled subscriber was not cut off: {s['stalled']['ended']}")
    if s["server_cut_off"] != 1:
        problems.append(f"the service cut off {s['server_cut_off']} subscribers, not 1")
    if results["changes_published"] != results["spans_sent"]:
        problems.append(
            f"the service published {results['changes_published']} changes for "
            f"{results['spans_sent']} failing spans, not one each"
        )
    if results["healthy_streams_ended"]:
        problems.append(f"healthy streams ended early: {results['healthy_streams_ended']}")
    if any(c["wrong_answers"].values()):
        problems.append(f"unexpected Check or health answers: {c['wrong_answers']}")
    k = results["client_check"]
    if k["held"] != k["expected"]:
        problems.append(f"part 4: the mirror held {k['held']}, not {k['expected']}")
    if any(k["wrong_answers"].values()):
        problems.append(f"part 4: unexpected check() answers: {k['wrong_answers']}")
    h = results["harness"]
    for name in ("alone", "fanout", "batch"):
        if h[name]["seen"] != h[name]["events"]:
            problems.append(
                f"part 5 ({name}): {h[name]['events'] - h[name]['seen']} failures never "
                "reached the harness's mirror"
            )
    if h["fanout"]["raw"]["missing"] or h["fanout"]["raw"]["ended"]:
        problems.append(
            f"part 5: {h['fanout']['raw']['missing']} changes never reached a raw subscriber; "
            f"streams ended: {h['fanout']['raw']['ended']}"
        )
    if h["prompt"]["dropped"] or h["prompt"]["failed"]:
        problems.append(f"part 5: the prompt processor lost tool spans: {h['prompt']}")
    for what, stats in (("part 4", k["client"]), ("part 5", h["client"])):
        if stats["connects"] != 1 or stats["broken"] or stats["cut_off"]:
            problems.append(f"{what}: the client's stream did not hold: {stats}")
    if h["client"]["changes"] != h["recorded"]:
        problems.append(
            f"part 5: the harness's stream carried {h['client']['changes']} changes for "
            f"{h['recorded']} failures, not one each"
        )
    for name, log in logs.items():
        unexpected = [
            logged
            for logged in log.splitlines()
            # Expected at this level: no next hop, no tokens on either port, the cut-off.
            if not any(known in logged for known in EXPECTED_LOG)
        ]
        if unexpected:
            problems.append(f"the {name} process logged:\n" + "\n".join(unexpected[-20:]))
    return problems
