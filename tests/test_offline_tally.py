"""The tallies read only what the decisions say: hand-made decisions, the figures they give.

No engine here: whether a call is dead is the breaker's to say (and its tests'); what is
checked is how the report counts what it was told.
"""

from __future__ import annotations

from typing import Any

from mcp_breaker_client.shared.verdict import FailureClass, Outcome

from processor.classify.events import Dialect, ToolCall, ToolListing
from processor.config import Rule
from processor.engines.breaker import CallDecision
from processor.engines.refusals import Evidence
from processor.engines.roster import RosterFinding, RosterHealth
from processor.offline import html, text
from processor.offline.tally import Tally
from tests.engine_builders import at_ns, failed, new_span_id, tool_call, trace_of


def decision(
    call: ToolCall, rule: Rule | None = None, repeat_of: bytes | None = None
) -> CallDecision:
    dead = rule is not None
    return CallDecision(
        call=call,
        state="turn_blocked" if dead else "closed",
        rule=rule,
        key="",
        dead_call=dead,
        repeat_of=repeat_of,
        enforced=dead,  # the enforcing replay's refusals (offline/enforce.py)
        forced_reason="",
        evidence=Evidence(
            calls=0,
            failures=1,
            since_s=None,
            first_failure_trace_id=call.trace_id,
            first_failure_span_id=repeat_of,
            failure_class="transport",
            excerpt="session closed",
            retry_after_s=None,
        )
        if dead
        else None,
        message="",
        transitions=(),
    )


def tally() -> Tally:
    return Tally(ids=5, max_rows=100, worst_turns=3, turn_idle_s=3600)


def report_of(decisions: list[CallDecision]) -> dict[str, Any]:
    t = tally()
    for d in decisions:
        t(d)
    t.finish()
    return t.to_json()


def test_model_rounds_saved_are_rounds_after_the_first_dead_call_with_only_dead_calls() -> None:
    first = failed(1, FailureClass.TRANSPORT, model_round=1)
    span = first.span_ids[0]
    calls = [
        decision(first),
        decision(tool_call(2, model_round=2)),  # round 2: a live call, refused nothing
        decision(failed(3, FailureClass.TRANSPORT, model_round=3), Rule.TURN_TOOL, span),
        decision(tool_call(4, model_round=4), Rule.TURN_TOOL, span),  # refused, succeeded
        decision(failed(5, FailureClass.TRANSPORT, model_round=4), Rule.TURN_TOOL, span),
        decision(failed(6, FailureClass.TRANSPORT, model_round=5), Rule.TURN_TOOL, span),
        decision(tool_call(7, model_round=5)),  # round 5 made a live call too
        decision(failed(8, FailureClass.TRANSPORT, model_round=None), Rule.TURN_TOOL, span),
    ]
    report = report_of(calls)
    (turn,) = report["turns"]["worst"]
    # The first dead call is in round 3: rounds 4 (two dead calls) count, 5 does not.
    assert turn["model_rounds_saved"] == 1
    assert turn["dead_calls"]["count"] == 5 and turn["dead_within_turn"] == 5
    assert turn["refused_that_succeeded"] == 1
    (repeated,) = turn["repeated_failures"]
    assert repeated["span_id"] == span.hex() and repeated["repeats"]["count"] == 5
    c = report["counterfactual"]
    assert c["model_rounds_saved"] == 1 and c["turns_with_rounds_saved"] == 1
    assert c["by_outcome"]["ok"]["count"] == 1 == c["refused_that_succeeded"]["count"]
    assert c["dead_calls_spared"]["count"] == 4
    assert c["tool_seconds_saved"] == 4 * 2.0  # two seconds a call (engine_builders)


def test_within_and_across_turns() -> None:
    report = report_of(
        [
            decision(failed(1, FailureClass.TRANSPORT, turn="a")),
            decision(failed(2, FailureClass.TRANSPORT, turn="b"), Rule.SERVER, b"x" * 8),
            decision(failed(3, FailureClass.TRANSPORT, turn="b"), Rule.TOOL, b"x" * 8),
            decision(failed(4, FailureClass.TRANSPORT, turn="b"), Rule.TURN_CALL, b"y" * 8),
        ]
    )
    c = report["counterfactual"]
    assert (c["within_turns"]["count"], c["across_turns"]["count"]) == (1, 2)
    assert set(c["by_rule"]) == {"server", "tool", "turn_call"}


def test_worst_turns_first_and_only_as_many_as_asked() -> None:
    calls = []
    for n, dead in enumerate([1, 4, 0, 2, 3]):
        first = failed(n * 10, FailureClass.TRANSPORT, turn=f"t{n}")
        calls.append(decision(first))
        for k in range(dead):
            call = failed(n * 10 + k + 1, FailureClass.TRANSPORT, turn=f"t{n}")
            calls.append(decision(call, Rule.TURN_TOOL, first.span_ids[0]))
    report = report_of(calls)
    assert [t["turn"] for t in report["turns"]["worst"]] == ["t1", "t4", "t3"]
    assert report["turns"]["total"] == 5 and report["turns"]["with_dead_calls"] == 4


def test_a_turn_idle_past_the_breakers_idle_time_is_closed() -> None:
    t = Tally(ids=5, max_rows=100, worst_turns=10, turn_idle_s=60)
    t(decision(failed(0, FailureClass.TRANSPORT, turn="a")))
    t(decision(failed(5, FailureClass.TRANSPORT, turn="b")))  # five minutes later: a closes
    assert t.turns.total() == 2 and len(t.turns.worst()) == 1
    t(decision(failed(10, FailureClass.TRANSPORT, turn="a")))  # the same id, a new turn
    t.finish()
    assert t.turns.total() == 3


def test_every_table_is_bounded() -> None:
    t = Tally(ids=2, max_rows=3, worst_turns=3, turn_idle_s=3600)
    for n in range(10):
        t(decision(failed(n, FailureClass.TOOL_ERROR, tool=f"tool-{n}", turn=f"t{n}")))
    t.finish()
    tools = t.to_json()["calls"]["tools"]
    assert len(tools) == 4 and tools[-1]["tool"] == "(other)" and tools[-1]["calls"] == 7
    assert len(tools[0]["failures"]["ids"]) == 1
    assert t.to_json()["calls"]["failures"]["ids_not_listed"] == 8  # 10 failures, 2 ids
    assert t.turns.total() == 10  # counted, though at most 3 were open at once
    assert Outcome.FAILED.value in tools[0]["outcomes"]


# --- what a turn is, every outcome's column, what cannot be known -----------------------------


def listing_finding(turn: str, minute: float) -> RosterFinding:
    """A real finding of the roster engine, for a listing of ``turn`` and no call."""
    start = at_ns(minute)
    listing = ToolListing(
        turn=turn,
        round=None,
        server="web",
        offered=3,
        start_ns=start,
        end_ns=start + 10**6,
        trace_id=trace_of(turn),
        span_ids=(new_span_id(),),
        dialect=Dialect.MCP_SDK,
    )
    return RosterHealth().observe(listing)


def test_a_trace_of_listings_and_no_call_is_not_a_turn() -> None:
    """A session's initialize and tools/list trace, then one turn of calls: one turn."""
    t = tally()
    t(listing_finding("session-start", 0))
    t(listing_finding("turn-1", 1))  # the turn's own listing counts with its calls
    t(decision(failed(1, FailureClass.TRANSPORT, turn="turn-1")))
    assert t.turns.total() == 1
    t.finish()
    report = t.to_json()
    assert report["turns"]["total"] == 1
    assert [w["turn"] for w in report["turns"]["worst"]] == ["turn-1"]
    assert report["roster"]["listings"] == 2  # the listings still count, as listings


def test_model_rounds_saved_cannot_be_known_without_round_numbers() -> None:
    first = failed(1, FailureClass.TRANSPORT)
    span = first.span_ids[0]
    report = report_of(
        [
            decision(first),
            decision(failed(2, FailureClass.TRANSPORT), Rule.TURN_TOOL, span),
            decision(failed(3, FailureClass.TRANSPORT), Rule.TURN_TOOL, span),
        ]
    )
    c = report["counterfactual"]
    assert c["turns_with_dead_calls"] == 1 and c["turns_without_round_numbers"] == 1
    assert c["model_rounds_saved"] is None  # not 0: nothing says which rounds they were
    assert report["turns"]["worst"][0]["model_rounds_saved"] is None
    assert "model rounds saved  " + text.NO_ROUNDS in text._counterfactual(c)


def test_rounds_known_for_some_turns_say_for_how_many_they_are_not() -> None:
    calls = []
    for turn, model_round in (("a", 1), ("b", None)):
        first = failed(0, FailureClass.TRANSPORT, turn=turn, model_round=model_round)
        calls.append(decision(first))
        again = model_round and model_round + 1
        repeat = failed(1, FailureClass.TRANSPORT, turn=turn, model_round=again)
        calls.append(decision(repeat, Rule.TURN_TOOL, first.span_ids[0]))
    c = report_of(calls)["counterfactual"]
    # Turn a's refusal was its last round: a known 0. Turn b's is not known at all.
    assert (c["model_rounds_saved"], c["turns_with_rounds_saved"]) == (0, 0)
    assert c["turns_without_round_numbers"] == 1
    line = text._counterfactual(c)
    assert "0 in 0 turns; not known for 1 turn (no round numbers recorded)" in line


def test_calls_with_no_outcome_signal_have_their_column() -> None:
    t = tally()
    t(decision(tool_call(0, outcome=Outcome.UNKNOWN)))
    t(decision(tool_call(1, outcome=Outcome.UNKNOWN)))
    t(decision(tool_call(2)))
    t.finish()
    calls = t.to_json()["calls"]
    assert calls["outcomes"] == {"ok": 1, "failed": 0, "neutral": 0, "unknown": 2}
    (row,) = calls["tools"]
    shown = text._calls(calls).splitlines()
    header = shown[shown.index("TOOLS, worst first") + 1].split()
    cells = shown[shown.index("TOOLS, worst first") + 2].split()
    assert header[:8] == ["tool", "server", "calls", "ok", "failed", "hidden", "neutral", "unknown"]
    assert cells[:8] == ["search", "web", "3", "1", "0", "0", "0", "2"]
    page = html._calls(calls)
    assert "<th>unknown</th>" in page
    assert '<td data-figure="calls.tools.0.outcomes.unknown">2</td>' in page
    assert row["outcomes"]["unknown"] == 2
