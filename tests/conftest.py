from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import CaptureCollector


@pytest.fixture
def next_hop() -> Iterator[CaptureCollector]:
    collector = CaptureCollector().start()
    yield collector
    collector.stop()
