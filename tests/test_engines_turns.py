"""Within a turn: after a failed call, a repeat is a dead call, keyed by the failure's cause.

Calls are built on a fake clock (minutes into the seed's day); the TurnBreaker's only
clock is the span times it is given.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from mcp_breaker_client.shared.verdict import FailureClass, NeutralReason, Outcome

from processor.classify.events import ToolCall
from processor.config import BreakerConfig, TurnKey
from processor.engines.turns import TurnBreaker, TurnScope
from tests.engine_builders import NO_ARGUMENTS, declined, failed, round_ns, tool_call

TOOL_WIDE = [FailureClass.TRANSPORT, FailureClass.TIMEOUT]
CALL_SCOPED = [
    FailureClass.TOOL_ERROR,
    FailureClass.PROTOCOL,
    FailureClass.HIDDEN,
    FailureClass.UNKNOWN_TOOL,
]
BAD = {"url": "htp:/typo"}
GOOD = {"url": "https://example.test/artifact"}


def turns_for(**overrides: Any) -> TurnBreaker:
    return TurnBreaker(replace(BreakerConfig(), **overrides))


def ids(classes: list[FailureClass]) -> list[str]:
    return [c.value for c in classes]


def fail_then(
    breaker: TurnBreaker, failure_class: FailureClass, later: ToolCall, **kwargs: Any
) -> tuple[ToolCall, bool]:
    """A failure at minute 10 of the given class, then ``later``: (the failure, later dead?)."""
    first = failed(10, failure_class, **kwargs)
    assert breaker.observe(first).dead_call is False
    return first, breaker.observe(later).dead_call


# --- keyed by cause ---------------------------------------------------------------------------


@pytest.mark.parametrize("failure_class", TOOL_WIDE, ids=ids(TOOL_WIDE))
def test_a_transport_or_timeout_failure_blocks_the_whole_tool(failure_class: FailureClass) -> None:
    """Arguments cannot revive a dead session: different arguments are still a dead call."""
    breaker = turns_for()
    first = failed(10, failure_class, arguments=BAD)
    opened = breaker.observe(first)
    assert opened.dead_call is False
    assert opened.block is not None and opened.block.scope is TurnScope.TOOL
    verdict = breaker.observe(tool_call(11, arguments=GOOD))
    assert verdict.dead_call is True
    assert verdict.block is not None
    assert verdict.block.scope is TurnScope.TOOL
    assert verdict.block.span_id == first.span_ids[0]
    assert verdict.block.failure_class is failure_class
    assert verdict.block.excerpt == f"{failure_class.value} failure"


@pytest.mark.parametrize("failure_class", CALL_SCOPED, ids=ids(CALL_SCOPED))
def test_a_corrected_call_after_a_call_scoped_failure_is_not_a_dead_call(
    failure_class: FailureClass,
) -> None:
    """After a tool, protocol, hidden or unknown-tool failure the model may fix its arguments."""
    _, dead = fail_then(turns_for(), failure_class, tool_call(11, arguments=GOOD), arguments=BAD)
    assert dead is False


@pytest.mark.parametrize("failure_class", CALL_SCOPED, ids=ids(CALL_SCOPED))
def test_a_byte_identical_repeat_of_a_call_scoped_failure_is_a_dead_call(
    failure_class: FailureClass,
) -> None:
    """The same fingerprint again, after any failure, is a dead call of scope turn_call."""
    breaker = turns_for()
    first, dead = fail_then(
        breaker, failure_class, tool_call(11, arguments=BAD, outcome=Outcome.FAILED), arguments=BAD
    )
    assert dead is True
    verdict = breaker.observe(tool_call(12, arguments=BAD))
    assert verdict.dead_call is True
    assert verdict.block is not None
    assert verdict.block.scope is TurnScope.CALL
    assert verdict.block.span_id == first.span_ids[0]


@pytest.mark.parametrize(
    ("turn_key", "failure_class", "arguments", "dead"),
    [
        (TurnKey.CALL, FailureClass.TRANSPORT, GOOD, False),
        (TurnKey.CALL, FailureClass.TRANSPORT, BAD, True),
        (TurnKey.CALL, FailureClass.TOOL_ERROR, GOOD, False),
        (TurnKey.CALL, FailureClass.TOOL_ERROR, BAD, True),
        (TurnKey.TOOL, FailureClass.TRANSPORT, GOOD, True),
        (TurnKey.TOOL, FailureClass.TOOL_ERROR, GOOD, True),
        (TurnKey.TOOL, FailureClass.PROTOCOL, BAD, True),
        (TurnKey.CAUSE, FailureClass.TIMEOUT, GOOD, True),
        (TurnKey.CAUSE, FailureClass.PROTOCOL, GOOD, False),
    ],
    ids=[
        "call-transport-corrected",
        "call-transport-identical",
        "call-tool_error-corrected",
        "call-tool_error-identical",
        "tool-transport-corrected",
        "tool-tool_error-corrected",
        "tool-protocol-identical",
        "cause-timeout-corrected",
        "cause-protocol-corrected",
    ],
)
def test_turn_key_can_be_set_to_call_or_tool_outright(
    turn_key: TurnKey, failure_class: FailureClass, arguments: dict[str, str], dead: bool
) -> None:
    """turn_key=call blocks only the fingerprint, turn_key=tool the whole tool, any cause."""
    breaker = turns_for(turn_key=turn_key)
    later = tool_call(11, arguments=arguments)
    _, was_dead = fail_then(breaker, failure_class, later, arguments=BAD)
    assert was_dead is dead


# --- calls without a fingerprint --------------------------------------------------------------


@pytest.mark.parametrize("failure_class", CALL_SCOPED, ids=ids(CALL_SCOPED))
def test_a_call_scoped_failure_without_a_fingerprint_blocks_nothing(
    failure_class: FailureClass,
) -> None:
    """No fingerprint, no way to tell a repeat from a correction: nothing is blocked."""
    breaker = turns_for()
    verdict = breaker.observe(failed(10, failure_class, arguments=NO_ARGUMENTS))
    assert verdict.block is None
    assert breaker.observe(tool_call(11, arguments=NO_ARGUMENTS)).dead_call is False
    assert breaker.observe(tool_call(12, arguments=BAD)).dead_call is False


@pytest.mark.parametrize("failure_class", TOOL_WIDE, ids=ids(TOOL_WIDE))
def test_a_tool_scoped_failure_without_a_fingerprint_still_blocks_the_tool(
    failure_class: FailureClass,
) -> None:
    """A dead session needs no fingerprint: the tool is blocked for calls with or without one."""
    breaker = turns_for()
    breaker.observe(failed(10, failure_class, arguments=NO_ARGUMENTS))
    assert breaker.observe(tool_call(11, arguments=NO_ARGUMENTS)).dead_call is True
    assert breaker.observe(tool_call(12, arguments=GOOD)).dead_call is True


def test_a_call_without_a_fingerprint_meets_only_tool_scoped_blocks() -> None:
    """A call-scoped block cannot be matched by a call with no fingerprint."""
    breaker = turns_for()
    breaker.observe(failed(10, FailureClass.TOOL_ERROR, arguments=BAD))
    assert breaker.observe(tool_call(11, arguments=NO_ARGUMENTS)).dead_call is False


# --- what a block does not reach --------------------------------------------------------------


@pytest.mark.parametrize("failure_class", TOOL_WIDE + CALL_SCOPED, ids=ids(TOOL_WIDE + CALL_SCOPED))
def test_a_different_turn_is_unaffected(failure_class: FailureClass) -> None:
    """Blocks last for their own turn only; the next user message starts clean."""
    breaker = turns_for()
    breaker.observe(failed(10, failure_class, turn="turn-a", arguments=BAD))
    assert breaker.observe(tool_call(11, turn="turn-b", arguments=BAD)).dead_call is False


def test_another_tool_of_the_same_server_is_unaffected() -> None:
    """A transport failure blocks its tool, not the server's other tools, within the turn."""
    breaker = turns_for()
    breaker.observe(failed(10, FailureClass.TRANSPORT, tool="browser_navigate", server="pw"))
    other = tool_call(11, tool="browser_snapshot", server="pw")
    assert breaker.observe(other).dead_call is False


def test_the_same_tool_name_on_another_server_is_unaffected() -> None:
    """A tool is named by server and tool: the same name elsewhere is another tool."""
    breaker = turns_for()
    breaker.observe(failed(10, FailureClass.TRANSPORT, tool="search", server="web"))
    assert breaker.observe(tool_call(11, tool="search", server="docs")).dead_call is False


@pytest.mark.parametrize("reason", list(NeutralReason), ids=[r.value for r in NeutralReason])
def test_a_neutral_call_is_never_a_dead_call(reason: NeutralReason) -> None:
    """A declined, dismissed or cancelled call after a failure is the user's doing, not dead."""
    breaker = turns_for()
    breaker.observe(failed(10, FailureClass.TRANSPORT, arguments=BAD))
    neutral = tool_call(11, arguments=BAD, outcome=Outcome.NEUTRAL, neutral_reason=reason)
    verdict = breaker.observe(neutral)
    assert verdict.dead_call is False
    assert verdict.block is None


def test_a_neutral_call_never_blocks() -> None:
    """A user's "no", repeated, is never a failure to repeat."""
    breaker = turns_for()
    for minute in range(10, 20):
        verdict = breaker.observe(declined(minute, arguments=BAD))
        assert (verdict.dead_call, verdict.block) == (False, None)
    assert breaker.observe(tool_call(21, arguments=BAD)).dead_call is False


def test_a_success_opens_no_block() -> None:
    """Only failures block: a success repeated is just a success."""
    breaker = turns_for()
    for minute in range(10, 15):
        assert breaker.observe(tool_call(minute, arguments=GOOD)).block is None


def test_a_call_with_an_unknown_outcome_still_meets_a_block() -> None:
    """Unknown is not neutral: a call made while its key was blocked is a dead call."""
    breaker = turns_for()
    breaker.observe(failed(10, FailureClass.TRANSPORT))
    assert breaker.observe(tool_call(11, outcome=Outcome.UNKNOWN)).dead_call is True


# --- time -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start_offset_s", "dead"),
    [(-30.0, False), (-5.5, False), (-5.0, True), (-3.0, True), (0.0, True), (1.0, True)],
    ids=["30s-before", "beyond-skew", "at-skew", "within-skew", "at-end", "after"],
)
def test_a_call_that_started_before_the_failure_ended_is_not_a_repeat(
    start_offset_s: float, dead: bool
) -> None:
    """Parallel calls are not repeats; clock_skew_s (5 s) of disagreement is forgiven."""
    breaker = turns_for(clock_skew_s=5.0)
    first = failed(10, FailureClass.TRANSPORT, duration_s=60.0)
    breaker.observe(first)
    start_ns = first.end_ns + round_ns(start_offset_s)
    other = tool_call(10, arguments=GOOD)
    other = replace(other, start_ns=start_ns, end_ns=start_ns + round_ns(120.0))
    assert breaker.observe(other).dead_call is dead


def test_the_failing_call_seen_again_does_not_repeat_itself() -> None:
    """The same spans exported twice are one call, not a repeat of themselves."""
    breaker = turns_for()
    first = failed(10, FailureClass.TOOL_ERROR, arguments=BAD)
    breaker.observe(first)
    assert breaker.observe(first).dead_call is False


@pytest.mark.parametrize(
    ("idle_s", "dead"),
    [(60.0, True), (3599.0, True), (3600.0, False), (7200.0, False)],
    ids=["a-minute", "just-under", "exactly", "two-hours"],
)
def test_a_turns_state_expires_after_turn_idle_s_of_span_time(idle_s: float, dead: bool) -> None:
    """A turn with no call for turn_idle_s is forgotten, measured between span ends."""
    breaker = turns_for(turn_idle_s=3600.0)
    first = failed(10, FailureClass.TRANSPORT, duration_s=2.0)
    breaker.observe(first)
    later = tool_call(10, duration_s=2.0)
    end_ns = first.end_ns + round_ns(idle_s)
    later = replace(later, start_ns=end_ns - round_ns(2.0), end_ns=end_ns)
    assert breaker.observe(later).dead_call is dead


def test_each_call_in_a_turn_restarts_its_idle_time() -> None:
    """Idle time counts from the turn's latest call, not from the failure."""
    breaker = turns_for(turn_idle_s=3600.0)
    breaker.observe(failed(0, FailureClass.TRANSPORT, tool="navigate"))
    breaker.observe(tool_call(50, tool="other"))  # the turn is still active
    assert breaker.observe(tool_call(100, tool="navigate")).dead_call is True


def test_the_span_clock_never_runs_backwards() -> None:
    """A late span from long ago does not revive a turn that has already expired."""
    breaker = turns_for(turn_idle_s=600.0)
    breaker.observe(failed(0, FailureClass.TRANSPORT, turn="old"))
    breaker.observe(tool_call(60, turn="new"))  # an hour later, in another turn
    assert breaker.observe(tool_call(5, turn="old")).dead_call is False


# --- bounds -----------------------------------------------------------------------------------


def test_no_more_than_max_turns_are_kept() -> None:
    """The least recently used turn goes first once max_turns are tracked."""
    breaker = turns_for(max_turns=5)
    for i in range(20):
        breaker.observe(failed(i * 0.1, FailureClass.TRANSPORT, turn=f"turn-{i}"))
        assert len(breaker) <= 5
    assert len(breaker) == 5
    assert breaker.observe(tool_call(3, turn="turn-0")).dead_call is False
    assert breaker.observe(tool_call(3, turn="turn-19")).dead_call is True


def test_the_least_recently_used_turn_keeps_its_blocks_when_it_calls_again() -> None:
    """At max_turns turns and no more, the oldest turn's next call finds its own block."""
    breaker = turns_for(max_turns=2)
    breaker.observe(failed(10, FailureClass.TRANSPORT, turn="turn-a"))
    breaker.observe(tool_call(11, turn="turn-b", tool="other"))
    assert breaker.observe(tool_call(12, turn="turn-a")).dead_call is True
    assert len(breaker) == 2


def test_a_call_in_a_tracked_turn_evicts_no_other_turn() -> None:
    """Only a new turn beyond max_turns makes room; a known turn calling again does not."""
    breaker = turns_for(max_turns=2)
    breaker.observe(failed(10, FailureClass.TRANSPORT, turn="turn-a"))
    breaker.observe(tool_call(11, turn="turn-b", tool="other"))
    breaker.observe(tool_call(12, turn="turn-b", tool="other"))
    assert len(breaker) == 2
    assert breaker.observe(tool_call(13, turn="turn-a")).dead_call is True


def test_no_more_than_max_blocks_per_turn_are_kept() -> None:
    """A turn that fails on many distinct calls stops opening blocks at the bound."""
    breaker = turns_for(max_blocks_per_turn=3)
    for i in range(5):
        breaker.observe(failed(10 + i, FailureClass.TOOL_ERROR, arguments={"n": i}))
    repeats = [breaker.observe(tool_call(20 + i, arguments={"n": i})).dead_call for i in range(5)]
    assert repeats == [True, True, True, False, False]
