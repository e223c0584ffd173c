"""The bounded queue in front of the next hop, and the consumers that empty it.

Admission is decided synchronously, before the receiver answers its sender: a batch is
either taken whole (and then delivered, or counted and logged as failed) or refused, so
the sender retries. Nothing is dropped silently. The bound covers every span the forwarder
holds, queued or in flight, in spans and in bytes.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from processor.config import ForwardConfig
from processor.forward.outage import OutageLog
from processor.forward.retry import SendOutcome, next_delay_s
from processor.forward.senders import Sender
from processor.stage import Prepared, split_request
from processor.telemetry.metrics import SelfMetrics

log = logging.getLogger(__name__)


class Admission(enum.Enum):
    ACCEPTED = "accepted"
    QUEUE_FULL = "queue_full"
    STOPPING = "stopping"


class FailureReason(enum.StrEnum):
    """Why spans the forwarder accepted were not delivered; a metric label."""

    PERMANENT = "permanent"  # the next hop said the data is bad
    RETRIES_EXHAUSTED = "retries_exhausted"  # retry.max_elapsed_s ran out
    REJECTED_BY_NEXT_HOP = "rejected_by_next_hop"  # partial success downstream
    SHUTDOWN = "shutdown"  # still held when the shutdown grace period ended


@dataclass(frozen=True, slots=True)
class QueueStats:
    spans: int
    bytes: int
    batches: int
    in_flight: int
    capacity_spans: int
    capacity_bytes: int


@dataclass(frozen=True, slots=True)
class DrainReport:
    delivered_spans: int
    undelivered_spans: int
    undelivered_batches: int


class Downstream(Protocol):
    """Where the intake hands prepared requests."""

    retry_after_s: float

    def offer(self, batch: Prepared) -> Admission: ...


class Release:
    """No next hop: spans are analysed by the stage, then released."""

    retry_after_s = 0.0

    def __init__(self, metrics: SelfMetrics) -> None:
        self._metrics = metrics

    def offer(self, batch: Prepared) -> Admission:
        self._metrics.released_spans.inc(batch.span_count)
        return Admission.ACCEPTED


Sleep = Callable[[float], Awaitable[object]]


class Forwarder:
    def __init__(
        self,
        config: ForwardConfig,
        sender: Sender,
        metrics: SelfMetrics,
        *,
        sleep: Sleep = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._sender = sender
        self._metrics = metrics
        for reason in FailureReason:  # zeros from the start: increase() sees the first loss
            metrics.send_failed_spans.labels(reason)
        self._sleep = sleep
        self._jitter = jitter
        self._clock = clock
        self.retry_after_s = config.queue.backpressure_retry_after_s
        # Batches wait in a deque so a consumer can look at the next one before taking it;
        # the queue holds one token per waiting batch and is what consumers sleep on.
        self._waiting: collections.deque[Prepared] = collections.deque()
        self._tokens: asyncio.Queue[None] = asyncio.Queue()
        self._held_spans = 0
        self._held_bytes = 0
        self._held_batches = 0
        self._in_flight = 0
        self._delivered_spans = 0
        self._stopping = False
        self._consumers: list[asyncio.Task[None]] = []
        self._idle = asyncio.Event()
        self._idle.set()
        # A next hop that is down fails every consumer's attempts: logged once, then
        # summarised, then its recovery (not a line per attempt).
        self._outage = OutageLog(sender.target, clock=clock)

    @property
    def target(self) -> str:
        return self._sender.target

    def start(self) -> None:
        self._consumers = [
            asyncio.create_task(self._consume(), name=f"forward-consumer-{i}")
            for i in range(self._config.queue.consumers)
        ]

    def stats(self) -> QueueStats:
        queue = self._config.queue
        return QueueStats(
            spans=self._held_spans,
            bytes=self._held_bytes,
            batches=self._held_batches,
            in_flight=self._in_flight,
            capacity_spans=queue.max_spans,
            capacity_bytes=queue.max_bytes,
        )

    def offer(self, batch: Prepared) -> Admission:
        if self._stopping:
            return Admission.STOPPING
        queue = self._config.queue
        over_spans = self._held_spans + batch.span_count > queue.max_spans
        over_bytes = self._held_bytes + len(batch.payload) > queue.max_bytes
        # An empty queue takes any one batch, or a request bigger than the bound would be
        # refused for ever; the receivers' size limits still bound it.
        if (over_spans or over_bytes) and self._held_batches:
            return Admission.QUEUE_FULL
        self._held_spans += batch.span_count
        self._held_bytes += len(batch.payload)
        self._held_batches += 1
        self._idle.clear()
        self._waiting.append(batch)
        self._tokens.put_nowait(None)
        return Admission.ACCEPTED

    async def reachable(self, timeout_s: float) -> bool:
        return await self._sender.reachable(timeout_s)

    async def _consume(self) -> None:
        while True:
            await self._tokens.get()
            parts = self._take_waiting()
            self._in_flight += 1
            try:
                if len(parts) == 1 and len(parts[0].payload) > self._config.max_request_bytes:
                    # A request larger than the next hop may take (OTLP/HTTP allows 20 MiB
                    # in, a gRPC next hop usually 4 MiB): sent in pieces, none refused.
                    limit = self._config.max_request_bytes
                    for piece, spans in split_request(parts[0].payload, limit):
                        await self._deliver(piece, spans)
                else:
                    await self._deliver(
                        b"".join(p.payload for p in parts), sum(p.span_count for p in parts)
                    )
            finally:
                self._in_flight -= 1
                for part in parts:
                    self._release(part)

    def _take_waiting(self) -> list[Prepared]:
        """The oldest batch, plus those behind it that fit in one export request.

        Encoded requests concatenate into one valid request (repeated fields append), so
        when the next hop is slower than the senders, fewer and larger exports go out.
        """
        parts = [self._waiting.popleft()]
        size = len(parts[0].payload)
        limit = self._config.max_request_bytes
        while self._waiting and size + len(self._waiting[0].payload) <= limit:
            self._tokens.get_nowait()  # one token per batch: it is there
            parts.append(self._waiting.popleft())
            size += len(parts[-1].payload)
        return parts

    def _release(self, batch: Prepared) -> None:
        self._held_spans -= batch.span_count
        self._held_bytes -= len(batch.payload)
        self._held_batches -= 1
        if not self._held_batches:
            self._idle.set()

    async def _deliver(self, payload: bytes, span_count: int) -> None:
        started = self._clock()
        attempt = 0
        while True:
            result = await self._sender.send(payload, self._config.timeout_s)
            if result.outcome is SendOutcome.DELIVERED:
                self._outage.delivered()
                self._count_delivered(span_count, result.rejected_spans, result.detail)
                return
            delay = next_delay_s(
                self._config.retry, result, attempt, self._clock() - started, self._jitter()
            )
            if delay is None:
                reason = (
                    FailureReason.PERMANENT
                    if result.outcome is SendOutcome.PERMANENT
                    else FailureReason.RETRIES_EXHAUSTED
                )
                self._metrics.send_failed_spans.labels(reason).inc(span_count)
                self._outage.gave_up(
                    result.detail,
                    spans=span_count,
                    attempts=attempt + 1,
                    reason=reason.value,
                    held_spans=self._held_spans,
                )
                return
            self._metrics.send_retries.inc()
            self._outage.attempt_failed(
                result.detail, spans=span_count, retry_in_s=delay, held_spans=self._held_spans
            )
            attempt += 1
            await self._sleep(delay)

    def _count_delivered(self, span_count: int, rejected: int, detail: str) -> None:
        taken = span_count - min(rejected, span_count)
        self._delivered_spans += taken
        self._metrics.sent_spans.inc(taken)
        if rejected:
            self._metrics.send_failed_spans.labels(FailureReason.REJECTED_BY_NEXT_HOP).inc(rejected)
            log.warning(
                "next hop %s rejected %d of %d spans: %s",
                self.target,
                rejected,
                span_count,
                detail,
            )

    async def drain(self, grace_s: float) -> DrainReport:
        """Refuse new batches, deliver what is held within ``grace_s``, report the rest."""
        self._stopping = True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), grace_s)
        # Counted before cancelling: a cancelled consumer releases its batch on the way out.
        undelivered_spans, undelivered_batches = self._held_spans, self._held_batches
        self._outage.close(undelivered_spans)
        for task in self._consumers:
            task.cancel()
        await asyncio.gather(*self._consumers, return_exceptions=True)
        while self._waiting:
            self._release(self._waiting.popleft())
        if undelivered_spans:
            self._metrics.send_failed_spans.labels(FailureReason.SHUTDOWN).inc(undelivered_spans)
        await self._sender.close()
        return DrainReport(self._delivered_spans, undelivered_spans, undelivered_batches)
