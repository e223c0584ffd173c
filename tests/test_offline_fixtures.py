"""The captures in tests/fixtures/real-spans, analysed per dialect: each tool call reads
as the client saw it (the classifier's own expectations, tests/test_classify_fixtures.py),
and the three files analysed together are the sum of the three."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.offline_support import analyze_json
from tests.test_classify_fixtures import DIALECTS, EXPECTED, FIXTURES


def outcome_of(row: dict[str, Any]) -> tuple[str, str | None]:
    (outcome,) = [o for o, n in row["outcomes"].items() if n]
    (failure,) = list(row["failure_classes"]) or [None]
    return outcome, failure


@pytest.mark.parametrize("fixture", list(EXPECTED))
def test_each_capture_reads_as_its_client_saw_it(fixture: str) -> None:
    report = analyze_json(str(FIXTURES / f"{fixture}.otlp.bin"))
    tools = {row["tool"]: row for row in report["calls"]["tools"]}
    assert set(tools) == set(EXPECTED[fixture])
    for tool, (outcome, failure) in EXPECTED[fixture].items():
        row = tools[tool]
        assert row["calls"] == 1
        assert outcome_of(row) == (outcome.value, failure.value if failure else None), tool
        assert row["dialects"] == {DIALECTS[fixture].value: 1}
    assert report["roster"]["listings"] == 1
    assert report["input"]["files"][0]["skipped"] == 0
    hidden = sum(r["hidden_failures"]["count"] for r in tools.values())
    assert hidden == sum(1 for o in EXPECTED[fixture].values() if o[1] and o[1].value == "hidden")


def test_a_directory_of_captures_is_the_sum_of_its_files(tmp_path: Path) -> None:
    for fixture in EXPECTED:
        shutil.copy(FIXTURES / f"{fixture}.otlp.bin", tmp_path)
    report = analyze_json(str(tmp_path))
    assert len(report["input"]["files"]) == 3
    assert report["calls"]["calls"] == sum(len(t) for t in EXPECTED.values())
    assert report["roster"]["listings"] == 3
    assert report["calls"]["dialects"] == {d.value: len(EXPECTED[f]) for f, d in DIALECTS.items()}
