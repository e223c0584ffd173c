"""docs/frameworks: a page for every framework the suite runs, and links that resolve."""

from __future__ import annotations

import re
from pathlib import Path

from tests.live.harness import FRAMEWORKS
from tests.test_classify_frameworks import CAPTURES

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "frameworks"
# The page of each framework the live suite runs (tests/live/client_<framework>.py).
PAGE_OF = {
    "pydantic_ai": "pydantic-ai.md",
    "openai_agents": "openai-agents.md",
    "strands": "strands.md",
    "langgraph": "langgraph.md",
    "vercel_ai6": "vercel-ai.md",
    "vercel_ai7": "vercel-ai.md",
}
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def test_every_framework_run_has_a_page_in_the_index() -> None:
    index = (PAGES / "README.md").read_text()
    assert set(PAGE_OF) == set(FRAMEWORKS)
    for framework, page in PAGE_OF.items():
        assert (PAGES / page).is_file(), page
        assert f"({page})" in index, f"{page} is not linked from docs/frameworks/README.md"
        assert (ROOT / "tests" / "live" / f"client_{framework}.py").is_file()
        assert framework in CAPTURES, f"no capture of {framework} in the fast suite"


def test_the_links_of_the_pages_and_the_readme_resolve() -> None:
    for page in [ROOT / "README.md", *sorted(PAGES.glob("*.md"))]:
        for target, _ in LINK.findall(page.read_text()):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.name}: {target}"
