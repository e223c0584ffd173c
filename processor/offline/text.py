"""``--format text``: the report for a terminal, worst first, every figure from the json.

Tables show the first rows only (``TEXT_ROWS``); the json has them all, and the ids.
"""

from __future__ import annotations

import textwrap
from typing import Any

TEXT_ROWS = 10
WIDTH = 96  # prose lines are wrapped here; tables are as wide as their cells
TEXT_TURNS = 3
TEXT_TRANSITIONS = 8
EXCERPT_CHARS = 170


def render(report: dict[str, Any]) -> str:
    day = (report["input"]["first_span_end_at"] or "")[:10]
    sections = [
        _header(report, day),
        _counterfactual(report["counterfactual"]),
        _calls(report["calls"]),
        _turns(report["turns"], day),
        _circuits(report["circuits"], day),
        _roster(report["roster"]),
    ]
    if "sweep" in report:
        sections.append(sweep_table(report["sweep"]))
    sections.append(_input(report["input"]))
    return "\n\n".join(s for s in sections if s) + "\n"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _s(seconds: float) -> str:
    return f"{seconds:,.1f} s"


def _when(at: str | None, day: str) -> str:
    if not at:
        return "?"
    return at[11:19] if at[:10] == day else f"{at[:10]} {at[11:19]}"


def _header(report: dict[str, Any], day: str) -> str:
    source = report["input"]
    files = len(source["files"])
    first, last = source["first_span_end_at"], source["last_span_end_at"]
    span = f", {first[:10]} {first[11:19]} to {_when(last, day)} UTC" if first else ""
    changed = report["settings"]["changed"]
    settings = ", ".join(f"{k}={v}" for k, v in changed.items()) or "the defaults"
    return (
        f"mcp-breaker analyze: {_plural(files, 'file')}, {_plural(source['spans'], 'span')} "
        f"({source['mcp_spans']:,} MCP){span}\n"
        "as enforcing every rule (a refused call is never made); settings: " + settings
    )


def _counterfactual(c: dict[str, Any]) -> str:
    refused, within, across = c["would_refuse"], c["within_turns"], c["across_turns"]
    rules = ", ".join(f"{rule} {v['count']}" for rule, v in c["by_rule"].items())
    spared, good = c["dead_calls_spared"], c["refused_that_succeeded"]
    lines = [
        "WHAT THE BREAKER WOULD HAVE DONE",
        f"  refused             {_plural(refused['count'], 'call')}, {_s(refused['seconds'])}"
        + (f"  ({rules})" if rules else ""),
        f"    within a turn     {_plural(within['count'], 'call')}, {_s(within['seconds'])}",
        f"    across turns      {_plural(across['count'], 'call')}, {_s(across['seconds'])}",
        f"  dead calls spared   {spared['count']:,} (refused, and they failed): "
        f"{_s(c['tool_seconds_saved'])} of tool time",
        f"  model rounds saved  {_rounds_saved(c)}",
        f"  good calls refused  {good['count']:,}, {_s(good['seconds'])} (refused, though "
        "they succeeded: the cost of enforcing)",
        f"  turns affected      {c['turns_with_dead_calls']:,} had refused calls",
    ]
    flight = c["dead_calls_in_flight"]
    if flight["count"]:
        lines.append(
            f"  made in flight      {_plural(flight['count'], 'dead call')}, "
            f"{_s(flight['seconds'])} (begun before the failure they repeat had ended: not "
            "refused)"
        )
    return "\n".join(lines)


NO_ROUNDS = "cannot be known: no round numbers recorded (mcp.turn.round)"


def _rounds_saved(c: dict[str, Any]) -> str:
    saved, unknown = c["model_rounds_saved"], c["turns_without_round_numbers"]
    if saved is None:
        return NO_ROUNDS
    said = f"{saved:,} in {_plural(c['turns_with_rounds_saved'], 'turn')}"
    if unknown:
        said += f"; not known for {_plural(unknown, 'turn')} (no round numbers recorded)"
    return said


def _classes(row: dict[str, Any]) -> str:
    parts = [f"{k} {v}" for k, v in row["failure_classes"].items()]
    parts += [f"{k} {v}" for k, v in row["neutral"].items()]
    return ", ".join(parts) or "-"


def _table(
    headers: list[str], rows: list[list[str]], left: int = 1, *, last_left: bool = True
) -> list[str]:
    """Columns before ``left`` (and the last, with ``last_left``) are text, the rest numbers."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        out = [
            cell.ljust(widths[i])
            if i < left or (last_left and i == len(cells) - 1)
            else cell.rjust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return "  " + "  ".join(out).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def _call_rows(rows: list[dict[str, Any]], key: Any) -> list[list[str]]:
    return [
        [
            *key(r),
            f"{r['calls']:,}",
            f"{r['outcomes']['ok']:,}",
            f"{r['outcomes']['failed']:,}",
            f"{r['hidden_failures']['count']:,}",
            f"{r['outcomes']['neutral']:,}",
            f"{r['outcomes']['unknown']:,}",
            f"{r['dead_calls']['count']:,}",
            f"{r['dead_calls']['seconds']:,.1f}",
            _classes(r),
        ]
        for r in rows[:TEXT_ROWS]
    ]


_CALL_HEADERS = [
    "calls",
    "ok",
    "failed",
    "hidden",
    "neutral",
    "unknown",
    "dead",
    "dead s",
    "classes",
]


def _calls(calls: dict[str, Any]) -> str:
    if not calls["calls"]:
        return "CALLS\n  no MCP tool call in the input"
    lines = ["SERVERS, worst first"]
    lines += _table(
        ["server", *_CALL_HEADERS], _call_rows(calls["servers"], lambda r: [_server_name(r)])
    )
    lines += _more(calls["servers"])
    lines += ["", "TOOLS, worst first"]
    lines += _table(
        ["tool", "server", *_CALL_HEADERS],
        _call_rows(calls["tools"], lambda r: [r["tool"], _server_name(r)]),
        left=2,
    )
    lines += _more(calls["tools"])
    return "\n".join(lines)


def _server_name(row: dict[str, Any]) -> str:
    return row["server"] or "(no server named)"


def _more(rows: list[Any], shown: int = TEXT_ROWS) -> list[str]:
    return [f"  ... {len(rows) - shown:,} more in --format json"] if len(rows) > shown else []


def _turns(turns: dict[str, Any], day: str) -> str:
    lines = [
        f"WORST TURNS ({turns['total']:,} turns, {turns['with_dead_calls']:,} with refused calls)"
    ]
    if not turns["worst"]:
        return lines[0] + "\n  no turn had a failure, a refused call or a collapse"
    for n, t in enumerate(turns["worst"][:TEXT_TURNS], 1):
        dead = t["dead_calls"]
        lines.append(
            f"  {n}. {t['turn']}  at {_when(t['first_at'], day)}"
            + (f"  ({t['harness']})" if t["harness"] else "")
            + (f"  trace {t['trace_ids'][0]}" if len(t["trace_ids"]) == 1 else "")
        )
        lines += _wrap(
            f"{_plural(t['calls'], 'call')}, {t['failed']:,} failed, {dead['count']:,} refused "
            f"({t['dead_within_turn']:,} within the turn, {t['dead_across_turns']:,} across "
            f"turns), {_s(dead['seconds'])} on refused calls, "
            + (
                "model rounds saved cannot be known (no round numbers recorded)"
                if t["model_rounds_saved"] is None
                else f"{_plural(t['model_rounds_saved'], 'model round')} saved"
            )
        )
        for r in t["repeated_failures"][:3]:
            error = r["error"][:EXCERPT_CHARS] + ("…" if len(r["error"]) > EXCERPT_CHARS else "")
            lines += _wrap(
                f"{r['repeats']['count']:,}x repeating span {r['span_id']} "
                f"({r['tool']}, {r['failure_class'] or 'failed'}): {error}"
            )
        rounds = [
            f"{r['round']}: {r['calls']} ({r['dead']} dead)"
            + (f" {r['offered_tools']} offered" if r["offered_tools"] is not None else "")
            for r in t["rounds"]
        ]
        if rounds:
            lines += _wrap("rounds " + ", ".join(rounds))
        for c in t["collapses"]:
            lines += _wrap(_collapse(c))
    lines += _more(turns["worst"], TEXT_TURNS)
    return "\n".join(lines)


def _wrap(text: str, indent: str = "     ") -> list[str]:
    return textwrap.wrap(
        text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False
    )


def _collapse(c: dict[str, Any]) -> str:
    recovered = (
        f", recovered in round {c['recovered_round']}"
        if c["recovered_round"]
        else ", not recovered"
    )
    return (
        f"roster collapsed in rounds {c['from_round']}-{c['to_round']} "
        f"({c['offered_before']} tools offered before){recovered}"
    )


def _circuits(circuits: list[dict[str, Any]], day: str) -> str:
    if not circuits:
        return "CIRCUITS\n  no circuit would have opened"
    lines = ["CIRCUITS THAT WOULD HAVE OPENED, most opens first"]
    for c in circuits[:TEXT_ROWS]:
        first = c["transitions"][0] if c["transitions"] else None
        lines += _wrap(
            f"{c['scope']} {c['key']}: opened {c['opened']}x (first at "
            f"{_when(c['first_opened_at'], day)}), reopened {c['reopened']}x after a failed "
            f"probe, closed {c['closed']}x; open {_duration(c['open_seconds'])} in all; "
            f"{c['state_at_end']} at the end",
            "  ",
        )
        for t in c["transitions"][:TEXT_TRANSITIONS]:
            lines.append(
                f"     {_when(t['at'], day)}  {t['from']} -> {t['to']}  ({t['trigger']}, "
                f"span {t['span_id']})"
            )
        hidden = len(c["transitions"]) - TEXT_TRANSITIONS + c["transitions_not_listed"]
        if hidden > 0 and first is not None:
            lines.append(f"     ... {hidden:,} more transitions")
    lines += _more(circuits)
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    minutes, s = divmod(round(seconds), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}h {m:02d}m {s:02d}s" if hours else f"{m}m {s:02d}s" if m else f"{s}s"


def _roster(roster: dict[str, Any]) -> str:
    lines = ["ROSTER"]
    if not roster["listings"]:
        return "ROSTER\n  no tool listing in the input"
    states = ", ".join(f"{v['count']:,} {state}" for state, v in roster["states"].items())
    missing = "; ".join(
        f"{n:,} lacking {attrs.replace(',', ' and ')}"
        for attrs, n in roster["ambiguous_missing_attributes"].items()
    )
    lines.append(f"  {_plural(roster['listings'], 'listing')}: {states}")
    if missing:
        lines.append(f"  ambiguous: {missing} (an old instrument: warm and backoff look alike)")
    for c in roster["collapses"][:TEXT_ROWS]:
        lines.append(f"  turn {c['turn']}: {_collapse(c)}")
    if not roster["collapses"]:
        lines.append("  mid-turn collapses: none")
    for n in roster["namespaces_missing"][:TEXT_ROWS]:
        lines.append(
            f"  {n['attachment']}: {', '.join(n['missing']) or '-'} "
            f"({n['harness'] or '?'}, {_plural(n['listings']['count'], 'listing')})"
        )
    for r in roster["startup_races"][:TEXT_ROWS]:
        lines.append(
            f"  startup race: {', '.join(r['late_namespaces'])} connected after the session's "
            f"tool snapshot ({_plural(r['listings']['count'], 'listing')})"
        )
    stale = roster["stale"]
    offering, unknown = stale["listings_offering_open_tools"], stale["unknown_tool_after_offer"]
    if offering["count"] or unknown["count"]:
        tools = ", ".join(list(stale["tools"])[:TEXT_ROWS])
        lines.append(
            f"  stale rosters: {_plural(offering['count'], 'listing')} offering tools whose "
            f"breaker was open ({tools or '-'}); {_plural(unknown['count'], 'call')} failing as "
            "an unknown tool the turn had been offered"
        )
    return "\n".join(lines)


def sweep_table(sweep: dict[str, Any]) -> str:
    keys = [k["key"] for k in sweep["keys"]]
    headers = [
        *keys,
        "refused",
        "spared",
        "good refused",
        "tool s saved",
        "rounds saved",
        "circuits opened",
    ]
    rows = [
        [
            *(row["values"][k] for k in keys),
            f"{row['would_refuse']:,}",
            f"{row['dead_calls_spared']:,}",
            f"{row['good_calls_refused']:,}",
            f"{row['tool_seconds_saved']:,.1f}",
            "?" if row["model_rounds_saved"] is None else f"{row['model_rounds_saved']:,}",
            f"{row['circuits_opened']:,}",
        ]
        for row in sweep["rows"]
    ]
    lines = ["SWEEP: dead calls spared against good calls refused"]
    lines += _table(headers, rows, left=len(keys), last_left=False)
    return "\n".join(lines)


def _input(source: dict[str, Any]) -> str:
    lines = ["INPUT"]
    for f in source["files"][:TEXT_ROWS]:
        lines.append(
            f"  {f['name']}: {_plural(f['records'], 'record')}, {_plural(f['spans'], 'span')}, "
            f"{f['mcp_spans']:,} MCP, {f['skipped']:,} skipped"
        )
    lines += _more(source["files"])
    skipped = source["skipped"]
    if skipped["count"]:
        lines.append(f"  {_plural(skipped['count'], 'unreadable record')} skipped, first:")
        lines += [f"    {p}" for p in skipped["first"][:5]]
    reorder = source["reorder"]
    late = (
        f"{reorder['late_spans']:,} came later than that (at most "
        f"{reorder['late_max_seconds']:,.1f} s) and were analysed as they came"
        if reorder["late_spans"]
        else "none came later than that"
    )
    lines.append(f"  spans put in end-time order within {reorder['window_s']:g} s: {late}")
    if source["outside_window"]:
        lines.append(f"  {source['outside_window']:,} MCP spans outside --since/--until")
    if source["invalid_ids"]:
        lines.append(f"  {source['invalid_ids']:,} spans with invalid ids, dropped as the hop does")
    if source["analysis_errors"]:
        lines.append(f"  the analysis failed on {source['analysis_errors']:,} batches (logged)")
    return "\n".join(lines)
