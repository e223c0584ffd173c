"""The README's report of the sirens-echo seed window, and its HTML screenshot, made by the
command itself.

    .venv/bin/python scripts/analyze_seed.py          # rewrite both
    .venv/bin/python scripts/analyze_seed.py --check  # exit 1 if the README is behind

The window is written by the real OpenTelemetry SDK into a Collector ``file``-exporter
JSON file (tests/seed_window.py), then ``mcp-breaker analyze`` reads it: its text report
goes between the README's markers, and its HTML report (with a sweep of
``breaker.min_calls``) is rendered by headless Chromium to docs/analyze-report.png.
Run it after changing what the breaker decides: tests/test_offline_docs.py fails until
the README shows what the command prints.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.offline_support import CHROMIUM_FLAGS  # noqa: E402
from tests.seed_window import FILE_NAME, write_seed_window  # noqa: E402

README = ROOT / "README.md"
SCREENSHOT = ROOT / "docs" / "analyze-report.png"
BEGIN = "<!-- analyze-seed: begin (scripts/analyze_seed.py writes this) -->"
END = "<!-- analyze-seed: end -->"
WINDOW = "--window-size=1200,2300"


def analyze(directory: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "processor", "analyze", FILE_NAME, *args],
        cwd=directory,
        capture_output=True,
        text=True,
        check=True,
        # The settings are the defaults, whatever this shell's MCP_BREAKER_* say.
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("MCP_BREAKER_")},
            "PYTHONPATH": str(ROOT),
        },
    )
    return done.stdout


def text_report(directory: Path) -> str:
    write_seed_window(directory)
    return analyze(directory)


def readme_block(text: str) -> str:
    return f"{BEGIN}\n```text\n$ mcp-breaker analyze {FILE_NAME}\n{text}```\n{END}"


def current_block() -> str:
    readme = README.read_text()
    return readme[readme.index(BEGIN) : readme.index(END) + len(END)]


def main() -> int:
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        block = readme_block(text_report(directory))
        if "--check" in sys.argv:
            if block != current_block():
                print("README.md: the analyze report is behind; run scripts/analyze_seed.py")
                return 1
            return 0
        README.write_text(README.read_text().replace(current_block(), block))
        page = directory / "report.html"
        analyze(
            directory, "--sweep", "breaker.min_calls=2,3,5", "--format", "html", "-o", str(page)
        )
        subprocess.run(
            [
                "chromium",
                *CHROMIUM_FLAGS,
                f"--user-data-dir={directory / 'profile'}",
                WINDOW,
                f"--screenshot={SCREENSHOT}",
                page.as_uri(),
            ],
            capture_output=True,
            check=True,
            timeout=120,
        )
    print(f"wrote the report into {README.name} and {SCREENSHOT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
