"""The harness's mirror of advisories: snapshots and changes in, a local check out.

Advisories are built as the service sends them (``processor.advisories.v1``); the
fingerprint of a turn-call advisory is the one ``mcp_breaker_client.shared.fingerprint`` gives.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_breaker_client.calls import call_fingerprint, resolve_server
from mcp_breaker_client.mirror import Decision, Mirror
from mcp_breaker_client.shared.fingerprint import arguments_digest, fingerprint
from mcp_breaker_client.v1 import advisories_pb2 as pb

NOW_S = 1_787_011_200.0  # a fixed wall-clock time; the mirror is given its clock
NS = 1_000_000_000
SERVER, TOOL, TURN = "playwright", "playwright__browser_navigate", "turn-0106"
ARGUMENTS = {"url": "https://artifacts.example.test/run/1539078028959944794"}
A_FUTURE_STATE = 42  # a state a later version of the contract might add


def advisory(
    advisory_id: str = "a",
    *,
    scope: int = pb.SCOPE_TURN_TOOL,
    state: int = pb.STATE_TURN_BLOCKED,
    server: str = SERVER,
    tool: str = TOOL,
    turn: str = TURN,
    print_: str = "",
    enforced: bool = True,
    expires_s: float = 0.0,
    message: str = "`playwright__browser_navigate` is unavailable for the rest of this turn",
) -> pb.Advisory:
    return pb.Advisory(
        id=advisory_id,
        scope=scope,  # type: ignore[arg-type]
        state=state,  # type: ignore[arg-type]
        server=server,
        tool=tool if scope != pb.SCOPE_SERVER else "",
        turn=turn if scope in (pb.SCOPE_TURN_TOOL, pb.SCOPE_TURN_CALL) else "",
        fingerprint=print_,
        enforced=enforced,
        expires_unix_nano=int(expires_s * NS),
        message=message,
    )


def check(mirror: Mirror, **call: Any) -> Decision:
    return mirror.check(
        **{**dict(turn=TURN, server=SERVER, tool=TOOL, now_s=NOW_S), **call}
    ).decision


def test_a_snapshot_replaces_everything_and_a_change_replaces_by_id() -> None:
    mirror = Mirror()
    mirror.replace("epoch-1", 7, [advisory("a"), advisory("b", turn="other")])
    assert {a.id for a in mirror.advisories()} == {"a", "b"}
    assert (mirror.epoch, mirror.last_seq) == ("epoch-1", 7)

    mirror.replace("epoch-1", 9, [advisory("c")])
    assert [a.id for a in mirror.advisories()] == ["c"]

    mirror.apply("epoch-1", 10, advisory("c", state=pb.STATE_OPEN, scope=pb.SCOPE_TOOL))
    held = mirror.get("c")
    assert held is not None and held.state == pb.STATE_OPEN and held.scope == pb.SCOPE_TOOL
    assert check(mirror, turn="any turn") is Decision.DENY  # now across turns

    mirror.apply("epoch-1", 11, advisory("c", state=pb.STATE_CLOSED))
    assert len(mirror) == 0 and mirror.last_seq == 11
    assert check(mirror) is Decision.ALLOW


def test_messages_of_the_stream_and_a_heartbeat_does_not_move_the_position() -> None:
    mirror = Mirror()
    snapshot = pb.SubscribeResponse(
        epoch="e", seq=3, snapshot=pb.Snapshot(advisories=[advisory("a")])
    )
    assert mirror.apply_message(snapshot) == "snapshot"
    heartbeat = pb.SubscribeResponse(epoch="e", seq=5, heartbeat=pb.Heartbeat(at_unix_nano=1))
    assert mirror.apply_message(heartbeat) == "heartbeat"
    assert mirror.last_seq == 3  # change 4 may still be on its way
    change = pb.SubscribeResponse(epoch="e", seq=4, change=advisory("a", state=pb.STATE_CLOSED))
    assert mirror.apply_message(change) == "change"
    assert (len(mirror), mirror.last_seq) == (0, 4)


def test_a_snapshot_in_parts_replaces_with_the_first_and_completes_with_the_last() -> None:
    mirror = Mirror()
    mirror.replace("e", 2, [advisory("stale")])

    def part(*ids: str, first: bool, more: bool) -> pb.SubscribeResponse:
        advisories = [advisory(i, turn=i) for i in ids]
        snapshot = pb.Snapshot(advisories=advisories, first=first, more=more)
        return pb.SubscribeResponse(epoch="e", seq=9, snapshot=snapshot)

    mirror.apply_message(part("a", "b", first=True, more=True))
    assert {a.id for a in mirror.advisories()} == {"a", "b"} and not mirror.complete
    # No position until the snapshot is whole: a stream broken here starts over.
    assert (mirror.epoch, mirror.last_seq) == ("", 0)
    mirror.apply_message(part("c", first=False, more=True))
    mirror.apply_message(part("d", first=False, more=False))
    assert {a.id for a in mirror.advisories()} == {"a", "b", "c", "d"} and mirror.complete
    assert mirror.last_seq == 9
    # A later snapshot starts over.
    mirror.apply_message(part("e", first=True, more=False))
    assert [a.id for a in mirror.advisories()] == ["e"] and mirror.complete


def test_each_scope_matches_its_own_calls_only() -> None:
    mirror = Mirror()
    mirror.replace("e", 1, [advisory("turn-tool")])
    assert check(mirror) is Decision.DENY
    assert check(mirror, turn="another turn") is Decision.ALLOW
    assert check(mirror, tool="playwright__browser_click") is Decision.ALLOW
    assert check(mirror, server="other") is Decision.ALLOW

    mirror.replace("e", 2, [advisory("server", scope=pb.SCOPE_SERVER, state=pb.STATE_OPEN)])
    assert check(mirror, turn="any", tool="playwright__browser_click") is Decision.DENY
    assert check(mirror, server="github", tool="search") is Decision.ALLOW

    mirror.replace("e", 3, [advisory("tool", scope=pb.SCOPE_TOOL, state=pb.STATE_FORCED_OPEN)])
    assert check(mirror, turn="any") is Decision.DENY
    assert check(mirror, tool="playwright__browser_click") is Decision.ALLOW
    assert check(mirror, server="elsewhere") is Decision.ALLOW


def test_an_exact_call_matches_by_the_fingerprint_the_service_computes() -> None:
    print_ = fingerprint(SERVER, TOOL, ARGUMENTS)
    mirror = Mirror()
    mirror.replace("e", 1, [advisory("call", scope=pb.SCOPE_TURN_CALL, print_=print_)])
    assert check(mirror, arguments=ARGUMENTS) is Decision.DENY
    # The same call, written differently: canonical JSON makes them one call.
    assert check(mirror, arguments={"url": ARGUMENTS["url"]}) is Decision.DENY
    assert check(mirror, fingerprint=print_) is Decision.DENY
    assert check(mirror, arguments={"url": "https://elsewhere.test"}) is Decision.ALLOW
    assert check(mirror, arguments=None) is Decision.ALLOW  # no arguments, no fingerprint
    assert check(mirror, turn="another", arguments=ARGUMENTS) is Decision.ALLOW
    # 2.0 and 2 are one argument in either form: the digest is over canonical JSON.
    assert call_fingerprint(SERVER, TOOL, {"n": 2.0}) == call_fingerprint(SERVER, TOOL, {"n": 2})


def test_an_exact_call_matches_the_digest_form_this_library_records() -> None:
    """The library records only the arguments' digest, so the service fingerprints
    {"args_hash": digest}; the mirror matches that form as well as the raw one."""
    print_ = fingerprint(SERVER, TOOL, {"args_hash": arguments_digest(ARGUMENTS)})
    assert print_ == call_fingerprint(SERVER, TOOL, ARGUMENTS)
    mirror = Mirror()
    mirror.replace("e", 1, [advisory("call", scope=pb.SCOPE_TURN_CALL, print_=print_)])
    assert check(mirror, arguments=ARGUMENTS) is Decision.DENY
    assert check(mirror, arguments={"url": "https://elsewhere.test"}) is Decision.ALLOW


def test_the_server_is_named_from_the_tool_prefix_as_the_service_does() -> None:
    assert resolve_server(None, "playwright__browser_navigate") == "playwright"
    assert resolve_server("", "__odd") == ""
    assert resolve_server("named", "playwright__x") == "named"
    mirror = Mirror()
    mirror.replace("e", 1, [advisory("s", scope=pb.SCOPE_SERVER, state=pb.STATE_OPEN)])
    assert check(mirror, server=None) is Decision.DENY


def test_states_half_open_probes_forced_closed_allows_an_unknown_state_refuses() -> None:
    mirror = Mirror()
    for state, expected in (
        (pb.STATE_HALF_OPEN, Decision.PROBE_NEEDED),
        (pb.STATE_FORCED_CLOSED, Decision.ALLOW),
        (pb.STATE_UNSPECIFIED, Decision.ALLOW),
        (pb.STATE_OPEN, Decision.DENY),
        (pb.STATE_FORCED_OPEN, Decision.DENY),
        (pb.STATE_TURN_BLOCKED, Decision.DENY),
        (A_FUTURE_STATE, Decision.DENY),
    ):
        mirror.replace("e", 1, [advisory("t", scope=pb.SCOPE_TOOL, state=state)])
        assert check(mirror) is expected, state


def test_a_refusal_anywhere_beats_a_probe_elsewhere() -> None:
    mirror = Mirror()
    mirror.replace(
        "e",
        1,
        [
            advisory("server", scope=pb.SCOPE_SERVER, state=pb.STATE_HALF_OPEN),
            advisory("tool", scope=pb.SCOPE_TOOL, state=pb.STATE_OPEN),
        ],
    )
    result = mirror.check(turn=TURN, server=SERVER, tool=TOOL, now_s=NOW_S)
    assert result.decision is Decision.DENY and result.advisory is not None
    assert result.advisory.id == "tool"


def test_expired_advisories_no_longer_apply_but_an_expired_open_circuit_is_half_open() -> None:
    mirror = Mirror()
    past, future = NOW_S - 1, NOW_S + 60
    mirror.replace("e", 1, [advisory("t", expires_s=past)])
    assert check(mirror) is Decision.ALLOW
    mirror.replace("e", 2, [advisory("t", expires_s=future)])
    assert check(mirror) is Decision.DENY
    assert check(mirror, now_s=future + 1) is Decision.ALLOW
    mirror.replace(
        "e", 3, [advisory("c", scope=pb.SCOPE_TOOL, state=pb.STATE_OPEN, expires_s=past)]
    )
    assert check(mirror) is Decision.PROBE_NEEDED  # the service would say half-open too
    mirror.replace(
        "e", 4, [advisory("h", scope=pb.SCOPE_TOOL, state=pb.STATE_HALF_OPEN, expires_s=past)]
    )
    assert check(mirror) is Decision.ALLOW  # nobody probed it: withdrawn


def test_shadow_advisories_never_refuse_but_are_shown() -> None:
    mirror = Mirror()
    mirror.replace("e", 1, [advisory("t", enforced=False)])
    result = mirror.check(turn=TURN, server=SERVER, tool=TOOL, now_s=NOW_S)
    assert result.decision is Decision.ALLOW and result.shadow
    assert result.advisory is not None and result.advisory.id == "t"
    mirror.replace(
        "e", 2, [advisory("h", scope=pb.SCOPE_TOOL, state=pb.STATE_HALF_OPEN, enforced=False)]
    )
    assert check(mirror) is Decision.ALLOW


def test_an_unknown_scope_matches_nothing() -> None:
    mirror = Mirror()
    mirror.replace("e", 1, [advisory("x", scope=9)])
    assert len(mirror) == 1 and check(mirror) is Decision.ALLOW
    mirror.apply("e", 2, advisory("x", scope=9, state=pb.STATE_CLOSED))
    assert len(mirror) == 0


def test_the_mirror_is_bounded_dropping_the_oldest() -> None:
    mirror = Mirror(max_advisories=3)
    for n in range(5):
        mirror.apply("e", n + 1, advisory(f"a{n}", turn=f"turn-{n}"))
    assert [a.id for a in mirror.advisories()] == ["a2", "a3", "a4"]
    assert mirror.evicted == 2
    assert check(mirror, turn="turn-0") is Decision.ALLOW
    assert check(mirror, turn="turn-4") is Decision.DENY


# -- properties ---------------------------------------------------------------------------------
IDS = ("a", "b", "c", "d")
STATES = (*range(0, 7), A_FUTURE_STATE)
SCOPES = (pb.SCOPE_SERVER, pb.SCOPE_TOOL, pb.SCOPE_TURN_TOOL, pb.SCOPE_TURN_CALL)
PRINTS = (fingerprint("s1", "t1", {"x": 1}), fingerprint("s1", "t1", {"x": 2}))

advisories = st.builds(
    advisory,
    st.sampled_from(IDS),
    scope=st.sampled_from(SCOPES),
    state=st.sampled_from(STATES),
    server=st.sampled_from(("s1", "s2")),
    tool=st.sampled_from(("t1", "t2")),
    turn=st.sampled_from(("u1", "u2")),
    print_=st.sampled_from(PRINTS),
    enforced=st.booleans(),
    expires_s=st.sampled_from((0.0, NOW_S - 1, NOW_S + 1)),
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("change"), advisories),
        st.tuples(st.just("snapshot"), st.lists(advisories, max_size=4)),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_after_any_sequence_the_mirror_holds_the_last_state_of_each_id(ops: list[Any]) -> None:
    mirror = Mirror()
    expected: dict[str, pb.Advisory] = {}
    for seq, (kind, value) in enumerate(ops, start=1):
        if kind == "change":
            mirror.apply("e", seq, value)
            expected.pop(value.id, None)
            if value.state != pb.STATE_CLOSED:
                expected[value.id] = value
        else:
            mirror.replace("e", seq, value)
            expected = {a.id: a for a in value if a.state != pb.STATE_CLOSED}
    assert {a.id: a for a in mirror.advisories()} == expected
    assert mirror.last_seq == len(ops)
    for call in CALLS:
        assert mirror.check(now_s=NOW_S, **call).decision is reference(expected.values(), **call)


CALLS = [
    {"turn": turn, "server": server, "tool": tool, "arguments": arguments}
    for turn in ("u1", "u2")
    for server in ("s1", "s2")
    for tool in ("t1", "t2")
    for arguments in ({"x": 1}, {"x": 2}, None)
]


def reference(held: Any, *, turn: str, server: str, tool: str, arguments: Any) -> Decision:
    """The matching rules of docs/advisories.md, by scanning every advisory."""
    print_ = fingerprint(server, tool, arguments) if arguments is not None else None
    decision = Decision.ALLOW
    for a in held:
        matches = {
            pb.SCOPE_SERVER: a.server == server,
            pb.SCOPE_TOOL: (a.server, a.tool) == (server, tool),
            pb.SCOPE_TURN_TOOL: (a.turn, a.server, a.tool) == (turn, server, tool),
            pb.SCOPE_TURN_CALL: (a.turn, a.fingerprint) == (turn, print_),
        }[a.scope]
        state = a.state
        if a.expires_unix_nano and a.expires_unix_nano <= NOW_S * NS:
            if state != pb.STATE_OPEN or a.scope not in (pb.SCOPE_SERVER, pb.SCOPE_TOOL):
                continue
            state = pb.STATE_HALF_OPEN
        if not matches or not a.enforced:
            continue
        if state in (pb.STATE_OPEN, pb.STATE_FORCED_OPEN, pb.STATE_TURN_BLOCKED, A_FUTURE_STATE):
            return Decision.DENY
        if state == pb.STATE_HALF_OPEN:
            decision = Decision.PROBE_NEEDED
    return decision
