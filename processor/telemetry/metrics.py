"""The service's own metrics, declared once, on one explicit registry.

Names follow the Collector's ``otelcol_*`` internal metrics under our prefix, and
Prometheus conventions: ``_total`` counters (prometheus_client adds the suffix), base
units, and label values from closed sets only. Queue gauges are read live at scrape time
by a collector, never copied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:  # the forwarder imports this module to count; this only names its type
    from processor.forward.queue import QueueStats

PREFIX = "mcp_breaker"


class SelfMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(f"{PREFIX}_{name}", doc, labels, registry=registry)

        transport = ("transport",)
        self.accepted_spans = counter(
            "receiver_accepted_spans", "Spans taken in and owned for delivery.", transport
        )
        self.refused_spans = counter(
            "receiver_refused_spans",
            "Spans the sender was told to retry (queue full or shutting down).",
            transport,
        )
        self.rejected_spans = counter(
            "receiver_rejected_spans",
            "Spans rejected as invalid and reported to the sender as partial success.",
            transport,
        )
        self.requests = counter(
            "receiver_requests",
            "Export requests by outcome: success, refused (retry), invalid (not retryable).",
            ("transport", "outcome"),
        )
        self.stage_requests = counter(
            "stage_requests",
            "Requests by stage path: passthrough (forwarded as received) or parsed.",
            ("path",),
        )
        self.stage_errors = counter(
            "stage_errors",
            "Requests whose span analysis failed; they were forwarded without it.",
        )
        self.sent_spans = counter("exporter_sent_spans", "Spans the next hop accepted.")
        self.send_failed_spans = counter(
            "exporter_send_failed_spans",
            "Accepted spans that were not delivered, by reason.",
            ("reason",),
        )
        self.send_retries = counter(
            "exporter_send_retries", "Export attempts that failed and were retried."
        )
        self.released_spans = counter(
            "released_spans", "Spans analysed and released because no next hop is configured."
        )
        # Series exist from the start, so rate() and alerts see a zero, not an absence.
        for name in ("grpc", "http"):
            for family in (self.accepted_spans, self.refused_spans, self.rejected_spans):
                family.labels(name)
            for outcome in ("success", "refused", "invalid"):
                self.requests.labels(name, outcome)


class QueueCollector(Collector):
    """Reads the forwarder's queue at scrape time."""

    def __init__(self, read: Callable[[], QueueStats]) -> None:
        self._read = read

    def collect(self) -> Iterable[GaugeMetricFamily]:
        stats = self._read()
        for name, doc, attribute in (
            ("exporter_queue_spans", "Spans held by the forwarder, queued or in flight.", "spans"),
            (
                "exporter_queue_capacity_spans",
                "Most spans the forwarder may hold.",
                "capacity_spans",
            ),
            ("exporter_queue_bytes", "Encoded bytes held by the forwarder.", "bytes"),
            (
                "exporter_queue_capacity_bytes",
                "Most encoded bytes the forwarder may hold.",
                "capacity_bytes",
            ),
            (
                "exporter_in_flight_requests",
                "Export requests being sent to the next hop.",
                "in_flight",
            ),
        ):
            yield GaugeMetricFamily(f"{PREFIX}_{name}", doc, value=getattr(stats, attribute))
