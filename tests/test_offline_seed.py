"""The sirens-echo seed window, written by the real SDK into a Collector file and analysed
by the command: the figures the seed's author counted by hand, from the report.

What follows from the seed itself: every call to ``playwright__browser_navigate`` in the
window failed (17 calls, 0 successes); three seconds a call; 21 of the 25 listings are the
old instrument's ``reached: 0, cached: true``. Enforced, a refused call is never made: the
earlier turns' repeats are refused within their turns and count for nothing, the server's
circuit opens on the third turn's failure (00:40), its 01:00 probe fails, and the 01:06
turn's 8 calls are all refused across turns, each quoting the streak's first failure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.offline_support import analyze, analyze_json, ids, tool_row, turn_of
from tests.otlp_file import write_json_lines
from tests.sdk import RESOURCE
from tests.seed_window import (
    CALL_SECONDS,
    INCIDENT_TURN,
    ROUNDS,
    SEED_CALLS,
    TOOL,
    seed_exports,
)
from tests.test_seed_replay import at_ns


@pytest.fixture(scope="module")
def exports() -> list[list[ReadableSpan]]:
    return seed_exports()


@pytest.fixture(scope="module")
def seed_file(tmp_path_factory: pytest.TempPathFactory, exports: list[list[ReadableSpan]]) -> Path:
    return write_json_lines(tmp_path_factory.mktemp("seed") / "traces.json", exports)


@pytest.fixture(scope="module")
def report(seed_file: Path) -> dict[str, Any]:
    return analyze_json(str(seed_file))


def test_every_call_to_the_dead_tool_failed(report: dict[str, Any]) -> None:
    row = tool_row(report, TOOL)
    assert row["server"] == "playwright"
    assert row["calls"] == SEED_CALLS == 17
    assert row["outcomes"]["ok"] == 0 and row["outcomes"]["failed"] == 17
    assert row["failure_classes"] == {"transport": 17}
    assert row["failures"]["count"] == 17 and len(row["failures"]["ids"]) == 17


def test_the_incident_turn(report: dict[str, Any], exports: list[list[ReadableSpan]]) -> None:
    turn = turn_of(report, INCIDENT_TURN)
    assert report["turns"]["worst"][0]["turn"] == INCIDENT_TURN  # worst first
    assert turn["calls"] == len(ROUNDS) == 8
    # The server's circuit was open from the earlier turns: nothing of the turn was made,
    # so no failure of its own blocked the rest within it.
    assert turn["dead_within_turn"] == 0
    assert turn["dead_across_turns"] == 8
    assert turn["dead_calls"]["count"] == 8
    assert turn["dead_calls"]["seconds"] == 8 * CALL_SECONDS
    assert turn["model_rounds_saved"] == 4  # rounds 5, 7, 9 and 11 only repeated dead calls

    incident = sorted(exports[-1], key=lambda s: s.start_time or 0)
    every = {s.context.span_id.to_bytes(8, "big").hex() for s in incident}
    assert ids(turn["dead_calls"]) == every  # each figure names its spans
    # Each refusal quotes the first failure of the circuit's streak: the 00:20 turn's.
    (repeated,) = turn["repeated_failures"]
    first_turn = sorted(exports[1], key=lambda s: s.start_time or 0)  # [0]: the listings
    streak_start = first_turn[0].context.span_id.to_bytes(8, "big").hex()
    assert repeated["span_id"] == streak_start
    assert repeated["repeats"]["count"] == 8 and ids(repeated["repeats"]) == every
    assert "upstream MCP session is closed" in repeated["error"]


def test_the_listings(report: dict[str, Any]) -> None:
    roster = report["roster"]
    assert roster["listings"] == 25
    assert roster["states"]["ambiguous"]["count"] == 21
    assert roster["states"]["cold"]["count"] == 4
    assert roster["ambiguous_missing_attributes"] == {"unavailable,registered": 21}


def test_the_counterfactual_adds_up(report: dict[str, Any]) -> None:
    c = report["counterfactual"]
    refused = c["would_refuse"]["count"]
    assert refused == c["within_turns"]["count"] + c["across_turns"]["count"]
    assert refused == sum(v["count"] for v in c["by_rule"].values())
    assert refused >= 8 and c["dead_calls_spared"]["count"] == refused  # all of them failed
    assert c["tool_seconds_saved"] == refused * CALL_SECONDS
    assert c["refused_that_succeeded"]["count"] == 0
    assert c["model_rounds_saved"] >= 4
    server = [x for x in report["circuits"] if (x["scope"], x["key"]) == ("server", "playwright")]
    assert server and server[0]["opened"] >= 1
    assert server[0]["first_opened_at"] < "2026-08-18T01:06"  # open before the incident


def test_the_text_report(seed_file: Path) -> None:
    result = analyze(str(seed_file))
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "8 calls, 8 failed, 8 refused (0 within the turn, 8 across turns)" in text
    assert f"{TOOL}  playwright     17   0      17" in text
    assert "25 listings: 21 ambiguous, 4 cold" in text


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_compressed_files_give_the_same_report(
    tmp_path: Path, exports: list[list[ReadableSpan]], report: dict[str, Any], compression: str
) -> None:
    path = write_json_lines(tmp_path / "traces.json", exports, compression=compression)
    again = analyze_json(str(path))
    assert {k: v for k, v in again.items() if k != "input"} == {
        k: v for k, v in report.items() if k != "input"
    }


def test_since_and_until_keep_a_window(seed_file: Path) -> None:
    window = analyze_json(
        str(seed_file), "--since", "2026-08-18T01:00:00Z", "--until", "2026-08-18T02:00"
    )
    assert tool_row(window, TOOL)["calls"] == 3 + 8  # the 01:00 and 01:06 turns
    assert window["input"]["outside_window"] == 25 + 6
    assert turn_of(window, INCIDENT_TURN)["dead_within_turn"] == 7
    assert window["input"]["window"]["since"] == "2026-08-18T01:00:00.000Z"


def flaky_exports() -> list[list[ReadableSpan]]:
    """Another server that fails twice, then answers: one call a turn, a minute apart."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("sirens-echo.harness", "943")
    for n, outcome in enumerate(("failed", "failed", "ok", "ok", "ok")):
        start = at_ns(120 + n)
        span = tracer.start_span("mcp.tool.call", kind=SpanKind.CLIENT, start_time=start)
        span.set_attributes(
            {
                "mcp.tool.name": "search__query",
                "mcp.server.name": "search",
                "mcp.tool.outcome": outcome,
                "mcp.turn.id": f"flaky-{n}",
                "mcp.turn.round": 1,
            }
        )
        if outcome == "failed":
            span.set_attribute("mcp.tool.error", "connection refused")
        span.end(end_time=start + 10**9)
    provider.shutdown()
    return [list(memory.get_finished_spans())]


def test_a_sweep_moves_the_counterfactual_the_expected_way(
    tmp_path: Path, exports: list[list[ReadableSpan]]
) -> None:
    # The seed, then, an hour later, a server that fails twice and recovers.
    path = write_json_lines(tmp_path / "traces.json", [*exports, *flaky_exports()])
    report = analyze_json(str(path), "--sweep", "breaker.min_calls=2,3,5")
    rows = report["sweep"]["rows"]
    assert [r["values"] for r in rows] == [{"breaker.min_calls": v} for v in ("2", "3", "5")]
    spared = [r["dead_calls_spared"] for r in rows]
    refused_good = [r["good_calls_refused"] for r in rows]
    refused = [r["would_refuse"] for r in rows]
    # Fewer calls needed to open: as many dead calls spared or more, more good calls refused.
    assert spared[0] >= spared[1] >= spared[2]
    assert refused_good[0] >= refused_good[1] >= refused_good[2]
    assert refused_good[0] > refused_good[2] == 0
    # Wherever the dead server's circuit opens, its repeats in a turn are refused within the
    # turn anyway, and never made: no more of them to spare. The flaky server opens after
    # two failures with min_calls 2, and the calls of its recovery are refused.
    assert refused[0] > refused[2] and spared[0] == spared[2]
    # The report itself is the configuration as given (the default min_calls, 3).
    assert report["counterfactual"]["dead_calls_spared"]["count"] == spared[1]


def test_a_sweep_of_two_keys(seed_file: Path) -> None:
    result = analyze(
        str(seed_file), "--sweep", "breaker.min_calls=2,5", "--sweep", "breaker.turn_key=call,tool"
    )
    assert result.returncode == 0, result.stderr
    table = result.stdout.split("SWEEP")[1].split("\n\n")[0].splitlines()
    rows = [line.split()[:2] for line in table[2:]]
    assert rows == [["2", "call"], ["2", "tool"], ["5", "call"], ["5", "tool"]]
