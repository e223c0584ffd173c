"""The package's modules import one another without a circle, type-checking imports too:
each module can be read after the ones it builds on, and none needs a lazy import to load."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "processor"
GENERATED = "v1"  # protoc's stubs import only each other


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py") if GENERATED not in p.parts}


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


def test_the_package_has_no_import_circle() -> None:
    deps = graph()
    assert len(deps) > 100  # the walk found the package
    graphlib.TopologicalSorter(deps).prepare()  # raises CycleError, naming the circle


def test_a_circle_would_be_found() -> None:
    deps = graph()
    deps["processor.errors"] = deps["processor.errors"] | {"processor.server"}
    try:
        graphlib.TopologicalSorter(deps).prepare()
    except graphlib.CycleError as error:
        assert "processor.errors" in error.args[1]
    else:
        raise AssertionError("a circle through processor.errors went unseen")
