"""A tool's result, read the same way wherever an instrumentation put it.

Results reach us in several shapes, and every dialect reader hands its raw value here:

- the whole ``CallToolResult`` envelope, ``{"content": [...], "structuredContent": {...},
  "isError": false}``: the OpenTelemetry MCP conventions' ``gen_ai.tool.call.result`` when
  the instrumentation records the envelope, Logfire's ``response``, the T3 seed's body;
- a bare structured body (``{"_tag": "OrchestratorMcpFailure", ...}``, ``{"items": []}``);
- a JSON string of either, or a plain text;
- a content list, ``[{"type": "text", "text": "..."}]``, or one item of it (the OpenAI
  Agents SDK's tool output, as OpenInference records it);
- OpenLLMetry's wrapper, ``{"result": <any of the above>, "is_error": false}``.

What bears on the outcome comes out: the envelope's own ``isError``, the first text (for
phrases and excerpts), and a *typed failure* found inside — in ``structuredContent``, in
the body itself, or as JSON inside a text item — which under ``isError: false`` is a
hidden failure; and the server the envelope's ``_meta`` names, if it names one. The work
is bounded whatever the input: at most ``MAX_CONTENT_ITEMS`` content items are looked
at, JSON text is decoded only below ``MAX_JSON_CHARS`` (by ``loads``), and one
wrapper and one envelope deep at most.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_JSON_CHARS = 64 * 1024  # JSON text longer than this is not decoded
MAX_CONTENT_ITEMS = 16  # content items read for text and typed failures; the rest are not
# A typed failure inside a success envelope: {"_tag": "OrchestratorMcpFailure", ...}.
FAILURE_TAG = re.compile(r"(failure|error)$", re.I)
ENVELOPE_KEYS = frozenset({"content", "structuredContent", "isError"})
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"  # a result's _meta names its server


@dataclass(frozen=True, slots=True)
class ResultReading:
    """What a recorded result says about how the call ended."""

    is_error: bool | None = None  # the envelope's (or wrapper's) own isError, if it has one
    text: str = ""  # the first text of the result, for phrases and the error excerpt
    typed_failure: Mapping[str, Any] | None = None  # the typed failure body found inside
    # The server that answered, where the envelope carries the MCP server's own
    # ``_meta["io.modelcontextprotocol/serverInfo"]`` (the AI SDK 7 records it whole).
    server: str | None = None

    @property
    def recorded(self) -> bool:
        return self.is_error is not None or bool(self.text) or self.typed_failure is not None


NO_RESULT = ResultReading()


def read_result(value: Any, *, is_error: bool | None = None) -> ResultReading:
    """Read a recorded result of any shape above; ``is_error`` is a flag the dialect found
    beside it (an attribute), which the envelope's own flag does not override."""
    if value is None and is_error is None:
        return NO_RESULT  # most spans record no result: one frozen reading for them all
    if isinstance(value, str):
        parsed = loads(value)
        if isinstance(parsed, (dict, list)):
            value = parsed  # JSON text: read as the structure it encodes
        else:
            return ResultReading(is_error=is_error, text=value)
    if isinstance(value, dict) and "result" in value and not ENVELOPE_KEYS & value.keys():
        # OpenLLMetry's wrapper: its own is_error beside the result.
        flag = as_bool(value.get("is_error"))
        inner = read_result(_unwrap(value["result"]), is_error=flag)
        return _with_flag(inner, is_error)
    if isinstance(value, list):
        return ResultReading(is_error=is_error, **_content(value))
    if not isinstance(value, dict):
        return ResultReading(is_error=is_error)
    if value.get("type") == "text" and isinstance(value.get("text"), str):
        return ResultReading(is_error=is_error, **_content([value]))  # one content item
    if ENVELOPE_KEYS & value.keys():
        flag = as_bool(value.get("isError"))
        found = _content(value.get("content"))
        structured = value.get("structuredContent")
        if isinstance(structured, dict) and typed_failure(structured):
            found["typed_failure"] = structured
        meta = value.get("_meta")
        if isinstance(meta, dict):
            found["server"] = _server_name(meta)
        return ResultReading(is_error=is_error if is_error is not None else flag, **found)
    message = value.get("message")
    return ResultReading(
        is_error=is_error,
        text=message if isinstance(message, str) else "",
        typed_failure=value if typed_failure(value) else None,
    )


def typed_failure(body: Mapping[str, Any]) -> bool:
    """A body that declares a failure by its own type: a ``_tag`` ending in Failure or
    Error, an ``error`` object, or ``ok: false``."""
    tag = body.get("_tag")
    if isinstance(tag, str) and FAILURE_TAG.search(tag):
        return True
    return isinstance(body.get("error"), dict) or body.get("ok") is False


def as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def _unwrap(value: Any) -> Any:
    """The wrapper's result, decoded once if it is JSON text (never a second wrapper)."""
    if isinstance(value, str):
        parsed = loads(value)
        if isinstance(parsed, (dict, list)):
            value = parsed
    if isinstance(value, dict) and "result" in value and not ENVELOPE_KEYS & value.keys():
        return None  # a wrapper inside a wrapper is not a shape anyone records
    return value


def _content(items: Any) -> dict[str, Any]:
    """The first text of a content list, and a typed failure in JSON inside a text item."""
    found: dict[str, Any] = {}
    if not isinstance(items, list):
        return found
    for item in items[:MAX_CONTENT_ITEMS]:
        if not isinstance(item, dict):
            continue
        text = item.get("text")
        if not isinstance(text, str):
            continue
        found.setdefault("text", text)
        if "typed_failure" not in found and text.lstrip().startswith("{"):
            body = loads(text)
            if isinstance(body, dict) and typed_failure(body):
                found["typed_failure"] = body
    return found


def _server_name(meta: Mapping[str, Any]) -> str | None:
    info = meta.get(SERVER_INFO_KEY)
    name = info.get("name") if isinstance(info, dict) else None
    return name if isinstance(name, str) and name else None


def _with_flag(reading: ResultReading, is_error: bool | None) -> ResultReading:
    if is_error is None:
        return reading
    return ResultReading(is_error, reading.text, reading.typed_failure, reading.server)


def loads(value: object) -> Any:
    """Decode a JSON attribute; None when it is absent, too long, or not JSON."""
    if isinstance(value, (dict, list)):
        return value
    if not isinstance(value, str) or len(value) >= MAX_JSON_CHARS:
        return None
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None
