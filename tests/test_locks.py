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
CLIENT_LOCK = ROOT / "clients" / "python" / "requirements.lock"
# The two distributions of this repository: each lock leaves them out (the installs take
# them from the tree), and a requirement of one on the other is followed into its pyproject.
PROJECTS = {
    canonicalize_name(project["name"]): project
    for project in (
        tomllib.loads((ROOT / path).read_text())["project"]
        for path in ("pyproject.toml", "clients/python/pyproject.toml")
    )
}
SERVICE, CLIENT = (canonicalize_name(n) for n in ("mcp-breaker", "mcp-breaker-client"))
# Which project and extras each lock holds (scripts/lock, scripts/_venv.sh).
EXTRAS = {
    LOCKS / "service.lock": (SERVICE, ()),
    LOCKS / "serve.lock": (SERVICE, ("examples",)),
    LOCKS / "test.lock": (SERVICE, ("test",)),
    CLIENT_LOCK: (CLIENT, ("mcp", "test")),
}
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+?)(?: \\)?$")


def pins(lock: Path) -> dict[str, str]:
    found = {}
    for line in lock.read_text().splitlines():
        if match := _PIN.match(line):
            found[canonicalize_name(match["name"])] = match["version"]
    return found


def requirements(project: str, extras: tuple[str, ...]) -> list[Requirement]:
    """A project's requirements with these extras, the extras' own extras followed, and
    into the other project of this repository (at its own version) when it is required."""
    wanted, seen, out = [(project, "")] + [(project, e) for e in extras], set(), []
    while wanted:
        name, extra = wanted.pop()
        if (name, extra) in seen:
            continue
        seen.add((name, extra))
        found = PROJECTS[name]
        listed = found["optional-dependencies"][extra] if extra else found["dependencies"]
        for dependency in listed:
            requirement = Requirement(dependency)
            key = canonicalize_name(requirement.name)
            if key in PROJECTS:
                version = PROJECTS[key]["version"]
                assert requirement.specifier.contains(version), (requirement, version)
                wanted += [(key, "")] + [(key, e) for e in requirement.extras]
            else:
                out.append(requirement)
    return out


@pytest.mark.parametrize("lock", sorted(EXTRAS), ids=lambda p: p.name)
def test_the_lock_satisfies_pyproject(lock: Path) -> None:
    pinned, name = pins(lock), lock.name
    assert pinned, name
    assert not PROJECTS.keys() & pinned.keys(), f"{name}: pins a project of this repository"
    for requirement in requirements(*EXTRAS[lock]):
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        key = canonicalize_name(requirement.name)
        assert key in pinned, f"{name}: {requirement} is not in the lock: run scripts/lock"
        assert requirement.specifier.contains(pinned[key], prereleases=True), (
            f"{name}: {requirement} but the lock pins {pinned[key]}: run scripts/lock"
        )


@pytest.mark.parametrize("lock", sorted(EXTRAS), ids=lambda p: p.name)
def test_every_pin_has_its_hashes(lock: Path) -> None:
    text = lock.read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    for block in blocks:
        if _PIN.match(block.splitlines()[0]):
            assert "--hash=sha256:" in block, block.splitlines()[0]


def test_the_smaller_locks_agree_with_the_test_lock() -> None:
    """One resolution: a package the service runs with is the version the tests ran."""
    tested = pins(LOCKS / "test.lock")
    for lock in (LOCKS / "service.lock", LOCKS / "serve.lock", CLIENT_LOCK):
        for package, version in pins(lock).items():
            assert tested.get(package) == version, f"{lock.name}: {package} {version}"


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
    assert "--no-deps /dist/mcp_breaker_client-*.whl /dist/mcp_breaker-" in dockerfile
    assert "!requirements/service.lock" in (ROOT / ".dockerignore").read_text()
    venv = (ROOT / "scripts" / "_venv.sh").read_text()
    assert "--require-hashes -r" in venv
    for lock in EXTRAS:
        if lock.parent == LOCKS:
            assert f"requirements/{lock.name}" in venv
