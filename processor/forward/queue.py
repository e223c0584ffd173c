"""The bounded queue in front of the next hop, and the consumers that empty it.

Admission is decided before the stage analyses a request and before the receiver answers
its sender: a batch is either taken whole (and then delivered, or counted and logged as
given up) or refused, so the sender retries, and a refused request has left no trace.
Nothing is dropped silently. The bound covers every span the forwarder holds, queued or in
flight, in spans and in bytes, whichever store keeps them (``store.py``: in memory, or on
disk, where a request is committed before its sender hears OK), and the room kept for
requests admitted and still being analysed.

Waiting batches go out merged into one export. If the next hop refuses an export for good
for what may be in its data, the export is split and the parts are sent apart, down to
the request that caused it and then to its spans (``_send``, ``isolate.py``), so one
sender's bad span never takes other senders' spans with it; only the spans refused are
given up, each counted and logged with its sender (``rejections.py``).
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

from prometheus_client import Counter

from processor.config import ForwardConfig
from processor.errors import QueueStorageError
from processor.forward.deadline import AttemptDeadline
from processor.forward.isolate import Budget, Piece, halves
from processor.forward.outage import OutageLog
from processor.forward.rejections import RejectionLog, culprit
from processor.forward.retry import SendOutcome, SendResult, next_delay_s
from processor.forward.senders import Sender
from processor.forward.store import Held, MemoryStore, Store
from processor.inflight.stage import Prepared, split_request
from processor.offloop import OFF_THE_LOOP

log = logging.getLogger(__name__)


class Admission(enum.Enum):
    ACCEPTED = "accepted"
    QUEUE_FULL = "queue_full"
    STOPPING = "stopping"
    STORAGE_FAILED = "storage_failed"  # the disk queue could not write it: retry later


class FailureReason(enum.StrEnum):
    """Why spans the forwarder accepted were not delivered; a metric label."""

    PERMANENT = "permanent"  # the next hop said the data is bad
    RETRIES_EXHAUSTED = "retries_exhausted"  # retry.max_elapsed_s ran out
    REJECTED_BY_NEXT_HOP = "rejected_by_next_hop"  # partial success downstream
    SHUTDOWN = "shutdown"  # still held in memory when the shutdown grace period ended
    STORAGE = "storage"  # the disk queue could not read them back


@dataclass(frozen=True, slots=True)
class QueueStats:
    spans: int
    bytes: int
    batches: int
    in_flight: int
    capacity_spans: int
    capacity_bytes: int
    attempt_timeout_s: float = 0.0  # the deadline a new export's first attempt gets


@dataclass(frozen=True, slots=True)
class DrainReport:
    delivered_spans: int
    undelivered_spans: int  # lost at shutdown: held in memory when the grace period ended
    undelivered_batches: int
    kept_spans: int = 0  # left on the disk queue, delivered at the next start
    kept_batches: int = 0


class Downstream(Protocol):
    """Where the intake hands prepared requests: first asked, then given."""

    retry_after_s: float

    def admit(self, span_count: int, size: int) -> Admission:
        """Whether a request this large is taken; asked before the stage analyses it. Its
        room is kept from then on, so the answer holds however long the analysis takes."""
        ...

    async def take(self, batch: Prepared, admitted: tuple[int, int]) -> Admission:
        """Take an admitted batch (ACCEPTED once it is safe: on disk, for the disk queue);
        ``admitted``: the spans and bytes it was admitted as."""
        ...

    def withdraw(self, span_count: int, size: int) -> None:
        """An admitted request that will not be taken: its room is given back."""
        ...


class DeliveryCounters(Protocol):
    """What the queue counts as it delivers, in counters the telemetry owns (its
    ``SelfMetrics`` is one): the queue reports through this, and telemetry reads the
    queue's ``QueueStats``, so the import goes one way, telemetry to queue."""

    sent_spans: Counter
    send_failed_spans: Counter  # labelled by ``FailureReason``
    send_retries: Counter
    released_spans: Counter


class Release:
    """No next hop: spans are analysed by the stage, then released."""

    retry_after_s = 0.0

    def __init__(self, metrics: DeliveryCounters) -> None:
        self._metrics = metrics

    def admit(self, span_count: int, size: int) -> Admission:
        return Admission.ACCEPTED

    async def take(self, batch: Prepared, admitted: tuple[int, int]) -> Admission:
        self._metrics.released_spans.inc(batch.span_count)
        return Admission.ACCEPTED

    def withdraw(self, span_count: int, size: int) -> None:
        pass


Sleep = Callable[[float], Awaitable[object]]


class Forwarder:
    def __init__(
        self,
        config: ForwardConfig,
        sender: Sender,
        metrics: DeliveryCounters,
        *,
        store: Store | None = None,
        on_rejected: Callable[[str, int], object] = lambda service, spans: None,
        sleep: Sleep = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._sender = sender
        self._metrics = metrics
        self._store: Store = store if store is not None else MemoryStore()
        self._on_rejected = on_rejected  # (service.name, spans): the per-sender metric
        for reason in FailureReason:  # zeros from the start: increase() sees the first loss
            metrics.send_failed_spans.labels(reason)
        self._sleep = sleep
        self._jitter = jitter
        self._clock = clock
        self.retry_after_s = config.queue.backpressure_retry_after_s
        # Batches wait in a deque so a consumer can look at the next one before taking it;
        # the queue holds one token per waiting batch and is what consumers sleep on.
        self._waiting: collections.deque[Held] = collections.deque()
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
        # Learnt from the next hop, so that one slower than timeout_s is not sent each
        # request again and again while it is still taking the first (deadline.py).
        self._deadline = AttemptDeadline(
            base_s=config.timeout_s, max_s=config.max_timeout_s, clock=clock
        )
        self._rejections = RejectionLog(sender.target, clock=clock)
        # What a previous run left on disk goes out first.
        self.recovered_spans = self.recovered_batches = 0
        for held in self._store.recovered():
            self._hold(held.span_count, held.size)
            self._enqueue(held)
            self.recovered_spans += held.span_count
            self.recovered_batches += 1

    @property
    def target(self) -> str:
        return self._sender.target

    @property
    def storage(self) -> str:
        return self._store.where

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
            attempt_timeout_s=self._deadline.first_s(),
        )

    def admit(self, span_count: int, size: int) -> Admission:
        if self._stopping:
            return Admission.STOPPING
        queue = self._config.queue
        over_spans = self._held_spans + span_count > queue.max_spans
        over_bytes = self._held_bytes + size > queue.max_bytes
        # An empty queue takes any one batch, or a request bigger than the bound would be
        # refused for ever; the receivers' size limits still bound it.
        if (over_spans or over_bytes) and self._held_batches:
            return Admission.QUEUE_FULL
        self._hold(span_count, size)  # kept for it: counted now, the bound holds
        return Admission.ACCEPTED

    async def take(self, batch: Prepared, admitted: tuple[int, int]) -> Admission:
        """Hold an admitted batch in the room kept for it. Its analysis has run, so it is
        taken even if its annotations made it a little larger than what was admitted."""
        if self._stopping:
            self.withdraw(*admitted)
            return Admission.STOPPING
        spans, size = admitted
        self._held_spans += batch.span_count - spans
        self._held_bytes += len(batch.payload) - size
        # Shielded: a sender that stops waiting must not stop a commit under way, or the
        # request would sit on disk, forgotten until the next start.
        return await asyncio.shield(self._keep(batch))

    def withdraw(self, span_count: int, size: int) -> None:
        self._release(span_count, size)

    async def offer(self, batch: Prepared) -> Admission:
        """Admit and take at once (for callers with nothing to analyse in between)."""
        admitted = (batch.span_count, len(batch.payload))
        admission = self.admit(*admitted)
        if admission is not Admission.ACCEPTED:
            return admission
        return await self.take(batch, admitted)

    async def _keep(self, batch: Prepared) -> Admission:
        try:
            held = await self._store.append(batch)
        except QueueStorageError as error:
            self._release(batch.span_count, len(batch.payload))
            log.error("%s; the sender is told to retry", error)
            return Admission.STORAGE_FAILED
        self._enqueue(held)
        return Admission.ACCEPTED

    def _hold(self, spans: int, size: int) -> None:
        self._held_spans += spans
        self._held_bytes += size
        self._held_batches += 1
        self._idle.clear()

    def _enqueue(self, held: Held) -> None:
        self._waiting.append(held)
        self._tokens.put_nowait(None)

    def _release(self, spans: int, size: int) -> None:
        self._held_spans -= spans
        self._held_bytes -= size
        self._held_batches -= 1
        if not self._held_batches:
            self._idle.set()

    async def reachable(self, timeout_s: float) -> bool:
        return await self._sender.reachable(timeout_s)

    async def _consume(self) -> None:
        while True:
            await self._tokens.get()
            parts = self._take_waiting()
            self._in_flight += 1
            try:
                try:
                    readable, payloads = parts, await self._store.payloads(parts)
                except QueueStorageError as error:
                    readable, payloads = await self._read_each(parts, error)
                if readable:
                    await self._deliver_parts(readable, payloads)
                # Only now does it leave the disk: a crash before this sends it again.
                await self._store.remove(parts)
            finally:
                self._in_flight -= 1
                for part in parts:
                    self._release(part.span_count, part.size)

    def _take_waiting(self) -> list[Held]:
        """The oldest batch, plus those behind it that fit in one export request.

        Encoded requests concatenate into one valid request (repeated fields append), so
        when the next hop is slower than the senders, fewer and larger exports go out.
        """
        parts = [self._waiting.popleft()]
        size = parts[0].size
        limit = self._config.max_request_bytes
        while self._waiting and size + self._waiting[0].size <= limit:
            self._tokens.get_nowait()  # one token per batch: it is there
            parts.append(self._waiting.popleft())
            size += parts[-1].size
        return parts

    async def _deliver_parts(self, parts: list[Held], payloads: list[bytes]) -> None:
        pieces = [
            Piece(payload, part.span_count, part.sender)
            for part, payload in zip(parts, payloads, strict=True)
        ]
        limit = self._config.max_request_bytes
        if len(pieces) == 1 and len(pieces[0].payload) > limit:
            # A request larger than the next hop may take (OTLP/HTTP allows 20 MiB in, a
            # gRPC next hop usually 4 MiB): sent in pieces, none refused. Cut in a thread:
            # on the loop, cutting the 25 MB a 19 MB body of MCP spans becomes once
            # annotated held every other sender and /healthz 42-46 ms (bench/loop_stall.py).
            origin = pieces[0].sender
            with OFF_THE_LOOP:
                cut = await asyncio.to_thread(split_request, pieces[0].payload, limit)
            for piece, spans in cut:
                await self._send([Piece(piece, spans, origin)], Budget())
        else:
            await self._send(pieces, Budget())

    async def _send(self, pieces: list[Piece], budget: Budget) -> None:
        """Deliver ``pieces`` as one export; if the next hop refuses it for what may be in
        its data, send its halves apart (by request, then by span), so that only the spans
        it refuses are given up."""
        spans = sum(p.span_count for p in pieces)
        payload = pieces[0].payload if len(pieces) == 1 else b"".join(p.payload for p in pieces)
        failed = await self._deliver(payload, spans)
        if failed is None:
            return
        failure, attempts = failed
        parts = halves(pieces) if failure.data_refused and budget.left >= 2 else []
        if not parts:
            self._give_up(pieces, failure, attempts)
            return
        if not budget.started:
            budget.started = True
            self._rejections.isolating(spans, len(pieces), failure.detail)
        budget.left -= len(parts)
        for half in parts:
            await self._send(half, budget)

    async def _deliver(self, payload: bytes, span_count: int) -> tuple[SendResult, int] | None:
        """Send with retries; None once delivered, else the last failure and the attempts."""
        started = self._clock()
        attempt = 0
        deadline_s = self._deadline.first_s()
        while True:
            sent_at = self._clock()
            result = await self._sender.send(payload, deadline_s)
            if result.outcome is SendOutcome.DELIVERED:
                self._deadline.answered(self._clock() - sent_at)
                self._outage.delivered()
                self._count_delivered(span_count, result.rejected_spans, result.detail)
                return None
            if result.timed_out:
                deadline_s = self._timed_out(deadline_s)
            else:  # never shorter than this request's last: it may be what it needs
                deadline_s = max(deadline_s, self._deadline.first_s())
            delay = next_delay_s(
                self._config.retry, result, attempt, self._clock() - started, self._jitter()
            )
            if delay is None:
                return result, attempt + 1
            self._metrics.send_retries.inc()
            self._outage.attempt_failed(
                result.detail, spans=span_count, retry_in_s=delay, held_spans=self._held_spans
            )
            attempt += 1
            await self._sleep(delay)

    def _timed_out(self, deadline_s: float) -> float:
        """The next attempt's deadline after one of ``deadline_s`` passed unanswered."""
        before = self._deadline.first_s()
        grown = self._deadline.timed_out(deadline_s)
        if self._deadline.first_s() > before:
            log.warning(
                "next hop %s did not answer an export within %.3g s: attempts now wait up "
                "to %.3g s (at most forward.max_timeout_s, %.3g s), so that it is not sent "
                "each request again while it is still taking it",
                self.target,
                deadline_s,
                self._deadline.first_s(),
                self._deadline.max_s,
            )
        return grown

    def _give_up(self, pieces: list[Piece], failure: SendResult, attempts: int) -> None:
        spans = sum(p.span_count for p in pieces)
        permanent = failure.outcome is SendOutcome.PERMANENT
        reason = FailureReason.PERMANENT if permanent else FailureReason.RETRIES_EXHAUSTED
        self._metrics.send_failed_spans.labels(reason).inc(spans)
        if not failure.data_refused:  # the next hop is failing, not the data: an outage
            self._outage.gave_up(
                failure.detail,
                spans=spans,
                attempts=attempts,
                reason=reason.value,
                held_spans=self._held_spans,
            )
            return
        # Refused for what was in them, and named by their senders. Split down to one span,
        # or else the budget for splitting ran out: then valid spans may be among them.
        exact = len(pieces) == 1 and pieces[0].span_count <= 1
        for piece in pieces:
            who = culprit(piece.sender, piece.payload)
            self._on_rejected(who.service, piece.span_count)
            self._rejections.refused(who, piece.span_count, failure.detail, whole=not exact)

    async def _read_each(
        self, parts: list[Held], error: QueueStorageError
    ) -> tuple[list[Held], list[bytes]]:
        """A batch the store could not read whole (a disk queue after a power loss without
        fsync may keep a request's row and not its bytes): each request read alone, and
        only those that cannot be given up, so a damaged one takes no other with it."""
        if len(parts) == 1:
            self._cannot_read(parts, error)
            return [], []
        readable: list[Held] = []
        payloads: list[bytes] = []
        for part in parts:
            try:
                (payload,) = await self._store.payloads([part])
            except QueueStorageError as each_error:
                self._cannot_read([part], each_error)
            else:
                readable.append(part)
                payloads.append(payload)
        return readable, payloads

    def _cannot_read(self, parts: list[Held], error: QueueStorageError) -> None:
        spans = sum(p.span_count for p in parts)
        self._metrics.send_failed_spans.labels(FailureReason.STORAGE).inc(spans)
        log.error("%s: %d spans in %d requests given up", error, spans, len(parts))

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
        """Refuse new batches, deliver what is held within ``grace_s``, report the rest.

        On the disk queue what is left stays on disk for the next start: kept, not lost."""
        self._stopping = True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), grace_s)
        # Counted before cancelling: a cancelled consumer releases its batch on the way out.
        left_spans, left_batches = self._held_spans, self._held_batches
        self._outage.close(left_spans)
        self._rejections.close()
        for task in self._consumers:
            task.cancel()
        await asyncio.gather(*self._consumers, return_exceptions=True)
        while self._waiting:
            held = self._waiting.popleft()
            self._release(held.span_count, held.size)
        await self._sender.close()
        await self._store.close()
        if not self._store.durable:
            if left_spans:
                self._metrics.send_failed_spans.labels(FailureReason.SHUTDOWN).inc(left_spans)
            return DrainReport(self._delivered_spans, left_spans, left_batches)
        return DrainReport(self._delivered_spans, 0, 0, left_spans, left_batches)
