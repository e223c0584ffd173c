"""The shared state's own metrics, read at scrape time from its counts (redis backend)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from processor.state.replica import SharedStats
from processor.telemetry import catalogue as c
from processor.telemetry.findings import closed_family


class SharedStateCollector(Collector):
    def __init__(self, stats: SharedStats) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        stats = self._stats
        yield closed_family(c.SHARED_STATE_UP, {(): 1.0 if stats.up else 0.0})
        yield closed_family(c.SHARED_EVENTS_APPENDED, {(): stats.appended})
        yield closed_family(c.SHARED_EVENTS_APPLIED, {(): stats.applied})
        yield closed_family(c.SHARED_EVENTS_DROPPED, {(): stats.dropped})
        yield closed_family(c.SHARED_EVENTS_UNREADABLE, {(): stats.unreadable})
        yield closed_family(c.SHARED_OUTBOX, {(): stats.outbox})
