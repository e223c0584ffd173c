"""The cardinality attack, through the running service: every span names a new tool.

Tool names come from whoever sends spans. A sender that makes up a new name per call
must not make /metrics, or the memory behind it, grow without end: each metric keyed by
the name holds ``telemetry.max_series_per_metric`` series, then one overflow series
(``otel_metric_overflow="true"``), and counts what it folded. Nothing is lost: the
overflow series holds the calls the others could not.

Spans go in as raw OTLP/gRPC requests (hundreds of harness ``mcp.tool.call`` spans each);
the scrape is the plain text format a curl would see. Memory is compared, not measured
against a number: what the metrics' own code holds after a second batch of new names,
next to what it took on for the first.
"""

from __future__ import annotations

import gc
import os
import random
import tracemalloc
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from prometheus_client.parser import text_string_to_metric_families

from processor.classify.pairing import PairingStats
from processor.config import BreakerConfig, TelemetryConfig
from processor.engines.breaker import Breaker
from processor.telemetry import findings
from processor.telemetry.findings import FindingMetrics
from processor.telemetry.series import MAX_LABEL_VALUE_CHARS, OVERFLOW_LABEL
from tests.engine_builders import tool_call
from tests.otlp_builders import EXPORT_METHOD, make_request, make_span
from tests.support import ServiceThread, make_config

CAP = 50
BATCH = 2000  # new tool names per measured batch
PER_REQUEST = 500
TOOL_CALLS = "mcp_breaker_tool_calls_total"
OVERFLOW_TOTAL = "mcp_breaker_metric_overflow"  # the family, as the text parser names it
TELEMETRY_CODE = str(Path(findings.__file__).parent) + os.sep
# The second batch of new names may add at most this share of what the first added (the
# first fills the tables to the cap; unbounded tables would add as much again).
MAX_GROWTH_RATIO = 0.1

Export = Callable[..., ExportTraceServiceResponse]  # (request, timeout=...)


class Sender:
    """Harness ``mcp.tool.call`` spans over one gRPC channel, a fresh span id each."""

    def __init__(self, endpoint: str) -> None:
        self._channel = grpc.insecure_channel(endpoint)
        self._export: Export = self._channel.unary_unary(
            EXPORT_METHOD,
            request_serializer=ExportTraceServiceRequest.SerializeToString,
            response_deserializer=ExportTraceServiceResponse.FromString,
        )
        self._next = 1
        self.sent = 0

    def calls(self, tools: list[str]) -> None:
        for first in range(0, len(tools), PER_REQUEST):
            spans = [self._span(tool) for tool in tools[first : first + PER_REQUEST]]
            response = self._export(make_request(*spans), timeout=30)
            assert not response.partial_success.rejected_spans
            self.sent += len(spans)

    def _span(self, tool: str) -> Span:
        index = self._next
        self._next += 1
        return make_span(
            "mcp.tool.call",
            index,
            trace_id=(0xC0FFEE0000 + index // PER_REQUEST).to_bytes(16, "big"),  # a few turns
            span_id=(0x5A00000000 + index).to_bytes(8, "big"),
            kind=Span.SPAN_KIND_CLIENT,
            attributes={"mcp.tool.name": tool, "mcp.server.name": "web", "mcp.tool.outcome": "ok"},
        )

    def close(self) -> None:
        self._channel.close()


def new_names(rng: random.Random, count: int) -> list[str]:
    return [f"tool-{rng.getrandbits(64):016x}" for _ in range(count)]


def telemetry_bytes() -> int:
    """Bytes held by allocations made in the metrics' own code.

    One frame is enough: everything a table holds per series (the label tuple, the value,
    its histogram counts and exemplars, the table's entry) is allocated by a line of
    findings.py or series.py itself.
    """
    gc.collect()
    by_file = tracemalloc.take_snapshot().statistics("filename")
    return sum(stat.size for stat in by_file if TELEMETRY_CODE in stat.traceback[0].filename)


def growth_of_two_batches(send: Callable[[], None]) -> tuple[int, int]:
    """What the metrics' code holds more after one batch, then after a second."""
    tracemalloc.start(1)
    try:
        before = telemetry_bytes()
        send()
        after_first = telemetry_bytes()
        send()
        after_second = telemetry_bytes()
    finally:
        tracemalloc.stop()
    return after_first - before, after_second - after_first


def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        text = response.read().decode()
    return {
        family.name: [(sample.labels, sample.value) for sample in family.samples]
        for family in text_string_to_metric_families(text)
    }


@pytest.fixture
def service() -> Iterator[ServiceThread]:
    running = ServiceThread(make_config(f"telemetry.max_series_per_metric={CAP}"))
    yield running
    running.stop()


def test_a_new_tool_name_per_call_stays_within_the_cap(service: ServiceThread) -> None:
    rng = random.Random(2026)
    sender = Sender(service.grpc_endpoint)
    try:
        long_name = "L" * 100_000  # first, so it gets one of the places
        sender.calls([long_name])
        first, second = growth_of_two_batches(lambda: sender.calls(new_names(rng, BATCH)))
        # A series' first scrape shows it at zero (so increase() counts its first calls),
        # the next one its count.
        at_birth = scrape(service.telemetry_url)
        scraped = scrape(service.telemetry_url)
    finally:
        sender.close()

    assert {value for _, value in at_birth["mcp_breaker_tool_calls"]} == {0.0}

    calls = scraped["mcp_breaker_tool_calls"]
    assert sender.sent == 1 + 2 * BATCH
    assert len(calls) == CAP + 1  # the cap, and the overflow series
    overflow = [value for labels, value in calls if labels == {OVERFLOW_LABEL: "true"}]
    assert overflow == [sender.sent - CAP]
    assert sum(value for _, value in calls) == sender.sent  # nothing lost
    folded = {labels["metric"]: value for labels, value in scraped[OVERFLOW_TOTAL]}
    assert folded["tool_calls"] == sender.sent - CAP
    assert folded["tool_call_duration_seconds"] == sender.sent - CAP

    tools = {labels.get("tool") for labels, _ in calls}
    assert "L" * MAX_LABEL_VALUE_CHARS in tools  # 100 KB of name, cut to the cap
    assert all(len(tool) <= MAX_LABEL_VALUE_CHARS for tool in tools if tool is not None)
    circuits = {labels["key"] for labels, _ in scraped["mcp_breaker_circuit_state"]}
    assert len(circuits) <= CAP

    assert first > 0
    assert second <= first * MAX_GROWTH_RATIO, (first, second)


def test_the_memory_measure_sees_tables_that_grow() -> None:
    """The control for the test above: with a cap no batch reaches, the same measure shows
    the second batch adding about what the first did, so a ratio under
    MAX_GROWTH_RATIO there means the tables stopped growing, not a blind measure."""
    breaker = Breaker(BreakerConfig(max_circuits=10 * BATCH), jitter=lambda: 0.5)
    unbounded = TelemetryConfig(max_series_per_metric=10 * BATCH)
    metrics = FindingMetrics(unbounded, breaker, PairingStats(), clock=lambda: 0.0)
    rng = random.Random(7)
    minute = iter(range(BATCH))

    def send() -> None:
        for tool in new_names(rng, BATCH // 4):
            metrics(breaker.observe(tool_call(next(minute), tool=tool, turn="flood")))

    first, second = growth_of_two_batches(send)
    assert second > first * 0.5, (first, second)
