from __future__ import annotations

import pytest

from tests.live import harness


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "live: runs the real MCP SDKs in their own venvs")


def _stack(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None or item.get_closest_marker("live") is None:
        return None
    stack = callspec.params.get("stack")
    return stack if isinstance(stack, str) else None


@pytest.fixture(scope="session")
def live_venvs(request: pytest.FixtureRequest) -> None:
    """Build (or reuse) the venvs of the selected live tests' stacks at once, in parallel."""
    stacks = sorted({stack for item in request.session.items if (stack := _stack(item))})
    harness.ensure_venvs(tuple(stacks))
