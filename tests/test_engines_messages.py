"""Every sentence a model reads, word for word (mcp_breaker_client.shared.messages).

Golden tests: a change to what the model reads must show here, and in docs/breaker.md's
table, which ``test_docs_table_shows_every_template`` holds to the same words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp_breaker_client.shared import messages

ERROR = "billing backend unreachable: connect ECONNREFUSED 127.0.0.1:16999."
QUERY_DB = messages.tool_subject("query_db", "billing")
BILLING = messages.server_subject("billing")

GOLDEN = {
    "circuit_open": (
        messages.circuit_open(QUERY_DB, why=ERROR, calls=3, failures=3, for_s=300),
        "`query_db` on MCP server `billing` is unavailable for about 5 minutes, so do not "
        "call it before then; answer what you can without it (its last 3 calls failed: "
        "billing backend unreachable: connect ECONNREFUSED 127.0.0.1:16999).",
    ),
    "circuit_open, a server": (
        messages.circuit_open(
            messages.server_subject("billing", "fetch_invoice"),
            why="",
            calls=5,
            failures=3,
            for_s=8,
        ),
        "MCP server `billing` (all its tools, `fetch_invoice` among them) is unavailable for "
        "about 8 seconds, so do not call its tools before then; answer what you can without "
        "its tools (3 of its last 5 calls failed).",
    ),
    "circuit_forced_open": (
        messages.circuit_forced_open(BILLING, reason="maintenance window.", for_s=7200),
        "MCP server `billing` (all its tools) has been switched off by an operator for about "
        "2 hours, so do not call its tools before then; answer what you can without its "
        "tools (the reason given: maintenance window).",
    ),
    "circuit_failing": (
        messages.circuit_failing(QUERY_DB, why="timeout"),
        "`query_db` on MCP server `billing` is unavailable, so do not call it again this "
        "turn; answer what you can without it (the error: timeout).",
    ),
    "probe_in_flight": (
        messages.probe_in_flight(QUERY_DB),
        "`query_db` on MCP server `billing` is recovering from failures and another call is "
        "testing it now, so do not call it again this turn; answer what you can without it.",
    ),
    "turn_tool_blocked": (
        messages.turn_tool_blocked(
            messages.tool_subject("get_weather"), why="upstream MCP session is closed."
        ),
        "`get_weather` is unavailable for the rest of this turn, so do not call it again; "
        "answer what you can without it (the error: upstream MCP session is closed).",
    ),
    "turn_call_blocked": (
        messages.turn_call_blocked(QUERY_DB, why="no such table: invoices"),
        "This exact call to `query_db` on MCP server `billing` already failed in this turn, "
        "so do not repeat it; change the arguments or answer without it (the error: no such "
        "table: invoices).",
    ),
    "refused_without_message": (
        messages.refused_without_message(QUERY_DB, cause="transport"),
        "`query_db` on MCP server `billing` is unavailable right now, so do not call it again "
        "this turn; answer what you can without it (the error: transport).",
    ),
    "roster_collapsed": (
        messages.roster_collapsed(offered_before=5, rounds="rounds 2-3"),
        "The tools offered in this turn fell from 5 to none in rounds 2-3 while their servers "
        "are still configured, so list the tools again (tools/list) before the next model "
        "request; do not tell the user the tools are gone.",
    ),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_each_template_reads_word_for_word(name: str) -> None:
    written, golden = GOLDEN[name]
    assert written == golden


def test_every_template_of_the_module_has_a_golden_test() -> None:
    templates = {
        name
        for name, value in vars(messages).items()
        if callable(value)
        and getattr(value, "__module__", "") == messages.__name__
        and not name.startswith("_")
        and name not in {"about", "tool_subject", "server_subject", "Subject"}
    }
    assert templates == {name.split(",")[0] for name in GOLDEN}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_one_sentence_one_period_no_clock_time(name: str) -> None:
    written, _ = GOLDEN[name]
    assert written.endswith(".") and not written.endswith("..")
    # Periods inside the recorded error are the error's own; the instruction has none.
    instruction = written.removesuffix(".").split(" (")[0]
    assert "." not in instruction.replace("tools/list", "")
    assert not re.search(r"\b\d{1,2}:\d{2}\b|UTC", instruction)


@pytest.mark.parametrize(
    ("template", "empty"),
    [(messages.turn_tool_blocked, "(it failed)."), (messages.turn_call_blocked, "(it failed).")],
)
def test_a_turn_block_without_an_error_still_says_it_failed(
    template: Callable[..., str], empty: str
) -> None:
    assert template(QUERY_DB, why="").endswith(empty)
    assert template(QUERY_DB, why=" . ").endswith(empty)


def test_a_tool_of_no_named_server_is_named_alone() -> None:
    assert messages.tool_subject("search").name == "`search`"
    assert messages.tool_subject("search", "web").name == "`search` on MCP server `web`"


@pytest.mark.parametrize(
    ("seconds", "spoken"),
    [
        (0.2, "less than a second"),
        (1.2, "about a second"),
        (8, "about 8 seconds"),
        (59.6, "about a minute"),
        (90, "about 2 minutes"),
        (300, "about 5 minutes"),
        (3599, "about an hour"),
        (7200, "about 2 hours"),
        (30 * 3600, "about 30 hours"),
        (3 * 86400, "about 3 days"),
        (float("inf"), "a long time"),
    ],
)
def test_lengths_are_said_as_a_person_says_them(seconds: float, spoken: str) -> None:
    assert messages.about(seconds) == spoken


@given(st.floats(min_value=0, max_value=10**12, allow_nan=False))
def test_a_longer_wait_never_reads_shorter(seconds: float) -> None:
    def magnitude(text: str) -> float:
        if text == "less than a second":
            return 0.0
        if text == "a long time":
            return float("inf")
        count, unit = re.fullmatch(r"about (\w+) (\w+)", text).groups()  # type: ignore[union-attr]
        number = 1 if count in {"a", "an"} else int(count)
        scale = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}[unit.rstrip("s")]
        return number * scale

    assert magnitude(messages.about(seconds)) <= magnitude(messages.about(seconds * 1.5 + 1))


def test_docs_table_shows_every_template() -> None:
    """docs/breaker.md's "What the model reads" table quotes these words."""
    page = (Path(__file__).parents[1] / "docs" / "breaker.md").read_text()
    table = page.split("## What the model reads", 1)[1].split("\n## ", 1)[0]
    for name in GOLDEN:
        assert f"`{name.split(',')[0]}`" in table, name
    quoted = GOLDEN["circuit_open"][0]
    assert quoted.split(" (")[0] in table
