"""``mcp-breaker status``: the table, and the command against a running service."""

from __future__ import annotations

import json
import time

import grpc
import pytest
from google.protobuf import json_format

from processor import cli
from processor.advisories.status import MIN_CAUSE_CHARS, render
from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from tests.sdk import export_grpc
from tests.support import ServiceThread, make_config, wait_until
from tests.test_seed_replay import harness_calls

NOW = 1_800_000_000.0


def advisory(**fields: object) -> pb.Advisory:
    return pb.Advisory(**fields)  # type: ignore[arg-type]


def test_nothing_open_says_so() -> None:
    assert render([], NOW).startswith("No circuits open")
    closed = advisory(scope=pb.SCOPE_SERVER, server="web", state=pb.STATE_CLOSED)
    assert render([closed], NOW).startswith("No circuits open")


def test_worst_first_with_cause_and_since() -> None:
    half = advisory(scope=pb.SCOPE_TOOL, server="web", tool="fetch", state=pb.STATE_HALF_OPEN)
    opened = advisory(
        scope=pb.SCOPE_SERVER,
        server="playwright",
        state=pb.STATE_OPEN,
        cause="transport",
        retry_after_seconds=95,
        evidence=pb.Evidence(
            calls=9,
            failures=9,
            since_unix_nano=int((NOW - 46 * 60) * 1e9),
            excerpt="upstream MCP session is closed " + "x" * 200,
        ),
    )
    shadow = advisory(
        scope=pb.SCOPE_TURN_TOOL,
        server="gitea",
        tool="list_repos",
        turn="t-1",
        state=pb.STATE_TURN_BLOCKED,
        enforced=False,
    )
    lines = render([half, shadow, opened], NOW, width=100).splitlines()
    assert lines[0].split()[:4] == ["SCOPE", "SERVER", "TOOL", "STATE"]
    assert lines[1].split()[:4] == ["server", "playwright", "*", "OPEN"]
    assert "46m ago" in lines[1] and "9/9 failed" in lines[1] and "95s" in lines[1]
    assert "transport: upstream MCP session is closed" in lines[1]
    assert lines[1].endswith("…")  # a long excerpt is cut to the terminal, the table reads
    assert lines[2].split()[:4] == ["tool", "web", "fetch", "half-open"]
    assert "list_repos [turn t-1]" in lines[3] and "(shadow)" in lines[3]
    assert lines[-1] == "3 advisories in force."


def test_sender_names_cannot_break_the_table_or_drive_the_terminal() -> None:
    hijack = advisory(
        scope=pb.SCOPE_TURN_TOOL,
        server="web\x1b[2J\x1b[H",  # clear the screen, cursor home
        tool="fetch\nserver  fake  *  OPEN",  # a row of its own
        turn="t\r1\t\u202e",
        state=pb.STATE_TURN_BLOCKED,
        cause="transport\x9b31m",  # a C1 CSI: the same escape in one character
        evidence=pb.Evidence(excerpt="\x07\x7f\u2028closed"),
    )
    plain = advisory(scope=pb.SCOPE_TOOL, server="gitea", tool="list", state=pb.STATE_OPEN)
    lines = render([hijack, plain], NOW).splitlines()
    assert len(lines) == 5  # header, two rows, a blank, the count: no row forged
    assert all(line.isprintable() for line in lines)
    row = lines[2]
    assert row.startswith("turn/tool  web\\x1b[2J\\x1b[H  fetch\\nserver")
    assert "fetch\\nserver  fake  *  OPEN [turn t\\r1\\t\\u202e]" in row
    assert row.endswith("transport\\x9b31m: \\x07\\x7f\\u2028closed")
    # The columns still line up: escaped, a name is as wide as it prints.
    assert row.index("blocked (turn)") == lines[0].index("STATE")
    assert lines[1].index("OPEN") == lines[0].index("STATE")


def test_a_cause_is_cut_after_it_is_escaped() -> None:
    noisy = advisory(scope=pb.SCOPE_SERVER, server="web", state=pb.STATE_OPEN, cause="\x1b" * 100)
    row = render([noisy], NOW, width=80).splitlines()[1]
    assert row.endswith("\\x1b" * 14 + "\\x1…")  # what the terminal shows, cut to the limit
    assert len("\\x1b" * 14 + "\\x1…") == MIN_CAUSE_CHARS


CAUSE = (
    "transport: Error executing tool fetch_invoice: invoice backend http://billing:8080 "
    "refused the connection (Connection refused)"
)
LONG = advisory(
    id="|tool|billing/fetch_invoice",
    scope=pb.SCOPE_TOOL,
    server="billing",
    tool="fetch_invoice",
    state=pb.STATE_OPEN,
    tenant="acme",
    expires_unix_nano=int((NOW + 300) * 1e9),
    evidence=pb.Evidence(calls=3, failures=3, excerpt=CAUSE.partition(": ")[2]),
    cause="transport",
    enforced=True,
)


@pytest.mark.parametrize("width", [None, 250])
def test_the_cause_is_whole_when_the_terminal_has_room(width: int | None) -> None:
    """None: not a terminal (a pipe, a file): nothing is cut, as kubectl does."""
    row = render([LONG], NOW, width=width).splitlines()[1]
    assert row.endswith(CAUSE) and "(Connection refused)" in row


def test_a_narrow_terminal_cuts_the_cause_to_fit_but_never_below_the_floor() -> None:
    rows = {w: render([LONG], NOW, width=w).splitlines()[1] for w in (170, 180, 20)}
    assert len(rows[170]) == 170 and rows[170].endswith("…")
    assert len(rows[180]) == 180 and rows[180].endswith("refused the connectio…")
    assert rows[20].endswith("…") and len(rows[20].rpartition("  ")[2]) == MIN_CAUSE_CHARS


def test_wide_shows_every_cause_in_full_with_the_id_tenant_and_expiry() -> None:
    lines = render([LONG], NOW, width=40, wide=True).splitlines()
    assert lines[0].split()[-4:] == ["IN", "TENANT", "ID", "CAUSE"]
    assert lines[1].endswith(CAUSE)
    assert "  5m  " in lines[1] and "  acme  " in lines[1]
    assert "|tool|billing/fetch_invoice" in lines[1]


def test_the_command_against_a_running_service(capsys: pytest.CaptureFixture[str]) -> None:
    service = ServiceThread(make_config())
    try:
        target = f"127.0.0.1:{service.service.ports['advisories']}"
        assert cli.main(["status", "--target", target]) == 0
        out = capsys.readouterr().out
        assert out.startswith("No circuits open")
        # An all-clear from memory says whose: a restart is not a recovery.
        assert "in the service's memory" in out and "since it last started" in out
        now_ns = time.time_ns()
        export_grpc(service.grpc_endpoint, harness_calls("turn-now", [(1, now_ns - 4 * 10**9)]))
        wait_until(lambda: len(service.service.advisories.hub) > 0)  # type: ignore[union-attr]
        assert cli.main(["status", "--target", target]) == 0
        out = capsys.readouterr().out
        assert "playwright__browser_navigate [turn turn-now]" in out
        assert "blocked (turn)" in out and "upstream MCP session is closed" in out

        # --output json is GetState's reply, field for field, under the proto's names.
        assert cli.main(["status", "--target", target, "--output", "json"]) == 0
        document = json.loads(capsys.readouterr().out)
        with grpc.insecure_channel(target) as channel:
            stub = pb_grpc.AdvisoriesStub(channel)  # type: ignore[no-untyped-call]
            reply = stub.GetState(pb.GetStateRequest(), timeout=5)
        assert json_format.ParseDict(document, pb.GetStateResponse()) == reply
        assert {"advisories", "epoch", "seq", "not_shown", "shared_state"} <= document.keys()
        (shown,) = document["advisories"]
        assert shown["tool"] == "playwright__browser_navigate" and shown["turn"] == "turn-now"
        assert shown["state"] == "STATE_TURN_BLOCKED" and "message" in shown
        assert shown["evidence"]["calls"] == 1 and "retry_after_seconds" in shown

        assert cli.main(["status", "--target", target, "--wide"]) == 0
        assert "playwright__browser_navigate [turn turn-now]" in capsys.readouterr().out
    finally:
        service.stop()


def test_unreachable_service_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "--target", "127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mcp-breaker status: 127.0.0.1:1: UNAVAILABLE")
