"""What both receivers do with a request once its transport has unwrapped it.

The transports (``grpc.py``, ``http.py``) only translate: bytes and headers in, status
codes out. Counting, the stage and the hand-off to the forwarder happen here, once, in
this order: the stage opens the request (its path, its spans), the forwarder says whether
it takes that much, and only then does the analysis run, so a refused request leaves no
trace in the breaker and its retry is read as the first try. The forwarder keeps the room
it said yes to until the request is given (or withdrawn), so the answer still holds when
the request is given, however long its analysis took.

A large request is analysed in a worker thread while the loop serves everyone else (the
stage hands the steps that touch the engines back to the loop, a few at a time), and the
requests to analyse wait their turn in the order they were admitted: the engines read one
request at a time. A small one, when none waits, is analysed in place, with no await.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
from collections.abc import Callable
from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from processor.forward.queue import Admission, Downstream
from processor.inflight.stage import EngineStep, Opened, Prepared, Stage
from processor.offloop import OFF_THE_LOOP
from processor.request.sender import UNKNOWN_SENDER, Sender
from processor.telemetry.metrics import SelfMetrics

# A request larger than this is opened (decoded, its spans counted) in a worker thread, so
# a large one does not hold the event loop for other senders and the probes. Opening is
# pure: nothing it touches is shared.
OFFLOAD_BYTES = 1024 * 1024
# A request whose analysis reads more spans than this is analysed in a worker thread.
# One this size (an SDK's batch of 512 spans of agent traffic holds about 256) takes some
# 15 ms here, and is analysed in place: in a thread, next to a loop kept busy by other
# senders, the same requests cost a third more CPU (bench/hop.py, harness payload).
ANALYSE_IN_PLACE_SPANS = 256


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
        self._turn = asyncio.Lock()  # held while a request is analysed out of place
        self._in_turn = 0  # requests waiting for their turn or being analysed in it

    async def accept_protobuf(
        self, payload: bytes, transport: Transport, sender: Sender = UNKNOWN_SENDER
    ) -> IntakeResult:
        """Raises InvalidRequest for undecodable input; the transport counts it."""
        if len(payload) > OFFLOAD_BYTES:
            with OFF_THE_LOOP:  # as while analysing (offloop.py)
                opened = await asyncio.to_thread(self._stage.open, payload)
        else:
            opened = self._stage.open(payload)
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
        admitted = (opened.span_count, opened.size)
        # OTLP: an empty request is answered with success; there is nothing to forward.
        if opened.span_count and downstream.admit(*admitted) is not Admission.ACCEPTED:
            return self._refused(transport, opened.span_count)
        try:
            if opened.request is None or (
                not self._in_turn and opened.analysed_spans <= ANALYSE_IN_PLACE_SPANS
            ):
                prepared = self._stage.prepare(opened, sender)
            else:
                prepared = await self._prepared_in_turn(opened, sender)
        except BaseException:  # the sender gone, or a bug: nothing of it is taken
            if opened.span_count:
                downstream.withdraw(*admitted)
            raise
        if not prepared.span_count:
            if opened.span_count:  # every span rejected for its ids
                downstream.withdraw(*admitted)
        elif await downstream.take(prepared, admitted) is not Admission.ACCEPTED:
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

    async def _prepared_in_turn(self, opened: Opened, sender: Sender) -> Prepared:
        self._in_turn += 1
        # Shielded: once begun, an analysis runs to its end even if its sender goes, or the
        # next one would read the engines while a thread still does.
        return await asyncio.shield(self._analyse_in_turn(opened, sender))

    async def _analyse_in_turn(self, opened: Opened, sender: Sender) -> Prepared:
        try:
            async with self._turn:
                if opened.analysed_spans <= ANALYSE_IN_PLACE_SPANS:
                    return self._stage.prepare(opened, sender)
                on_loop = _on_loop(asyncio.get_running_loop())
                stage = self._stage
                with OFF_THE_LOOP:
                    return await asyncio.to_thread(stage.prepare_in_thread, opened, sender, on_loop)
        finally:
            self._in_turn -= 1

    def _refused(self, transport: Transport, span_count: int) -> IntakeResult:
        self._metrics.refused_spans.labels(transport).inc(span_count)
        self._metrics.requests.labels(transport, "refused").inc()
        return IntakeResult(
            IntakeOutcome.REFUSED, ExportTraceServiceResponse(), self._downstream.retry_after_s
        )


def _on_loop(loop: asyncio.AbstractEventLoop) -> Callable[[EngineStep], None]:
    """For a worker thread: run a step on ``loop`` and return once it has run (raising
    what it raised)."""

    def run(step: EngineStep) -> None:
        ran: concurrent.futures.Future[None] = concurrent.futures.Future()

        def step_on_loop() -> None:
            try:
                step()
            except BaseException as error:
                ran.set_exception(error)
                if not isinstance(error, Exception):
                    raise
            else:
                ran.set_result(None)

        loop.call_soon_threadsafe(step_on_loop)
        ran.result()

    return run
