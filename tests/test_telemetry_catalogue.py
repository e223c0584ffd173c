"""The catalogue is the one list of metrics: the docs follow it, the scrape holds nothing else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from processor.config import Backend, ServiceConfig, StateConfig
from processor.server import Service
from processor.telemetry.catalogue import CATALOGUE, SHARED, Kind, MetricSpec

DOCS = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"
SNAKE = re.compile(r"^mcp_breaker_[a-z][a-z0-9_]*[a-z0-9]$")


def doc_row(spec: MetricSpec) -> str:
    labels = ", ".join(f"`{label}`" for label in spec.labels) or "—"
    notes = [word for word, on in (("bounded", spec.bounded), ("exemplars", spec.exemplars)) if on]
    note = f" ({', '.join(notes)})" if notes else ""
    unit = spec.unit or "—"
    return f"| `{spec.scraped_name}` | {spec.kind.value} | {unit} | {labels} | {spec.help}{note} |"


@pytest.mark.parametrize("spec", CATALOGUE, ids=lambda s: s.name)
def test_every_metric_is_documented_as_declared(spec: MetricSpec) -> None:
    text = DOCS.read_text()
    assert doc_row(spec) in text
    assert f"- `{spec.scraped_name}`: `{spec.query}`" in text


@pytest.mark.parametrize("spec", CATALOGUE, ids=lambda s: s.name)
def test_names_follow_prometheus_conventions(spec: MetricSpec) -> None:
    assert SNAKE.match(spec.full_name)
    assert not spec.full_name.endswith("_total")  # the exposition adds it to counters
    if spec.unit:
        assert spec.full_name.endswith(f"_{spec.unit}")
    if spec.kind is Kind.HISTOGRAM:
        assert spec.unit == "seconds"
    assert spec.full_name in spec.query  # the example query reads the metric it documents


def test_names_are_unique() -> None:
    names = [spec.full_name for spec in CATALOGUE]
    assert len(names) == len(set(names))


def test_the_scrape_holds_exactly_the_catalogue() -> None:
    """Every family a running service exposes is catalogued, and every catalogued family
    is exposed (the queue gauges once a next hop is configured; the shared state's with
    the redis backend)."""
    registry = CollectorRegistry()
    Service(ServiceConfig(), registry=registry)
    exposed = {family.name for family in registry.collect()}
    declared = {spec.full_name for spec in CATALOGUE}
    queue_gauges = {s.full_name for s in CATALOGUE if s.name.startswith("exporter_queue")}
    queue_gauges.add("mcp_breaker_exporter_in_flight_requests")
    queue_gauges.add("mcp_breaker_exporter_attempt_timeout_seconds")
    shared = {spec.full_name for spec in SHARED}
    assert exposed == declared - queue_gauges - shared

    registry = CollectorRegistry()
    Service(ServiceConfig(state=StateConfig(backend=Backend.REDIS)), registry=registry)
    assert shared <= {family.name for family in registry.collect()}
