"""The first hour on a fresh clone: the quick start and the first subscription, run as a
newcomer runs them, in a copy of the repository with no .venv, set up by the scripts alone.

tests/test_quickstart.py runs the same page in this checkout, whose .venv ./scripts/test
built with every extra, so it cannot see a step that needs something ./scripts/serve does
not install. Here nothing is installed beforehand: ./scripts/serve makes .venv itself, and
every later block uses what it made. Slow (a fresh environment: a minute or two with pip's
cache warm); CI runs it with the rest.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from processor.offline.command import EXTRA_HINT
from tests.docrun import DocSession, blocks

ROOT = Path(__file__).parents[1]
VENV_BIN = str(ROOT / ".venv" / "bin")


def fresh_clone(where: Path) -> Path:
    """The files a clone of this checkout has (tracked ones, and new ones not ignored):
    no .venv, no caches, no build output."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        source = ROOT / name
        if source.is_file():  # not a file deleted in the working tree
            target = where / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return where


def newcomer_environment(home: Path) -> dict[str, str | None]:
    """A shell that has not activated this checkout's .venv: python3 is the machine's."""
    path = os.pathsep.join(
        entry for entry in os.environ.get("PATH", "").split(os.pathsep) if entry != VENV_BIN
    )
    cache = os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")
    return {
        "PATH": path,
        "VIRTUAL_ENV": None,
        "PYTHONPATH": None,
        "HOME": str(home),
        "PIP_CACHE_DIR": cache,  # the wheels are not fetched again: a cold cache is slower
    }


@pytest.mark.slow
@pytest.mark.timeout(1500)  # a fresh .venv and one extra: bounded by the package index
def test_a_fresh_clone_runs_the_first_pages_as_written(tmp_path: Path) -> None:
    clone = fresh_clone(tmp_path / "clone")
    assert not (clone / ".venv").exists()
    home = tmp_path / "home"
    home.mkdir()
    env = newcomer_environment(home)
    python = clone / ".venv" / "bin" / "python"

    quickstart = blocks(clone / "docs" / "quickstart.md")
    with DocSession(clone, env, python=python) as session:
        for step in quickstart:
            session.run(step)
        assert session.stop() == 0, session.log
    # Only ./scripts/serve set it up: the service, and the examples' SDK, nothing else.
    installed = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True
    ).stdout
    assert "opentelemetry-sdk==" in installed and "pytest==" not in installed

    plaintext = blocks(clone / "docs" / "advisories.md", "plaintext")
    with DocSession(clone, env, python=python) as session:
        for step in plaintext:
            session.run(step)
        assert session.stop() == 0, session.log

    # The instruction analyze prints when its extra is missing works as printed.
    done = subprocess.run(
        ["bash", "-c", EXTRA_HINT.split(" (", 1)[0]],
        cwd=clone,
        env={k: v for k, v in {**os.environ, **env}.items() if v is not None},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert subprocess.run([python, "-c", "import matplotlib"]).returncode == 0, shlex.join(
        [str(python), "-c", "import matplotlib"]
    )
