"""The service's own metrics, declared once, on one explicit registry.

Names follow the Collector's ``otelcol_*`` internal metrics under our prefix, and
Prometheus conventions: ``_total`` counters (prometheus_client adds the suffix), base
units, and label values from closed sets only. Queue gauges are read live at scrape time
by a collector, never copied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from processor.telemetry import catalogue
from processor.telemetry.catalogue import MetricSpec

if TYPE_CHECKING:  # the forwarder imports this module to count; this only names its type
    from processor.forward.queue import QueueStats
    from processor.receive.connections import ConnectionLimit


class SelfMetrics:
    """The hop's own counters (receiver, stage, exporter), declared from the catalogue."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

        def counter(spec: MetricSpec) -> Counter:
            return Counter(spec.full_name, spec.help, spec.labels, registry=registry)

        self.accepted_spans = counter(catalogue.ACCEPTED_SPANS)
        self.refused_spans = counter(catalogue.REFUSED_SPANS)
        self.rejected_spans = counter(catalogue.REJECTED_SPANS)
        self.requests = counter(catalogue.REQUESTS)
        self.stage_requests = counter(catalogue.STAGE_REQUESTS)
        self.stage_errors = counter(catalogue.STAGE_ERRORS)
        self.sent_spans = counter(catalogue.SENT_SPANS)
        self.send_failed_spans = counter(catalogue.SEND_FAILED_SPANS)
        self.send_retries = counter(catalogue.SEND_RETRIES)
        self.released_spans = counter(catalogue.RELEASED_SPANS)
        # Series exist from the start, so rate() and alerts see a zero, not an absence.
        for name in ("grpc", "http"):
            for family in (self.accepted_spans, self.refused_spans, self.rejected_spans):
                family.labels(name)
            for outcome in ("success", "refused", "invalid", "unauthenticated"):
                self.requests.labels(name, outcome)


_QUEUE_GAUGES = (
    (catalogue.QUEUE_SPANS, "spans"),
    (catalogue.QUEUE_CAPACITY_SPANS, "capacity_spans"),
    (catalogue.QUEUE_BYTES, "bytes"),
    (catalogue.QUEUE_CAPACITY_BYTES, "capacity_bytes"),
    (catalogue.IN_FLIGHT, "in_flight"),
    (catalogue.ATTEMPT_TIMEOUT, "attempt_timeout_s"),
)


class QueueCollector(Collector):
    """Reads the forwarder's queue at scrape time."""

    def __init__(self, read: Callable[[], QueueStats]) -> None:
        self._read = read

    def collect(self) -> Iterable[GaugeMetricFamily]:
        stats = self._read()
        for spec, attribute in _QUEUE_GAUGES:
            yield GaugeMetricFamily(
                spec.full_name, spec.help, value=getattr(stats, attribute), unit=spec.unit
            )


class ConnectionCollector(Collector):
    """Reads the listeners' connection caps at scrape time, one family for all of them."""

    def __init__(self, limits: Mapping[str, ConnectionLimit]) -> None:
        self._limits = limits  # by transport

    def collect(self) -> Iterable[Metric]:
        open_ = GaugeMetricFamily(
            catalogue.RECEIVER_CONNECTIONS.full_name,
            catalogue.RECEIVER_CONNECTIONS.help,
            labels=("transport",),
        )
        refused = CounterMetricFamily(
            catalogue.RECEIVER_CONNECTIONS_REFUSED.full_name,
            catalogue.RECEIVER_CONNECTIONS_REFUSED.help,
            labels=("transport",),
        )
        evicted = CounterMetricFamily(
            catalogue.RECEIVER_CONNECTIONS_EVICTED.full_name,
            catalogue.RECEIVER_CONNECTIONS_EVICTED.help,
            labels=("transport",),
        )
        for transport, limit in self._limits.items():
            open_.add_metric((transport,), limit.open)
            refused.add_metric((transport,), limit.refused)
            evicted.add_metric((transport,), limit.evicted)
        return (open_, refused, evicted)
