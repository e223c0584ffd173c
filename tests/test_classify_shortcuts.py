"""The shortcuts classification takes per MCP span find exactly what the long way does: the
semconv shape cache against working a span out anew (and its bound), the prebuilt JSON
encoder against the encoder's own. (The builders: tests/test_cheap_dataclasses.py.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.classify import dialects
from processor.classify.events import (
    Dialect,
)
from processor.classify.fingerprint import _CANONICAL, _normalize, canonical_json
from tests.classify_builders import classify_all, make_span, only_call


def test_a_semconv_shape_is_what_the_span_says_and_the_cache_stays_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dialects, "_SHAPES", {})
    monkeypatch.setattr(dialects, "MAX_SHAPES", 8)
    attributes = {"mcp.method.name": "tools/call"}
    for n in range(20):  # a sender of unique names
        span = make_span(f"tools/call tool{n}", attributes, kind=Span.SPAN_KIND_SERVER)
        assert only_call(classify_all(span)).tool == f"tool{n}"
        assert len(dialects._SHAPES) <= 8
    long_name = "tools/call " + "y" * (dialects.MAX_SHAPE_NAME_CHARS - 10)  # not cut
    span = make_span(long_name, attributes, kind=Span.SPAN_KIND_SERVER)
    assert len(long_name) > dialects.MAX_SHAPE_NAME_CHARS
    assert only_call(classify_all(span)).tool == long_name.removeprefix("tools/call ")
    assert all(len(name) <= dialects.MAX_SHAPE_NAME_CHARS for name, *_ in dialects._SHAPES)


def test_a_cached_shape_still_heeds_each_spans_fastmcp_attributes() -> None:
    """The dialect's fastmcp attributes are a span's own: never taken from the cache."""
    attributes = {"mcp.method.name": "tools/call"}
    plain = make_span("tools/call same", attributes, kind=Span.SPAN_KIND_SERVER, span=1)
    fast = make_span(
        "tools/call same",
        {**attributes, "fastmcp.server.name": "f"},
        kind=Span.SPAN_KIND_SERVER,
        span=2,
    )
    for first, second in ((plain, fast), (fast, plain)):
        dialects._SHAPES.clear()
        a, b = (only_call(classify_all(span)) for span in (first, second))
        assert {a.dialect, b.dialect} == {Dialect.SEMCONV, Dialect.FASTMCP}


@pytest.mark.parametrize(
    "value",
    [
        None,
        "text",
        "\ud800 lone",
        3,
        2.0,
        float("nan"),
        [1, 2.5, {"b": 1, "a": [True, None]}],
        {"z": {"y": "é"}, "a": 1e300, 7: "seven"},
    ],
)
def test_the_prebuilt_encoder_writes_what_the_encoder_writes(value: Any) -> None:
    normalized = _normalize(value, 0)
    assert canonical_json(value) == _CANONICAL.encode(normalized)
    assert canonical_json(value) == json.dumps(
        normalized, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
