"""One telemetry port for several workers: their scrapes, merged as the catalogue says.

Each worker of ``serve --workers N`` serves its own metrics on a loopback port; the
supervisor scrapes them all in OpenMetrics (which keeps every type, exemplars and created
times) and shows one set: what each worker counted, added; the breaker's replicated state
(circuits, advisories), once; a harness's latest listing, the largest; shared state up
only if up everywhere (``catalogue.Merge``). Plain functions over parsed samples.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from processor.telemetry.catalogue import CATALOGUE, Merge

POLICY = {spec.full_name: spec.workers for spec in CATALOGUE}
SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


def merge(scrapes: Sequence[str]) -> list[Metric]:
    """The families of several OpenMetrics scrapes as one, in first-seen order."""
    families: dict[str, Metric] = {}
    series: dict[str, dict[SeriesKey, Sample]] = {}
    for text in scrapes:
        for family in text_string_to_metric_families(text):  # type: ignore[no-untyped-call]
            policy = POLICY.get(family.name, Merge.SUM)
            if family.name not in families:
                families[family.name] = Metric(
                    family.name, family.documentation, family.type, family.unit
                )
                series[family.name] = {}
            table = series[family.name]
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                held = table.get(key)
                table[key] = sample if held is None else _combine(policy, held, sample)
    merged = []
    for name, family in families.items():
        family.samples = list(series[name].values())
        merged.append(family)
    return merged


def _combine(policy: Merge, held: Sample, new: Sample) -> Sample:
    if held.name.endswith("_created"):  # when the series began: the earliest worker's
        return held._replace(value=min(held.value, new.value))
    if policy is Merge.ONE:
        return held
    if policy is Merge.MIN:
        return held._replace(value=min(held.value, new.value))
    if policy is Merge.MAX:
        return held._replace(value=max(held.value, new.value))
    return held._replace(value=held.value + new.value, exemplar=new.exemplar or held.exemplar)


class MergedCollector(Collector):
    """Serves the families ``update`` was last given (one scrape at a time)."""

    def __init__(self) -> None:
        self._families: list[Metric] = []

    def update(self, scrapes: Sequence[str]) -> None:
        self._families = merge(scrapes)

    def collect(self) -> Iterable[Metric]:
        return list(self._families)
