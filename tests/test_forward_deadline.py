"""The per-attempt deadline learnt from the next hop, on a fake clock."""

from __future__ import annotations

import pytest

from processor.forward.deadline import GROWTH, MARGIN, MEMORY_S, SAMPLES, AttemptDeadline


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def deadline(base_s: float = 5.0, max_s: float = 60.0) -> tuple[AttemptDeadline, Clock]:
    clock = Clock()
    return AttemptDeadline(base_s=base_s, max_s=max_s, clock=clock), clock


def attempts_until_answered(learnt: AttemptDeadline, latency_s: float) -> int:
    """One request sent to a next hop that always takes ``latency_s``: how many attempts
    (each one a copy the next hop received) until one waits long enough."""
    wait_s, sent = learnt.first_s(), 1
    while wait_s <= latency_s:
        wait_s = learnt.timed_out(wait_s)
        sent += 1
        assert sent < 100, "never waits long enough"
    learnt.answered(latency_s)
    return sent


def test_a_next_hop_that_answers_in_time_keeps_the_configured_deadline() -> None:
    learnt, _ = deadline()
    for _ in range(SAMPLES * 2):
        learnt.answered(0.2)
    assert learnt.first_s() == 5.0


@pytest.mark.parametrize(("slower", "most"), [(0.9, 1), (1.5, 2), (2.0, 3), (3.9, 3), (4.0, 4)])
def test_a_slow_next_hop_receives_a_request_a_bounded_number_of_times(
    slower: float, most: int
) -> None:
    learnt, _ = deadline()
    sent = attempts_until_answered(learnt, 5.0 * slower)
    assert sent == most  # 2 + floor(log2(slower)) from 1 x slower on: the documented bound
    # Once learnt, the next request goes once.
    assert attempts_until_answered(learnt, 5.0 * slower) == 1


def test_what_answers_took_sets_the_deadline_of_new_requests() -> None:
    learnt, _ = deadline()
    for n in range(SAMPLES):
        learnt.answered(4.0 if n % 20 else 9.0)  # 1 in 20 slower: the p95 sits on it
    assert learnt.first_s() == MARGIN * 9.0


def test_it_never_goes_past_the_maximum() -> None:
    learnt, _ = deadline(max_s=12.0)
    assert learnt.timed_out(5.0) == 10.0
    assert learnt.timed_out(10.0) == 12.0
    assert learnt.timed_out(12.0) == 12.0
    learnt.answered(30.0)
    assert learnt.first_s() == 12.0


def test_equal_bounds_turn_the_growth_off() -> None:
    learnt, _ = deadline(max_s=5.0)
    assert learnt.timed_out(5.0) == 5.0
    learnt.answered(20.0)
    assert learnt.first_s() == 5.0


def test_timeouts_of_the_same_deadline_from_many_consumers_grow_it_once() -> None:
    learnt, _ = deadline()
    for _ in range(10):  # ten consumers' first attempts, all of 5 s, time out together
        assert learnt.timed_out(5.0) == GROWTH * 5.0
    assert learnt.first_s() == 10.0


def test_a_next_hop_fast_again_gets_the_configured_deadline_back() -> None:
    learnt, clock = deadline()
    attempts_until_answered(learnt, 20.0)
    assert learnt.first_s() == 40.0
    clock.now += MEMORY_S - 1
    assert learnt.first_s() == 40.0  # a request's retries stay inside what is remembered
    clock.now += 1
    assert learnt.first_s() == 5.0
    assert learnt.timed_out(5.0) == 10.0  # an old timeout does not carry over either
