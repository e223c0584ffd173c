"""The fingerprint of a call: which server, which tool, which arguments, as one short hash.

Two calls with the same fingerprint are the same call, byte-identical or not: the JSON is
made canonical first (sorted keys, no whitespace, 2.0 written as 2). Absent arguments
give no fingerprint at all, never a made-up one; raw arguments never leave this module.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from mcp_breaker_client.shared.compact_json import compact_encoder

FINGERPRINT_HEX_CHARS = 32  # 128 bits: collisions are not a concern at any traffic we see
MAX_DEPTH = 32  # what is nested deeper than this is hashed as one marker
DEEP_MARKER = "<nested too deep>"


_CANONICAL_JSON = compact_encoder(sort_keys=True)


def canonical_json(value: Any) -> str:
    return _CANONICAL_JSON(_normalize(value, 0))


def fingerprint(server: str | None, tool: str, arguments: Any) -> str:
    """The hex fingerprint of a call; ``arguments`` is the decoded JSON value."""
    # Each part followed by a separator no part can contain unescaped; hashed as one string
    # (one encode, one update: the same bytes as part by part, at less cost per call).
    text = f"{server or ''}\x00{tool}\x00{canonical_json(arguments)}\x00"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:FINGERPRINT_HEX_CHARS]


def arguments_digest(arguments: Any) -> str:
    """What a harness records as ``mcp.tool.args_hash`` instead of the arguments: the
    SHA-256 of their canonical JSON (the client library does; any harness may)."""
    return hashlib.sha256(canonical_json(arguments).encode("utf-8", "surrogatepass")).hexdigest()


def fingerprints(server: str | None, tool: str, arguments: Any) -> tuple[str, str]:
    """Both fingerprints a span of this call may carry: from its recorded arguments, and
    from their digest (``{"args_hash": digest}``, the form the spans of a harness that
    records only the digest give)."""
    digest = {"args_hash": arguments_digest(arguments)}
    return fingerprint(server, tool, arguments), fingerprint(server, tool, digest)


def _normalize(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        return DEEP_MARKER  # not repr(): it would recurse through the rest of the depth
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 2**53:
            return int(value)  # 2.0 and 2 are the same argument to a JSON peer
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {str(k): _normalize(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalize(v, depth + 1) for v in value]
    return repr(value)
