"""The packages' modules import one another without a circle, type-checking imports too:
each module can be read after the ones it builds on, and none needs a lazy import to load.
The client (clients/python) imports nothing of the service: it installs without it."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVICE = ROOT / "processor"
CLIENT = ROOT / "clients" / "python" / "mcp_breaker_client"
GENERATED = "v1"  # protoc's stubs import only each other


def module_name(path: Path) -> str:
    package = next(p for p in (SERVICE, CLIENT) if path.is_relative_to(p))
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(*packages: Path) -> dict[str, Path]:
    return {
        module_name(p): p
        for package in packages or (SERVICE, CLIENT)
        for p in package.rglob("*.py")
        if GENERATED not in p.parts
    }


def imported(path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules this one imports, anywhere in it (a function's lazy import,
    an ``if TYPE_CHECKING:`` block): ``from a.b import c`` is ``a.b.c`` when that is a
    module, else ``a.b``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in known else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    name = module_name(path)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(path, known) for name, path in known.items()}


def test_the_packages_have_no_import_circle() -> None:
    deps = graph()
    assert len(deps) > 120  # the walk found both packages
    graphlib.TopologicalSorter(deps).prepare()  # raises CycleError, naming the circle


def test_the_client_imports_nothing_of_the_service() -> None:
    """Anywhere in a client module (a lazy import, a type-checking one): no ``processor``."""
    client = modules(CLIENT)
    assert len(client) > 15
    for name, path in client.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        assert not {m.split(".")[0] for m in found} & {"processor", "tests"}, (name, found)


def test_a_circle_would_be_found() -> None:
    deps = graph()
    deps["processor.errors"] = deps["processor.errors"] | {"processor.server"}
    try:
        graphlib.TopologicalSorter(deps).prepare()
    except graphlib.CycleError as error:
        assert "processor.errors" in error.args[1]
    else:
        raise AssertionError("a circle through processor.errors went unseen")
