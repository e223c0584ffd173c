"""What both receivers do with a request once its transport has unwrapped it.

The transports (``grpc.py``, ``http.py``) only translate: bytes and headers in, status
codes out. Counting, the stage and the hand-off to the forwarder happen here, once.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from processor.forward.queue import Admission, Downstream
from processor.sender import UNKNOWN_SENDER, Sender
from processor.stage import Prepared, Stage
from processor.telemetry.metrics import SelfMetrics


class Transport(enum.StrEnum):
    GRPC = "grpc"
    HTTP = "http"


class IntakeOutcome(enum.Enum):
    ACCEPTED = "accepted"  # every span (bar the rejected ones) is ours to deliver
    REFUSED = "refused"  # nothing was taken; the sender must retry after ``retry_after_s``


@dataclass(frozen=True, slots=True)
class IntakeResult:
    outcome: IntakeOutcome
    response: ExportTraceServiceResponse
    retry_after_s: float = 0.0


class Intake:
    def __init__(self, stage: Stage, downstream: Downstream, metrics: SelfMetrics) -> None:
        self._stage = stage
        self._downstream = downstream
        self._metrics = metrics

    def accept_protobuf(
        self, payload: bytes, transport: Transport, sender: Sender = UNKNOWN_SENDER
    ) -> IntakeResult:
        """Raises InvalidRequest for undecodable input; the transport counts it."""
        return self._admit(self._stage.from_protobuf(payload, sender), transport)

    def accept_request(
        self,
        request: ExportTraceServiceRequest,
        transport: Transport,
        sender: Sender = UNKNOWN_SENDER,
    ) -> IntakeResult:
        return self._admit(self._stage.from_request(request, sender), transport)

    def count_invalid(self, transport: Transport) -> None:
        """For requests turned away as undecodable or over a limit."""
        self._metrics.requests.labels(transport, "invalid").inc()

    def _admit(self, prepared: Prepared, transport: Transport) -> IntakeResult:
        metrics = self._metrics
        metrics.stage_requests.labels(prepared.path.value).inc()
        # OTLP: an empty request is answered with success; there is nothing to forward.
        if prepared.span_count and self._downstream.offer(prepared) is not Admission.ACCEPTED:
            metrics.refused_spans.labels(transport).inc(prepared.span_count)
            metrics.requests.labels(transport, "refused").inc()
            return IntakeResult(
                IntakeOutcome.REFUSED, ExportTraceServiceResponse(), self._downstream.retry_after_s
            )
        response = ExportTraceServiceResponse()
        if prepared.rejected_spans:
            response.partial_success.rejected_spans = prepared.rejected_spans
            response.partial_success.error_message = prepared.rejection_message
            metrics.rejected_spans.labels(transport).inc(prepared.rejected_spans)
        metrics.accepted_spans.labels(transport).inc(prepared.span_count)
        metrics.requests.labels(transport, "success").inc()
        return IntakeResult(IntakeOutcome.ACCEPTED, response)
