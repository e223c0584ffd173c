"""The advisory service's figures, read at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from processor.advisories.service import AdvisoryService
from processor.telemetry import catalogue as c
from processor.telemetry.findings import closed_family

VERDICTS = ("allow", "deny", "probe")


class AdvisoryCollector(Collector):
    def __init__(self, service: AdvisoryService) -> None:
        self._service = service

    def collect(self) -> Iterator[Metric]:
        service = self._service
        stats = service.stats
        yield closed_family(c.SUBSCRIBERS, {(): len(service.broadcaster.subscribers)})
        yield closed_family(c.ADVISORIES, {(): len(service.hub)})
        yield closed_family(c.ADVISORY_CHANGES, {(): stats.changes})
        yield closed_family(c.SUBSCRIBERS_CUT, {(): stats.cut_off})
        yield closed_family(c.CHECKS, {(v,): stats.checks.get(v, 0) for v in VERDICTS})
