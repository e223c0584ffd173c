"""What identifies a tool call, computed exactly as mcp-breaker computes it from spans.

A harness names a call three ways that must agree with the service, or its mirror would
never match the advisories raised from its own spans:

- the **server**: the one given, else the ``server__tool`` prefix of the tool's name (the
  convention the classifier applies when a span names no server);
- the **fingerprint** of server, tool and arguments (``processor.classify.fingerprint``);
- the **arguments as recorded** on the ``mcp.tool.call`` span. The service decodes an
  ``mcp.tool.arguments`` attribute only below ``MAX_JSON_CHARS``; larger arguments would
  give no fingerprint at all, so they are recorded as ``mcp.tool.args_hash`` (a digest of
  their canonical JSON) instead, and the service fingerprints ``{"args_hash": digest}``.
  ``call_fingerprint`` follows the same rule, so both sides agree for any size.

Plain functions, no I/O. The service's own ``classify.tool_servers`` map cannot be known
here: a harness that relies on it should pass the server name explicitly.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from processor.classify.fingerprint import canonical_json, fingerprint
from processor.classify.spanview import MAX_JSON_CHARS

SERVER_SEPARATOR = "__"  # "playwright__browser_navigate": as processor/classify/classifier.py
ARGUMENTS_ATTRIBUTE = "mcp.tool.arguments"
ARGS_HASH_ATTRIBUTE = "mcp.tool.args_hash"


def resolve_server(server: str | None, tool: str) -> str:
    """The server a call goes to as the service names it; "" when nothing names one."""
    if server:
        return server
    prefix, separator, _ = tool.partition(SERVER_SEPARATOR)
    return prefix if separator and prefix else ""


def recorded_arguments(arguments: Any) -> dict[str, str]:
    """The span attribute that carries the arguments: the JSON itself, or its digest when
    the service would not decode JSON that long. Empty for arguments that are not JSON."""
    try:
        text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return {}  # not JSON: no fingerprint on either side, rather than a made-up one
    if len(text) < MAX_JSON_CHARS:
        return {ARGUMENTS_ATTRIBUTE: text}
    return {ARGS_HASH_ATTRIBUTE: arguments_digest(arguments)}


def arguments_digest(arguments: Any) -> str:
    canonical = canonical_json(arguments).encode("utf-8", "surrogatepass")
    return hashlib.sha256(canonical).hexdigest()


def call_fingerprint(server: str | None, tool: str, arguments: Any) -> str | None:
    """The fingerprint the service will give this call's span; None without arguments."""
    if arguments is None:
        return None
    recorded = recorded_arguments(arguments)
    if ARGUMENTS_ATTRIBUTE in recorded:
        return fingerprint(server or None, tool, arguments)
    if ARGS_HASH_ATTRIBUTE in recorded:
        return fingerprint(server or None, tool, {"args_hash": recorded[ARGS_HASH_ATTRIBUTE]})
    return None
