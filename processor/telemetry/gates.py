"""What the gRPC ports' gates refused, read at scrape time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from processor.receive.portgate import PortGate
from processor.telemetry import catalogue

RAPID_RESET = "rapid_reset"  # the one reason a gate sends a GOAWAY


class GateCollector(Collector):
    def __init__(self, gates: Mapping[str, PortGate]) -> None:
        self._gates = gates  # by transport

    def collect(self) -> Iterable[Metric]:
        goaways = CounterMetricFamily(
            catalogue.RECEIVER_GOAWAYS.full_name,
            catalogue.RECEIVER_GOAWAYS.help,
            labels=("transport", "reason"),
        )
        for transport, gate in self._gates.items():
            goaways.add_metric((transport, RAPID_RESET), gate.goaways)
        return (goaways,)
