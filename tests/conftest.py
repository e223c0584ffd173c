from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.support import CaptureCollector

# No per-example deadline: on a shared, loaded machine one slow example is the machine,
# not the code (speed is measured by the benchmarks, never by a test).
settings.register_profile("mcp-breaker", deadline=None)
settings.load_profile("mcp-breaker")


@pytest.fixture
def next_hop() -> Iterator[CaptureCollector]:
    collector = CaptureCollector().start()
    yield collector
    collector.stop()
