"""The shortcuts classification takes per MCP span build and find exactly what the long
way does: the builders against the constructors, the semconv shape cache against working
a span out anew (and its bound), the prebuilt JSON encoder against the encoder's own."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.cheap_dataclasses import builder
from processor.classify import dialects
from processor.classify.dialects import Kind, Reading, build_reading
from processor.classify.events import (
    Dialect,
    Outcome,
    Side,
    ToolCall,
    ToolListing,
    Verdict,
    build_tool_call,
    build_tool_listing,
)
from processor.classify.fingerprint import _CANONICAL, _normalize, canonical_json
from processor.classify.outcome import Signals, build_signals
from processor.classify.spanview import SpanView
from tests.classify_builders import classify_all, make_span, only_call

CALL: dict[str, Any] = dict(
    turn="t",
    round=2,
    server="s",
    tool="x",
    fingerprint=None,
    verdict=Verdict(outcome=Outcome.OK),
    start_ns=1,
    end_ns=2,
    trace_id=b"\x01",
    span_ids=(b"\x02",),
    dialect=Dialect.SEMCONV,
)


def span_view(name: str = "tools/call x") -> SpanView:
    return SpanView(name, Span.SPAN_KIND_CLIENT, 0, "", b"", b"", b"", 1, 2, {}, (), {})


def test_a_built_event_is_the_constructed_one() -> None:
    built, constructed = build_tool_call(**CALL), ToolCall(**CALL)
    assert type(built) is ToolCall
    assert built == constructed and hash(built) == hash(constructed)
    assert repr(built) == repr(constructed)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.tool = "y"  # type: ignore[misc]
    listing: dict[str, Any] = dict(CALL, listed=3, problems=("p",))
    for key in ("tool", "fingerprint", "verdict"):
        del listing[key]
    assert build_tool_listing(**listing) == ToolListing(**listing)


def test_a_built_reading_is_the_constructed_one_with_fresh_defaults() -> None:
    view = span_view()
    fields: dict[str, Any] = dict(kind=Kind.CALL, dialect=Dialect.SEMCONV, side=Side.CLIENT)
    built, constructed = build_reading(**fields, span=view), Reading(**fields, span=view)
    assert built == constructed and repr(built) == repr(constructed)
    other = build_reading(**fields, span=view)
    # A default factory is called per object, as the constructor calls it.
    assert built.counts == {} and built.counts is not other.counts
    assert built.signals == Signals() and built.signals is not other.signals
    assert build_signals(rpc_code=-1, answered=True) == Signals(rpc_code=-1, answered=True)


def test_a_builder_refuses_what_the_constructor_refuses() -> None:
    with pytest.raises(TypeError):
        build_reading(kind=Kind.CALL)  # required fields missing
    with pytest.raises(TypeError):
        build_signals(no_such_field=1)
    with pytest.raises(TypeError):
        build_tool_call(*CALL.values())  # keyword-only, as the constructor

    @dataclasses.dataclass(slots=True)
    class Checked:
        x: int

        def __post_init__(self) -> None:
            pass

    with pytest.raises(TypeError):
        builder(Checked)  # it would be skipped


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
