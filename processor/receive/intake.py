"""What both receivers do with a request once its transport has unwrapped it.

The transports (``grpc.py``, ``http.py``) only translate: bytes and headers in, status
codes out. Counting, the stage and the hand-off to the forwarder happen here, once, in
this order: the stage opens the request (its path, its spans), the forwarder says whether
it takes that much, and only then does the analysis run, so a refused request leaves no
trace in the breaker and its retry is read as the first try. Nothing awaits between the
question and the hand-off, so the answer still holds when the request is given.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from processor.forward.queue import Admission, Downstream
from processor.sender import UNKNOWN_SENDER, Sender
from processor.stage import Opened, Stage
from processor.telemetry.metrics import SelfMetrics

# A request larger than this is opened (decoded, its spans counted) in a worker thread, so
# a large one does not hold the event loop for other senders and the probes. Opening is
# pure: nothing it touches is shared. The analysis that follows stays on the loop.
OFFLOAD_BYTES = 1024 * 1024


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

    async def accept_protobuf(
        self, payload: bytes, transport: Transport, sender: Sender = UNKNOWN_SENDER
    ) -> IntakeResult:
        """Raises InvalidRequest for undecodable input; the transport counts it."""
        opened = (
            await asyncio.to_thread(self._stage.open, payload)
            if len(payload) > OFFLOAD_BYTES
            else self._stage.open(payload)
        )
        return await self._admit(opened, transport, sender)

    async def accept_request(
        self,
        request: ExportTraceServiceRequest,
        transport: Transport,
        sender: Sender = UNKNOWN_SENDER,
    ) -> IntakeResult:
        return await self._admit(self._stage.open_request(request), transport, sender)

    def count_invalid(self, transport: Transport) -> None:
        """For requests turned away as undecodable or over a limit."""
        self._metrics.requests.labels(transport, "invalid").inc()

    def count_busy(self, transport: Transport) -> None:
        """For requests told to retry before they were read: the receiver held enough."""
        self._metrics.requests.labels(transport, "refused").inc()

    def count_unauthenticated(self, transport: Transport) -> None:
        """For requests turned away before they were read: no or a wrong credential."""
        self._metrics.requests.labels(transport, "unauthenticated").inc()

    async def _admit(self, opened: Opened, transport: Transport, sender: Sender) -> IntakeResult:
        metrics = self._metrics
        metrics.stage_requests.labels(opened.path.value).inc()
        downstream = self._downstream
        # OTLP: an empty request is answered with success; there is nothing to forward.
        if opened.span_count and (
            downstream.admit(opened.span_count, opened.size) is not Admission.ACCEPTED
        ):
            return self._refused(transport, opened.span_count)
        prepared = self._stage.prepare(opened, sender)
        if prepared.span_count and await downstream.take(prepared) is not Admission.ACCEPTED:
            # Only when the disk queue cannot write (or shutdown began in between): the
            # analysis has run, so the retry will read as a duplicate, annotated the same.
            return self._refused(transport, prepared.span_count)
        response = ExportTraceServiceResponse()
        if prepared.rejected_spans:
            response.partial_success.rejected_spans = prepared.rejected_spans
            response.partial_success.error_message = prepared.rejection_message
            metrics.rejected_spans.labels(transport).inc(prepared.rejected_spans)
        metrics.accepted_spans.labels(transport).inc(prepared.span_count)
        metrics.requests.labels(transport, "success").inc()
        return IntakeResult(IntakeOutcome.ACCEPTED, response)

    def _refused(self, transport: Transport, span_count: int) -> IntakeResult:
        self._metrics.refused_spans.labels(transport).inc(span_count)
        self._metrics.requests.labels(transport, "refused").inc()
        return IntakeResult(
            IntakeOutcome.REFUSED, ExportTraceServiceResponse(), self._downstream.retry_after_s
        )
