"""Running ``mcp-breaker analyze`` as a user does: the console script in its own process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def analyze(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "processor", "analyze", *args],
        input=stdin,
        capture_output=True,
        timeout=300,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def analyze_json(*args: str, expect: int = 0) -> dict[str, Any]:
    result = analyze(*args, "--format", "json")
    assert result.returncode == expect, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def tool_row(report: dict[str, Any], tool: str) -> dict[str, Any]:
    (row,) = [r for r in report["calls"]["tools"] if r["tool"] == tool]
    return row


def turn_of(report: dict[str, Any], turn: str) -> dict[str, Any]:
    (found,) = [t for t in report["turns"]["worst"] if t["turn"] == turn]
    return found


def ids(figure: dict[str, Any]) -> set[str]:
    return {i["span_id"] for i in figure["ids"]}


def chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Debian's Chromium, headless, on a fresh profile, with no network of its own."""
    return subprocess.run(
        ["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
        capture_output=True,
        timeout=120,
    )
