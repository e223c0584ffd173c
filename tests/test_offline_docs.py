"""The docs of ``mcp-breaker analyze`` follow the command: the README's report of the seed
window is what the command prints today, and docs/analyze.md names every section of the
json report, every flag and every exit code."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from processor.offline import command
from tests.offline_support import analyze

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "analyze.md").read_text()


def test_the_readme_shows_what_the_command_prints() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "analyze_seed.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_screenshot_is_committed() -> None:
    data = (ROOT / "docs" / "analyze-report.png").read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 50_000
    assert "docs/analyze-report.png" in (ROOT / "README.md").read_text()


def test_every_section_and_figure_is_documented(tmp_path: Path) -> None:
    from tests.seed_window import write_seed_window

    report = json.loads(analyze(str(write_seed_window(tmp_path)), "--format", "json").stdout)
    for section in ("input", "calls", "counterfactual", "turns", "circuits", "roster"):
        assert f"(`{section}`" in DOC, section
    for figure in report["counterfactual"]:
        assert f"`{figure}`" in DOC, figure


def test_every_flag_and_exit_code_is_documented() -> None:
    help_text = analyze("--help").stdout
    flags = set(re.findall(r"--[a-z][a-z-]+", help_text))
    assert len(flags) > 10
    for flag in flags - {"--help"}:
        assert f"`{flag}" in DOC, flag
    for code in (command.EXIT_OK, command.EXIT_FAILED, command.EXIT_USAGE, command.EXIT_PARTIAL):
        assert f"| {code} |" in DOC
