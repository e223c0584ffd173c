"""The advisory hub: the breaker's real decisions in, numbered changes out, on a fake clock.

Every call goes through a real Breaker (default config, ``jitter=lambda: 0.5`` so an open
period is exactly ``open_base_s``) and its decision into ``hub.observe``. The hub's clock
is the span clock here: minutes past midnight of the seed's day (tests/engine_builders).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from mcp_breaker_client.shared.verdict import FailureClass, Outcome

from processor.advisories.hub import AdvisoryHub, Audience, Change
from processor.advisories.model import (
    CLOSED,
    ROSTER_COLLAPSED,
    TURN_BLOCKED,
    Advisory,
    AdvisoryScope,
)
from processor.classify.events import Dialect, ToolCall, ToolListing
from processor.config import AdvisoriesConfig, BreakerConfig, TurnKey
from processor.engines.breaker import Breaker
from processor.engines.circuit import CircuitKey, Scope, State
from processor.engines.roster import RosterHealth
from processor.errors import IllegalTransition
from tests.engine_builders import DAY_S, NS_PER_S, at_s, failed, tool_call

EPOCH = "epoch-1"
HARNESS = "harness-a"
WEB = CircuitKey(Scope.SERVER, "web")
WEB_ID = "|server|web"  # the default tenant's server circuit
OPEN_S = 300.0  # the default open_base_s, undisturbed by jitter
EVERYONE = Audience(tenant="")


def hub_for(breaker: dict[str, Any] | None = None, **advisories: Any) -> AdvisoryHub:
    engine = Breaker(replace(BreakerConfig(), **(breaker or {})), jitter=lambda: 0.5)
    return AdvisoryHub(replace(AdvisoriesConfig(), **advisories), engine, epoch=EPOCH)


def who(call: ToolCall, tenant: str = "", harness: str = HARNESS) -> ToolCall:
    return replace(call, tenant=tenant, harness=harness)


def feed(hub: AdvisoryHub, call: ToolCall, now_s: float | None = None) -> list[Change]:
    """The call through the breaker, its decision into the hub at ``now_s`` (its end)."""
    decision = hub.breaker.observe(call)
    return hub.observe(decision, call.end_ns / NS_PER_S if now_s is None else now_s)


def transport(minute: float, turn: str, **kwargs: Any) -> ToolCall:
    tenant = kwargs.pop("tenant", "")
    harness = kwargs.pop("harness", HARNESS)
    return who(failed(minute, FailureClass.TRANSPORT, turn=turn, **kwargs), tenant, harness)


def ok(minute: float, turn: str, **kwargs: Any) -> ToolCall:
    return who(tool_call(minute, turn=turn, **kwargs))


WEB_TOOLS = ("search", "fetch", "crawl")


def open_web(hub: AdvisoryHub) -> tuple[list[ToolCall], list[Change]]:
    """Three session failures in three turns (minutes 10, 11, 12), one on each of three
    tools: the server opens, and no tool failed often enough to open on its own."""
    calls = [transport(10 + i, f"t{10 + i}", tool=WEB_TOOLS[i]) for i in range(3)]
    changes = [change for call in calls for change in feed(hub, call)]
    return calls, changes


def seqs(changes: list[Change]) -> list[int]:
    return [seq for seq, _ in changes]


# --- turn blocks ------------------------------------------------------------------------------


def test_a_transport_failure_becomes_a_turn_tool_advisory() -> None:
    hub = hub_for()
    call = transport(10, "turn-1", excerpt="upstream MCP session is closed")
    changes = feed(hub, call)
    assert seqs(changes) == [1]
    advisory = changes[0][1]
    assert advisory.scope is AdvisoryScope.TURN_TOOL
    assert advisory.state == TURN_BLOCKED and advisory.blocking
    assert (advisory.server, advisory.tool, advisory.turn) == ("web", "search", "turn-1")
    assert advisory.fingerprint == ""
    assert advisory.id == "|turn_tool|turn-1|web/search"
    assert advisory.cause == "transport"
    assert "`search` on MCP server `web` is unavailable for the rest of this turn" in (
        advisory.message
    )
    assert "upstream MCP session is closed" in advisory.message
    assert advisory.expires_s == call.end_ns / NS_PER_S + BreakerConfig().turn_idle_s
    assert advisory.harness == HARNESS and advisory.enforced
    evidence = advisory.evidence
    assert evidence is not None
    assert (evidence.calls, evidence.failures, evidence.failure_class) == (1, 1, "transport")
    assert evidence.first_failure_span_id == call.span_ids[0]
    assert evidence.first_failure_trace_id == call.trace_id
    assert hub.get(advisory.id) == advisory and len(hub) == 1


@pytest.mark.parametrize(
    ("turn_key", "failure_class"),
    [(TurnKey.CALL, FailureClass.TRANSPORT), (TurnKey.CAUSE, FailureClass.TOOL_ERROR)],
    ids=["turn_key=call", "turn_key=cause, a tool error"],
)
def test_a_call_scoped_block_becomes_a_turn_call_advisory(
    turn_key: TurnKey, failure_class: FailureClass
) -> None:
    hub = hub_for({"turn_key": turn_key})
    call = who(failed(10, failure_class, turn="turn-1", arguments={"url": "https://x.test"}))
    (seq, advisory), *rest = feed(hub, call)
    assert (seq, rest) == (1, [])
    assert advisory.scope is AdvisoryScope.TURN_CALL
    assert advisory.state == TURN_BLOCKED
    assert advisory.fingerprint == call.fingerprint and advisory.fingerprint
    assert advisory.id == f"|turn_call|turn-1|{call.fingerprint}"
    assert advisory.cause == failure_class.value
    assert "This exact call to `search` on MCP server `web` already failed in this turn" in (
        advisory.message
    )


def test_changes_are_numbered_one_by_one() -> None:
    hub = hub_for()
    numbered = [seq for minute in range(6) for seq, _ in feed(hub, transport(minute, f"t{minute}"))]
    # Six turn blocks, plus the server's and the tool's circuits, opened at the third failure.
    assert numbered == list(range(1, 9))
    assert hub.seq == 8


def test_a_late_failure_in_the_same_turn_does_not_replace_the_block() -> None:
    """Found by the resume property: a late span from another harness in the same turn
    replaced the block, so a subscriber filtered to the first harness kept a block that
    had changed hands, and never heard it close."""
    hub = hub_for()
    ((_, block),) = feed(hub, transport(10, "turn-1", harness="h1"))
    # Began a minute before the first failure ended: not a repeat, so the turn breaker
    # opens nothing new (its first block stands) and neither may the hub.
    assert feed(hub, transport(9, "turn-1", harness="h2")) == []
    assert hub.get(block.id) == block
    ((_, over),) = hub.expire(block.expires_s)
    assert over.harness == "h1"
    assert Audience(tenant="", harness="h1").sees(over)


def test_a_success_and_a_repeat_change_nothing() -> None:
    hub = hub_for()
    assert feed(hub, ok(5, "turn-1")) == []
    feed(hub, transport(10, "turn-1"))
    # The repeat is a dead call: it runs into the block, it does not open another.
    assert feed(hub, transport(11, "turn-1")) == []
    assert hub.seq == 1


# --- circuits ---------------------------------------------------------------------------------


def test_an_open_circuit_becomes_an_advisory_with_its_evidence() -> None:
    hub = hub_for()
    calls, changes = open_web(hub)
    assert seqs(changes) == [1, 2, 3, 4]
    (_, opened), (_, block) = changes[2], changes[3]  # the circuit first, then the turn block
    assert block.scope is AdvisoryScope.TURN_TOOL and block.turn == "t12"
    assert opened.id == WEB_ID
    assert opened.scope is AdvisoryScope.SERVER and opened.key == "web"
    assert (opened.server, opened.tool, opened.state) == ("web", "", State.OPEN.value)
    assert opened.blocking and opened.enforced
    assert opened.cause == "transport"
    last_end = calls[-1].end_ns / NS_PER_S
    assert opened.retry_after_s == OPEN_S
    assert opened.expires_s == last_end + OPEN_S
    # For how long, as a length (a model knows no clock): a refusal across turns that said
    # "this turn" would be tried again in the next one.
    assert opened.message.startswith(
        "MCP server `web` (all its tools) is unavailable for about 5 minutes, so do not call "
        "its tools before then;"
    )
    assert "(its last 3 calls failed: " in opened.message
    assert "this turn" not in opened.message and "UTC" not in opened.message
    evidence = opened.evidence
    assert evidence is not None
    assert (evidence.calls, evidence.failures) == (3, 3)
    assert evidence.since_s == calls[0].end_ns / NS_PER_S
    assert evidence.first_failure_span_id == calls[0].span_ids[0]
    assert opened.harness == HARNESS  # the harness whose call raised it


def test_a_circuit_that_closes_sends_a_closed_change() -> None:
    hub = hub_for()
    open_web(hub)
    # After the open period a success is the probe: open -> half-open -> closed, one change.
    changes = feed(hub, ok(20, "t20"))
    assert len(changes) == 1
    seq, closed = changes[0]
    assert seq == 5
    assert (closed.id, closed.state) == (WEB_ID, CLOSED)
    assert not closed.in_force and closed.message == ""
    assert hub.get(WEB_ID) is None


def test_no_change_when_nothing_was_in_force() -> None:
    hub = hub_for()
    # The circuit opened while the hub was not listening (say, before it started).
    for i in range(3):
        hub.breaker.observe(transport(10 + i, f"t{10 + i}"))
    assert hub.breaker.circuits[WEB].state is State.OPEN
    assert feed(hub, ok(20, "t20")) == []  # it closes: nothing to take back
    # Forced closed, then released: neither is an advisory in force.
    now = at_s(30)
    hub.breaker.force(WEB, State.FORCED_CLOSED, now + 60, "stand aside", now)
    for _ in ("forced closed", "released"):
        advisory = hub.circuit_advisory(WEB)
        assert advisory is not None and not advisory.in_force
        assert hub.publish([advisory], now) == []
        hub.breaker.release(WEB, "done", now)
    assert hub.seq == 0 and len(hub) == 0


def test_a_forced_circuit_carries_the_operators_reason_and_a_released_one_closes() -> None:
    hub = hub_for()
    now = at_s(30)
    hub.breaker.force(WEB, State.FORCED_OPEN, now + 600, "maintenance window", now)
    advisory = hub.circuit_advisory(WEB, reason="maintenance window")
    assert advisory is not None
    ((seq, forced),) = hub.publish([advisory], now)
    assert (seq, forced.state, forced.cause) == (1, State.FORCED_OPEN.value, "maintenance window")
    assert forced.blocking and forced.expires_s == now + 600
    assert "maintenance window" in forced.message
    hub.breaker.release(WEB, "back", now + 1)
    released = hub.circuit_advisory(WEB, reason="back")
    assert released is not None
    ((seq, closed),) = hub.publish([released], now + 1)
    assert (seq, closed.state, closed.cause) == (2, CLOSED, "back")


def test_after_a_release_a_later_open_names_the_failure_not_the_old_reason() -> None:
    """The operator's reason belongs to the forced state; it must not outlive it."""
    hub = hub_for()
    now = at_s(5)
    hub.breaker.force(WEB, State.FORCED_OPEN, now + 60, "maintenance window", now)
    hub.breaker.release(WEB, "back", now + 1)
    _, changes = open_web(hub)
    opened = next(a for _, a in changes if a.id == WEB_ID)
    assert opened.state == State.OPEN.value
    assert opened.cause == "transport"
    assert "maintenance window" not in opened.message


# --- expiry -----------------------------------------------------------------------------------


def test_expiry_moves_open_to_half_open_then_drops_it() -> None:
    hub = hub_for(half_open_ttl_s=600.0)
    open_web(hub)
    opened = hub.get(WEB_ID)
    assert opened is not None
    assert hub.expire(opened.expires_s - 1) == []
    changes = hub.expire(opened.expires_s)
    assert len(changes) == 1
    seq, half_open = changes[0]
    assert seq == 5
    assert half_open.state == State.HALF_OPEN.value and not half_open.blocking
    assert half_open.cause == "open_period_over"
    assert (half_open.message, half_open.retry_after_s) == ("", 0.0)
    assert half_open.expires_s == opened.expires_s + 600
    assert hub.expire(half_open.expires_s - 1) == []
    ((seq, dropped),) = hub.expire(half_open.expires_s)
    assert (seq, dropped.id, dropped.state, dropped.cause) == (6, WEB_ID, CLOSED, "expired")
    assert hub.get(WEB_ID) is None


def test_a_turn_block_past_its_expiry_is_over() -> None:
    hub = hub_for()
    ((_, block),) = feed(hub, transport(10, "turn-1"))
    assert hub.expire(block.expires_s - 0.5) == []
    ((seq, over),) = hub.expire(block.expires_s)
    assert (seq, over.id, over.state, over.cause) == (2, block.id, CLOSED, "turn_over")
    assert len(hub) == 0 and hub.expire(block.expires_s + 10_000) == []


def test_the_oldest_advisory_is_evicted_with_a_closed_change() -> None:
    hub = hub_for(max_advisories=2)
    # Three servers, so no circuit opens: three turn blocks only.
    first = feed(hub, transport(1, "t1", server="s1"))[0][1]
    feed(hub, transport(2, "t2", server="s2"))
    changes = feed(hub, transport(3, "t3", server="s3"))
    assert seqs(changes) == [3, 4]
    assert changes[0][1].turn == "t3"
    evicted = changes[1][1]
    assert (evicted.id, evicted.state, evicted.cause) == (first.id, CLOSED, "evicted")
    assert len(hub) == 2 and hub.get(first.id) is None


def test_turn_blocks_are_evicted_before_an_open_circuit_however_old() -> None:
    """Another tenant's flood of turn blocks must not take back a server that is out: a
    mirror that lost it would call the dead server again."""
    hub = hub_for(max_advisories=4)
    open_web(hub)  # the oldest entries: three turn blocks, then the server circuit
    assert hub.get(WEB_ID) is not None
    for i in range(20):
        feed(hub, transport(20 + i, f"flood-{i}", server=f"s{i}", tenant="other"))
    assert hub.get(WEB_ID) is not None and hub.get(WEB_ID).state == State.OPEN.value
    assert len(hub) == 4


# --- resuming ---------------------------------------------------------------------------------


def test_since_gives_exactly_the_missed_changes() -> None:
    hub = hub_for()
    _, changes = open_web(hub)
    changes += feed(hub, transport(13, "t13"))
    assert seqs(changes) == [1, 2, 3, 4, 5]
    assert hub.since(EPOCH, 2, EVERYONE) == changes[2:]
    assert hub.since(EPOCH, 0, EVERYONE) == changes
    assert hub.since(EPOCH, 5, EVERYONE) == []  # up to date


def test_since_says_resync_for_another_epoch_a_future_seq_or_a_gap_too_old() -> None:
    hub = hub_for(replay_changes=3)
    _, changes = open_web(hub)
    changes += feed(hub, transport(13, "t13"))
    assert hub.seq == 5
    assert hub.since("another-epoch", 4, EVERYONE) is None
    assert hub.since(EPOCH, 6, EVERYONE) is None  # from the future: not this process's seq
    assert hub.since(EPOCH, 1, EVERYONE) is None  # changes 2.. are no longer all held
    assert hub.since(EPOCH, 2, EVERYONE) == changes[2:]  # 3, 4, 5: just held
    assert hub.since(EPOCH, 5, EVERYONE) == []


# --- who sees what ----------------------------------------------------------------------------


def test_an_audience_sees_its_tenant_only() -> None:
    hub = hub_for()
    feed(hub, transport(1, "t1", tenant="acme"))
    feed(hub, transport(2, "t2", tenant="globex"))
    acme = hub.snapshot(Audience(tenant="acme"))
    assert [a.tenant for a in acme] == ["acme"]
    assert [a.tenant for a in hub.snapshot(Audience(tenant="globex"))] == ["globex"]
    assert hub.snapshot(EVERYONE) == []  # the default tenant is a tenant like any other
    assert [a.tenant for _, a in hub.since(EPOCH, 0, Audience(tenant="acme")) or []] == ["acme"]


def test_an_audience_filters_by_server() -> None:
    hub = hub_for()
    feed(hub, transport(1, "t1", server="web"))
    feed(hub, transport(2, "t2", server="db"))
    assert [a.server for a in hub.snapshot(Audience(tenant="", servers=frozenset({"db"})))] == [
        "db"
    ]
    both = Audience(tenant="", servers=frozenset({"db", "web"}))
    assert sorted(a.server for a in hub.snapshot(both)) == ["db", "web"]
    assert hub.snapshot(Audience(tenant="", servers=frozenset({"mail"}))) == []


def test_the_harness_filter_applies_to_turn_scopes_only() -> None:
    hub = hub_for()
    for i, harness in enumerate(["h1", "h2", "h2"]):
        feed(hub, transport(10 + i, f"t{i}", harness=harness))
    h1 = hub.snapshot(Audience(tenant="", harness="h1"))
    # h1's own turn block, and the server and tool circuits h2's failure opened: for everyone.
    assert sorted((a.scope.value, a.harness) for a in h1) == [
        ("server", "h2"),
        ("tool", "h2"),
        ("turn_tool", "h1"),
    ]
    h2 = hub.snapshot(Audience(tenant="", harness="h2"))
    assert sorted((a.scope.value, a.harness) for a in h2) == [
        ("server", "h2"),
        ("tool", "h2"),
        ("turn_tool", "h2"),
        ("turn_tool", "h2"),
    ]
    assert len(hub.snapshot(EVERYONE)) == 5


def test_blocking_for_finds_the_turn_block_for_the_exact_call() -> None:
    hub = hub_for()
    call = transport(10, "turn-1")
    feed(hub, call)
    found = hub.blocking_for("", "turn-1", "web", "search", ())
    assert found is not None and found.turn == "turn-1"
    assert hub.blocking_for("", "turn-2", "web", "search", ()) is None
    assert hub.blocking_for("acme", "turn-1", "web", "search", ()) is None
    hub_call = hub_for({"turn_key": TurnKey.CALL})
    feed(hub_call, call)
    assert hub_call.blocking_for("", "turn-1", "web", "search", (call.fingerprint or "",))
    assert hub_call.blocking_for("", "turn-1", "web", "search", ("other",)) is None


# --- the property: resuming from any point rebuilds the present -------------------------------

REPLAY = 12
TENANTS = ("", "acme")
HARNESSES = ("h1", "h2")
TURNS = ("t1", "t2", "t3")
SERVERS = ("web", "db", None)
TOOLS = ("search", "fetch")
AUDIENCES = (
    Audience(tenant=""),
    Audience(tenant="acme"),
    Audience(tenant="", servers=frozenset({"web"})),
    Audience(tenant="", harness="h1"),
    Audience(tenant="acme", servers=frozenset({"db"}), harness="h2"),
)
STEPS = st.sampled_from([0.0, 1.0, 20.0, 120.0, 400.0, 700.0, 4000.0])
OUTCOMES = st.sampled_from(
    [
        (Outcome.OK, None),
        (Outcome.FAILED, FailureClass.TRANSPORT),
        (Outcome.FAILED, FailureClass.TOOL_ERROR),
        (Outcome.FAILED, FailureClass.TIMEOUT),
        (Outcome.NEUTRAL, None),
    ]
)
Mark = tuple[int, Audience, dict[str, Advisory]]


def apply(mirror: dict[str, Advisory], changes: list[Change]) -> dict[str, Advisory]:
    """What a harness does with a change: replace the advisory with its id, or drop it."""
    mirror = dict(mirror)
    for _, advisory in changes:
        if advisory.state == CLOSED:
            mirror.pop(advisory.id, None)
        else:
            mirror[advisory.id] = advisory
    return mirror


class ResumeRules(RuleBasedStateMachine):
    """Any sequence of calls, late spans, expiry and operator actions; marks taken on the way.

    From every mark (the seq and the snapshot a subscriber held), the changes ``since``
    gives, applied to that snapshot, are the current snapshot; or ``since`` says resync,
    and only when the changes after the mark are no longer all held.
    """

    def __init__(self) -> None:
        super().__init__()
        self.hub = hub_for(
            {"open_base_s": 300.0, "turn_idle_s": 3600.0},
            replay_changes=REPLAY,
            max_advisories=6,
            half_open_ttl_s=600.0,
        )
        self.now = at_s(0)
        self.marks: list[Mark] = []

    def call_at(self, start_s: float, **kwargs: Any) -> None:
        tenant, harness, outcome, failure_class = (
            kwargs.pop(k) for k in ("tenant", "harness", "outcome", "failure_class")
        )
        call = tool_call(
            (start_s - DAY_S) / 60,
            outcome=outcome,
            failure_class=failure_class,
            excerpt="failed" if failure_class else "",
            duration_s=1.0,
            **kwargs,
        )
        changes = feed(self.hub, who(call, tenant, harness), self.now)
        self.check_numbering(changes)

    def check_numbering(self, changes: list[Change]) -> None:
        numbers = seqs(changes)
        assert numbers == list(range(self.hub.seq - len(numbers) + 1, self.hub.seq + 1))

    @rule(
        step=STEPS,
        tenant=st.sampled_from(TENANTS),
        harness=st.sampled_from(HARNESSES),
        turn=st.sampled_from(TURNS),
        server=st.sampled_from(SERVERS),
        tool=st.sampled_from(TOOLS),
        outcome=OUTCOMES,
        argument=st.integers(0, 1),
    )
    def a_call(
        self,
        step: float,
        outcome: tuple[Outcome, FailureClass | None],
        argument: int,
        **kwargs: Any,
    ) -> None:
        self.now += step
        self.call_at(
            self.now,
            outcome=outcome[0],
            failure_class=outcome[1],
            arguments={"a": argument},
            **kwargs,
        )

    @rule(
        late=st.sampled_from([3.0, 60.0, 900.0]),
        tenant=st.sampled_from(TENANTS),
        harness=st.sampled_from(HARNESSES),
        turn=st.sampled_from(TURNS),
        server=st.sampled_from(SERVERS),
        tool=st.sampled_from(TOOLS),
    )
    def a_late_failure(self, late: float, **kwargs: Any) -> None:
        """A span that arrives after later ones: exporters batch, hosts disagree."""
        self.call_at(
            self.now - late,
            outcome=Outcome.FAILED,
            failure_class=FailureClass.TRANSPORT,
            **kwargs,
        )

    @rule(step=STEPS)
    def expire(self, step: float) -> None:
        self.now += step
        self.check_numbering(self.hub.expire(self.now))

    @rule(
        tenant=st.sampled_from(TENANTS),
        server=st.sampled_from(["web", "db"]),
        forced=st.sampled_from([State.FORCED_OPEN, State.FORCED_CLOSED, None]),
        for_s=st.sampled_from([60.0, 3600.0]),
    )
    def an_operator(self, tenant: str, server: str, forced: State | None, for_s: float) -> None:
        key = CircuitKey(Scope.SERVER, server, tenant)
        if forced is None:
            if self.hub.breaker.release(key, "released", self.now) is None:
                return
            reason = "released"
        else:
            try:
                self.hub.breaker.force(key, forced, self.now + for_s, "operator", self.now)
            except IllegalTransition:
                return
            reason = "operator"
        advisory = self.hub.circuit_advisory(key, reason=reason)
        assert advisory is not None
        self.check_numbering(self.hub.publish([advisory], self.now))

    @rule(audience=st.sampled_from(AUDIENCES))
    def a_subscriber_takes_a_snapshot(self, audience: Audience) -> None:
        mirror = {a.id: a for a in self.hub.snapshot(audience)}
        self.marks.append((self.hub.seq, audience, mirror))

    @invariant()
    def resuming_from_any_mark_rebuilds_the_current_snapshot(self) -> None:
        hub = self.hub
        for seq, audience, mirror in self.marks:
            changes = hub.since(EPOCH, seq, audience)
            if changes is None:
                assert hub.seq - seq > REPLAY  # only when the changes are no longer held
                continue
            assert all(seq < s <= hub.seq for s in seqs(changes))
            assert seqs(changes) == sorted(set(seqs(changes)))
            assert all(audience.sees(a) for _, a in changes)
            assert apply(mirror, changes) == {a.id: a for a in hub.snapshot(audience)}

    @invariant()
    def bounded(self) -> None:
        assert len(self.hub) <= 6


def test_resuming_from_any_point_rebuilds_the_current_snapshot() -> None:
    run_state_machine_as_test(
        ResumeRules,
        settings=settings(
            max_examples=150,
            stateful_step_count=40,
            deadline=None,
            derandomize=True,
            database=None,
        ),
    )


# --- roster collapses -------------------------------------------------------------------------


def roster_listing(model_round: int, offered: int, turn: str = "turn-r") -> ToolListing:
    start_ns = int((DAY_S + 600 + model_round) * NS_PER_S)
    return ToolListing(
        turn=turn,
        round=model_round,
        server=None,
        configured=3,
        registered=offered,
        offered=offered,
        start_ns=start_ns,
        end_ns=start_ns + NS_PER_S // 20,
        trace_id=b"\x01" * 16,
        span_ids=(model_round.to_bytes(8, "big"),),
        dialect=Dialect.HARNESS,
        harness=HARNESS,
        tenant="acme",
    )


def test_a_roster_collapse_tells_the_harness_to_relist_until_it_recovers() -> None:
    hub = hub_for()
    roster = RosterHealth()
    now = at_s(10)

    def listed(model_round: int, offered: int) -> list[Change]:
        return hub.observe_roster(roster.observe(roster_listing(model_round, offered)), now)

    assert listed(1, 86) == [] and listed(2, 86) == []
    (opened,) = listed(3, 0)
    advisory = opened[1]
    assert (advisory.scope, advisory.state) == (AdvisoryScope.TURN_ROSTER, ROSTER_COLLAPSED)
    assert (advisory.turn, advisory.tenant, advisory.harness) == ("turn-r", "acme", HARNESS)
    assert not advisory.blocking  # it asks for a re-list; it refuses no call
    assert "fell from 86 to none in round 3" in advisory.message
    assert "tools/list" in advisory.message
    (extended,) = listed(4, 0)
    assert "rounds 3-4" in extended[1].message and extended[1].id == advisory.id
    (recovered,) = listed(5, 86)
    assert recovered[1].state == CLOSED and recovered[1].cause == "recovered at round 5"
    assert hub.get(advisory.id) is None
    # Only the harness's own audience (and tenant) sees it.
    assert Audience(tenant="acme", harness=HARNESS).sees(advisory)
    assert not Audience(tenant="acme", harness="someone-else").sees(advisory)
    assert not Audience(tenant="globex").sees(advisory)
