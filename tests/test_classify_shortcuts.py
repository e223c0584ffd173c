"""The shortcuts classification takes per MCP span find exactly what the long way does: the
semconv shape cache against working a span out anew (and its bound), the attribute count
read with a span's attributes against counting them again, the prebuilt JSON encoder
against the encoder's own. (The builders: tests/test_cheap_dataclasses.py.)"""

from __future__ import annotations

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.classify import dialects
from processor.classify.classifier import Classifier
from processor.classify.events import (
    Dialect,
)
from processor.classify.spanview import MAX_ATTRIBUTES
from tests.classify_builders import as_request, classify_all, make_span, only_call


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


def test_what_the_classifier_read_counts_every_attribute_and_keeps_only_the_wanted() -> None:
    """Classifier.read: each span's count of attributes, wanted or not, as the span holds
    them; nothing for a span with more than MAX_ATTRIBUTES."""
    call = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "t"}
    small = make_span("tools/call t", {**call, "http.url": "u"}, span=1)
    large = make_span(
        "tools/call t", {**call, **{f"x.{n}": n for n in range(MAX_ATTRIBUTES)}}, span=2
    )
    classifier = Classifier()
    classifier.classify(as_request([small, large]), now=0.0)
    assert set(classifier.spans) == {small.span_id, large.span_id}
    assert classifier.read == {small.span_id: (3, call)}  # http.url counted, not read
