"""The interpreter's settings while requests are worked on in threads (offloop.py)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator

import pytest

from processor import offloop
from processor.offloop import (
    ANALYSIS_SWITCH_S,
    DEFERRED_OLD_THRESHOLD,
    MAX_DEFERRAL_S,
    _FullCollectionsDeferred,
    _SwitchSooner,
)

THRESHOLDS = (2_000, 5, 100)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(*THRESHOLDS)
    yield
    gc.set_threshold(*before)


def test_full_collections_are_deferred_while_any_request_is_in_a_thread() -> None:
    deferred = _FullCollectionsDeferred(FakeClock())
    with deferred:
        assert gc.get_threshold() == (2_000, 5, DEFERRED_OLD_THRESHOLD)
        with deferred:  # a second request, in another thread
            assert gc.get_threshold() == (2_000, 5, DEFERRED_OLD_THRESHOLD)
        assert gc.get_threshold() == (2_000, 5, DEFERRED_OLD_THRESHOLD)  # the first goes on
    assert gc.get_threshold() == THRESHOLDS


def test_young_and_middle_collections_go_on_meanwhile() -> None:
    with _FullCollectionsDeferred(FakeClock()):
        young, middle, _ = gc.get_threshold()
    assert (young, middle) == THRESHOLDS[:2]


def test_a_deferral_lapses_after_its_longest_stretch_until_none_is_in_a_thread() -> None:
    """Requests that overlap without end (several senders of large requests) never leave
    a moment with none in a thread: after MAX_DEFERRAL_S full collections run again, and
    the next deferral starts only once every request then in a thread is done."""
    clock = FakeClock()
    deferred = _FullCollectionsDeferred(clock)
    deferred.__enter__()  # the first request
    clock.now = MAX_DEFERRAL_S / 2
    deferred.__enter__()  # the second, before the first is done
    deferred.__exit__()
    assert gc.get_threshold()[2] == DEFERRED_OLD_THRESHOLD
    clock.now = MAX_DEFERRAL_S
    deferred.__enter__()  # the third, overlapping the first
    deferred.__exit__()  # the first is done: the stretch is up
    assert gc.get_threshold() == THRESHOLDS
    deferred.__enter__()  # a fourth, while the third still runs: not deferred
    assert gc.get_threshold() == THRESHOLDS
    deferred.__exit__()
    deferred.__exit__()  # none is in a thread now
    assert gc.get_threshold() == THRESHOLDS
    clock.now += 1
    with deferred:  # the next is deferred again
        assert gc.get_threshold()[2] == DEFERRED_OLD_THRESHOLD
    assert gc.get_threshold() == THRESHOLDS


def test_the_thresholds_put_back_are_the_ones_set_when_the_deferral_began() -> None:
    deferred = _FullCollectionsDeferred(FakeClock())
    gc.set_threshold(700, 10, 10)
    with deferred:
        pass
    assert gc.get_threshold() == (700, 10, 10)


def test_the_switch_interval_is_shorter_while_any_request_is_in_a_thread() -> None:
    sooner = _SwitchSooner()
    before = sys.getswitchinterval()
    assert before > ANALYSIS_SWITCH_S
    with sooner:
        with sooner:
            assert sys.getswitchinterval() == ANALYSIS_SWITCH_S
        assert sys.getswitchinterval() == ANALYSIS_SWITCH_S
    assert sys.getswitchinterval() == before


def test_off_the_loop_sets_both_and_puts_both_back() -> None:
    before = (sys.getswitchinterval(), gc.get_threshold())
    with offloop.OFF_THE_LOOP:
        assert sys.getswitchinterval() == ANALYSIS_SWITCH_S
        assert gc.get_threshold()[2] == DEFERRED_OLD_THRESHOLD
    assert (sys.getswitchinterval(), gc.get_threshold()) == before
