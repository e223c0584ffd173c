"""The enforcing replay: a call the breaker refuses is never made, so it is no evidence.

Each test plays the same calls into the plain engine (``Breaker``, as a harness that
ignores it) and into ``EnforcingBreaker``, and checks the difference the brief names: with
enforcement a turn's refused repeats do not open the circuit in that turn.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from mcp_breaker_client.shared.verdict import FailureClass, NeutralReason, Outcome

from processor.classify.events import ToolCall
from processor.config import BreakerConfig, Rule
from processor.engines.breaker import Breaker, CallDecision
from processor.engines.circuit import CircuitKey, Scope, State
from processor.offline.enforce import REFUSED, EnforcingBreaker
from tests.engine_builders import at_s, failed, tool_call

TOOL_KEY = CircuitKey(Scope.TOOL, "web/search")


def opened(decisions: list[CallDecision]) -> list[int]:
    """The index of each call whose decision opened a circuit."""
    return [
        n
        for n, d in enumerate(decisions)
        if any(t.target is State.OPEN and t.source is State.CLOSED for t in d.transitions)
    ]


def three_turns() -> list[ToolCall]:
    """Three turns, a minute apart, each repeating one transport failure three times."""
    return [
        failed(turn * 1 + k * 0.1, FailureClass.TRANSPORT, turn=f"t{turn}")
        for turn in range(3)
        for k in range(3)
    ]


def test_refused_repeats_are_no_evidence_so_the_circuit_opens_in_the_third_turn() -> None:
    calls = three_turns()
    plain = Breaker(BreakerConfig())
    ignored = [plain.observe(c) for c in calls]
    assert opened(ignored) == [2]  # the first turn's own repeats open it, in that turn

    enforcing = EnforcingBreaker(BreakerConfig())
    decisions = [enforcing.observe(c) for c in calls]
    assert opened(decisions) == [6]  # the third turn's failure: the third made
    made = [n for n, d in enumerate(decisions) if not d.dead_call]
    assert made == [0, 3, 6]
    for n in (1, 2, 4, 5, 7, 8):
        assert decisions[n].rule is Rule.TURN_TOOL and decisions[n].enforced
        assert decisions[n].repeat_of == calls[n - n % 3].span_ids[0]
    assert enforcing.refused == 6
    circuit = enforcing.circuits.peek(TOOL_KEY)
    assert circuit is not None and circuit.calls_and_failures() == (3, 3)


def test_a_call_in_flight_when_its_twin_failed_was_made_and_is_evidence() -> None:
    """Begun before the failure ended (two calls of one round side by side): no harness
    could refuse it. The engine's clock skew counts it as a dead call; it stays one, not
    refused, and its failure counts."""
    first = failed(0, FailureClass.TOOL_ERROR, duration_s=3)
    twin = replace(
        failed(0, FailureClass.TOOL_ERROR), start_ns=first.start_ns + 10**9, end_ns=first.end_ns + 1
    )
    enforcing = EnforcingBreaker(BreakerConfig())
    enforcing.observe(first)
    decision = enforcing.observe(twin)
    assert decision.dead_call and not decision.enforced  # dead, but made
    assert enforcing.refused == 0
    circuit = enforcing.circuits.peek(TOOL_KEY)
    assert circuit is not None and circuit.calls_and_failures() == (2, 2)


def test_a_half_open_circuit_with_its_permit_taken_refuses_and_takes_no_permit() -> None:
    """A probe is out (its permit taken, as the service's Check takes one for a harness
    whose call has not ended yet): the next call is refused, and its refusal takes no
    permit; a call with no outcome signal never takes one, so it goes, as in the engine."""
    config = BreakerConfig(open_jitter=0.0)
    enforcing = EnforcingBreaker(config)
    for turn in range(3):  # opened at minute 2, for open_base_s
        enforcing.observe(failed(turn, FailureClass.TRANSPORT, turn=f"t{turn}"))
    later = 2 + config.open_base_s / 60 + 1  # past the open period
    server = enforcing.circuits.peek(CircuitKey(Scope.SERVER, "web"))
    assert server is not None
    enforcing.machine.advance(server, at_s(later - 0.1))
    assert server.state is State.HALF_OPEN
    assert enforcing.machine.permit(server, at_s(later - 0.1))[1] is not None  # the probe
    refused = enforcing.observe(tool_call(later, turn="p2", tool="fetch"))
    assert refused.dead_call and refused.enforced and refused.rule is Rule.SERVER
    assert refused.state == State.HALF_OPEN.value and len(server.leases) == 1
    unknown = tool_call(later + 0.1, turn="p3", tool="fetch", outcome=Outcome.UNKNOWN)
    assert not enforcing.observe(unknown).dead_call


def test_a_refused_call_reaches_the_engine_as_the_client_records_a_refusal() -> None:
    assert REFUSED.outcome is Outcome.NEUTRAL
    assert REFUSED.neutral_reason is NeutralReason.REFUSED_BY_ADVISORY


def _traffic(seed: int) -> list[ToolCall]:
    """One call at a time (each begun after the last ended), over a few turns, tools and
    argument sets, failing, succeeding or neutral at random."""
    rng = random.Random(seed)
    calls, minute = [], 0.0
    for _ in range(60):
        minute += rng.choice((0.05, 0.5, 3.0, 9.0))
        kind = rng.random()
        common = {
            "turn": f"t{int(minute // 10)}",
            "tool": rng.choice(("search", "fetch")),
            "arguments": {"q": rng.choice("ab")},
            "duration_s": 1.0,
        }
        if kind < 0.5:
            cls = rng.choice((FailureClass.TRANSPORT, FailureClass.TOOL_ERROR))
            calls.append(failed(minute, cls, **common))
        elif kind < 0.9:
            calls.append(tool_call(minute, **common))
        else:
            calls.append(tool_call(minute, outcome=Outcome.UNKNOWN, **common))
    return calls


@pytest.mark.parametrize("seed", range(12))
def test_the_replay_is_the_engine_fed_what_an_enforcing_harness_would_have_sent(
    seed: int,
) -> None:
    """The property itself: the enforcing replay's decisions on the recorded calls are the
    plain engine's on the calls as enforcement sends them (each refused call a refusal),
    and no call it let through was one the engine would have refused."""
    config = BreakerConfig(open_jitter=0.0, open_base_s=60)
    recorded = _traffic(seed)
    enforcing = EnforcingBreaker(config)
    replayed = [enforcing.observe(c) for c in recorded]
    sent = [
        replace(c, verdict=REFUSED) if d.dead_call else c
        for c, d in zip(recorded, replayed, strict=True)
    ]
    plain = Breaker(config)
    online = [plain.observe(c) for c in sent]
    for call, ours, theirs in zip(recorded, replayed, online, strict=True):
        assert ours.transitions == theirs.transitions, call
        if not ours.dead_call:
            assert not theirs.dead_call  # made: the engine had no refusal for it either
            assert (ours.state, ours.rule, ours.probe) == (theirs.state, theirs.rule, theirs.probe)
    assert enforcing.refused == sum(d.dead_call for d in replayed)
    for circuit in plain.circuits.values():
        ours_circuit = enforcing.circuits.peek(circuit.key)
        assert ours_circuit is not None
        assert (ours_circuit.state, ours_circuit.calls_and_failures()) == (
            circuit.state,
            circuit.calls_and_failures(),
        )
