"""Body codecs for OTLP/HTTP: capped gzip, and OTLP/JSON to and from protobuf.

OTLP/JSON is protobuf's JSON mapping with two differences that matter here: trace and
span ids are hex, not base64, and enums are integers. Both are handled before protobuf's
own parser sees the document.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from processor.errors import InvalidRequest, RequestTooLarge

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"})
_MAX_JSON_DEPTH = 64  # OTLP documents are shallow; deep nesting is an attack, not data


def gunzip_capped(body: bytes, limit_bytes: int) -> bytes:
    """Decompress every gzip member, at most ``limit_bytes`` in all.

    A bomb stops at the cap instead of filling memory. Several members one after the
    other are one valid body (RFC 1952), so each is inflated in turn.
    """
    parts: list[bytes] = []
    room = limit_bytes
    rest = body
    while rest:
        inflater = zlib.decompressobj(_GZIP_WBITS)
        try:
            data = inflater.decompress(rest, room + 1)
        except zlib.error:
            raise InvalidRequest("body is not valid gzip") from None
        if len(data) > room or inflater.unconsumed_tail:
            raise RequestTooLarge(limit_bytes)
        if not inflater.eof:
            raise InvalidRequest("gzip body is truncated")
        parts.append(data)
        room -= len(data)
        rest = inflater.unused_data
    if not parts:
        raise InvalidRequest("gzip body is empty")
    return b"".join(parts)


def request_from_json(body: bytes) -> ExportTraceServiceRequest:
    try:
        document = json.loads(body)
    except ValueError:
        raise InvalidRequest("body is not valid JSON") from None
    except RecursionError:  # valid JSON, deeper than the decoder goes: say so
        raise InvalidRequest(f"JSON nested deeper than {_MAX_JSON_DEPTH} levels") from None
    if not isinstance(document, dict):
        raise InvalidRequest("body must be a JSON object")
    _hex_ids_to_base64(document, depth=0)
    request = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise InvalidRequest(f"body is not an OTLP/JSON trace export: {_first_line(exc)}") from None
    except (SystemError, UnicodeError, ValueError):
        # A string JSON can hold and protobuf cannot: a lone surrogate ("\udc00"), which
        # the protobuf runtime refuses with one of these rather than a ParseError.
        raise InvalidRequest("body holds a string that is not valid Unicode") from None
    return request


def message_to_json(message: Message) -> bytes:
    return json_format.MessageToJson(message, indent=None).encode()


def _hex_ids_to_base64(node: Any, depth: int) -> None:
    if depth > _MAX_JSON_DEPTH:
        raise InvalidRequest(f"JSON nested deeper than {_MAX_JSON_DEPTH} levels")
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                try:
                    node[key] = base64.b64encode(bytes.fromhex(value)).decode()
                except ValueError:
                    raise InvalidRequest(f"{key} must be hex, got {value[:40]!r}") from None
            else:
                _hex_ids_to_base64(value, depth + 1)
    elif isinstance(node, list):
        for item in node:
            _hex_ids_to_base64(item, depth + 1)


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


__all__ = ["gunzip_capped", "message_to_json", "request_from_json"]
