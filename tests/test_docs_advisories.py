"""docs/advisories.md, run as written: installing the client library, then a first
subscription on loopback."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.docrun import DocSession, blocks

ROOT = Path(__file__).parents[1]
PAGE = ROOT / "docs" / "advisories.md"


def checkout(where: Path) -> Path:
    """What a checkout holds that installing the client needs (not .venv, not caches)."""
    where.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "tests")
    shutil.copytree(ROOT / "clients" / "python", where / "clients" / "python", ignore=ignore)
    return where


@pytest.mark.timeout(900)  # two pip installs: a bound on waiting for the package index
def test_the_install_commands_install_the_client_library(tmp_path: Path) -> None:
    """From a checkout and from a wheel, into a fresh environment (~ is a scratch home,
    with pip's cache left where it was, so that the wheels are not fetched again)."""
    steps = blocks(PAGE, "install")
    assert [b.kind for b in steps] == ["run", "run", "run", "output"]
    home = tmp_path / "home"
    home.mkdir()
    source = checkout(tmp_path / "checkout")
    cache = os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")
    with DocSession(source, env={"HOME": str(home), "PIP_CACHE_DIR": cache}) as session:
        for step in steps:
            session.run(step)
    assert (home / "harness-venv" / "bin" / "python").exists()
    assert not (home / "harness-venv" / "bin" / "mcp-breaker").exists()  # the service's script
    assert list((source / "dist").glob("mcp_breaker_client-*.whl"))


def test_the_plaintext_first_steps_subscribe_and_refuse_the_dead_tool() -> None:
    steps = blocks(PAGE, "plaintext")
    assert [b.kind for b in steps if b.kind != "output"] == ["background", "run", "python", "run"]
    with DocSession(ROOT) as session:
        for step in steps:
            session.run(step)
        assert session.stop() == 0, session.log
