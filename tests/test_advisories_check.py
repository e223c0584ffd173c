"""``Check``: allow, deny with the advisory, or a probe permit, from the breaker's real state.

Calls go through a real Breaker and its decisions into the hub, as the span path does;
the asker's clock is passed in (minutes past midnight of the seed's day), so a circuit is
half-open for an asker once its open period has run out, before any span moves it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from mcp_breaker_client.shared.verdict import FailureClass

from processor.advisories.check import Checker, CheckResult, Verdict
from processor.advisories.hub import AdvisoryHub
from processor.advisories.model import TURN_BLOCKED, AdvisoryScope
from processor.classify.events import ToolCall
from processor.config import AdvisoriesConfig, BreakerConfig, TurnKey
from processor.engines.breaker import Breaker
from processor.engines.circuit import CircuitKey, Scope, State
from tests.engine_builders import NS_PER_S, at_s, failed, tool_call

WEB = CircuitKey(Scope.SERVER, "web")
OPEN_S = 300.0  # default open_base_s; jitter fixed at the middle


def checker_for(**breaker: Any) -> Checker:
    engine = Breaker(replace(BreakerConfig(), **breaker), jitter=lambda: 0.5)
    return Checker(AdvisoryHub(AdvisoriesConfig(), engine, epoch="e"))


def feed(checker: Checker, call: ToolCall) -> None:
    decision = checker.breaker.observe(call)
    checker.hub.observe(decision, call.end_ns / NS_PER_S)


def ask(
    checker: Checker,
    minute: float,
    *,
    turn: str = "new-turn",
    server: str = "web",
    tool: str = "search",
    fingerprint: str = "",
    tenant: str = "",
) -> CheckResult:
    return checker.check(
        tenant=tenant,
        turn=turn,
        server=server,
        tool=tool,
        fingerprints=(fingerprint,) if fingerprint else (),
        now_s=at_s(minute),
    )


def transport(minute: float, turn: str, **kwargs: Any) -> ToolCall:
    return failed(minute, FailureClass.TRANSPORT, turn=turn, **kwargs)


def open_web(checker: Checker, first_minute: float = 10) -> float:
    """Three transport failures, a minute apart: the server opens. Its open_until, in s."""
    for i in range(3):
        feed(checker, transport(first_minute + i, f"t{first_minute + i}"))
    circuit = checker.breaker.circuits[WEB]
    assert circuit.state is State.OPEN
    return circuit.open_until_s


def minute_of(seconds: float) -> float:
    return (seconds - at_s(0)) / 60


def verdicts(results: list[CheckResult]) -> list[Verdict]:
    return [r.verdict for r in results]


# --- within a turn ----------------------------------------------------------------------------


def test_a_turn_block_denies_the_tool_for_the_rest_of_the_turn() -> None:
    checker = checker_for()
    feed(checker, transport(10, "turn-1", excerpt="upstream MCP session is closed"))
    result = ask(checker, 11, turn="turn-1")
    assert result.verdict is Verdict.DENY and result.permit == 0
    advisory = result.advisory
    assert advisory is not None
    assert (advisory.scope, advisory.state) == (AdvisoryScope.TURN_TOOL, TURN_BLOCKED)
    assert "upstream MCP session is closed" in advisory.message
    assert ask(checker, 11, turn="turn-2").verdict is Verdict.ALLOW  # another turn
    assert ask(checker, 11, turn="turn-1", tool="fetch").verdict is Verdict.ALLOW
    assert ask(checker, 11, turn="turn-1", tenant="acme").verdict is Verdict.ALLOW


def test_a_call_block_denies_only_the_same_call() -> None:
    checker = checker_for(turn_key=TurnKey.CALL)
    call = transport(10, "turn-1", arguments={"url": "htp:/typo"})
    feed(checker, call)
    assert call.fingerprint
    same = ask(checker, 11, turn="turn-1", fingerprint=call.fingerprint)
    assert same.verdict is Verdict.DENY
    assert same.advisory is not None and same.advisory.scope is AdvisoryScope.TURN_CALL
    assert ask(checker, 11, turn="turn-1", fingerprint="another").verdict is Verdict.ALLOW
    assert ask(checker, 11, turn="turn-1").verdict is Verdict.ALLOW  # no fingerprint given


# --- across turns -----------------------------------------------------------------------------


def test_an_open_server_denies_with_its_advisory() -> None:
    checker = checker_for()
    open_until = open_web(checker)
    result = ask(checker, 13, tool="any-tool-of-web")
    assert result.verdict is Verdict.DENY
    advisory = result.advisory
    assert advisory is not None
    assert (advisory.scope, advisory.state) == (AdvisoryScope.SERVER, State.OPEN.value)
    assert advisory.message.startswith("MCP server `web` (all its tools) is unavailable")
    # How long to wait counts from the asking, not from the last span the circuit saw.
    assert advisory.retry_after_s == pytest.approx(open_until - at_s(13))
    assert ask(checker, 13, server="db").verdict is Verdict.ALLOW
    assert ask(checker, 13, tenant="acme").verdict is Verdict.ALLOW


def test_an_open_tool_denies_that_tool_only() -> None:
    checker = checker_for()
    for i in range(3):
        feed(checker, failed(10 + i, FailureClass.TOOL_ERROR, turn=f"t{i}", tool="fetch"))
    result = ask(checker, 13, tool="fetch")
    assert result.verdict is Verdict.DENY
    assert result.advisory is not None and result.advisory.scope is AdvisoryScope.TOOL
    assert result.advisory.tool == "fetch"
    assert ask(checker, 13, tool="search").verdict is Verdict.ALLOW


def test_a_forced_open_circuit_denies() -> None:
    checker = checker_for()
    now = at_s(5)
    checker.breaker.force(WEB, State.FORCED_OPEN, now + 600, "maintenance", now)
    result = ask(checker, 6)
    assert result.verdict is Verdict.DENY
    assert result.advisory is not None
    assert (result.advisory.state, result.advisory.cause) == ("forced_open", "maintenance")
    assert result.advisory.retry_after_s == pytest.approx(540)
    assert ask(checker, 16).verdict is Verdict.ALLOW  # the force ran out


# --- shadow mode ------------------------------------------------------------------------------


def test_shadow_mode_allows_and_says_why() -> None:
    checker = checker_for(shadow=True)
    feed(checker, transport(9, "turn-1"))
    in_turn = ask(checker, 9.5, turn="turn-1")
    assert in_turn.verdict is Verdict.ALLOW
    assert in_turn.advisory is not None and not in_turn.advisory.enforced
    open_web(checker)
    across = ask(checker, 13)
    assert across.verdict is Verdict.ALLOW
    assert across.advisory is not None and across.advisory.state == State.OPEN.value
    assert not across.advisory.enforced and across.advisory.message


def test_shadow_mode_never_denies_a_half_open_circuit_either() -> None:
    checker = checker_for(shadow=True)
    half_open = minute_of(open_web(checker)) + 1
    results = [ask(checker, half_open) for _ in range(5)]
    assert Verdict.DENY not in verdicts(results)
    assert verdicts(results).count(Verdict.PROBE) == 1
    assert all(r.advisory is not None for r in results)


def test_a_rule_in_shadow_allows_while_the_others_deny() -> None:
    checker = checker_for(shadow_rules=("server",))
    open_web(checker)
    assert ask(checker, 13).verdict is Verdict.ALLOW
    assert ask(checker, 13, turn="t12").verdict is Verdict.DENY  # turn_tool is enforced


# --- half-open: probe permits -----------------------------------------------------------------


@pytest.mark.parametrize("permits", [1, 3])
def test_half_open_grants_exactly_the_permits(permits: int) -> None:
    checker = checker_for(probe_permits=permits)
    open_until = open_web(checker)
    before = ask(checker, minute_of(open_until) - 0.5)
    assert before.verdict is Verdict.DENY  # still open
    now = minute_of(open_until) + 1
    assert checker.breaker.circuits[WEB].state is State.OPEN  # no span moved it
    results = [ask(checker, now, turn=f"asker-{i}") for i in range(12)]
    probes = [r for r in results if r.verdict is Verdict.PROBE]
    assert len(probes) == permits
    assert len({p.permit for p in probes}) == permits and all(p.permit for p in probes)
    for probe in probes:
        assert probe.advisory is not None and probe.advisory.state == State.HALF_OPEN.value
    denied = [r for r in results if r.verdict is Verdict.DENY]
    assert len(denied) == 12 - permits
    lease_s = BreakerConfig().probe_lease_s
    for result in denied:
        assert result.advisory is not None and result.permit == 0
        assert "another call is testing it now" in result.advisory.message
        assert result.advisory.retry_after_s == pytest.approx(lease_s)


def test_an_unanswered_probe_gives_its_permit_back_when_the_lease_runs_out() -> None:
    checker = checker_for(probe_lease_s=120.0)
    now = minute_of(open_web(checker)) + 1
    first = ask(checker, now)
    assert first.verdict is Verdict.PROBE
    later = ask(checker, now + 1)
    assert later.verdict is Verdict.DENY
    assert later.advisory is not None and later.advisory.retry_after_s == pytest.approx(60)
    assert ask(checker, now + 1.99).verdict is Verdict.DENY
    again = ask(checker, now + 2)  # 120 s after the first permit: its lease is over
    assert again.verdict is Verdict.PROBE and again.permit != first.permit
    assert ask(checker, now + 2).verdict is Verdict.DENY


def test_a_circuit_closed_again_drops_its_leases() -> None:
    checker = checker_for(probe_lease_s=3600.0)  # leases that would outlive everything here
    now = minute_of(open_web(checker, 10)) + 1
    assert ask(checker, now).verdict is Verdict.PROBE
    # The probe succeeded: its span closes the circuit.
    feed(checker, tool_call(now + 0.5, turn="probe"))
    assert checker.breaker.circuits[WEB].state is State.CLOSED
    assert ask(checker, now + 1).verdict is Verdict.ALLOW
    # It opens again and its open period runs out: a fresh half-open, fresh permits.
    again = minute_of(open_web(checker, now + 2)) + 1
    assert ask(checker, again).verdict is Verdict.PROBE
    assert ask(checker, again).verdict is Verdict.DENY


def test_a_new_half_open_period_has_fresh_permits_even_unasked_in_between() -> None:
    """Nobody asked while the circuit was closed: the old lease must not carry over."""
    checker = checker_for(probe_lease_s=3600.0)
    now = minute_of(open_web(checker, 10)) + 1
    assert ask(checker, now).verdict is Verdict.PROBE
    feed(checker, tool_call(now + 0.5, turn="probe"))  # closed, and no Check meanwhile
    again = minute_of(open_web(checker, now + 2)) + 1
    assert ask(checker, again).verdict is Verdict.PROBE


def test_a_failed_probe_reopens_and_the_next_half_open_has_fresh_permits() -> None:
    checker = checker_for(probe_lease_s=3600.0)
    now = minute_of(open_web(checker, 10)) + 1
    assert ask(checker, now).verdict is Verdict.PROBE
    feed(checker, transport(now + 0.5, "probe"))  # half-open -> open, for twice as long
    circuit = checker.breaker.circuits[WEB]
    assert circuit.state is State.OPEN
    assert ask(checker, now + 2).verdict is Verdict.DENY
    assert ask(checker, minute_of(circuit.open_until_s) + 1).verdict is Verdict.PROBE


def test_a_permit_is_not_spent_on_a_caller_another_circuit_denies() -> None:
    """The server is half-open, one of its tools is still open: asking for that tool is
    denied, and must not hold the server's only permit against the other tools."""
    checker = checker_for()
    server_open_until = open_web(checker, 10)  # open until 00:17:02
    for i in range(3):  # the server answers (it is open: nothing changes there), fetch fails
        feed(checker, failed(13 + i, FailureClass.TOOL_ERROR, turn=f"f{i}", tool="fetch"))
    fetch = checker.breaker.circuits[CircuitKey(Scope.TOOL, "web/fetch")]
    assert fetch.state is State.OPEN and fetch.open_until_s > server_open_until
    now = minute_of(server_open_until) + 1
    denied = ask(checker, now, tool="fetch")
    assert denied.verdict is Verdict.DENY
    assert denied.advisory is not None and denied.advisory.scope is AdvisoryScope.TOOL
    assert ask(checker, now, tool="search").verdict is Verdict.PROBE
