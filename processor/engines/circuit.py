"""One circuit: the across-turn state of a tool or a server, as an explicit state machine.

States are an enum, the allowed transitions are a table, and ``_transition`` is the only
place the state changes: it checks the table and returns exactly one Transition event.
Time is the span's, in seconds, passed in by the caller; a circuit never reads a clock.

    closed ──(failure ratio / consecutive failures / blast radius)──▶ open
    open ──(open period over)──▶ half-open
    half-open ──(success)──▶ closed          half-open ──(failure)──▶ open, for longer
    any ──(manual)──▶ forced open / forced closed ──(expiry or release)──▶ closed

Spans arrive out of order, so a circuit remembers its last few transitions: a call that
arrives after the circuit moved is judged by the state of its own time (``state_as_of``),
its outcome answers a probe only if it ended after the circuit went half-open, and an
outcome from before the circuit last closed is stale evidence, not counted.
"""

from __future__ import annotations

import enum
import hashlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from mcp_breaker_client.shared.cheap_dataclasses import slot_init

from processor.config import BreakerConfig
from processor.errors import IllegalTransition

MAX_HISTORY = 8  # transitions a circuit remembers, to judge late spans by their own time


class State(enum.StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"
    FORCED_OPEN = "forced_open"
    FORCED_CLOSED = "forced_closed"


class Trigger(enum.StrEnum):
    FAILURE_RATIO = "failure_ratio"
    CONSECUTIVE_FAILURES = "consecutive_failures"
    BLAST_RADIUS = "blast_radius"  # a server: most of its tools' circuits are open
    OPEN_PERIOD_OVER = "open_period_over"
    PROBE_SUCCEEDED = "probe_succeeded"
    PROBE_FAILED = "probe_failed"
    FORCED = "forced"
    FORCE_EXPIRED = "force_expired"
    RELEASED = "released"


_MANUAL = (State.FORCED_OPEN, State.FORCED_CLOSED)
ALLOWED_TRANSITIONS: frozenset[tuple[State, State]] = frozenset(
    {
        (State.CLOSED, State.OPEN),
        (State.OPEN, State.HALF_OPEN),
        (State.HALF_OPEN, State.CLOSED),
        (State.HALF_OPEN, State.OPEN),
        *((source, State.FORCED_OPEN) for source in State if source is not State.FORCED_OPEN),
        *((source, State.FORCED_CLOSED) for source in State if source is not State.FORCED_CLOSED),
        *((forced, State.CLOSED) for forced in _MANUAL),
    }
)
BLOCKING = frozenset({State.OPEN, State.FORCED_OPEN})
_LETS_THROUGH = (State.CLOSED, State.FORCED_CLOSED)  # every call, no permit needed
# Read off the enum once, for the tests every call makes (advance, record): on Python 3.11
# an enum member read off its class costs some 60 ns, a module name 10.
_CLOSED, _OPEN, _HALF_OPEN = State.CLOSED, State.OPEN, State.HALF_OPEN


class Scope(enum.StrEnum):
    TOOL = "tool"
    SERVER = "server"


class CircuitKey(NamedTuple):
    """A NamedTuple, not a dataclass: it is hashed several times per call, and a tuple's
    hash and equality are native."""

    scope: Scope
    name: str  # "server/tool" for a tool, "server" for a server
    tenant: str = ""  # tenants never share a circuit, even for servers of the same name


@dataclass(frozen=True, slots=True)
class FailureRecord:
    """The first failure of the current streak: the evidence a decision quotes."""

    at_s: float
    trace_id: bytes
    span_id: bytes
    failure_class: str
    excerpt: str


@slot_init  # a cheaper constructor, as for the events: one per move of a circuit
@dataclass(frozen=True, slots=True, kw_only=True)
class Transition:
    key: CircuitKey
    source: State
    target: State
    trigger: Trigger
    at_s: float
    reason: str = ""  # for manual control: who asked, and why


class Permit(enum.Enum):
    ALLOW = "allow"
    PROBE = "probe"  # half-open: this call is the one that tests the circuit
    DENY = "deny"


_ALLOW = Permit.ALLOW  # read once, as _CLOSED above: every call asks for a permit


@dataclass(slots=True)
class Circuit:
    key: CircuitKey
    state: State = State.CLOSED
    window: deque[tuple[float, bool]] = field(default_factory=deque)  # (at, failed)
    consecutive_failures: int = 0
    open_until_s: float = 0.0
    opened_count: int = 0  # opens since the last close: the backoff exponent
    forced_until_s: float = 0.0
    forced_reason: str = ""
    leases: dict[int, float] = field(default_factory=dict)  # probe permit id -> expiry
    first_failure: FailureRecord | None = None
    since_s: float | None = None  # when the current failure streak began
    last_s: float = 0.0  # the latest span time seen: the circuit's own clock
    server: str = ""  # a tool circuit's server, as the call named it
    # (when, state before) of the latest transitions, oldest first; and when it last closed.
    history: deque[tuple[float, State]] = field(default_factory=lambda: deque(maxlen=MAX_HISTORY))
    closed_at_s: float = float("-inf")
    last_success_s: float = float("-inf")  # the span time of the latest success recorded

    def calls_and_failures(self) -> tuple[int, int]:
        return len(self.window), sum(1 for _, failed in self.window if failed)

    @property
    def changed_s(self) -> float:
        """When the circuit last changed state (minus infinity: never)."""
        return self.history[-1][0] if self.history else float("-inf")

    def state_as_of(self, at_s: float) -> State:
        """The state the circuit was in at ``at_s``, as far as its history reaches."""
        history = self.history
        if not history or history[-1][0] <= at_s:  # not moved since: most calls
            return self.state
        state = self.state
        for when, before in reversed(history):
            if when <= at_s:
                break
            state = before
        return state


Jitter = Callable[[], float]  # a uniform draw from [0, 1)


def jitter_of(key: CircuitKey, opened_count: int, at_s: float) -> float:
    """The jitter of one open period, from [0, 1): drawn from what opened it, not from a
    random source, so every replica that applies the same events opens the circuit for
    the same time (and circuits opened together still spread out: their keys differ)."""
    seed = f"{key.tenant}|{key.scope.value}|{key.name}|{opened_count}|{at_s:.6f}".encode()
    return int.from_bytes(hashlib.blake2b(seed, digest_size=8).digest(), "big") / 2**64


class CircuitMachine:
    """The rules that move one circuit; shared by every circuit of a breaker."""

    def __init__(self, config: BreakerConfig, jitter: Jitter | None = None) -> None:
        """``jitter``: a fixed source for tests; by default it comes from ``jitter_of``."""
        self.config = config
        self._jitter = jitter
        self._next_lease = 0

    def _transition(
        self, circuit: Circuit, target: State, trigger: Trigger, at_s: float, reason: str = ""
    ) -> Transition:
        if (circuit.state, target) not in ALLOWED_TRANSITIONS:
            raise IllegalTransition("circuit", circuit.state, target)
        at_s = max(at_s, circuit.changed_s)  # a late span cannot move a circuit into its past
        circuit.history.append((at_s, circuit.state))
        event = Transition(
            key=circuit.key,
            source=circuit.state,
            target=target,
            trigger=trigger,
            at_s=at_s,
            reason=reason,
        )
        circuit.state = target
        circuit.leases.clear()
        if target is State.OPEN:
            circuit.opened_count += 1
            draw = (
                self._jitter()
                if self._jitter is not None
                else jitter_of(circuit.key, circuit.opened_count, at_s)
            )
            circuit.open_until_s = at_s + self.open_period_s(circuit.opened_count, draw)
        elif target is State.CLOSED:
            circuit.opened_count = 0
            circuit.consecutive_failures = 0
            circuit.first_failure = None
            circuit.since_s = None
            circuit.window.clear()
            circuit.closed_at_s = at_s
        return event

    def open_period_s(self, opened_count: int, draw: float) -> float:
        """The ``opened_count``-th open period in a row, ``draw`` from [0, 1) its jitter."""
        c = self.config
        base = min(c.open_base_s * c.open_multiplier ** (opened_count - 1), c.open_max_s)
        return base * (1 - c.open_jitter + 2 * c.open_jitter * draw)

    def advance(self, circuit: Circuit, now_s: float) -> list[Transition]:
        """Time-driven moves: an open period or a manual override that has run out."""
        events: list[Transition] = []
        if now_s > circuit.last_s:  # as max(), without the call: every call passes here
            circuit.last_s = now_s
        # Each move is dated when its time ran out, not when a span happened to notice.
        if circuit.state in _MANUAL and circuit.forced_until_s <= now_s:
            events.append(
                self._transition(
                    circuit, State.CLOSED, Trigger.FORCE_EXPIRED, circuit.forced_until_s
                )
            )
        if circuit.state is _OPEN and circuit.open_until_s <= now_s:
            events.append(
                self._transition(
                    circuit, State.HALF_OPEN, Trigger.OPEN_PERIOD_OVER, circuit.open_until_s
                )
            )
        if circuit.leases:
            for lease, expiry in list(circuit.leases.items()):
                if expiry <= now_s:
                    del circuit.leases[lease]  # an unanswered probe gives its permit back
        return events

    @staticmethod
    def state_at(circuit: Circuit, now_s: float) -> State:
        """The state ``advance`` would move the circuit to by ``now_s``, without moving it:
        for readers (metrics, advisories) that must not change what the next call sees."""
        if circuit.state in _MANUAL and circuit.forced_until_s <= now_s:
            return State.CLOSED
        if circuit.state is State.OPEN and circuit.open_until_s <= now_s:
            return State.HALF_OPEN
        return circuit.state

    def permit(self, circuit: Circuit, now_s: float) -> tuple[Permit, int | None]:
        """May a call go ahead now? A probe comes with a lease id, to be returned."""
        if circuit.state in _LETS_THROUGH:
            return _ALLOW, None
        if circuit.state is _HALF_OPEN and len(circuit.leases) < self.config.probe_permits:
            self._next_lease += 1
            circuit.leases[self._next_lease] = now_s + self.config.probe_lease_s
            return Permit.PROBE, self._next_lease
        return Permit.DENY, None

    def record(
        self,
        circuit: Circuit,
        failed: bool,
        at_s: float,
        failure: FailureRecord | None = None,
    ) -> list[Transition]:
        """A call's outcome, as of when it ended (neutral and unknown outcomes are never
        recorded)."""
        events = self.advance(circuit, at_s)
        if at_s < circuit.closed_at_s:
            return events  # from before the circuit last closed: that streak is over
        c = self.config
        # The window ends at the latest span time the circuit has seen, not at this call's:
        # an outcome replayed from long ago (a disk queue's backlog) is outside it.
        horizon = circuit.last_s - c.window_s
        if at_s < horizon:
            return events
        window = circuit.window
        window.append((at_s, failed))
        while window and (len(window) > c.max_window_calls or window[0][0] < horizon):
            window.popleft()
        # A failure that ended before a success already recorded: that success ended its
        # streak. It counts in the window's ratio, never as the latest of a run of failures.
        superseded = failed and at_s < circuit.last_success_s
        if not failed:
            circuit.consecutive_failures = 0
            if at_s > circuit.last_success_s:
                circuit.last_success_s = at_s
        elif not superseded:
            circuit.consecutive_failures += 1
            if circuit.first_failure is None and failure is not None:
                circuit.first_failure = failure
                circuit.since_s = failure.at_s
        if circuit.state is _HALF_OPEN and at_s >= circuit.changed_s:
            # Only a call that ended after the circuit went half-open answers its probe: a
            # late span from before then is old news.
            target, trigger = (
                (State.OPEN, Trigger.PROBE_FAILED)
                if failed
                else (State.CLOSED, Trigger.PROBE_SUCCEEDED)
            )
            events.append(self._transition(circuit, target, trigger, at_s))
        elif circuit.state is _CLOSED and failed:
            tripped = self._trips(circuit, ratio_only=superseded)
            if tripped is not None:
                events.append(self._transition(circuit, State.OPEN, tripped, at_s))
        elif circuit.state is _CLOSED:
            circuit.first_failure, circuit.since_s = None, None
        return events

    def trip(self, circuit: Circuit, trigger: Trigger, at_s: float) -> Transition:
        """Open a circuit on evidence from outside its own window (the blast radius)."""
        return self._transition(circuit, State.OPEN, trigger, at_s)

    def _trips(self, circuit: Circuit, *, ratio_only: bool = False) -> Trigger | None:
        c = self.config
        streak = c.consecutive_failures and circuit.consecutive_failures >= c.consecutive_failures
        if streak and not ratio_only:
            return Trigger.CONSECUTIVE_FAILURES
        calls, failures = circuit.calls_and_failures()
        if calls >= c.min_calls and failures / calls >= c.failure_ratio:
            return Trigger.FAILURE_RATIO
        return None

    def force(
        self, circuit: Circuit, target: State, until_s: float, reason: str, now_s: float
    ) -> Transition:
        if target not in _MANUAL:
            raise ValueError(f"force() takes forced_open or forced_closed, not {target}")
        if (circuit.state, target) not in ALLOWED_TRANSITIONS:  # before touching anything
            raise IllegalTransition("circuit", circuit.state, target)
        circuit.forced_until_s = until_s
        circuit.forced_reason = reason
        return self._transition(circuit, target, Trigger.FORCED, now_s, reason)

    def release(self, circuit: Circuit, reason: str, now_s: float) -> Transition | None:
        if circuit.state not in _MANUAL:
            return None
        return self._transition(circuit, State.CLOSED, Trigger.RELEASED, now_s, reason)
