from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import settings
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support import CaptureCollector

# No per-example deadline: on a shared, loaded machine one slow example is the machine,
# not the code (speed is measured by the benchmarks, never by a test).
settings.register_profile("mcp-breaker", deadline=None)
settings.load_profile("mcp-breaker")


@pytest.fixture
def next_hop() -> Iterator[CaptureCollector]:
    collector = CaptureCollector().start()
    yield collector
    collector.stop()


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A tracer provider of the OpenTelemetry SDK whose spans end up in memory, at once."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield provider, memory
    provider.shutdown()
