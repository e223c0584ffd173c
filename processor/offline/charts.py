"""The HTML report's pictures, drawn by matplotlib as inline SVG.

matplotlib because it is the best-kept plotting library in Python, and it renders to SVG
with text as paths (``svg.fonttype: path``): the pictures need no font, no script and no
network, and they stay sharp when zoomed. Each function takes the report's json and
returns one ``<svg>`` element; nothing here reads the engines.
"""

from __future__ import annotations

import io
import re
from typing import Any, cast

import matplotlib
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

_RC: dict[str, Any] = {
    "svg.fonttype": "path",
    "svg.hashsalt": "mcp-breaker",  # the same report draws the same bytes
    "text.parse_math": False,  # names from spans are text: "$" is not mathtext
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
OK = "#3a8f5c"
FAILED = "#e0913a"
DEAD = "#c23b3b"
OTHER = "#9aa3ad"
ROSTER = "#3465a4"
STATE_COLOURS = {
    "closed": "#d9ead3",
    "open": DEAD,
    "forced_open": "#7a1f1f",
    "half_open": "#f1c232",
    "forced_closed": "#6aa84f",
}
_PROLOGUE = re.compile(rb"^.*?(?=<svg)", re.S)


def _svg(figure: Figure) -> str:
    out = io.BytesIO()
    figure.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    return _PROLOGUE.sub(b"", out.getvalue(), count=1).decode()


def turn_timeline(turn: dict[str, Any]) -> str:
    """Calls by round (allowed and ok, allowed and failed, dead) and the tools offered."""
    rounds = turn["rounds"]
    with matplotlib.rc_context(cast(Any, _RC)):
        figure = Figure(figsize=(7.5, 2.6))
        axes = figure.add_subplot()
        axes.set_xlabel("round")
        axes.set_ylabel("calls")
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        if not rounds:
            axes.text(0.5, 0.5, "no round numbers recorded", ha="center", transform=axes.transAxes)
            return _svg(figure)
        x = [r["round"] for r in rounds]
        ok = [r["ok"] - r["dead_ok"] for r in rounds]
        failed = [r["failed"] - r["dead_failed"] for r in rounds]
        dead = [r["dead"] for r in rounds]
        other = [
            r["calls"] - a - b - c for r, a, b, c in zip(rounds, ok, failed, dead, strict=True)
        ]
        bottom = [0] * len(x)
        for values, colour, label in (
            (ok, OK, "allowed, ok"),
            (failed, FAILED, "allowed, failed"),
            (other, OTHER, "allowed, other"),
            (dead, DEAD, "dead call (would be refused)"),
        ):
            if any(values):
                axes.bar(x, values, bottom=bottom, color=colour, label=label, width=0.7)
                bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        axes.set_xticks(x)
        axes.set_ylim(0, max(r["calls"] for r in rounds) * 1.15 + 0.1)
        handles, labels = axes.get_legend_handles_labels()
        offered = [
            (r["round"], r["offered_tools"]) for r in rounds if r["offered_tools"] is not None
        ]
        if offered:
            twin = axes.twinx()
            twin.plot(*zip(*offered, strict=True), color=ROSTER, marker="o", label="tools offered")
            twin.set_ylabel("tools offered", color=ROSTER)
            twin.set_ylim(bottom=0)
            twin.spines["right"].set_visible(True)
            more, more_labels = twin.get_legend_handles_labels()
            handles, labels = handles + more, labels + more_labels
        right = 1.12 if offered else 1.01  # past the second axis's labels, when there is one
        axes.legend(
            handles,
            labels,
            loc="upper left",
            bbox_to_anchor=(right, 1.0),
            frameon=False,
            fontsize=8,
        )
        return _svg(figure)


def circuit_states(circuits: list[dict[str, Any]], start_s: float, end_s: float) -> str:
    """Each circuit's state over span time, one row per circuit, from its transitions."""
    with matplotlib.rc_context(cast(Any, _RC)):
        figure = Figure(figsize=(7.5, 0.55 * len(circuits) + 1.0))
        axes = figure.add_subplot()
        labels = []
        for row, circuit in enumerate(circuits):
            labels.append(f"{circuit['scope']} {circuit['key']}")
            transitions = circuit["transitions"]
            state = transitions[0]["from"] if transitions else circuit["state_at_end"]
            since = start_s
            spans: list[tuple[float, float, str]] = []
            for t in transitions:
                spans.append((since, t["at_s"], state))
                state, since = t["to"], t["at_s"]
            spans.append((since, max(end_s, since), state))
            for begin, finish, name in spans:
                axes.broken_barh(
                    [((begin - start_s) / 60, max((finish - begin) / 60, 1e-3))],
                    (row - 0.35, 0.7),
                    facecolors=STATE_COLOURS.get(name, OTHER),
                )
        axes.set_yticks(range(len(labels)), labels)
        axes.invert_yaxis()
        axes.set_xlabel("minutes since the first span")
        handles = [Patch(color=colour, label=state) for state, colour in STATE_COLOURS.items()]
        axes.legend(
            handles=handles,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.35),
            ncol=5,
            frameon=False,
            fontsize=8,
        )
        return _svg(figure)


def sweep_curve(sweep: dict[str, Any]) -> str:
    """Dead calls spared against good calls refused, one point per value (a line per value
    of the second key, when there are two)."""
    keys = [k["key"] for k in sweep["keys"]]
    with matplotlib.rc_context(cast(Any, _RC)):
        figure = Figure(figsize=(6.0, 3.4))
        axes = figure.add_subplot()
        groups: dict[str, list[dict[str, Any]]] = {}
        for row in sweep["rows"]:
            group = row["values"][keys[1]] if len(keys) > 1 else ""
            groups.setdefault(group, []).append(row)
        for group, rows in groups.items():
            x = [r["good_calls_refused"] for r in rows]
            y = [r["dead_calls_spared"] for r in rows]
            axes.plot(x, y, marker="o", label=f"{keys[1]}={group}" if group else None)
            # Settings that give the same trade-off share one point, and one label.
            points: dict[tuple[int, int], list[str]] = {}
            for r, xi, yi in zip(rows, x, y, strict=True):
                points.setdefault((xi, yi), []).append(str(r["values"][keys[0]]))
            for (xi, yi), values in points.items():
                axes.annotate(
                    f"{keys[0]}={', '.join(values)}",
                    (xi, yi),
                    fontsize=7,
                    textcoords="offset points",
                    xytext=(6, 2),
                )
        rows = sweep["rows"]
        axes.set_xlabel("good calls refused (the cost of enforcing)")
        axes.set_ylabel("dead calls spared")
        axes.set_xlim(-0.5, max(r["good_calls_refused"] for r in rows) * 1.3 + 2)
        axes.set_ylim(0, max(r["dead_calls_spared"] for r in rows) * 1.15 + 1)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        if len(groups) > 1:
            axes.legend(frameon=False, fontsize=8)
        return _svg(figure)
