"""The counts of a tool listing, checked: what a harness reported, and what was malformed.

A bad count is dropped and named in ``problems``, never guessed and never fatal: roster
health must not call a roster collapsed because an instrument wrote ``-1`` or ``"lots"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

COUNT_FIELDS = ("configured", "listed", "reached", "unavailable", "registered", "offered")
NAMESPACE_FIELDS = {
    "mcp.namespaces.connected": "namespaces_connected",
    "mcp.namespaces.attached": "namespaces_attached",
}
MAX_NAMESPACES = 256
MAX_NAMESPACE_CHARS = 128


def listing_counts(raw: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """ToolListing fields from the dialect's raw listing attributes, and the problems."""
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
    listed, configured = fields.get("listed"), fields.get("configured")
    if listed is not None and configured is not None and listed > configured:
        # Not impossible (one server may list many tools), but worth flagging: the counts
        # are per server in every harness we know.
        problems.append(f"listed ({listed}) exceeds configured ({configured})")
    return fields, tuple(problems)
