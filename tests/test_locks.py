"""The lock files (requirements/*.lock, written by scripts/lock): each satisfies
pyproject.toml, pins every package it names with hashes, and is what the installs use.

A lock that no longer satisfies pyproject.toml (a dependency added or its range changed
without running scripts/lock) fails here, naming the requirement; the fix is to run
scripts/lock and commit what it writes.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parents[1]
LOCKS = ROOT / "requirements"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SELF = canonicalize_name(PROJECT["name"])
# Which extras each lock holds (scripts/lock, scripts/_venv.sh).
EXTRAS = {"service.lock": (), "serve.lock": ("examples",), "test.lock": ("test",)}
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+?)(?: \\)?$")


def pins(lock: Path) -> dict[str, str]:
    found = {}
    for line in lock.read_text().splitlines():
        if match := _PIN.match(line):
            found[canonicalize_name(match["name"])] = match["version"]
    return found


def requirements(extras: tuple[str, ...]) -> list[Requirement]:
    """The project's requirements with these extras, the extras' own extras followed."""
    wanted, seen, out = list(extras), set(), []
    for dependency in PROJECT["dependencies"]:
        out.append(Requirement(dependency))
    while wanted:
        extra = wanted.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for dependency in PROJECT["optional-dependencies"][extra]:
            requirement = Requirement(dependency)
            if canonicalize_name(requirement.name) == SELF:
                wanted.extend(requirement.extras)
            else:
                out.append(requirement)
    return out


@pytest.mark.parametrize("name", sorted(EXTRAS))
def test_the_lock_satisfies_pyproject(name: str) -> None:
    pinned = pins(LOCKS / name)
    assert pinned, name
    for requirement in requirements(EXTRAS[name]):
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        key = canonicalize_name(requirement.name)
        assert key in pinned, f"{name}: {requirement} is not in the lock: run scripts/lock"
        assert requirement.specifier.contains(pinned[key], prereleases=True), (
            f"{name}: {requirement} but the lock pins {pinned[key]}: run scripts/lock"
        )


@pytest.mark.parametrize("name", sorted(EXTRAS))
def test_every_pin_has_its_hashes(name: str) -> None:
    text = (LOCKS / name).read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    for block in blocks:
        if _PIN.match(block.splitlines()[0]):
            assert "--hash=sha256:" in block, block.splitlines()[0]


def test_the_smaller_locks_agree_with_the_test_lock() -> None:
    """One resolution: a package the service runs with is the version the tests ran."""
    tested = pins(LOCKS / "test.lock")
    for name in ("service.lock", "serve.lock"):
        for package, version in pins(LOCKS / name).items():
            assert tested.get(package) == version, f"{name}: {package} {version}"


def test_this_environment_was_installed_from_the_test_lock() -> None:
    """./scripts/test installs .venv from requirements/test.lock: what these tests run on
    is exactly what the lock says (CI too, since it runs ./scripts/test)."""
    differ = {}
    for package, version in pins(LOCKS / "test.lock").items():
        try:
            installed = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            installed = "(not installed)"
        if installed != version:
            differ[package] = (installed, version)
    assert not differ, f"installed, locked: {differ}"


def test_the_image_and_the_scripts_install_from_the_locks() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--require-hashes -r requirements/service.lock" in dockerfile
    assert "--no-deps /dist/mcp_breaker-" in dockerfile
    assert "!requirements/service.lock" in (ROOT / ".dockerignore").read_text()
    venv = (ROOT / "scripts" / "_venv.sh").read_text()
    assert "--require-hashes -r" in venv
    for name in EXTRAS:
        assert f"requirements/{name}" in venv
