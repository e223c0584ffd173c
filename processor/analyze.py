"""The stage hook that reads MCP spans: classify, then hand each event to its consumers.

The classifier is pure and takes the time as an argument; this is where the clock is read.
Consumers (the engines, and in tests a list) are plain callables, so the order of the
pipeline is written down in one place: ``server.py``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from processor.classify.classifier import Classifier
from processor.classify.events import Event, ToolCall

log = logging.getLogger(__name__)

EventSink = Callable[[Event], None]


class Analyzer:
    def __init__(
        self,
        classifier: Classifier,
        sinks: Sequence[EventSink] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.classifier = classifier
        self._sinks = tuple(sinks)
        self._clock = clock

    def __call__(self, request: ExportTraceServiceRequest) -> None:
        self._publish(self.classifier.classify(request, self._clock()))

    def tick(self) -> None:
        """Decide the calls whose other half did not come in time; called periodically."""
        self._publish(self.classifier.expire(self._clock()))

    def flush(self) -> None:
        self._publish(self.classifier.flush())

    def _publish(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, ToolCall) and log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "tool call %s/%s in turn %s: %s%s (%s)",
                    event.server or "?",
                    event.tool,
                    event.turn,
                    event.outcome.value,
                    f"/{event.failure_class.value}" if event.failure_class else "",
                    event.dialect.value,
                )
            for sink in self._sinks:
                sink(event)
