"""``mcp-breaker status``: the table, and the command against a running service."""

from __future__ import annotations

import time

import pytest

from processor import cli
from processor.advisories.v1 import advisories_pb2 as pb
from processor.status import MAX_CAUSE_CHARS, render
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
    lines = render([half, shadow, opened], NOW).splitlines()
    assert lines[0].split()[:4] == ["SCOPE", "SERVER", "TOOL", "STATE"]
    assert lines[1].split()[:4] == ["server", "playwright", "*", "OPEN"]
    assert "46m ago" in lines[1] and "9/9 failed" in lines[1] and "95s" in lines[1]
    assert "transport: upstream MCP session is closed" in lines[1]
    assert lines[1].endswith("…")  # a long excerpt is cut, the table stays readable
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
    row = render([noisy], NOW).splitlines()[1]
    assert row.endswith("\\x1b" * 14 + "\\x1…")  # what the terminal shows, cut to the limit
    assert len("\\x1b" * 14 + "\\x1…") == MAX_CAUSE_CHARS


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
    finally:
        service.stop()


def test_unreachable_service_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "--target", "127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mcp-breaker status: 127.0.0.1:1: UNAVAILABLE")
