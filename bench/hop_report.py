"""The hop benchmark's report: medians per hop, the run's checks of its own work, the table.

A run's numbers count only if the hop did its work (every span delivered, every call and
listing decided, the sampled output annotated), so the checks are here with the figures
they vouch for; bench/hop.py says what is measured.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from collections.abc import Callable
from typing import Any

# Sibling modules: bench/ is on sys.path when these files are run as scripts.
from payload_spans import SPANS_PER_REQUEST

PAYLOAD_LABELS = {
    "plain": "no MCP",
    "mixed": "15% MCP",
    "harness": "agent traffic",
    "frameworks": "agent frameworks' runs",
}
HOP_LABELS = {
    "null-receiver": "null receiver (no hop)",
    "null-forwarder": "null forwarder",
    "naive-hop": "naive hop",
    "rotel": "rotel",
    "serve": "mcp-breaker serve",
    "serve-redis": "mcp-breaker serve (Redis)",
    "serve-2w": "mcp-breaker serve --workers 2 (Redis)",
}
RATIO_BASE = "null-forwarder"  # throughput ratios: the fair floor for a forwarding hop
LATENCY_BASE = "null-receiver"  # latency added: to the calls that went through no hop
SAMPLED_HOPS = (
    "naive-hop",
    "serve",
    "serve-redis",
    "serve-2w",
)  # whose output is decoded, in a sample, and checked
GENERATOR_BOUND = 0.9  # of a core: the load generator, not the target, sets the pace


def summarize(runs: list[dict[str, Any]], hops: list[str]) -> dict[str, dict[str, Any]]:
    """Per hop, medians over repeats; ratios and differences are taken within a repeat
    (against the baseline's run of the same repeat), then the median."""
    median = statistics.median
    by_repeat: dict[tuple[int, str], dict[str, Any]] = {(r["repeat"], r["hop"]): r for r in runs}
    summary: dict[str, dict[str, Any]] = {}
    for hop in hops:
        mine = [r for r in runs if r["hop"] == hop]
        if not mine:
            continue
        row: dict[str, Any] = {
            "spans_per_s": median(r["spans_per_s"] for r in mine),
            "cpu_s_per_m_spans": median(r["hop_cpu_s_per_m_spans"] for r in mine),
            "p50_ms": median(r["latency_ms"]["p50"] for r in mine),
            "p99_ms": median(r["latency_ms"]["p99"] for r in mine),
            "loadgen_core_share": median(r["loadgen_core_share"] for r in mine),
            "loadgen_cpu_s_per_m_spans": median(r["loadgen_cpu_s_per_m_spans"] for r in mine),
            "render_us_per_request": median(r["render_us_per_request"] for r in mine),
            "runs": len(mine),
        }

        def paired(
            base: str,
            value: Callable[[dict[str, Any], dict[str, Any]], float],
            mine: list[dict[str, Any]] = mine,
        ) -> Any:
            pairs = [
                (by_repeat[(r["repeat"], base)], r)
                for r in mine
                if (r["repeat"], base) in by_repeat
            ]
            return median(value(b, r) for b, r in pairs) if pairs else None

        row["throughput_vs_null_forwarder"] = paired(
            RATIO_BASE, lambda b, r: r["spans_per_s"] / b["spans_per_s"]
        )
        # The issue-28 goals, as ratios within a repeat: throughput against the naive hop,
        # CPU per span against one serve process on the memory backend.
        row["throughput_vs_naive"] = paired(
            "naive-hop", lambda b, r: r["spans_per_s"] / b["spans_per_s"]
        )
        row["cpu_vs_serve"] = (
            paired("serve", lambda b, r: r["hop_cpu_s_per_m_spans"] / b["hop_cpu_s_per_m_spans"])
            if hop.startswith("serve-")
            else None
        )
        with_mcp = [r for r in mine if r["ok_mcp_spans"]]
        # CPU s per million spans times spans per MCP span: µs of the hop's CPU per MCP span
        # (its pass-through work on the other spans included).
        row["cpu_us_per_mcp_span"] = (
            median(r["hop_cpu_s_per_m_spans"] * r["ok_spans"] / r["ok_mcp_spans"] for r in with_mcp)
            if with_mcp
            else None
        )
        for q in ("p50", "p99"):

            def added(base: dict[str, Any], run: dict[str, Any], q: str = q) -> float:
                return float(run["latency_ms"][q] - base["latency_ms"][q])

            row[f"{q}_added_ms"] = paired(LATENCY_BASE, added)
        summary[hop] = row
    return summary


def check_run(run: dict[str, Any]) -> list[str]:
    """What would make a run's numbers meaningless, or say the hop did not do its work."""
    what = f"run {run['number']} ({run['payload']} -> {run['hop']})"
    problems = []
    if run["errors"] or run["warmup_errors"]:
        problems.append(f"{what}: {run['errors']} errors, {run['warmup_errors']} in warm-up")
    got, hop, payload = run["received"], run["hop"], run["payload"]
    if hop == "null-receiver":
        if (got["requests"], got["bytes"]) != (run["taken_requests"], run["ok_bytes"]):
            problems.append(
                f"{what}: sent {run['taken_requests']} requests, {run['ok_bytes']} bytes; "
                f"received {got['requests']}, {got['bytes']}"
            )
        return problems
    if got.get("spans") != run["ok_spans"]:
        problems.append(f"{what}: sent {run['ok_spans']} spans, received {got.get('spans')}")
    # Forwarded as received: the null forwarder always, serve on its pass-through path.
    if (hop == "null-forwarder" or (hop.startswith("serve") and payload == "plain")) and got[
        "bytes"
    ] != run["ok_bytes"]:
        problems.append(f"{what}: sent {run['ok_bytes']} bytes, received {got['bytes']}")
    sample = got.get("sample")
    if hop in SAMPLED_HOPS:
        if not sample or not sample.get("spans"):
            problems.append(f"{what}: nothing sampled at the receiving end")
            sample = {}
        mcp_share = run["ok_mcp_spans"] / max(run["ok_spans"], 1)
        sampled_mcp = sample.get("named_mcp", 0)
        if abs(sampled_mcp - mcp_share * sample.get("spans", 0)) > 0.5:
            problems.append(f"{what}: {sampled_mcp} MCP spans in the sample, not {mcp_share:.1%}")
    if hop == "naive-hop" and sample.get("naive_marked") != sample.get("named_mcp"):
        problems.append(
            f"{what}: {sample.get('naive_marked')} of {sample.get('named_mcp')} sampled MCP "
            "spans marked"
        )
    if hop.startswith("serve"):
        problems += check_serve(what, run, sample or {})
    return problems


def check_serve(what: str, run: dict[str, Any], sample: dict[str, int]) -> list[str]:
    serve, problems = run["serve"], []
    taken = run["ok_spans"]
    if not serve["accepted_spans"] == serve["sent_spans"] == taken:
        problems.append(
            f"{what}: loadgen got ok for {taken} spans, serve accepted "
            f"{serve['accepted_spans']} and delivered {serve['sent_spans']}"
        )
    path = "passthrough_requests" if run["payload"] == "plain" else "parsed_requests"
    if serve[path] != run["taken_requests"]:
        problems.append(f"{what}: {serve[path]} of {run['taken_requests']} requests on {path}")
    expect = {
        "duplicate_spans": 0,
        "stage_errors": 0,
        "forwarded_pending": 0,  # every call decided in its own request
        "classification_errors": 0,  # none unpaired, none decided early, none clamped
        "pending_calls_after": 0,
        "tool_calls": run["ok_calls"],
        "tool_listings": run["ok_listings"],
    }
    for key, value in expect.items():
        if serve[key] != value:
            problems.append(f"{what}: serve's {key} {serve[key]}, expected {value}")
    calls, listings = sample.get("call_spans", 0), sample.get("listing_spans", 0)
    for found, of, text in (
        ("call_outcome", calls, "call spans with mcp.breaker.outcome"),
        ("call_decided", calls, "call spans with their decision (mcp.breaker.state)"),
        ("listing_state", listings, "listing spans with mcp.roster.state"),
    ):
        if sample.get(found, 0) != of:
            problems.append(f"{what}: {sample.get(found, 0)} of {of} sampled {text}")
    for bad, text in (
        ("call_pending", "call spans marked pending"),
        ("other_annotated", "non-MCP spans annotated"),
    ):
        if sample.get(bad, 0):
            problems.append(f"{what}: {sample[bad]} sampled {text}")
    return problems


def self_checks(runs: list[dict[str, Any]]) -> list[str]:
    """The checks that held, in figures, for the report."""
    lines = []
    serve = [r for r in runs if r["hop"].startswith("serve")]
    if serve:
        s: defaultdict[str, int] = defaultdict(int)
        for r in serve:
            for key in ("duplicate_spans", "forwarded_pending", "classification_errors"):
                s[key] += r["serve"][key]
            s["tool_calls"] += r["serve"]["tool_calls"]
            s["calls_sent"] += r["ok_calls"]
            s["tool_listings"] += r["serve"]["tool_listings"]
            s["listings_sent"] += r["ok_listings"]
            s["dead_calls"] += r["serve"]["dead_calls"]
            sample = r["received"].get("sample", {})
            for key in ("spans", "call_spans", "call_decided", "listing_spans", "listing_state"):
                s[f"sample_{key}"] += sample.get(key, 0)
            s["sample_requests"] += sample.get("requests", 0)
        lines += [
            f"serve: duplicate spans {s['duplicate_spans']}, spans forwarded pending "
            f"{s['forwarded_pending']}, classification errors {s['classification_errors']}",
            f"serve: tool calls decided {s['tool_calls']:,} of {s['calls_sent']:,} sent, "
            f"listings {s['tool_listings']:,} of {s['listings_sent']:,} "
            f"(dead calls among them {s['dead_calls']:,})",
            f"serve, at the receiving end ({s['sample_requests']} sampled requests, "
            f"{s['sample_spans']:,} spans): call spans with their decision "
            f"{s['sample_call_decided']:,} of {s['sample_call_spans']:,}, listing spans with "
            f"their roster state {s['sample_listing_state']:,} of {s['sample_listing_spans']:,}",
        ]
    sent = sum(r["ok_spans"] for r in runs)
    received = sum(
        r["received"].get("spans", r["received"]["requests"] * SPANS_PER_REQUEST) for r in runs
    )
    lines.append(f"all runs: {received:,} spans received of {sent:,} sent")
    render = sum(r["render_s"] for r in runs) / max(sum(r["cpu_s"] for r in runs), 1e-9)
    lines.append(
        f"loadgen: {statistics.median(r['render_us_per_request'] for r in runs):.0f} µs of CPU "
        f"to make a request fresh ({render:.0%} of its CPU); at most "
        f"{max(r['loadgen_core_share'] for r in runs):.0%} of a core in any run"
    )
    return lines


def print_progress(run: dict[str, Any], total: int) -> None:
    latency = run["latency_ms"]
    print(
        f"[{run['number']:>{len(str(total))}}/{total}] {run['payload']:<8} {run['hop']:<15}"
        f"{run['spans_per_s']:>10,.0f} spans/s   p50 {latency['p50']:7.2f} ms   "
        f"p99 {latency['p99']:7.2f} ms   hop CPU {run['hop_cpu_s_per_m_spans']:6.2f} s/M   "
        f"loadgen {run['loadgen_core_share']:.0%} of a core   errors {run['errors'] or 0}",
        flush=True,  # the table comes at the end; show the runs as they finish
    )


def _cell(value: Any, form: str) -> str:
    return "-" if value is None else form.format(value)


def print_table(summaries: dict[str, dict[str, dict[str, Any]]], args: argparse.Namespace) -> None:
    print(
        f"\nhop benchmark: {SPANS_PER_REQUEST} spans/request, fresh ids every request, "
        f"{args.concurrency} in flight, {args.duration:g} s runs (+{args.warmup:g} s warm-up), "
        f"{args.repeats} repeat(s); medians; ratios and differences within a repeat"
    )
    columns = (
        ("spans/s", "spans_per_s", "{:,.0f}", 11),
        ("vs null fwd", "throughput_vs_null_forwarder", "{:.2f}", 14),
        ("vs naive", "throughput_vs_naive", "{:.2f}", 10),
        ("CPU s/M spans", "cpu_s_per_m_spans", "{:.2f}", 16),
        ("CPU vs serve", "cpu_vs_serve", "{:.2f}", 14),
        ("CPU µs/MCP span", "cpu_us_per_mcp_span", "{:.1f}", 17),
        ("p50 added ms", "p50_added_ms", "{:+.2f}", 15),
        ("p99 added ms", "p99_added_ms", "{:+.2f}", 15),
        ("loadgen CPU", "loadgen_core_share", "{:.0%}", 14),
    )
    width = max(len(label) for label in HOP_LABELS.values()) + 4
    for variant, summary in summaries.items():
        header = f"{variant} ({PAYLOAD_LABELS[variant]})".ljust(width)
        print("\n" + header + "".join(label.rjust(w) for label, _, _, w in columns))
        for hop, row in summary.items():
            cells = [_cell(row[key], form).rjust(w) for _, key, form, w in columns]
            if row["loadgen_core_share"] >= GENERATOR_BOUND:
                cells[-1] += " *"
            print(f"  {HOP_LABELS[hop]}".ljust(width) + "".join(cells))
    print(
        "\nCPU s/M spans: the hop process's CPU time (the null receiver's own, on its row) per "
        "million spans taken;\nCPU vs serve: that of one serve process on the memory backend "
        "in the same repeat; CPU µs/MCP span:\nthe hop's CPU time over the MCP spans it took "
        "(its work on the other spans included).\nloadgen CPU: the load generator's CPU time "
        "over its run, of one "
        f"core; * at {GENERATOR_BOUND:.0%} or more: that row's\nthroughput is the load "
        "generator's (its CPU per span is still the receiving process's own)."
    )
