"""The bounded stores' fill, read at scrape time: how much of each cap is in use.

Everything an outsider can make the service remember (calls waiting for their other half,
spans seen, circuits, turns, listings, advisories) sits in a store with a cap in entries,
and every name in an entry is cut to ``classify.max_name_chars``; so a store's memory is
bounded by its cap times its largest entry. These gauges show how close each is to its cap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from processor.telemetry import catalogue

Sizes = dict[str, tuple[int, int]]  # store -> (entries held, cap)


class StoreCollector(Collector):
    def __init__(self, *sources: Callable[[], Sizes]) -> None:
        self._sources = sources

    def collect(self) -> Iterable[Metric]:
        held = GaugeMetricFamily(
            catalogue.STORE_ENTRIES.full_name, catalogue.STORE_ENTRIES.help, labels=("store",)
        )
        caps = GaugeMetricFamily(
            catalogue.STORE_CAPACITY.full_name, catalogue.STORE_CAPACITY.help, labels=("store",)
        )
        for source in self._sources:
            for store, (entries, cap) in source().items():
                held.add_metric((store,), entries)
                caps.add_metric((store,), cap)
        return (held, caps)
