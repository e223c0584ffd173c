"""The client's shared/cheap_dataclasses.py: the constructors made by ``slot_init`` and
the functions made by ``builder`` keep every promise a dataclass makes. (The engines'
classes built by ``slot_init``: tests/test_engines_breaker.py.)"""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest
from mcp_breaker_client.shared.cheap_dataclasses import builder
from mcp_breaker_client.shared.outcome import Signals, build_signals
from mcp_breaker_client.shared.verdict import UNKNOWN_VERDICT, Outcome, Verdict
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.classify.events import (
    Dialect,
    Side,
    ToolCall,
    ToolListing,
    build_tool_call,
    build_tool_listing,
)
from processor.classify.reading import Kind, Reading, build_reading
from processor.classify.spanview import SpanView

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
    return SpanView(name, Span.SPAN_KIND_CLIENT, 0, "", b"", b"", b"", 1, 2, {}, {}, (), {})


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
    assert built.verdict is UNKNOWN_VERDICT is other.verdict  # frozen: one for all
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


def test_events_stay_frozen_comparable_and_hashable() -> None:
    call = ToolCall(**CALL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.tool = "other"  # type: ignore[misc]
    assert call == ToolCall(**CALL) and hash(call) == hash(ToolCall(**CALL))
    assert call != ToolCall(**{**CALL, "tool": "other"})
    assert pickle.loads(pickle.dumps(call)) == call
    assert dataclasses.replace(call, tool="other").tool == "other"


def test_defaults_and_missing_arguments_are_a_dataclass_s() -> None:
    call = ToolCall(**CALL)
    assert (call.harness, call.tenant, call.arrived_s) == ("", "", 0.0)
    assert Verdict(outcome=Outcome.FAILED).failure_class is None
    with pytest.raises(TypeError):
        Verdict()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Verdict(Outcome.OK)  # type: ignore[misc]  # keyword-only, as declared
    with pytest.raises(TypeError):
        ToolListing(turn="t")  # type: ignore[call-arg]
