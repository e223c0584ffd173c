"""What identifies a tool call, computed exactly as mcp-breaker computes it from spans.

A harness names a call three ways that must agree with the service, or its mirror would
never match the advisories raised from its own spans:

- the **server**: the one given, else the ``server__tool`` prefix of the tool's name (the
  convention the classifier applies when a span names no server);
- the **fingerprint** of server, tool and arguments (``mcp_breaker_client.shared.fingerprint``);
- the **arguments as recorded** on the ``mcp.tool.call`` span: always as
  ``mcp.tool.args_hash``, the digest of their canonical JSON, never the arguments
  themselves (spans go on to tracing backends). The service fingerprints
  ``{"args_hash": digest}``, and ``call_fingerprint`` does the same, so both sides agree
  for arguments of any size.

Plain functions, no I/O. The service's own ``classify.tool_servers`` map cannot be known
here: a harness that relies on it should pass the server name explicitly.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_breaker_client.shared.conventions import ARGS_HASH_ATTRIBUTE, server_prefix
from mcp_breaker_client.shared.fingerprint import arguments_digest, fingerprint, fingerprints


def resolve_server(server: str | None, tool: str) -> str:
    """The server a call goes to as the service names it; "" when nothing names one."""
    return server or server_prefix(tool) or ""


def _is_json(arguments: Any) -> bool:
    try:
        json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return False  # not JSON: no fingerprint on either side, rather than a made-up one
    except RecursionError:
        return True  # deeper than json can walk, but JSON: canonical_json bounds the depth
    return True


def recorded_arguments(arguments: Any) -> dict[str, str]:
    """The span attribute that identifies the arguments: always their digest, never the
    arguments themselves. Spans travel on to tracing backends, and arguments carry what
    users typed (paths, queries, tokens); the digest is all the breaker needs. Empty for
    arguments that are not JSON."""
    return {ARGS_HASH_ATTRIBUTE: arguments_digest(arguments)} if _is_json(arguments) else {}


def call_fingerprint(server: str | None, tool: str, arguments: Any) -> str | None:
    """The fingerprint the service will give this call's span; None without arguments."""
    if arguments is None or not _is_json(arguments):
        return None
    return fingerprint(server or None, tool, {"args_hash": arguments_digest(arguments)})


def call_fingerprints(server: str | None, tool: str, arguments: Any) -> tuple[str, ...]:
    """Every fingerprint a span of this call may carry: the digest form this library
    records, and the raw form of a harness that records ``mcp.tool.arguments`` itself."""
    if arguments is None or not _is_json(arguments):
        return ()
    return fingerprints(server or None, tool, arguments)
