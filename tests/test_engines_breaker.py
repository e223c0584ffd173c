"""The breaker: a decision per call, from the turn's blocks and the tool and server circuits.

The seed incident (sirens-echo #943) is replayed call by call: a dead Playwright session
that failed 9 times across four earlier turns, then 8 more times in the 01:06 turn.
Every breaker uses the default config and ``jitter=lambda: 0.5``; times are span times.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_breaker_client.shared.turns import turn_block_message
from mcp_breaker_client.shared.verdict import FailureClass, NeutralReason, Outcome

from processor.classify.events import ToolCall
from processor.config import BreakerConfig, Rule
from processor.engines.breaker import Breaker, CallDecision
from processor.engines.circuit import CircuitKey, Scope, State, Transition, Trigger
from tests.engine_builders import NS_PER_S, at_s, declined, failed, tool_call

SERVER = "playwright"
NAVIGATE = "playwright__browser_navigate"
SESSION_CLOSED = "upstream MCP session is closed"
ARTIFACT = {"url": "https://example.test/artifact/943"}
SEED_TURN = "1539078028959944794"
# The earlier turns: 9 calls in all, at 00:20, 00:30, 00:40 and 01:00 (minutes past midnight).
EARLIER_CALLS = [("t0020", 20.0), ("t0020", 21.0), ("t0020", 22.0)] + [
    (f"t{h:02d}{m:02d}", h * 60 + m + k) for h, m in ((0, 30), (0, 40), (1, 0)) for k in (0, 1)
]
SEED_TURN_START = 66 + 36 / 60  # 01:06:36
SEED_ROUNDS = [1, 5, 7, 7, 9, 9, 11, 11]
SERVER_KEY = CircuitKey(Scope.SERVER, SERVER)


def breaker_for(**overrides: Any) -> Breaker:
    """A breaker over the default config with ``overrides``; jitter fixed at the middle."""
    return Breaker(replace(BreakerConfig(), **overrides), jitter=lambda: 0.5)


def navigate(minute: float, turn: str, **kwargs: Any) -> ToolCall:
    """A call to the seed's dead tool that fails the way the seed's did."""
    return failed(
        minute,
        FailureClass.TRANSPORT,
        turn=turn,
        tool=NAVIGATE,
        server=SERVER,
        arguments=ARTIFACT,
        excerpt=SESSION_CLOSED,
        **kwargs,
    )


def replay_earlier_turns(breaker: Breaker) -> list[CallDecision]:
    return [breaker.observe(navigate(minute, turn)) for turn, minute in EARLIER_CALLS]


def seed_turn_calls() -> list[ToolCall]:
    """The 01:06 turn: one call per round listed, each after the one before has ended."""
    calls = []
    for i, model_round in enumerate(SEED_ROUNDS):
        minute = SEED_TURN_START + 0.1 + model_round * 0.25 + (i % 2) * 0.05
        calls.append(navigate(minute, SEED_TURN, model_round=model_round, duration_s=1.5))
    return calls


def replay_seed(breaker: Breaker) -> tuple[list[CallDecision], list[CallDecision]]:
    """The earlier turns' decisions, and the 01:06 turn's."""
    earlier = replay_earlier_turns(breaker)
    return earlier, [breaker.observe(call) for call in seed_turn_calls()]


def state_of(breaker: Breaker, key: CircuitKey) -> State:
    return breaker.circuits[key].state


def pairs(transitions: tuple[Transition, ...] | list[Transition]) -> list[tuple[State, State]]:
    return [(t.source, t.target) for t in transitions]


# --- the seed incident ------------------------------------------------------------------------


def test_the_earlier_turns_make_nine_failed_calls() -> None:
    """The replay holds what the seed measured: 9 calls, 0 successes, 00:20 to 01:00."""
    assert len(EARLIER_CALLS) == 9
    assert {turn for turn, _ in EARLIER_CALLS} == {"t0020", "t0030", "t0040", "t0100"}
    assert len(SEED_ROUNDS) == 8


def test_the_server_circuit_is_open_before_the_0106_turn_starts() -> None:
    """Nine transport failures in an hour have the playwright server open at 01:06:36."""
    breaker = breaker_for()
    replay_earlier_turns(breaker)
    server = breaker.circuits[SERVER_KEY]
    assert server.state is State.OPEN
    assert server.open_until_s > at_s(SEED_TURN_START)
    assert server.calls_and_failures() == (9, 9)


def test_the_first_call_of_the_0106_turn_is_a_dead_call_across_turns() -> None:
    """The first call meets the open server circuit: dead, with the seed's own numbers."""
    breaker = breaker_for()
    earlier, (first, *_) = replay_seed(breaker)
    assert first.dead_call is True
    assert first.state == "open"
    assert first.rule is Rule.SERVER
    assert first.key == SERVER
    assert first.enforced is True
    assert first.repeat_of == earlier[0].call.span_ids[0]
    assert first.evidence is not None
    assert (first.evidence.calls, first.evidence.failures) == (9, 9)
    assert first.evidence.failure_class == "transport"
    assert first.evidence.retry_after_s is not None and first.evidence.retry_after_s > 0


def test_the_refusal_tells_the_model_what_is_out_why_and_since_when() -> None:
    """Never silently drop the tool: the message names the tool, the error and the count."""
    _, (first, *_) = replay_seed(breaker_for())
    assert "its last 9 calls failed" in first.message
    assert "UTC" not in first.message  # a length, not a clock time the model cannot place
    assert NAVIGATE in first.message
    assert SERVER in first.message
    assert SESSION_CLOSED in first.message


def test_every_later_call_of_the_0106_turn_repeats_its_first_call() -> None:
    """Rounds 5 to 11 are dead calls within the turn, each pointing at the first 01:06 call."""
    _, seed_turn = replay_seed(breaker_for())
    first, *later = seed_turn
    assert len(later) == 7
    for decision in later:
        assert decision.dead_call is True
        assert decision.repeat_of == first.call.span_ids[0]
        assert decision.rule is Rule.TURN_TOOL
        assert SESSION_CLOSED in decision.message


def test_the_0106_turn_would_have_made_no_live_call() -> None:
    """All eight calls of the turn are dead calls: the seed's six repeats and two more."""
    _, seed_turn = replay_seed(breaker_for())
    assert [d.dead_call for d in seed_turn] == [True] * 8


def test_a_success_after_the_open_period_closes_the_server() -> None:
    """Once the open period is over, a successful call is the probe that closes the server."""
    breaker = breaker_for()
    replay_seed(breaker)
    reopen_minute = breaker.circuits[SERVER_KEY].open_until_s / 60 - at_s(0) / 60
    recovered = tool_call(
        reopen_minute + 1, turn="t-recovered", tool=NAVIGATE, server=SERVER, arguments=ARTIFACT
    )
    decision = breaker.observe(recovered)
    assert decision.dead_call is False
    assert decision.state == "half_open"
    server_moves = [t for t in decision.transitions if t.key == SERVER_KEY]
    assert pairs(server_moves) == [
        (State.OPEN, State.HALF_OPEN),
        (State.HALF_OPEN, State.CLOSED),
    ]
    assert server_moves[-1].trigger is Trigger.PROBE_SUCCEEDED
    assert state_of(breaker, SERVER_KEY) is State.CLOSED


# --- what counts, and against what ------------------------------------------------------------


@pytest.mark.parametrize("bad_attempts", [1, 2], ids=["one-bad-attempt", "two-bad-attempts"])
def test_a_corrected_call_after_bad_arguments_is_never_a_dead_call(bad_attempts: int) -> None:
    """tool_error blocks only the identical call: the model's corrected call goes through."""
    breaker = breaker_for()
    for i in range(bad_attempts):
        bad = failed(10 + i, FailureClass.TOOL_ERROR, tool="query", arguments={"sql": f"SELEC {i}"})
        assert breaker.observe(bad).dead_call is False
    corrected = tool_call(20, tool="query", arguments={"sql": "SELECT 1"})
    decision = breaker.observe(corrected)
    assert decision.dead_call is False
    assert decision.message == ""


def test_the_bad_call_repeated_byte_for_byte_is_a_dead_call() -> None:
    """The other half of keying by cause: the identical failed call is refused."""
    breaker = breaker_for()
    breaker.observe(failed(10, FailureClass.TOOL_ERROR, tool="query", arguments={"sql": "SELEC"}))
    repeat = breaker.observe(tool_call(11, tool="query", arguments={"sql": "SELEC"}))
    assert repeat.dead_call is True
    assert repeat.rule is Rule.TURN_CALL


def test_a_flood_of_declined_calls_opens_nothing() -> None:
    """A user saying no, a hundred times over many turns, is neither failure nor success."""
    breaker = breaker_for()
    decisions = [
        breaker.observe(declined(i, turn=f"turn-{i // 10}", tool=NAVIGATE, server=SERVER))
        for i in range(100)
    ]
    assert not any(d.dead_call for d in decisions)
    assert not any(d.transitions for d in decisions)
    assert all(c.state is State.CLOSED for c in breaker.circuits.values())
    assert all(c.calls_and_failures() == (0, 0) for c in breaker.circuits.values())


def test_a_declined_call_in_half_open_does_not_take_the_probe() -> None:
    """Neutral outcomes never consume a half-open probe: the next real call still probes."""
    breaker = breaker_for()
    replay_earlier_turns(breaker)
    probe_minute = breaker.circuits[SERVER_KEY].open_until_s / 60 - at_s(0) / 60 + 1
    neutral = breaker.observe(declined(probe_minute, turn="t-x", tool=NAVIGATE, server=SERVER))
    assert neutral.dead_call is False
    assert neutral.state == "half_open"
    assert breaker.circuits[SERVER_KEY].leases == {}
    probe = breaker.observe(
        tool_call(probe_minute + 0.5, turn="t-x", tool=NAVIGATE, server=SERVER, arguments={})
    )
    assert probe.dead_call is False
    assert state_of(breaker, SERVER_KEY) is State.CLOSED


def test_unknown_outcomes_change_nothing() -> None:
    """No outcome signal, no evidence: no circuit moves and no window fills."""
    breaker = breaker_for()
    decisions = [
        breaker.observe(tool_call(i, turn=f"turn-{i}", outcome=Outcome.UNKNOWN)) for i in range(20)
    ]
    assert not any(d.dead_call or d.transitions for d in decisions)
    assert all(c.calls_and_failures() == (0, 0) for c in breaker.circuits.values())
    assert all(c.state is State.CLOSED for c in breaker.circuits.values())


SERVER_WIDE = [FailureClass.TRANSPORT, FailureClass.TIMEOUT]
TOOL_ONLY = [
    FailureClass.TOOL_ERROR,
    FailureClass.PROTOCOL,
    FailureClass.HIDDEN,
    FailureClass.UNKNOWN_TOOL,
]


# (server calls, server failures), (tool calls, tool failures) after one failed call whose
# origin is read from its class alone (docs/breaker.md, "Who is blamed").
COUNTS = {
    FailureClass.TRANSPORT: ((1, 1), (1, 1)),  # no answer: the session and the tool
    FailureClass.TIMEOUT: ((0, 0), (1, 1)),  # no answer in time: the tool, not the server
    FailureClass.TOOL_ERROR: ((1, 0), (1, 1)),
    FailureClass.HIDDEN: ((1, 0), (1, 1)),
    FailureClass.UNKNOWN_TOOL: ((1, 0), (1, 1)),
    FailureClass.PROTOCOL: ((1, 0), (0, 0)),
}


@pytest.mark.parametrize("failure_class", list(COUNTS), ids=lambda c: c.value)
def test_each_failure_class_counts_where_it_belongs(failure_class: FailureClass) -> None:
    """Every failure counts against its tool but a protocol error (the caller's invalid
    params); only a session failure counts against the server, and any answer from the
    server counts for it; a timeout says nothing about the server."""
    breaker = breaker_for()
    breaker.observe(failed(10, failure_class, tool="fetch", server="web"))
    server = breaker.circuits[CircuitKey(Scope.SERVER, "web")]
    tool = breaker.circuits.get(CircuitKey(Scope.TOOL, "web/fetch"))
    assert server.calls_and_failures() == COUNTS[failure_class][0]
    assert (tool.calls_and_failures() if tool else (0, 0)) == COUNTS[failure_class][1]


def test_a_success_counts_for_both_the_server_and_the_tool() -> None:
    """One good call is evidence for its server and its tool alike."""
    breaker = breaker_for()
    breaker.observe(tool_call(10, tool="fetch", server="web"))
    assert breaker.circuits[CircuitKey(Scope.SERVER, "web")].calls_and_failures() == (1, 0)
    assert breaker.circuits[CircuitKey(Scope.TOOL, "web/fetch")].calls_and_failures() == (1, 0)


def test_tool_errors_open_the_tool_not_the_server() -> None:
    """A tool that keeps failing is out; the server's other tools are not."""
    breaker = breaker_for()
    for i in range(3):
        breaker.observe(failed(10 + i, FailureClass.TOOL_ERROR, tool="fetch", turn=f"t{i}"))
    assert state_of(breaker, CircuitKey(Scope.TOOL, "web/fetch")) is State.OPEN
    assert state_of(breaker, CircuitKey(Scope.SERVER, "web")) is State.CLOSED
    other = breaker.observe(tool_call(14, tool="search", turn="t9"))
    assert other.dead_call is False
    again = breaker.observe(tool_call(15, tool="fetch", turn="t9", arguments={"q": "other"}))
    assert (again.dead_call, again.rule, again.state) == (True, Rule.TOOL, "open")


def test_a_tool_error_on_a_server_probe_does_not_hold_the_servers_permit() -> None:
    """The server answered the probe (the tool ran), so another tool may call it right after."""
    breaker = breaker_for()
    replay_earlier_turns(breaker)
    probe_minute = breaker.circuits[SERVER_KEY].open_until_s / 60 - at_s(0) / 60 + 1
    probe = breaker.observe(
        failed(probe_minute, FailureClass.TOOL_ERROR, turn="t-p", tool=NAVIGATE, server=SERVER)
    )
    assert probe.dead_call is False
    snapshot = tool_call(probe_minute + 1, turn="t-p", tool="browser_snapshot", server=SERVER)
    assert breaker.observe(snapshot).dead_call is False


# --- shadow mode and manual control -----------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [{"shadow": True}, {"shadow_rules": ("server",)}],
    ids=["shadow-everything", "shadow-server-rule"],
)
def test_shadow_mode_decides_but_does_not_enforce(overrides: dict[str, Any]) -> None:
    """In shadow, the dead call is still found and counted, but marked not enforced."""
    _, (first, *_) = replay_seed(breaker_for(**overrides))
    assert first.dead_call is True
    assert first.rule is Rule.SERVER
    assert first.enforced is False


def test_global_shadow_covers_the_turn_rules_too() -> None:
    """shadow=True marks every decision, within the turn as well as across turns."""
    _, (_, *later) = replay_seed(breaker_for(shadow=True))
    assert all(d.dead_call and not d.enforced for d in later)


def test_a_shadow_rule_leaves_the_other_rules_enforced() -> None:
    """shadow_rules=("server",) shadows the server rule only; turn blocks still enforce."""
    _, (_, *later) = replay_seed(breaker_for(shadow_rules=("server",)))
    assert all(d.dead_call and d.enforced for d in later)


def test_a_forced_open_server_refuses_the_next_call_with_the_operators_reason() -> None:
    """A manual force-open is a dead call quoting its reason, until the expiry passes."""
    breaker = breaker_for()
    event = breaker.force(
        SERVER_KEY, State.FORCED_OPEN, at_s(70), "playwright down, see #897", at_s(10)
    )
    assert (event.source, event.target, event.reason) == (
        State.CLOSED,
        State.FORCED_OPEN,
        "playwright down, see #897",
    )
    refused = breaker.observe(tool_call(20, turn="t1", tool=NAVIGATE, server=SERVER))
    assert refused.dead_call is True
    assert refused.state == "forced_open"
    assert refused.rule is Rule.SERVER
    assert refused.forced_reason == "playwright down, see #897"
    assert "playwright down, see #897" in refused.message
    allowed = breaker.observe(tool_call(71, turn="t2", tool=NAVIGATE, server=SERVER))
    assert allowed.dead_call is False
    assert allowed.state == "closed"
    assert [(t.target, t.trigger) for t in allowed.transitions] == [
        (State.CLOSED, Trigger.FORCE_EXPIRED)
    ]


def test_a_released_server_is_allowed_at_once() -> None:
    """release() ends an override before its expiry."""
    breaker = breaker_for()
    breaker.force(SERVER_KEY, State.FORCED_OPEN, at_s(600), "maintenance", at_s(10))
    released = breaker.release(SERVER_KEY, "back up", at_s(15))
    assert released is not None and released.trigger is Trigger.RELEASED
    decision = breaker.observe(tool_call(20, tool=NAVIGATE, server=SERVER))
    assert decision.dead_call is False


def test_a_forced_closed_server_lets_failing_calls_through() -> None:
    """Forced closed overrides the evidence across turns: no call is refused by the server."""
    breaker = breaker_for()
    breaker.force(SERVER_KEY, State.FORCED_CLOSED, at_s(600), "let it through", at_s(10))
    decisions = [breaker.observe(navigate(20 + i, f"t{i}")) for i in range(10)]
    assert not any(d.dead_call for d in decisions)
    assert state_of(breaker, SERVER_KEY) is State.FORCED_CLOSED


# --- blast radius and memory ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("open_tools", "out"), [(0, False), (1, False), (2, True), (3, True)], ids=lambda v: str(v)
)
def test_a_server_is_out_when_most_of_its_tools_are_open(open_tools: int, out: bool) -> None:
    """Blast radius: 2 of 3 tools open puts the server out; 1 of 3 does not. (All within
    a minute and a half: each tool's open period, five minutes, is still running.)"""
    breaker = breaker_for()
    tools = ["navigate", "snapshot", "click"]
    for n, tool in enumerate(tools):
        for i in range(3):
            where: dict[str, Any] = {"turn": f"{tool}-{i}", "tool": tool, "server": SERVER}
            minute = n * 0.5 + i * 0.1
            if n < open_tools:
                breaker.observe(failed(minute, FailureClass.TOOL_ERROR, **where))
            else:
                breaker.observe(tool_call(minute, **where))
    opened = [state_of(breaker, CircuitKey(Scope.TOOL, f"{SERVER}/{t}")) for t in tools]
    assert opened.count(State.OPEN) == open_tools
    assert breaker.server_out(SERVER) is out


def test_a_server_with_one_tool_is_never_out_by_blast_radius() -> None:
    """Below blast_radius_min_tools there is no share to speak of."""
    breaker = breaker_for()
    for i in range(3):
        breaker.observe(failed(i, FailureClass.TOOL_ERROR, turn=f"t{i}", tool="only"))
    assert breaker.server_out("web") is False


def test_the_circuits_stay_within_max_circuits() -> None:
    """More distinct tools than max_circuits: the least recently used circuits go."""
    breaker = breaker_for(max_circuits=10)
    for i in range(50):
        breaker.observe(tool_call(i, turn=f"t{i}", tool=f"tool-{i}", server=f"server-{i % 7}"))
        assert len(breaker.circuits) <= 10
    assert len(breaker.circuits) == 10


def test_the_blast_radius_is_read_from_the_bounded_circuits() -> None:
    """No index beside the circuits: evicted tools no longer count for their server."""
    breaker = breaker_for(max_circuits=4, blast_radius_min_tools=2)
    for minute in range(3):
        breaker.observe(failed(minute, FailureClass.TOOL_ERROR, tool="a", server="web"))
        breaker.observe(failed(minute, FailureClass.TOOL_ERROR, tool="b", server="web"))
    assert breaker.server_out("web")
    for i in range(200):  # unrelated traffic evicts web's circuits
        breaker.observe(tool_call(10 + i, turn=f"t{i}", tool=f"tool-{i}", server=f"s{i}"))
    assert len(breaker.circuits) == 4
    assert not breaker.server_out("web")


OUTCOMES = st.sampled_from(
    [
        (Outcome.OK, None),
        (Outcome.FAILED, FailureClass.TRANSPORT),
        (Outcome.FAILED, FailureClass.TOOL_ERROR),
        (Outcome.NEUTRAL, None),
    ]
)
# Per call: minutes since the previous one, tool, turn, arguments, (outcome, class).
Plan = list[tuple[float, str, int, int, tuple[Outcome, FailureClass | None]]]
CALLS = st.lists(
    st.tuples(
        st.floats(0, 30),
        st.sampled_from(["navigate", "click"]),
        st.integers(0, 3),
        st.integers(0, 2),
        OUTCOMES,
    ),
    max_size=30,
)


def build(plan: Plan) -> list[ToolCall]:
    calls: list[ToolCall] = []
    minute = 0.0
    for gap, tool, turn, args, (outcome, failure_class) in plan:
        minute += gap + 0.1
        calls.append(
            tool_call(
                minute,
                turn=f"turn-{turn}",
                tool=tool,
                server=SERVER,
                arguments={"n": args},
                outcome=outcome,
                failure_class=failure_class,
                neutral_reason=NeutralReason.DECLINED if outcome is Outcome.NEUTRAL else None,
                excerpt=SESSION_CLOSED if failure_class else "",
            )
        )
    return calls


def outcome_of(decision: CallDecision) -> tuple[Any, ...]:
    return (decision.dead_call, decision.state, decision.rule, decision.repeat_of)


@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(plan=CALLS)
def test_neutral_calls_change_no_other_decision(plan: Plan) -> None:
    """Removing every declined call leaves every other call's decision and every state alike."""
    calls = build(plan)
    with_neutral, without = breaker_for(), breaker_for()
    kept = []
    for call in calls:
        decision = with_neutral.observe(call)
        if call.outcome is Outcome.NEUTRAL:
            assert decision.dead_call is False
        else:
            kept.append(outcome_of(decision))
    assert kept == [
        outcome_of(without.observe(c)) for c in calls if c.outcome is not Outcome.NEUTRAL
    ]
    if not calls:
        return
    end_s = calls[-1].end_ns / NS_PER_S  # bring both to the same time: time alone moves states
    for circuit in without.circuits.values():
        twin = with_neutral.circuits[circuit.key]
        without.machine.advance(circuit, end_s)
        with_neutral.machine.advance(twin, end_s)
        assert twin.state is circuit.state
        assert twin.window == circuit.window


def test_the_engines_faster_constructors_keep_what_a_dataclass_promises() -> None:
    """CallDecision, Evidence, Transition and RosterFinding are built by ``slot_init``
    (mcp_breaker_client.shared.cheap_dataclasses): still frozen, keyword-only, equal and
    hashable by value, with their defaults, copied by ``replace`` and pickled as before."""
    import dataclasses
    import pickle

    from processor.classify.events import Dialect, ToolListing
    from processor.engines.refusals import Evidence
    from processor.engines.roster import ListingState, RosterFinding

    breaker = breaker_for(consecutive_failures=1)
    breaker.observe(failed(1.0, FailureClass.TRANSPORT, tool="t"))
    decision = breaker.observe(tool_call(2.0, tool="t"))
    assert decision.dead_call and decision.evidence is not None
    assert decision.stale_roster is False and decision.revised == () and not decision.late
    assert decision.probe is None and decision.opened_block is None
    assert pickle.loads(pickle.dumps(decision)) == decision
    assert hash(decision.evidence) == hash(replace(decision.evidence))
    stale = replace(decision, stale_roster=True)
    assert stale.stale_roster and stale != decision and stale.call is decision.call
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.dead_call = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        CallDecision(call=decision.call)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Evidence(0, 0, None, None, None, "", "", None)  # type: ignore[misc]
    moved = Transition(
        key=SERVER_KEY, source=State.CLOSED, target=State.OPEN, trigger=Trigger.FORCED, at_s=1.0
    )
    assert moved.reason == "" and moved == replace(moved) and hash(moved) == hash(replace(moved))
    with pytest.raises(dataclasses.FrozenInstanceError):
        moved.at_s = 2.0  # type: ignore[misc]
    listing = ToolListing(
        turn="t1",
        round=1,
        server="web",
        start_ns=1,
        end_ns=2,
        trace_id=b"\x01" * 16,
        span_ids=(b"\x02" * 8,),
        dialect=Dialect.HARNESS,
    )
    finding = RosterFinding(
        listing=listing,
        state=ListingState.WARM,
        missing_attributes=(),
        collapse=None,
        namespaces=None,
    )
    assert finding.stale_tools == () and pickle.loads(pickle.dumps(finding)) == finding
    with pytest.raises(TypeError):
        RosterFinding(listing=listing)  # type: ignore[call-arg]


@pytest.mark.parametrize("tool_wide", [True, False])
def test_a_turn_block_message_ends_the_error_with_one_period(tool_wide: bool) -> None:
    """The T3 seed's message ends with a period of its own: the model reads one, not two."""
    message = turn_block_message(
        "t3_queue_list", "", tool_wide=tool_wide, excerpt="The operation could not be completed."
    )
    assert message.endswith("could not be completed).") and ".." not in message
    assert turn_block_message("x", "", tool_wide=tool_wide, excerpt="").endswith("(it failed).")
