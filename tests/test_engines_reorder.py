"""The reorder window: calls found under each of their keys, in arrival order, until the
window's time or its bound lets them go."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from processor.engines.reorder import ReorderWindow, Seen
from tests.engine_builders import tool_call


def seen(index: int, keys: tuple[str, ...], arrived_s: float = 0.0) -> Seen:
    call = dataclasses.replace(tool_call(index, turn=f"turn-{index}"), arrived_s=arrived_s)
    return Seen(call, keys)


def test_a_key_finds_its_calls_in_arrival_order_one_or_many() -> None:
    window = ReorderWindow(window_s=10.0, max_calls=100)
    first, second, third = seen(1, ("a", "shared")), seen(2, ("b", "shared")), seen(3, ("a",))
    for each in (first, second, third):
        window.add(each)
    assert list(window.under("shared")) == [first, second]
    assert list(window.under("a")) == [first, third]
    assert list(window.under("b")) == [second]
    assert list(window.under("none")) == []


def test_the_bound_and_the_window_let_the_oldest_go_under_every_key() -> None:
    window = ReorderWindow(window_s=10.0, max_calls=2)
    calls = [seen(i, ("all", f"own-{i}"), arrived_s=float(i)) for i in range(4)]
    for call in calls:
        window.add(call)
    assert len(window) == 2
    assert list(window.under("all")) == calls[2:]
    assert list(window.under("own-1")) == [] and list(window.under("own-3")) == [calls[3]]
    window.prune(12.5)  # the call that arrived at 3 s is still within 10 s of it
    assert list(window.under("all")) == [calls[3]]
    window.prune(20.0)
    assert len(window) == 0 and window._by_key == {}


@settings(max_examples=100, deadline=None, database=None)
@given(st.lists(st.sets(st.sampled_from("abcd"), min_size=1), max_size=40), st.integers(1, 6))
def test_each_key_holds_exactly_the_calls_held_that_have_it(
    key_sets: list[set[str]], max_calls: int
) -> None:
    window = ReorderWindow(window_s=1e9, max_calls=max_calls)
    added = [seen(i, tuple(sorted(keys))) for i, keys in enumerate(key_sets)]
    for call in added:
        window.add(call)
    held = added[-max_calls:]
    for key in "abcd":
        assert list(window.under(key)) == [c for c in held if key in c.keys]
