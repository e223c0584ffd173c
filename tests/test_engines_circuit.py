"""The across-turn circuit: its state machine, driven by span times on a fake clock.

Every test passes times in seconds and draws jitter from ``lambda: 0.5`` (no jitter at
all), so an open period is exactly ``open_base_s * open_multiplier ** n``, capped.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from processor.config import BreakerConfig
from processor.engines.circuit import (
    ALLOWED_TRANSITIONS,
    BLOCKING,
    Circuit,
    CircuitKey,
    CircuitMachine,
    FailureRecord,
    Permit,
    Scope,
    State,
    Transition,
    Trigger,
)
from processor.errors import IllegalTransition

T0 = 10_000.0  # a span time in seconds; any value works, the machine never reads a clock
KEY = CircuitKey(Scope.TOOL, "playwright/playwright__browser_navigate")
NO_JITTER = 0.5  # the middle of [1 - j, 1 + j]: the undisturbed period
PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None)


def machine_for(draw: float = NO_JITTER, **overrides: object) -> CircuitMachine:
    """A machine over the default config with ``overrides``, and a fixed jitter draw."""
    return CircuitMachine(replace(BreakerConfig(), **overrides), jitter=lambda: draw)


def failure_at(at_s: float) -> FailureRecord:
    return FailureRecord(
        at_s=at_s,
        trace_id=b"\x01" * 16,
        span_id=int(at_s * 1000).to_bytes(8, "big"),
        failure_class="transport",
        excerpt="upstream MCP session is closed",
    )


def fail(machine: CircuitMachine, circuit: Circuit, at_s: float) -> list[Transition]:
    return machine.record(circuit, True, at_s, failure_at(at_s))


def succeed(machine: CircuitMachine, circuit: Circuit, at_s: float) -> list[Transition]:
    return machine.record(circuit, False, at_s)


def opened(machine: CircuitMachine, at_s: float = T0) -> Circuit:
    """A circuit that has just opened at ``at_s`` on consecutive failures."""
    circuit = Circuit(KEY)
    n = machine.config.consecutive_failures
    for i in range(n):
        fail(machine, circuit, at_s - (n - 1 - i))
    assert circuit.state is State.OPEN
    return circuit


def half_opened(machine: CircuitMachine, at_s: float = T0) -> Circuit:
    """A circuit whose first open period ended at ``at_s``."""
    circuit = opened(machine, at_s - machine.config.open_base_s)
    machine.advance(circuit, at_s)
    assert circuit.state is State.HALF_OPEN
    return circuit


def pairs(transitions: list[Transition]) -> list[tuple[State, State]]:
    return [(t.source, t.target) for t in transitions]


# --- closed -> open ---------------------------------------------------------------------------


def test_consecutive_failures_open_a_closed_circuit() -> None:
    """The fast path: the third failure in a row opens the circuit, before min_calls."""
    machine = machine_for(consecutive_failures=3, min_calls=50)
    circuit = Circuit(KEY)
    assert fail(machine, circuit, T0) == []
    assert fail(machine, circuit, T0 + 60) == []
    [event] = fail(machine, circuit, T0 + 120)
    assert (event.source, event.target, event.trigger) == (
        State.CLOSED,
        State.OPEN,
        Trigger.CONSECUTIVE_FAILURES,
    )
    assert event.at_s == T0 + 120
    assert circuit.state is State.OPEN


def test_a_success_resets_the_consecutive_count() -> None:
    """Two failures, a success, two failures: never three in a row, so still closed."""
    machine = machine_for(consecutive_failures=3, min_calls=50)
    circuit = Circuit(KEY)
    for at, failed in enumerate((True, True, False, True, True)):
        machine.record(circuit, failed, T0 + at)
    assert circuit.state is State.CLOSED
    assert circuit.consecutive_failures == 2


def test_the_failure_ratio_over_min_calls_opens_the_circuit() -> None:
    """With the fast path off, half the calls failing over four calls opens it."""
    machine = machine_for(consecutive_failures=0, min_calls=4, failure_ratio=0.5)
    circuit = Circuit(KEY)
    assert succeed(machine, circuit, T0) == []
    assert fail(machine, circuit, T0 + 60) == []
    assert succeed(machine, circuit, T0 + 120) == []
    [event] = fail(machine, circuit, T0 + 180)
    assert event.trigger is Trigger.FAILURE_RATIO
    assert circuit.state is State.OPEN


def test_a_ratio_below_the_threshold_keeps_the_circuit_closed() -> None:
    """Only failures open it at ratio 1.0: one success among many failures holds it closed."""
    machine = machine_for(consecutive_failures=0, min_calls=3, failure_ratio=1.0)
    circuit = Circuit(KEY)
    succeed(machine, circuit, T0)
    for i in range(1, 10):
        assert fail(machine, circuit, T0 + i) == []
    assert circuit.state is State.CLOSED


def test_failures_that_rolled_out_of_the_window_do_not_open_the_circuit() -> None:
    """Two failures more than window_s apart plus one more are not three in the window."""
    machine = machine_for(consecutive_failures=0, min_calls=3, window_s=3600.0)
    circuit = Circuit(KEY)
    fail(machine, circuit, T0)
    fail(machine, circuit, T0 + 1800)
    assert fail(machine, circuit, T0 + 3660) == []  # the first one is out of the window now
    assert circuit.calls_and_failures() == (2, 2)
    assert circuit.state is State.CLOSED
    [event] = fail(machine, circuit, T0 + 3700)  # three within the hour again
    assert event.trigger is Trigger.FAILURE_RATIO


def test_failures_replayed_from_before_the_latest_success_do_not_open_the_circuit() -> None:
    """A disk queue's backlog delivers three failures from before two successes already
    recorded: the successes ended that streak, so the tool they show working stays open
    to calls. The failures still count in the window."""
    machine = machine_for(consecutive_failures=3, min_calls=3, failure_ratio=1.0)
    circuit = Circuit(KEY)
    succeed(machine, circuit, T0 + 90)
    succeed(machine, circuit, T0 + 115)
    for at in (T0, T0 + 1, T0 + 2):
        assert fail(machine, circuit, at) == []
    assert circuit.state is State.CLOSED
    assert circuit.consecutive_failures == 0
    assert circuit.first_failure is None
    assert circuit.calls_and_failures() == (5, 3)
    # Failures after the latest success are a streak again.
    for at in (T0 + 120, T0 + 121):
        assert fail(machine, circuit, at) == []
    [event] = fail(machine, circuit, T0 + 122)
    assert event.trigger is Trigger.CONSECUTIVE_FAILURES


def test_a_late_failure_still_trips_the_ratio_it_completes() -> None:
    machine = machine_for(consecutive_failures=0, min_calls=4, failure_ratio=0.5)
    circuit = Circuit(KEY)
    fail(machine, circuit, T0 + 10)
    succeed(machine, circuit, T0 + 20)
    succeed(machine, circuit, T0 + 30)
    [event] = fail(machine, circuit, T0)  # before both successes: 2 of 4 in the window
    assert event.trigger is Trigger.FAILURE_RATIO


def test_outcomes_older_than_the_window_before_the_latest_seen_are_not_counted() -> None:
    """The window ends at the latest span time the circuit has seen: failures replayed from
    two hours ago are outside an hour's window, whatever order they come in."""
    machine = machine_for(consecutive_failures=3, min_calls=3, window_s=3600.0)
    circuit = Circuit(KEY)
    succeed(machine, circuit, T0 + 7200)
    for at in (T0, T0 + 1, T0 + 2):
        assert fail(machine, circuit, at) == []
    assert circuit.calls_and_failures() == (1, 0)
    assert circuit.state is State.CLOSED


def test_below_min_calls_nothing_opens_with_the_fast_path_off() -> None:
    """consecutive_failures=0 turns the fast path off: four failures of five needed stay shut."""
    machine = machine_for(consecutive_failures=0, min_calls=5)
    circuit = Circuit(KEY)
    for i in range(4):
        assert fail(machine, circuit, T0 + i) == []
    assert circuit.state is State.CLOSED
    [event] = fail(machine, circuit, T0 + 4)
    assert event.trigger is Trigger.FAILURE_RATIO


def test_the_first_failure_of_the_streak_is_kept_as_evidence() -> None:
    """The record quoted by a refusal is the streak's first failure, and since_s its time."""
    machine = machine_for()
    circuit = opened(machine, T0)
    assert circuit.first_failure is not None
    assert circuit.first_failure.at_s == T0 - 2
    assert circuit.since_s == T0 - 2


def test_a_success_while_closed_clears_the_streak_evidence() -> None:
    """After a success, the next failure starts a new streak with its own evidence."""
    machine = machine_for()
    circuit = Circuit(KEY)
    fail(machine, circuit, T0)
    succeed(machine, circuit, T0 + 10)
    assert circuit.first_failure is None
    assert circuit.since_s is None
    fail(machine, circuit, T0 + 20)
    assert circuit.since_s == T0 + 20


# --- open -> half-open -> closed or open ------------------------------------------------------


def test_an_open_circuit_denies_calls() -> None:
    """Open means no call goes ahead, not even a probe."""
    machine = machine_for()
    circuit = opened(machine)
    assert machine.permit(circuit, T0 + 1) == (Permit.DENY, None)


def test_an_open_circuit_half_opens_only_once_its_open_period_has_passed() -> None:
    """advance() before open_until_s changes nothing; at open_until_s it half-opens."""
    machine = machine_for(open_base_s=300.0)
    circuit = opened(machine, T0)
    assert circuit.open_until_s == T0 + 300
    assert machine.advance(circuit, T0 + 299.9) == []
    assert circuit.state is State.OPEN
    [event] = machine.advance(circuit, T0 + 300)
    assert (event.source, event.target, event.trigger) == (
        State.OPEN,
        State.HALF_OPEN,
        Trigger.OPEN_PERIOD_OVER,
    )
    assert circuit.state is State.HALF_OPEN


def test_a_success_in_half_open_closes() -> None:
    """A probe that succeeds closes the circuit and forgets the failures and the backoff."""
    machine = machine_for()
    circuit = half_opened(machine)
    [event] = succeed(machine, circuit, T0 + 5)
    assert (event.source, event.target, event.trigger) == (
        State.HALF_OPEN,
        State.CLOSED,
        Trigger.PROBE_SUCCEEDED,
    )
    assert circuit.state is State.CLOSED
    assert circuit.calls_and_failures() == (0, 0)
    assert circuit.consecutive_failures == 0
    assert circuit.opened_count == 0
    assert circuit.first_failure is None


def test_a_failure_in_half_open_reopens_for_twice_as_long() -> None:
    """The second open period is open_multiplier times the first."""
    machine = machine_for(open_base_s=300.0, open_multiplier=2.0)
    circuit = half_opened(machine)
    [event] = fail(machine, circuit, T0 + 5)
    assert (event.source, event.target, event.trigger) == (
        State.HALF_OPEN,
        State.OPEN,
        Trigger.PROBE_FAILED,
    )
    assert circuit.open_until_s - (T0 + 5) == 600.0


def test_open_periods_grow_exponentially_up_to_the_cap() -> None:
    """300, 600, 1200, 2400, then the 3600 s cap, probe failure after probe failure."""
    machine = machine_for(open_base_s=300.0, open_multiplier=2.0, open_max_s=3600.0)
    circuit = opened(machine, T0)
    periods = [circuit.open_until_s - T0]
    now = T0
    for _ in range(5):
        now = circuit.open_until_s
        machine.advance(circuit, now)
        fail(machine, circuit, now + 1)
        periods.append(circuit.open_until_s - (now + 1))
    assert periods == [300.0, 600.0, 1200.0, 2400.0, 3600.0, 3600.0]


def test_a_close_resets_the_backoff() -> None:
    """After a successful probe, the next open period is the base one again."""
    machine = machine_for(open_base_s=300.0)
    circuit = half_opened(machine)
    fail(machine, circuit, T0 + 1)  # 600 s now
    machine.advance(circuit, circuit.open_until_s)
    succeed(machine, circuit, circuit.open_until_s + 1)
    later = T0 + 10_000
    for i in range(3):
        fail(machine, circuit, later + i)
    assert circuit.open_until_s - (later + 2) == 300.0


@pytest.mark.parametrize(
    "draw",
    [0.0, 0.25, 0.5, 0.75, 0.999_999],
    ids=["lowest", "low", "middle", "high", "highest"],
)
@pytest.mark.parametrize("opened_count", [1, 2, 5, 9], ids=lambda n: f"open-{n}")
def test_jitter_keeps_each_open_period_within_plus_or_minus_open_jitter(
    draw: float, opened_count: int
) -> None:
    """A period d is drawn from [d(1-j), d(1+j)); d is capped at open_max_s first."""
    machine = machine_for(draw, open_base_s=300.0, open_max_s=3600.0, open_jitter=0.1)
    nominal = min(300.0 * 2.0 ** (opened_count - 1), 3600.0)
    period = machine.open_period_s(opened_count, draw)
    assert nominal * 0.9 <= period < nominal * 1.1
    assert period == pytest.approx(nominal * (0.9 + 0.2 * draw))


@PROPERTY_SETTINGS
@given(
    draw=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
    opened_count=st.integers(min_value=1, max_value=40),
    jitter=st.floats(min_value=0.0, max_value=0.99),
)
def test_no_open_period_leaves_its_jitter_band(
    draw: float, opened_count: int, jitter: float
) -> None:
    """Whatever the draw and the exponent, the period stays within the capped band."""
    machine = machine_for(draw, open_base_s=300.0, open_max_s=3600.0, open_jitter=jitter)
    nominal = min(300.0 * 2.0 ** (opened_count - 1), 3600.0)
    period = machine.open_period_s(opened_count, draw)
    assert nominal * (1 - jitter) - 1e-9 <= period <= nominal * (1 + jitter) + 1e-9


# --- probe permits ----------------------------------------------------------------------------


@pytest.mark.parametrize("permits", [1, 2, 3], ids=lambda n: f"{n}-permits")
def test_half_open_grants_at_most_probe_permits_concurrent_probes(permits: int) -> None:
    """Each probe holds a lease; with all leases out, the next call is denied."""
    machine = machine_for(probe_permits=permits)
    circuit = half_opened(machine)
    grants = [machine.permit(circuit, T0 + i) for i in range(permits)]
    assert [permit for permit, _ in grants] == [Permit.PROBE] * permits
    assert len({lease for _, lease in grants}) == permits
    assert machine.permit(circuit, T0 + permits) == (Permit.DENY, None)
    assert len(circuit.leases) == permits


def test_an_expired_probe_lease_gives_its_permit_back() -> None:
    """An unanswered probe's lease runs out after probe_lease_s; then another may probe."""
    machine = machine_for(probe_permits=1, probe_lease_s=120.0)
    circuit = half_opened(machine)
    permit, lease = machine.permit(circuit, T0)
    assert permit is Permit.PROBE
    machine.advance(circuit, T0 + 119)
    assert machine.permit(circuit, T0 + 119) == (Permit.DENY, None)
    machine.advance(circuit, T0 + 120)
    assert lease not in circuit.leases
    permit, second = machine.permit(circuit, T0 + 120)
    assert permit is Permit.PROBE
    assert second != lease
    assert circuit.state is State.HALF_OPEN


def test_a_probes_outcome_returns_every_lease() -> None:
    """Leaving half-open, by success or failure, clears the leases it held."""
    machine = machine_for(probe_permits=2)
    circuit = half_opened(machine)
    machine.permit(circuit, T0)
    machine.permit(circuit, T0)
    fail(machine, circuit, T0 + 1)
    assert circuit.leases == {}


@pytest.mark.parametrize(
    ("state", "permit"),
    [
        (State.CLOSED, Permit.ALLOW),
        (State.FORCED_CLOSED, Permit.ALLOW),
        (State.OPEN, Permit.DENY),
        (State.FORCED_OPEN, Permit.DENY),
    ],
    ids=["closed", "forced-closed", "open", "forced-open"],
)
def test_closed_states_allow_and_open_states_deny(state: State, permit: Permit) -> None:
    """Outside half-open a permit is a plain yes or no, with no lease."""
    machine = machine_for()
    circuit = Circuit(KEY, state=state)
    assert machine.permit(circuit, T0) == (permit, None)
    assert (state in BLOCKING) is (permit is Permit.DENY)


# --- manual control ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "permit"),
    [(State.FORCED_OPEN, Permit.DENY), (State.FORCED_CLOSED, Permit.ALLOW)],
    ids=["forced-open", "forced-closed"],
)
def test_a_forced_circuit_closes_when_its_expiry_passes(target: State, permit: Permit) -> None:
    """A manual override holds until its expiry, then the circuit closes (force_expired)."""
    machine = machine_for()
    circuit = Circuit(KEY)
    event = machine.force(circuit, target, T0 + 600, "incident #897", T0)
    assert (event.source, event.target, event.trigger) == (State.CLOSED, target, Trigger.FORCED)
    assert event.reason == "incident #897"
    assert circuit.forced_reason == "incident #897"
    assert machine.permit(circuit, T0 + 1) == (permit, None)
    assert machine.advance(circuit, T0 + 599) == []
    assert circuit.state is target
    [expired] = machine.advance(circuit, T0 + 600)
    assert (expired.source, expired.target, expired.trigger) == (
        target,
        State.CLOSED,
        Trigger.FORCE_EXPIRED,
    )
    assert machine.permit(circuit, T0 + 600) == (Permit.ALLOW, None)


def test_failures_while_forced_closed_open_nothing() -> None:
    """Forced closed lets every call through, however many fail."""
    machine = machine_for()
    circuit = Circuit(KEY)
    machine.force(circuit, State.FORCED_CLOSED, T0 + 3600, "let it through", T0)
    for i in range(10):
        assert fail(machine, circuit, T0 + i) == []
    assert circuit.state is State.FORCED_CLOSED


def test_a_success_while_forced_open_closes_nothing() -> None:
    """Forced open holds until its expiry or a release, whatever the calls say."""
    machine = machine_for()
    circuit = Circuit(KEY)
    machine.force(circuit, State.FORCED_OPEN, T0 + 3600, "maintenance", T0)
    assert succeed(machine, circuit, T0 + 1) == []
    assert circuit.state is State.FORCED_OPEN


@pytest.mark.parametrize(
    "target", [State.FORCED_OPEN, State.FORCED_CLOSED], ids=["forced-open", "forced-closed"]
)
def test_release_closes_a_forced_circuit(target: State) -> None:
    """release() ends an override early, with its own trigger and reason."""
    machine = machine_for()
    circuit = opened(machine)
    machine.force(circuit, target, T0 + 3600, "operator", T0 + 1)
    event = machine.release(circuit, "fixed upstream", T0 + 2)
    assert event is not None
    assert (event.source, event.target, event.trigger, event.reason) == (
        target,
        State.CLOSED,
        Trigger.RELEASED,
        "fixed upstream",
    )
    assert circuit.state is State.CLOSED
    assert circuit.opened_count == 0


@pytest.mark.parametrize(
    "state", [State.CLOSED, State.OPEN, State.HALF_OPEN], ids=["closed", "open", "half-open"]
)
def test_release_of_a_circuit_not_forced_does_nothing(state: State) -> None:
    """Only a manual override can be released; anything else is left as it is."""
    machine = machine_for()
    circuit = Circuit(KEY, state=state)
    assert machine.release(circuit, "nothing to release", T0) is None
    assert circuit.state is state


@pytest.mark.parametrize(
    "target", [State.CLOSED, State.OPEN, State.HALF_OPEN], ids=["closed", "open", "half-open"]
)
def test_force_takes_only_the_forced_states(target: State) -> None:
    """force() is manual control; the automatic states are not for it."""
    machine = machine_for()
    with pytest.raises(ValueError, match="forced_open or forced_closed"):
        machine.force(Circuit(KEY), target, T0 + 60, "no", T0)


def test_a_refused_re_force_leaves_the_override_as_it_was() -> None:
    """Forcing open a circuit already forced open raises, and must not move its expiry."""
    machine = machine_for()
    circuit = Circuit(KEY)
    machine.force(circuit, State.FORCED_OPEN, T0 + 600, "incident #897", T0)
    with pytest.raises(IllegalTransition):
        machine.force(circuit, State.FORCED_OPEN, T0 + 86_400, "someone else", T0 + 1)
    assert circuit.forced_until_s == T0 + 600
    assert circuit.forced_reason == "incident #897"


# --- the transition table ---------------------------------------------------------------------

ILLEGAL = sorted(
    (pair for pair in itertools.product(State, State) if pair not in ALLOWED_TRANSITIONS),
    key=lambda pair: (pair[0].value, pair[1].value),
)


@pytest.mark.parametrize(
    ("source", "target"), ILLEGAL, ids=[f"{s.value}->{t.value}" for s, t in ILLEGAL]
)
def test_a_transition_not_in_the_table_raises_illegal_transition(
    source: State, target: State
) -> None:
    """_transition is the one place the state changes, and it refuses what the table lacks."""
    machine = machine_for()
    circuit = Circuit(KEY, state=source)
    with pytest.raises(IllegalTransition) as raised:
        machine._transition(circuit, target, Trigger.FORCED, T0)
    assert (raised.value.source, raised.value.target) == (source, target)
    assert circuit.state is source


def test_closed_to_half_open_is_not_in_the_table() -> None:
    """Half-open is reached only from open: the named example of an illegal move."""
    assert (State.CLOSED, State.HALF_OPEN) not in ALLOWED_TRANSITIONS
    with pytest.raises(IllegalTransition):
        machine_for()._transition(Circuit(KEY), State.HALF_OPEN, Trigger.OPEN_PERIOD_OVER, T0)


def test_every_transition_of_a_full_life_is_in_the_table() -> None:
    """Open, probe-fail, probe-succeed, force, expire, force, release: all table moves."""
    machine = machine_for()
    circuit = Circuit(KEY)
    events: list[Transition] = []
    for i in range(3):
        events += fail(machine, circuit, T0 + i)
    events += machine.advance(circuit, circuit.open_until_s)
    events += fail(machine, circuit, circuit.open_until_s)
    events += machine.advance(circuit, circuit.open_until_s)
    events += succeed(machine, circuit, circuit.open_until_s + 1)
    now = circuit.last_s
    events.append(machine.force(circuit, State.FORCED_OPEN, now + 60, "a", now))
    events.append(machine.force(circuit, State.FORCED_CLOSED, now + 120, "b", now + 1))
    events += machine.advance(circuit, now + 120)
    events.append(machine.force(circuit, State.FORCED_OPEN, now + 999, "c", now + 121))
    released = machine.release(circuit, "d", now + 122)
    assert released is not None
    events.append(released)
    assert pairs(events) == [
        (State.CLOSED, State.OPEN),
        (State.OPEN, State.HALF_OPEN),
        (State.HALF_OPEN, State.OPEN),
        (State.OPEN, State.HALF_OPEN),
        (State.HALF_OPEN, State.CLOSED),
        (State.CLOSED, State.FORCED_OPEN),
        (State.FORCED_OPEN, State.FORCED_CLOSED),
        (State.FORCED_CLOSED, State.CLOSED),
        (State.CLOSED, State.FORCED_OPEN),
        (State.FORCED_OPEN, State.CLOSED),
    ]
    assert all(pair in ALLOWED_TRANSITIONS for pair in pairs(events))
    assert all(event.key == KEY for event in events)


# --- the window -------------------------------------------------------------------------------


def test_the_window_never_holds_more_than_max_window_calls() -> None:
    """The memory bound per key holds after every record, oldest calls dropped first."""
    machine = machine_for(max_window_calls=5)
    circuit = Circuit(KEY)
    for i in range(40):
        machine.record(circuit, i % 3 == 0, T0 + i)
        assert len(circuit.window) <= 5
    assert [at for at, _ in circuit.window] == [T0 + i for i in range(35, 40)]


# --- the stateful property --------------------------------------------------------------------

SHORT_DELTAS = st.sampled_from([0.0, 1.0, 10.0, 30.0, 59.0, 60.0, 61.0])  # between calls
PERMIT_DELTAS = st.sampled_from([0.0, 1.0, 10.0, 30.0])  # calls asking at about the same time
LONG_DELTAS = st.sampled_from([60.0, 119.0, 120.0, 300.0, 480.0, 900.0, 4000.0])  # idle time
STATEFUL_CONFIG = BreakerConfig(
    window_s=600.0,
    max_window_calls=6,
    min_calls=3,
    failure_ratio=0.6,
    consecutive_failures=2,
    open_base_s=60.0,
    open_multiplier=2.0,
    open_max_s=480.0,
    open_jitter=0.1,
    probe_permits=2,
    probe_lease_s=60.0,
)


class CircuitRules(RuleBasedStateMachine):
    """One circuit and its machine, driven by any sequence of outcomes, time and control."""

    def __init__(self) -> None:
        super().__init__()
        self.machine = CircuitMachine(STATEFUL_CONFIG, jitter=lambda: NO_JITTER)
        self.circuit = Circuit(KEY)
        self.now = T0

    def check(self, before: State, events: list[Transition]) -> None:
        """Every event is an allowed move and the events chain from before to after."""
        state = before
        for event in events:
            assert (event.source, event.target) in ALLOWED_TRANSITIONS
            assert event.source is state
            assert event.key == KEY
            state = event.target
        assert state is self.circuit.state

    def record(self, delta: float, failed: bool) -> None:
        self.now += delta
        before = self.circuit.state
        probing = before is State.HALF_OPEN or (
            before is State.OPEN and self.circuit.open_until_s <= self.now
        )
        failure = failure_at(self.now) if failed else None
        events = self.machine.record(self.circuit, failed, self.now, failure)
        self.check(before, events)
        if probing:
            assert events[-1].source is State.HALF_OPEN
            assert self.circuit.state is (State.OPEN if failed else State.CLOSED)
        if events and events[-1].target is State.OPEN:
            assert self.circuit.open_until_s > self.now

    @rule(delta=SHORT_DELTAS)
    def record_a_success(self, delta: float) -> None:
        self.record(delta, failed=False)

    @rule(delta=SHORT_DELTAS)
    def record_a_failure(self, delta: float) -> None:
        self.record(delta, failed=True)

    @rule(delta=LONG_DELTAS)
    def advance(self, delta: float) -> None:
        self.now += delta
        before = self.circuit.state
        events = self.machine.advance(self.circuit, self.now)
        self.check(before, events)
        assert len(events) <= 1

    @rule(delta=PERMIT_DELTAS)
    def ask_for_a_permit(self, delta: float) -> None:
        self.now += delta
        before = self.circuit.state
        self.check(before, self.machine.advance(self.circuit, self.now))
        state = self.circuit.state
        live = len(self.circuit.leases)
        permit, lease = self.machine.permit(self.circuit, self.now)
        if state in (State.CLOSED, State.FORCED_CLOSED):
            assert (permit, lease) == (Permit.ALLOW, None)
        elif state is State.HALF_OPEN and live < STATEFUL_CONFIG.probe_permits:
            assert permit is Permit.PROBE
            assert lease in self.circuit.leases
        else:
            assert (permit, lease) == (Permit.DENY, None)
        assert self.circuit.state is state

    @rule(
        action=st.sampled_from([State.FORCED_OPEN, State.FORCED_CLOSED, None]),
        for_s=st.sampled_from([0.0, 60.0, 600.0]),
    )
    def manual_control(self, action: State | None, for_s: float) -> None:
        """Force open, force closed (None: release), as an operator would."""
        if action is None:
            self.release()
        else:
            self.force(action, for_s)

    def force(self, manual: State, for_s: float) -> None:
        before = self.circuit.state
        if before is manual:
            with pytest.raises(IllegalTransition):
                self.machine.force(self.circuit, manual, self.now + for_s, "again", self.now)
            assert self.circuit.state is before
            return
        event = self.machine.force(self.circuit, manual, self.now + for_s, "stateful", self.now)
        self.check(before, [event])
        assert event.trigger is Trigger.FORCED

    def release(self) -> None:
        before = self.circuit.state
        event = self.machine.release(self.circuit, "stateful", self.now)
        if before in (State.FORCED_OPEN, State.FORCED_CLOSED):
            assert event is not None
            self.check(before, [event])
            assert self.circuit.state is State.CLOSED
        else:
            assert event is None
            assert self.circuit.state is before

    @invariant()
    def probes_never_exceed_the_permits(self) -> None:
        if self.circuit.state is State.HALF_OPEN:
            assert len(self.circuit.leases) <= STATEFUL_CONFIG.probe_permits
        else:
            assert self.circuit.leases == {}

    @invariant()
    def the_window_is_bounded(self) -> None:
        assert len(self.circuit.window) <= STATEFUL_CONFIG.max_window_calls

    @invariant()
    def closed_means_no_backoff(self) -> None:
        if self.circuit.state is State.CLOSED:
            assert self.circuit.opened_count == 0


def test_the_circuit_keeps_its_invariants_under_any_sequence_of_events() -> None:
    """Allowed moves, one event per change, bounded probes, and a half-open success closes."""
    run_state_machine_as_test(
        CircuitRules,
        settings=settings(
            max_examples=80,
            stateful_step_count=40,
            deadline=None,
            derandomize=True,
            database=None,
        ),
    )


def test_the_default_jitter_is_the_same_wherever_the_same_events_are_applied() -> None:
    """Replicas apply the same events: their circuits must open for the same time. The
    default jitter comes from the circuit, how many times it opened and when, so two
    machines agree, and two circuits opened at the same instant still spread out."""
    from processor.engines.circuit import jitter_of

    config = replace(STATEFUL_CONFIG, consecutive_failures=1)
    other = CircuitKey(Scope.SERVER, "elsewhere")
    circuits = [Circuit(KEY), Circuit(KEY), Circuit(other)]
    for machine, circuit in zip(
        [CircuitMachine(config), CircuitMachine(config), CircuitMachine(config)],
        circuits,
        strict=True,
    ):
        machine.record(circuit, True, T0, failure_at(T0))
    first, twin, elsewhere = (c.open_until_s for c in circuits)
    assert first == twin
    assert first != elsewhere
    draws = {jitter_of(KEY, n, T0 + n) for n in range(1, 200)}
    assert len(draws) == 199 and all(0 <= d < 1 for d in draws)
