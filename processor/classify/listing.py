"""The counts of a tool listing, checked: what a harness reported, and what was malformed.

A bad count is dropped and named in ``problems``, never guessed and never fatal: roster
health must not call a roster collapsed because an instrument wrote ``-1`` or ``"lots"``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

COUNT_FIELDS = ("configured", "listed", "reached", "unavailable", "registered", "offered")
NAMESPACE_FIELDS = {
    "mcp.namespaces.connected": "namespaces_connected",
    "mcp.namespaces.attached": "namespaces_attached",
    "mcp.namespaces.required": "namespaces_required",
    "offered_names": "offered_tools",  # mcp.tools.offered_names
}
PROBE_SOURCES = ("client_namespace", "offline_spawn")
MAX_NAMESPACES = 256
MAX_NAMESPACE_CHARS = 128


def listing_counts(raw: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """ToolListing fields from the dialect's raw listing attributes, and the problems."""
    if not raw:
        return {}, ()  # most dialects record no counts: nothing below would find any
    fields: dict[str, Any] = {}
    problems: list[str] = []
    for name in COUNT_FIELDS:
        if name not in raw:
            continue
        value = raw[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            problems.append(f"{name}: expected a count, got {str(value)[:40]!r}")
        else:
            fields[name] = value
    if "cached" in raw:
        if isinstance(raw["cached"], bool):
            fields["cached"] = raw["cached"]
        else:
            problems.append(f"cached: expected true or false, got {str(raw['cached'])[:40]!r}")
    for key, name in NAMESPACE_FIELDS.items():
        if key not in raw:
            continue
        value = raw[key]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            fields[name] = tuple(v[:MAX_NAMESPACE_CHARS] for v in value[:MAX_NAMESPACES])
        else:
            problems.append(f"{key}: expected a list of names, got {type(value).__name__}")
    snapshot = raw.get("mcp.session.tool_snapshot_at")
    if snapshot is not None:
        if isinstance(snapshot, (int, float)) and not isinstance(snapshot, bool):
            fields["tool_snapshot_at_s"] = float(snapshot)
        else:
            problems.append(
                f"mcp.session.tool_snapshot_at: expected epoch seconds, got {snapshot!r:.40}"
            )
    connected_at = raw.get("mcp.namespaces.connected_at")
    if connected_at is not None:
        parsed = _connected_at(connected_at)
        if parsed is None:
            problems.append(
                "mcp.namespaces.connected_at: expected a JSON object of name -> seconds"
            )
        else:
            fields["namespaces_connected_at_s"] = parsed
    source = raw.get("mcp.namespaces.probe_source")
    if source is not None:
        if source in PROBE_SOURCES:
            fields["probe_source"] = source
        else:
            problems.append(
                f"mcp.namespaces.probe_source: expected one of {', '.join(PROBE_SOURCES)}"
            )
    listed, configured = fields.get("listed"), fields.get("configured")
    if listed is not None and configured is not None and listed > configured:
        # Not impossible (one server may list many tools), but worth flagging: the counts
        # are per server in every harness we know.
        problems.append(f"listed ({listed}) exceeds configured ({configured})")
    return fields, tuple(problems)


def _connected_at(value: Any) -> tuple[tuple[str, float], ...] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value) if len(value) < 64 * 1024 else None
        except (ValueError, RecursionError):
            return None
    if not isinstance(value, dict):
        return None
    pairs = []
    for name, at in list(value.items())[:MAX_NAMESPACES]:
        if not isinstance(at, (int, float)) or isinstance(at, bool):
            return None
        try:
            seconds = float(at)
        except OverflowError:  # an integer JSON wrote with hundreds of digits
            return None
        pairs.append((str(name)[:MAX_NAMESPACE_CHARS], seconds))
    return tuple(pairs)
