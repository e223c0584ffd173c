"""The advisory service's figures, read at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from processor.advisories.service import AdvisoryService
from processor.telemetry import catalogue as c
from processor.telemetry.catalogue import Kind, MetricSpec

VERDICTS = ("allow", "deny", "probe")


def _family(spec: MetricSpec, samples: dict[tuple[str, ...], float]) -> Metric:
    family = Metric(spec.full_name, spec.help, spec.kind.value, spec.unit)
    name = spec.scraped_name if spec.kind is Kind.COUNTER else spec.full_name
    for labels, value in samples.items():
        family.add_sample(name, dict(zip(spec.labels, labels, strict=True)), value)
    return family


class AdvisoryCollector(Collector):
    def __init__(self, service: AdvisoryService) -> None:
        self._service = service

    def collect(self) -> Iterator[Metric]:
        service = self._service
        stats = service.stats
        yield _family(c.SUBSCRIBERS, {(): len(service.broadcaster.subscribers)})
        yield _family(c.ADVISORIES, {(): len(service.hub)})
        yield _family(c.ADVISORY_CHANGES, {(): stats.changes})
        yield _family(c.SUBSCRIBERS_CUT, {(): stats.cut_off})
        yield _family(c.CHECKS, {(v,): stats.checks.get(v, 0) for v in VERDICTS})
