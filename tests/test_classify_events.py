"""The event model (processor/classify/events.py): its faster constructor keeps every
promise a dataclass makes."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from processor.classify.events import Dialect, Outcome, ToolCall, ToolListing, Verdict


def a_call(**changes: object) -> ToolCall:
    values: dict[str, object] = dict(
        turn="turn-1",
        round=None,
        server="weather",
        tool="get_weather",
        fingerprint=None,
        verdict=Verdict(outcome=Outcome.OK),
        start_ns=1,
        end_ns=2,
        trace_id=b"\x01" * 16,
        span_ids=(b"\x02" * 8,),
        dialect=Dialect.MCP_SDK,
    )
    values.update(changes)
    return ToolCall(**values)  # type: ignore[arg-type]


def test_events_stay_frozen_comparable_and_hashable() -> None:
    call = a_call()
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.tool = "other"  # type: ignore[misc]
    assert call == a_call() and hash(call) == hash(a_call())
    assert call != a_call(tool="other")
    assert pickle.loads(pickle.dumps(call)) == call
    assert dataclasses.replace(call, tool="other").tool == "other"


def test_defaults_and_missing_arguments_are_a_dataclass_s() -> None:
    call = a_call()
    assert (call.harness, call.tenant, call.arrived_s) == ("", "", 0.0)
    assert Verdict(outcome=Outcome.FAILED).failure_class is None
    with pytest.raises(TypeError):
        Verdict()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Verdict(Outcome.OK)  # type: ignore[misc]  # keyword-only, as declared
    with pytest.raises(TypeError):
        ToolListing(turn="t")  # type: ignore[call-arg]
