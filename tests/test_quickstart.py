"""docs/quickstart.md, run as a newcomer runs it: every command, and what each prints."""

from __future__ import annotations

from pathlib import Path

from tests.docrun import DocSession, blocks

ROOT = Path(__file__).parents[1]
PAGE = ROOT / "docs" / "quickstart.md"


def test_every_command_of_the_quickstart_runs_and_prints_what_it_says() -> None:
    steps = blocks(PAGE)
    # Serve, send, status, metrics, subscribe: the page is all run, not just its start.
    assert [b.kind for b in steps if b.kind != "output"] == [
        "background",
        "run",
        "log",
        "run",
        "run",
        "run",
    ]
    with DocSession(ROOT) as session:
        for step in steps:
            session.run(step)
        assert session.stop() == 0, session.log  # Ctrl-C stops the service cleanly


def test_the_page_says_how_it_is_tested() -> None:
    """A reader who edits the page learns from its source what the test expects."""
    assert "tests/test_quickstart.py" in PAGE.read_text()
