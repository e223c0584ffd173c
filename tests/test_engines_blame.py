"""Who a call's outcome blames: its tool, its server, or neither.

The rules are data (``processor/engines/blame.py``) and a table in docs/breaker.md; a test
keeps the two alike. Then the cases of that page, through a real Breaker on the default
config: a dead tool on a live server, a dead session, the blast radius. The outcomes
come from real spans through the classifier where the origin matters (the words and
flags that say whether the server answered), and a stateful property drives one server
with several tools through any sequence of outcomes: its circuit never opens on the
ratio rule while a success stands in its window (at the default ratio, 1.0), and never on
anything but evidence about the server. It runs on the default config and with the ratio
rule alone (consecutive_failures 0), so the ratio rule's openings are checked, not merely
allowed for.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, cast

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test
from mcp_breaker_client.shared.verdict import FailureClass, FailureOrigin, Outcome, Verdict

from processor.classify.events import ToolCall
from processor.config import BreakerConfig
from processor.engines.blame import BLAME_RULES, CallEvidence, Count, call_evidence
from processor.engines.breaker import Breaker
from processor.engines.circuit import CircuitKey, Scope, State, Trigger
from tests.classify_builders import CLIENT, SERVER, classify_all, make_span, only_call
from tests.engine_builders import failed, tool_call

DOCS = Path(__file__).resolve().parents[1] / "docs" / "breaker.md"
WEB = CircuitKey(Scope.SERVER, "web")


def tool_key(tool: str, server: str = "web") -> CircuitKey:
    return CircuitKey(Scope.TOOL, f"{server}/{tool}")


def breaker() -> Breaker:
    return Breaker(BreakerConfig(), jitter=lambda: 0.5)


def state(engine: Breaker, key: CircuitKey) -> State:
    circuit = engine.circuits.peek(key)
    return circuit.state if circuit is not None else State.CLOSED


def with_origin(call: ToolCall, origin: FailureOrigin) -> ToolCall:
    return replace(call, verdict=replace(call.verdict, origin=origin))


# --- the rules, and the page that shows them ---------------------------------------------------

_CELL = {Count.FAILURE: "failure", Count.SUCCESS: "success", Count.NOTHING: "—"}


def test_the_docs_table_is_the_rules() -> None:
    rows = re.findall(r"^\| `(\w+)` \| (\S+) \| (\S+) \|$", DOCS.read_text(), re.MULTILINE)
    documented = {name: (tool, server) for name, tool, server in rows}
    assert documented == {
        evidence.value: (_CELL[rule.tool], _CELL[rule.server])
        for evidence, rule in BLAME_RULES.items()
    }
    assert set(BLAME_RULES) == set(CallEvidence)


EVIDENCE_OF = [
    (Outcome.OK, None, None, CallEvidence.OK),
    (Outcome.FAILED, FailureClass.TRANSPORT, FailureOrigin.SESSION, CallEvidence.SESSION_FAILURE),
    (Outcome.FAILED, FailureClass.TRANSPORT, FailureOrigin.TOOL, CallEvidence.TOOL_FAILURE),
    (Outcome.FAILED, FailureClass.TIMEOUT, FailureOrigin.NO_ANSWER, CallEvidence.NO_ANSWER),
    (Outcome.FAILED, FailureClass.TIMEOUT, FailureOrigin.TOOL, CallEvidence.TOOL_FAILURE),
    (Outcome.FAILED, FailureClass.TOOL_ERROR, FailureOrigin.TOOL, CallEvidence.TOOL_FAILURE),
    (Outcome.FAILED, FailureClass.HIDDEN, FailureOrigin.TOOL, CallEvidence.TOOL_FAILURE),
    (Outcome.FAILED, FailureClass.UNKNOWN_TOOL, FailureOrigin.TOOL, CallEvidence.TOOL_FAILURE),
    (Outcome.FAILED, FailureClass.PROTOCOL, FailureOrigin.TOOL, CallEvidence.CALLER_ERROR),
    # An event with no origin recorded is read by its class.
    (Outcome.FAILED, FailureClass.TRANSPORT, None, CallEvidence.SESSION_FAILURE),
    (Outcome.FAILED, FailureClass.TIMEOUT, None, CallEvidence.NO_ANSWER),
    (Outcome.FAILED, FailureClass.TOOL_ERROR, None, CallEvidence.TOOL_FAILURE),
    (Outcome.NEUTRAL, None, None, CallEvidence.NO_OUTCOME),
    (Outcome.UNKNOWN, None, None, CallEvidence.NO_OUTCOME),
]


@pytest.mark.parametrize(("outcome", "failure_class", "origin", "evidence"), EVIDENCE_OF)
def test_what_an_outcome_is_evidence_of(
    outcome: Outcome,
    failure_class: FailureClass | None,
    origin: FailureOrigin | None,
    evidence: CallEvidence,
) -> None:
    call = tool_call(1, outcome=outcome, failure_class=failure_class)
    call = replace(
        call, verdict=Verdict(outcome=outcome, failure_class=failure_class, origin=origin)
    )
    assert call_evidence(call) is evidence


# --- where the origin comes from: real span shapes ---------------------------------------------

BACKEND_DOWN = "billing backend unreachable: [Errno 111] Connection refused"
SESSION_CLOSED = (
    "mcp-beaver: upstream MCP session is closed (reconnect also failed: reconnect upstream MCP "
    '"http://127.0.0.1:8931/mcp": sending "notifications/initialized": Bad Request)'
)

ORIGINS: list[tuple[str, dict[str, Any], FailureClass, FailureOrigin]] = [
    (
        "a tool's result says its backend refused the connection",
        {"mcp.tool.outcome": "failed", "mcp.tool.error": BACKEND_DOWN, "mcp.tool.is_error": True},
        FailureClass.TRANSPORT,
        FailureOrigin.TOOL,
    ),
    (
        "the call raised: connection refused, no answer",
        {"mcp.tool.outcome": "failed", "mcp.tool.error": "ConnectError: Connection refused"},
        FailureClass.TRANSPORT,
        FailureOrigin.SESSION,
    ),
    (
        "a proxy answers that its upstream MCP session is closed (the seed)",
        {"mcp.tool.outcome": "failed", "mcp.tool.error": SESSION_CLOSED, "mcp.tool.is_error": True},
        FailureClass.TRANSPORT,
        FailureOrigin.SESSION,
    ),
    (
        "the SDK timed out waiting (-32001)",
        {
            "mcp.tool.outcome": "failed",
            "mcp.tool.error": "Request timed out",
            "error.type": "-32001",
        },
        FailureClass.TIMEOUT,
        FailureOrigin.NO_ANSWER,
    ),
    (
        "a tool reports its own timeout in its result",
        {
            "mcp.tool.outcome": "failed",
            "mcp.tool.error": "query timed out",
            "mcp.tool.is_error": True,
        },
        FailureClass.TIMEOUT,
        FailureOrigin.TOOL,
    ),
]


@pytest.mark.parametrize(
    ("attributes", "failure_class", "origin"), [o[1:] for o in ORIGINS], ids=[o[0] for o in ORIGINS]
)
def test_the_origin_of_a_harness_failure(
    attributes: dict[str, Any], failure_class: FailureClass, origin: FailureOrigin
) -> None:
    span = make_span("mcp.tool.call", {"mcp.tool.name": "fetch_invoice", **attributes})
    call = only_call(classify_all(span))
    assert (call.failure_class, call.verdict.origin) == (failure_class, origin)


def test_a_server_span_is_an_answer_from_the_server() -> None:
    """The mcp SDK 2.x server span of a tool that raised: the server ran the call."""
    server = make_span(
        "tools/call fetch_invoice",
        {"mcp.method.name": "tools/call", "error.type": "tool_error"},
        kind=SERVER,
        status=2,
        message=BACKEND_DOWN,
    )
    call = only_call(classify_all(server))
    assert (call.failure_class, call.verdict.origin) == (FailureClass.TRANSPORT, FailureOrigin.TOOL)


def test_a_client_span_that_raised_alone_is_no_answer() -> None:
    client = make_span(
        "tools/call fetch_invoice",
        {"mcp.method.name": "tools/call"},
        kind=CLIENT,
        status=2,
        message="ClosedResourceError: connection closed",
    )
    call = only_call(classify_all(client))
    assert call.verdict.origin is FailureOrigin.SESSION


# --- the cases of docs/breaker.md, on the default config ------------------------------------


def test_a_dead_tool_on_a_live_server_opens_the_tool_and_not_the_server() -> None:
    """Turns a minute apart, inside the tool circuit's first open period (5 minutes)."""
    engine = breaker()
    for turn in range(6):
        minute = float(turn)
        weather = engine.observe(tool_call(minute, turn=f"t{turn}", tool="get_weather"))
        invoice = engine.observe(
            with_origin(
                failed(
                    minute + 0.5,
                    FailureClass.TRANSPORT,
                    turn=f"t{turn}",
                    tool="fetch_invoice",
                    excerpt=BACKEND_DOWN,
                ),
                FailureOrigin.TOOL,
            )
        )
        assert weather.dead_call is False  # the healthy sibling is never refused
        assert invoice.dead_call is (turn >= 3)  # refused up front from the fourth turn
    assert state(engine, tool_key("fetch_invoice")) is State.OPEN
    assert state(engine, WEB) is State.CLOSED


def test_a_dead_session_takes_the_server_out_across_its_tools() -> None:
    engine = breaker()
    tools = ("navigate", "snapshot", "click")
    decisions = [
        engine.observe(failed(i, FailureClass.TRANSPORT, turn=f"t{i}", tool=tools[i % 3]))
        for i in range(3)
    ]
    assert state(engine, WEB) is State.OPEN
    assert decisions[-1].transitions[-1].trigger is Trigger.CONSECUTIVE_FAILURES
    for tool in (*tools, "never_called"):
        later = engine.observe(tool_call(4, turn="later", tool=tool))
        assert (later.dead_call, later.rule is not None and later.rule.value) == (True, "server")


def test_a_healthy_sibling_resets_the_servers_streak() -> None:
    engine = breaker()
    for i in range(6):
        if i % 2:
            engine.observe(tool_call(i, turn=f"t{i}", tool="get_weather"))
        else:
            engine.observe(failed(i, FailureClass.TRANSPORT, turn=f"t{i}", tool="fetch"))
    assert state(engine, WEB) is State.CLOSED


@pytest.mark.parametrize(
    ("failing", "healthy", "server_opens"),
    [(2, 1, True), (1, 1, False), (3, 0, True), (1, 2, False)],
    ids=["2 of 3", "1 of 2", "3 of 3", "1 of 3"],
)
def test_the_blast_radius(failing: int, healthy: int, server_opens: bool) -> None:
    """More than half of a server's tools open at once: the server circuit opens too."""
    engine = breaker()
    for n in range(healthy):
        engine.observe(tool_call(n * 0.1, turn=f"ok{n}", tool=f"good{n}"))
    for n in range(failing):
        for i in range(3):
            call = failed(1 + n * 0.5 + i * 0.1, FailureClass.TOOL_ERROR, tool=f"bad{n}")
            engine.observe(replace(call, turn=f"bad{n}-{i}"))
    assert all(state(engine, tool_key(f"bad{n}")) is State.OPEN for n in range(failing))
    assert (state(engine, WEB) is State.OPEN) is server_opens
    if server_opens:
        trigger = engine.circuits[WEB].history[-1]
        assert engine.circuits[WEB].state is State.OPEN and trigger[1] is State.CLOSED
        refused = engine.observe(tool_call(3, turn="later", tool="good0"))
        assert refused.dead_call and refused.rule is not None and refused.rule.value == "server"


def test_timeouts_open_the_tool_and_leave_the_server() -> None:
    engine = breaker()
    for i in range(4):
        engine.observe(failed(i, FailureClass.TIMEOUT, turn=f"t{i}", tool="slow"))
    assert state(engine, tool_key("slow")) is State.OPEN
    assert state(engine, WEB) is State.CLOSED
    assert engine.circuits[WEB].calls_and_failures() == (0, 0)


def test_invalid_params_are_the_callers_and_count_for_the_server() -> None:
    engine = breaker()
    for i in range(5):
        engine.observe(failed(i, FailureClass.PROTOCOL, turn=f"t{i}", tool="strict"))
    assert tool_key("strict") not in engine.circuits or engine.circuits[
        tool_key("strict")
    ].calls_and_failures() == (0, 0)
    assert engine.circuits[WEB].calls_and_failures() == (5, 0)


# --- any sequence of outcomes on one server -------------------------------------------------

TOOLS = ("a", "b", "c")
OUTCOMES = {
    "ok": lambda m, tool, turn: tool_call(m, turn=turn, tool=tool),
    "session": lambda m, tool, turn: failed(m, FailureClass.TRANSPORT, turn=turn, tool=tool),
    "tool": lambda m, tool, turn: failed(m, FailureClass.TOOL_ERROR, turn=turn, tool=tool),
    "timeout": lambda m, tool, turn: failed(m, FailureClass.TIMEOUT, turn=turn, tool=tool),
    "protocol": lambda m, tool, turn: failed(m, FailureClass.PROTOCOL, turn=turn, tool=tool),
}
# Minutes between calls; 90 is past the server's window (an hour): it starts afresh.
GAPS = [0.1, 1.0, 4.0, 30.0, 90.0]


# The default config, where three failures in a row open a circuit before the ratio rule
# can; then the ratio rule alone (consecutive_failures 0 turns the fast path off), at
# "only failures" and at a ratio a success in the window does not keep shut.
SERVER_CONFIGS = {
    "default": BreakerConfig(),
    "ratio rule alone, only failures": BreakerConfig(consecutive_failures=0),
    "ratio rule alone, 0.6": BreakerConfig(consecutive_failures=0, failure_ratio=0.6),
}


class OneServer(RuleBasedStateMachine):
    """One server, three tools, any outcomes minutes apart: the server opens only on
    evidence about the server, and the ratio rule opens it exactly when its window says so.
    ``seen`` counts the server's openings by trigger over a whole run, so a run can show
    that the rules it checks did fire."""

    config = BreakerConfig()
    seen: ClassVar[Counter[str]] = Counter()

    def __init__(self) -> None:
        super().__init__()
        self.engine = Breaker(self.config, jitter=lambda: 0.5)
        self.minute = 0.0
        self.turn = 0

    @rule(
        tool=st.sampled_from(TOOLS),
        outcome=st.sampled_from(sorted(OUTCOMES)),
        gap=st.sampled_from(GAPS),
        new_turn=st.booleans(),
    )
    def call(self, tool: str, outcome: str, gap: float, new_turn: bool) -> None:
        self.minute += gap
        self.turn += new_turn
        self.observe(tool, outcome)

    @rule(tools=st.lists(st.sampled_from(TOOLS), min_size=1, max_size=4))
    def outage(self, tools: list[str]) -> None:
        """The session dies: a burst of failed calls, each its own turn, seconds apart."""
        for tool in tools:
            self.minute += 0.1
            self.turn += 1
            self.observe(tool, "session")

    def observe(self, tool: str, outcome: str) -> None:
        server = self.engine.circuits.peek(WEB)
        window_before = list(server.window) if server is not None else []
        closed_before = server is None or server.state is State.CLOSED
        decision = self.engine.observe(OUTCOMES[outcome](self.minute, tool, f"t{self.turn}"))
        c = self.config
        for transition in decision.transitions:
            if transition.key != WEB or transition.target is not State.OPEN:
                continue
            self.seen[transition.trigger.value] += 1
            event(f"server opened: {transition.trigger.value}")
            if transition.trigger is Trigger.FAILURE_RATIO:
                calls, failures = self.engine.circuits[WEB].calls_and_failures()
                assert outcome == "session"
                assert calls >= c.min_calls and failures >= c.failure_ratio * calls
                if c.failure_ratio == 1.0:
                    # Only failures: a success anywhere in the window keeps it shut.
                    assert failures == calls
                if failures < calls:
                    self.seen["failure_ratio with a success in the window"] += 1
            elif transition.trigger is Trigger.CONSECUTIVE_FAILURES:
                assert c.consecutive_failures > 0 and outcome == "session"
                assert all(failed for _, failed in window_before[-2:])
            elif transition.trigger is Trigger.BLAST_RADIUS:
                assert self.engine.server_out("web", now_s=transition.at_s)
            else:
                assert transition.trigger is Trigger.PROBE_FAILED and outcome == "session"
        # And the other way: a closed server whose window now meets the ratio is open.
        after = self.engine.circuits.peek(WEB)
        if closed_before and after is not None and outcome == "session":
            calls, failures = after.calls_and_failures()
            if calls >= c.min_calls and failures >= c.failure_ratio * calls:
                assert after.state is State.OPEN
            elif failures >= c.min_calls and after.state is State.CLOSED:
                self.seen["held shut by a success in the window"] += 1


@pytest.mark.parametrize("name", list(SERVER_CONFIGS))
def test_a_server_opens_only_on_evidence_about_the_server(name: str) -> None:
    config = SERVER_CONFIGS[name]
    fresh = {"config": config, "seen": Counter()}
    machine = cast(type[OneServer], type(f"OneServer[{name}]", (OneServer,), fresh))
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=150,
            stateful_step_count=40,
            deadline=None,
            derandomize=True,
            database=None,
        ),
    )
    seen = machine.seen
    # Not vacuous: the rules the run checks did open the server, many times over.
    if config.consecutive_failures:
        assert seen[Trigger.CONSECUTIVE_FAILURES.value] > 0
    else:
        assert seen[Trigger.CONSECUTIVE_FAILURES.value] == 0
        assert seen[Trigger.FAILURE_RATIO.value] > 0
    if config.failure_ratio < 1:
        assert seen["failure_ratio with a success in the window"] > 0
    elif not config.consecutive_failures:
        # Enough failures to open it, but a success among them: the case the rule is for.
        assert seen["held shut by a success in the window"] > 0


# --- the ratio rule, on its own --------------------------------------------------------------

RATIO_ALONE = BreakerConfig(consecutive_failures=0)


def session_failure(minute: float, tool: str) -> ToolCall:
    return failed(minute, FailureClass.TRANSPORT, turn=f"t{minute}", tool=tool)


def test_the_ratio_rule_opens_a_server_whose_window_holds_only_failures() -> None:
    """With the fast path off, min_calls (3) session failures across tools open the server
    on the ratio rule alone."""
    engine = Breaker(RATIO_ALONE, jitter=lambda: 0.5)
    decisions = [engine.observe(session_failure(i, TOOLS[i])) for i in range(3)]
    assert [tuple(d.transitions) for d in decisions[:2]] == [(), ()]
    (opened,) = [t for t in decisions[2].transitions if t.key == WEB]
    assert (opened.target, opened.trigger) == (State.OPEN, Trigger.FAILURE_RATIO)
    assert engine.circuits[WEB].calls_and_failures() == (3, 3)


@pytest.mark.parametrize(("failure_ratio", "opens_at"), [(1.0, None), (0.75, 3), (0.6, 2)], ids=str)
def test_one_success_in_the_window_against_the_ratio(
    failure_ratio: float, opens_at: int | None
) -> None:
    """A success, then session failures: at ratio 1.0 the server never opens; below it,
    once failures reach the ratio of the window's calls."""
    config = replace(RATIO_ALONE, failure_ratio=failure_ratio)
    engine = Breaker(config, jitter=lambda: 0.5)
    engine.observe(tool_call(0, turn="t-ok", tool="a"))
    for n in range(1, 6):
        decision = engine.observe(session_failure(n, TOOLS[n % 3]))
        opened = [t.trigger for t in decision.transitions if t.key == WEB]
        assert opened == ([Trigger.FAILURE_RATIO] if n == opens_at else []), n
        if n == opens_at:  # a success and n failures: the window that opened it
            assert engine.circuits[WEB].calls_and_failures() == (n + 1, n)
    assert (state(engine, WEB) is State.OPEN) is (opens_at is not None)
