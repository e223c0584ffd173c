"""``--format html``: one self-contained page, tables and pictures, no network at all.

Inline CSS, inline SVG (``charts.py``), no script, no font, no link: the file opens the
same offline, from a mail, or years later. Every figure shown is a cell of the json
report, and says which (``data-figure="counterfactual.would_refuse.count"``), so what the
page shows can be checked against the json. Every name from the spans is escaped.
"""

from __future__ import annotations

from html import escape
from typing import Any

from processor.offline import charts

TURN_PICTURES = 3
TABLE_ROWS = 25
CIRCUITS_PICTURED = 12

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;
max-width:1100px;padding:0 1rem;color:#1f2328}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:2.2rem;
border-bottom:1px solid #d0d7de;padding-bottom:.3rem}h3{font-size:1rem;margin:1.2rem 0 .3rem}
.sub{color:#59636e;margin-top:0}
.cards{display:flex;flex-wrap:wrap;gap:.8rem;margin:1rem 0}
.card{border:1px solid #d0d7de;border-radius:8px;padding:.6rem .9rem;min-width:9.5rem}
.card b{display:block;font-size:1.6rem}.card span{color:#59636e;font-size:.85rem}
.card.bad b{color:#c23b3b}.card.good b{color:#3a8f5c}
table{border-collapse:collapse;margin:.4rem 0 1rem;font-size:.88rem}
th,td{border-bottom:1px solid #e5e8eb;padding:.25rem .6rem;text-align:right;vertical-align:top}
th{background:#f6f8fa}td.l,th.l{text-align:left}code{font-size:.82rem}
.note{color:#59636e;font-size:.85rem}svg{max-width:100%;height:auto}
"""


NOT_KNOWN = "not known"  # a figure the traces cannot give (None in the json)


def _n(value: Any) -> str:
    if value is None:
        return NOT_KNOWN
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return escape(str(value))


def fig(path: str, value: Any, *, tag: str = "td") -> str:
    """One figure, marked with the json path it comes from."""
    return f'<{tag} data-figure="{escape(path)}">{_n(value)}</{tag}>'


def _text(value: Any, tag: str = "td") -> str:
    return f'<{tag} class="l">{escape(str(value))}</{tag}>'


def _card(path: str, value: Any, label: str, kind: str = "") -> str:
    return (
        f'<div class="card {kind}"><b data-figure="{escape(path)}">{_n(value)}</b>'
        f"<span>{escape(label)}</span></div>"
    )


def render(report: dict[str, Any]) -> str:
    source = report["input"]
    title = "What the breaker would have done"
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>mcp-breaker analyze: {escape(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="sub">{_subtitle(report)}</p>',
        _headline(report["counterfactual"]),
    ]
    if "sweep" in report:
        parts.append(_sweep(report["sweep"]))
    parts += [
        _turns(report["turns"]),
        _circuits(report["circuits"], source),
        _calls(report["calls"]),
        _roster(report["roster"]),
        _input(source),
        f'<p class="note">mcp-breaker {escape(report["mcp_breaker_version"])}, report '
        f"version {report['report_version']}. Replayed as enforcing every rule: a refused "
        "call is never made, so it is evidence for nothing after it. Every figure is in the "
        "json report (<code>--format json</code>) with the trace and span "
        "ids behind it.</p>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _subtitle(report: dict[str, Any]) -> str:
    source = report["input"]
    first, last = source["first_span_end_at"] or "?", source["last_span_end_at"] or "?"
    changed = report["settings"]["changed"]
    settings = ", ".join(f"{k}={v}" for k, v in changed.items()) or "the default settings"
    return (
        f'<span data-figure="input.spans">{_n(source["spans"])}</span> spans '
        f'(<span data-figure="input.mcp_spans">{_n(source["mcp_spans"])}</span> MCP) from '
        f"{len(source['files'])} file(s), {escape(first)} to {escape(last)}; replayed as "
        f"enforcing, with {escape(settings)}."
    )


def _headline(c: dict[str, Any]) -> str:
    p = "counterfactual."
    return (
        '<div class="cards">'
        + _card(
            p + "would_refuse.count", c["would_refuse"]["count"], "calls it would refuse", "bad"
        )
        + _card(p + "within_turns.count", c["within_turns"]["count"], "of them within a turn")
        + _card(p + "across_turns.count", c["across_turns"]["count"], "of them across turns")
        + _card(
            p + "dead_calls_spared.count",
            c["dead_calls_spared"]["count"],
            "dead calls spared",
            "good",
        )
        + _card(p + "tool_seconds_saved", c["tool_seconds_saved"], "tool seconds saved", "good")
        + _card(
            p + "model_rounds_saved",
            c["model_rounds_saved"],
            "model rounds saved"
            if c["model_rounds_saved"] is not None
            else "model rounds saved: no round numbers recorded",
            "good",
        )
        + _card(
            p + "refused_that_succeeded.count",
            c["refused_that_succeeded"]["count"],
            "good calls refused (the cost)",
            "bad",
        )
        + "</div>"
    )


def _sweep(sweep: dict[str, Any]) -> str:
    keys = [k["key"] for k in sweep["keys"]]
    columns = [
        ("would_refuse", "refused"),
        ("dead_calls_spared", "dead calls spared"),
        ("good_calls_refused", "good calls refused"),
        ("tool_seconds_saved", "tool s saved"),
        ("model_rounds_saved", "rounds saved"),
        ("circuits_opened", "circuits opened"),
    ]
    head = "".join(f'<th class="l">{escape(k)}</th>' for k in keys) + "".join(
        f"<th>{escape(label)}</th>" for _, label in columns
    )
    body = []
    for i, row in enumerate(sweep["rows"]):
        cells = "".join(_text(row["values"][k]) for k in keys)
        cells += "".join(fig(f"sweep.rows.{i}.{key}", row[key]) for key, _ in columns)
        body.append(f"<tr>{cells}</tr>")
    return (
        "<h2>The trade-off, setting by setting</h2>"
        + charts.sweep_curve(sweep)
        + f"<table><tr>{head}</tr>{''.join(body)}</table>"
    )


def _turns(turns: dict[str, Any]) -> str:
    out = [
        "<h2>Worst turns</h2>",
        f'<p><span data-figure="turns.total">{_n(turns["total"])}</span> turns, '
        f'<span data-figure="turns.with_dead_calls">{_n(turns["with_dead_calls"])}</span> '
        "with refused calls.</p>",
    ]
    for i, t in enumerate(turns["worst"]):
        p = f"turns.worst.{i}."
        if i < TURN_PICTURES:
            out.append(f"<h3>{escape(t['turn'])}</h3>")
            out.append(charts.turn_timeline(t))
            out.append(
                "<table><tr><th>calls</th><th>failed</th><th>dead</th><th>within the turn</th>"
                "<th>across turns</th><th>dead s</th><th>rounds saved</th></tr><tr>"
                + fig(p + "calls", t["calls"])
                + fig(p + "failed", t["failed"])
                + fig(p + "dead_calls.count", t["dead_calls"]["count"])
                + fig(p + "dead_within_turn", t["dead_within_turn"])
                + fig(p + "dead_across_turns", t["dead_across_turns"])
                + fig(p + "dead_calls.seconds", t["dead_calls"]["seconds"])
                + fig(p + "model_rounds_saved", t["model_rounds_saved"])
                + "</tr></table>"
            )
            if t["repeated_failures"]:
                rows = "".join(
                    f"<tr>{fig(p + f'repeated_failures.{j}.repeats.count', r['repeats']['count'])}"
                    f"{_text(r['tool'])}{_text(r['failure_class'])}"
                    f'<td class="l"><code>{escape(r["span_id"])}</code></td>'
                    f"{_text(r['error'])}</tr>"
                    for j, r in enumerate(t["repeated_failures"])
                )
                out.append(
                    "<table><tr><th>repeats</th><th class='l'>tool</th><th class='l'>class</th>"
                    "<th class='l'>of span</th><th class='l'>recorded error (redacted)</th></tr>"
                    + rows
                    + "</table>"
                )
    return "\n".join(out)


def _circuits(circuits: list[dict[str, Any]], source: dict[str, Any]) -> str:
    if not circuits:
        return "<h2>Circuits</h2><p>No circuit would have opened.</p>"
    start, end = source["first_span_end_s"] or 0.0, source["last_span_end_s"] or 0.0
    rows = []
    for i, c in enumerate(circuits[:TABLE_ROWS]):
        p = f"circuits.{i}."
        rows.append(
            f"<tr>{_text(c['scope'])}{_text(c['key'])}{fig(p + 'opened', c['opened'])}"
            f"{fig(p + 'reopened', c['reopened'])}{fig(p + 'closed', c['closed'])}"
            f"{_text(c['first_opened_at'] or '-')}{fig(p + 'open_seconds', c['open_seconds'])}"
            f"{_text(c['state_at_end'])}</tr>"
        )
    return (
        "<h2>Circuits that would have opened</h2>"
        + charts.circuit_states(circuits[:CIRCUITS_PICTURED], start, end)
        + "<table><tr><th class='l'>scope</th><th class='l'>circuit</th><th>opened</th>"
        "<th>reopened</th><th>closed</th><th class='l'>first opened</th><th>open s</th>"
        "<th class='l'>at the end</th></tr>" + "".join(rows) + "</table>"
    )


def _calls(calls: dict[str, Any]) -> str:
    def table(rows: list[dict[str, Any]], prefix: str, with_tool: bool) -> str:
        head = "<th class='l'>server</th>" + ("<th class='l'>tool</th>" if with_tool else "")
        head += "".join(
            f"<th>{h}</th>"
            for h in ("calls", "ok", "failed", "hidden", "neutral", "unknown", "dead", "dead s")
        )
        body = []
        for i, r in enumerate(rows[:TABLE_ROWS]):
            p = f"{prefix}.{i}."
            cells = _text(r["server"] or "(none named)") + (_text(r["tool"]) if with_tool else "")
            cells += fig(p + "calls", r["calls"]) + fig(p + "outcomes.ok", r["outcomes"]["ok"])
            cells += fig(p + "outcomes.failed", r["outcomes"]["failed"])
            cells += fig(p + "hidden_failures.count", r["hidden_failures"]["count"])
            cells += fig(p + "outcomes.neutral", r["outcomes"]["neutral"])
            cells += fig(p + "outcomes.unknown", r["outcomes"]["unknown"])
            cells += fig(p + "dead_calls.count", r["dead_calls"]["count"])
            cells += fig(p + "dead_calls.seconds", r["dead_calls"]["seconds"])
            body.append(f"<tr>{cells}</tr>")
        return f"<table><tr>{head}</tr>{''.join(body)}</table>"

    return (
        "<h2>Servers and tools, worst first</h2>"
        + f'<p><span data-figure="calls.calls">{_n(calls["calls"])}</span> calls.</p>'
        + "<h3>Servers</h3>"
        + table(calls["servers"], "calls.servers", False)
        + "<h3>Tools</h3>"
        + table(calls["tools"], "calls.tools", True)
    )


def _roster(roster: dict[str, Any]) -> str:
    states = "".join(
        f"<tr>{_text(state)}{fig(f'roster.states.{state}.count', v['count'])}</tr>"
        for state, v in roster["states"].items()
    )
    out = [
        "<h2>Roster</h2>",
        f'<p><span data-figure="roster.listings">{_n(roster["listings"])}</span> tool '
        "listings.</p>",
        f"<table><tr><th class='l'>listing state</th><th>listings</th></tr>{states}</table>",
    ]
    if roster["collapses"]:
        rows = "".join(
            f"<tr>{_text(c['turn'])}{fig(f'roster.collapses.{i}.from_round', c['from_round'])}"
            f"{fig(f'roster.collapses.{i}.to_round', c['to_round'])}"
            f"{_text(c['recovered_round'] if c['recovered_round'] is not None else '-')}"
            f"{fig(f'roster.collapses.{i}.offered_before', c['offered_before'])}</tr>"
            for i, c in enumerate(roster["collapses"][:TABLE_ROWS])
        )
        out.append(
            "<h3>Mid-turn collapses</h3><table><tr><th class='l'>turn</th><th>from round</th>"
            "<th>to round</th><th class='l'>recovered in</th><th>tools before</th></tr>"
            + rows
            + "</table>"
        )
    for key, title in (
        ("namespaces_missing", "Namespaces connected, not attached"),
        ("startup_races", "Startup races"),
    ):
        if roster[key]:
            names = "missing" if key == "namespaces_missing" else "late_namespaces"
            rows = "".join(
                f"<tr>{_text(r['harness'])}{_text(', '.join(r[names]))}"
                f"{fig(f'roster.{key}.{i}.listings.count', r['listings']['count'])}</tr>"
                for i, r in enumerate(roster[key][:TABLE_ROWS])
            )
            out.append(
                f"<h3>{title}</h3><table><tr><th class='l'>harness</th>"
                f"<th class='l'>namespaces</th><th>listings</th></tr>{rows}</table>"
            )
    stale = roster["stale"]
    out.append(
        '<p>Stale rosters: <span data-figure="roster.stale.listings_offering_open_tools.count">'
        f"{_n(stale['listings_offering_open_tools']['count'])}</span> listings offering a tool "
        'whose breaker was open; <span data-figure="roster.stale.unknown_tool_after_offer.count">'
        f"{_n(stale['unknown_tool_after_offer']['count'])}</span> calls failing as an unknown "
        "tool the turn had been offered.</p>"
    )
    return "\n".join(out)


def _input(source: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr>{_text(f['name'])}{fig(f'input.files.{i}.records', f['records'])}"
        f"{fig(f'input.files.{i}.spans', f['spans'])}"
        f"{fig(f'input.files.{i}.mcp_spans', f['mcp_spans'])}"
        f"{fig(f'input.files.{i}.skipped', f['skipped'])}</tr>"
        for i, f in enumerate(source["files"][:TABLE_ROWS])
    )
    problems = "".join(f"<li><code>{escape(p)}</code></li>" for p in source["skipped"]["first"])
    reorder = source["reorder"]
    return (
        "<h2>Input</h2><table><tr><th class='l'>file</th><th>records</th><th>spans</th>"
        f"<th>MCP spans</th><th>skipped</th></tr>{rows}</table>"
        f'<p>Skipped: <span data-figure="input.skipped.count">{_n(source["skipped"]["count"])}'
        "</span> unreadable records. Spans put in end-time order within "
        f'{_n(reorder["window_s"])} s; <span data-figure="input.reorder.late_spans">'
        f"{_n(reorder['late_spans'])}</span> came later than that.</p>"
        + (f"<ul>{problems}</ul>" if problems else "")
    )
