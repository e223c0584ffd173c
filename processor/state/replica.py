"""One replica's part in the shared state: share its engines' inputs, apply everyone's.

    spans ─▶ pipeline ─▶ local engines ─▶ the span's annotations, this replica's metrics
                 │ (share)
                 ▼
            outbox ──XADD──▶ Redis Stream ──XREAD──▶ apply, in stream order:
                                                      every event   ─▶ shared engines
                                                                       ─▶ advisories, numbered
                                                                          by its position
                                                      remote events ─▶ local engines

A span never waits on Redis: the pipeline decides on this replica's *local* engines at
once and shares the event (its verdict, never raw arguments) through a bounded outbox.
The *shared* engines (the ones the service built: advisories, ``Check`` and the circuit
gauges read them) take every event in stream order, its own too when it comes back, at
the stream's time (``Entry.at_s``): the same events in the same order on pure engines,
so every replica comes to the same circuits, states and deadlines, whichever received
which call first. The local engines hear of the others' events too (a call is refused
here on evidence from there), but in this replica's order. The advisory hub of every
replica observes every event in stream order, numbering each change from the event's
position, so a subscriber resumes at any replica where it left off. An operator's force
or release, and the ticks that drive expiry (appended by the one replica that holds the
ticker lease), go through the stream too, so they happen the same at every replica, at
the stream's time.

A starting replica replays the stream (and the operators' overrides still in force)
before it reports ready. While Redis is away it goes on alone: its shared engines take
its events at once, it forwards, publishes its own advisories under an epoch of its own,
buffers its events (dropping the oldest past ``buffer_events``, counted), and says so
(``up``, a log line per change; a Redis call that began before the reconnection and
fails after it says nothing of now, and is not logged as Redis going away).
When Redis is back it appends what it buffered, catches up on the stream, and takes the
shared epoch again: its subscribers resync. If its shared engines took events alone, they
are rebuilt from the stream (a replay, as at a start), where those events then stand at
the places every replica applies them: the resync's snapshot carries the stream's
deadlines in place of those published alone. (A Redis that lost its data has no stream
to rebuild from: then what each replica took alone stays.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from processor.advisories.hub import position_seq
from processor.advisories.service import AdvisoryService
from processor.classify.events import ToolCall, ToolListing, build_tool_call
from processor.config import RedisConfig
from processor.engines.breaker import Breaker, CallDecision
from processor.engines.circuit import Transition
from processor.engines.roster import RosterFinding, RosterHealth
from processor.errors import BadEvent
from processor.inflight.pipeline import Pipeline
from processor.state import events as codec
from processor.state.events import Force, Release, SharedEvent, Tick
from processor.state.store import Entry, RedisStore
from processor.state.validate import Bounds

log = logging.getLogger(__name__)

READ_BATCH = 500  # entries per read
READ_BLOCK_MS = 1000  # a read waits this long for the next entry
APPEND_BATCH = 500  # events per append
RETRY_S = (0.2, 0.5, 1.0, 2.0, 5.0)  # waits between reconnection attempts
TRIM_EVERY_S = 60.0
MAX_PENDING = 100_000  # own events waiting to be read back (their findings)

Finding = CallDecision | RosterFinding


@dataclass(slots=True)
class SharedStats:
    """Counts for the metrics, read at scrape time."""

    up: bool = False
    appended: int = 0
    applied: int = 0  # other replicas' events applied here
    dropped: int = 0  # own events the outbox could not keep while Redis was away
    unreadable: int = 0  # entries that could not be read or decoded (another version?)
    outbox: int = 0


class SharedState:
    def __init__(
        self,
        config: RedisConfig,
        store: RedisStore,
        pipeline: Pipeline,
        advisories: AdvisoryService | None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.store = store
        self.pipeline = pipeline
        self.advisories = advisories
        self.clock = clock
        self.replica = secrets.token_hex(6)  # this process: a restart is another replica
        self.stats = SharedStats()
        self._bounds = Bounds.of(pipeline.classifier.config)  # what a replica writes
        self.ready = False  # replayed, or started alone: /readyz may say yes
        self.epoch = ""
        self._uids = 0
        # The shared engines are the ones the service built (its advisories and metrics
        # read them); the pipeline decides its spans on a local pair made here.
        self.engines = Pipeline(pipeline.classifier, pipeline.breaker, (), pipeline.roster)
        pipeline.breaker = Breaker(pipeline.breaker.config)
        pipeline.roster = RosterHealth(pipeline.roster.config)
        self._outbox: deque[tuple[int, bytes]] = deque()
        # Own events appended or waiting, by uid (so that its copy from the stream need not
        # be decoded again: with N workers, 1/N of what each reads is its own); and a future
        # for an operator waiting on it.
        self._pending: OrderedDict[int, SharedEvent] = OrderedDict()
        self._waiting: dict[int, asyncio.Future[list[Transition]]] = {}
        # Own events the shared engines took at once, Redis being away (and the harnesses
        # heard of): when they come back from the stream they are not taken again.
        self._announced: set[int] = set()
        # Overrides applied before the replay (payloads): the replay skips their own entry.
        self._preapplied: set[bytes] = set()
        # Counts the reconnections: a Redis call that failed after one that began before
        # it (another task reconnected meanwhile) does not mean Redis went away again.
        self._connection = 0
        self._last_id = "0-0"
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._last_trim = 0.0

    # -- start and stop ------------------------------------------------------------------
    async def start(self) -> None:
        """Replay the stream, then follow it. Redis away for ``startup_wait_s``: go on
        alone (ready at once: forwarding works) and catch up when it comes."""
        try:
            # Waited for: Redis answering. Not waited for: the replay, which takes what
            # the stream holds (bounded by retain_s) and must finish before ready.
            await asyncio.wait_for(self.store.ping(), self.config.startup_wait_s or 0.001)
            await self._sync()
        except Exception as error:  # OSError, redis errors, a timeout: start alone
            self._down(f"Redis not reachable at start ({_reason(error)})")
        self.ready = True
        self._tasks = [
            asyncio.create_task(self._follow(), name="shared-state-read"),
            asyncio.create_task(self._flush(), name="shared-state-append"),
            asyncio.create_task(self._tick(), name="shared-state-tick"),
        ]

    async def stop(self) -> None:
        """Append what is still in the outbox (briefly), then stop."""
        if self.stats.up and self._outbox:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._append_outbox(), self.config.timeout_s)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.store.close()

    # -- this replica's events -----------------------------------------------------------
    def share(self, event: ToolCall | ToolListing, finding: Finding) -> None:
        """The pipeline's hook: an event its local engines just decided (``finding``, this
        replica's spans and metrics). The shared engines take it when it comes back from
        the stream, at its place and time there; while Redis is away, now, and the
        harnesses hear of it at once (deciding alone)."""
        uid = self._queue(event)
        if not self.stats.up:
            self._announced.add(uid)
            shared = self.engines.apply(event)
            if self.advisories is not None:
                self.advisories.observe(shared)

    async def operate(self, event: Force | Release) -> list[Transition]:
        """An operator's force or release, applied at every replica (and here when it has
        come back through the stream; at once while Redis is away)."""
        assert self.advisories is not None
        if not self.stats.up:
            return self.advisories.apply_operator(event)
        future: asyncio.Future[list[Transition]] = asyncio.get_running_loop().create_future()
        uid = self._queue(event)
        self._waiting[uid] = future
        await self._persist_override(event)
        try:
            return await asyncio.wait_for(future, self.config.timeout_s * 3)
        except TimeoutError:
            self._waiting.pop(uid, None)
            log.warning("shared state: an operator's change did not come back in time")
            return []

    def _queue(self, event: SharedEvent) -> int:
        self._uids += 1
        uid = self._uids
        self._outbox.append((uid, codec.encode(event)))
        self._pending[uid] = event
        while len(self._outbox) > self.config.buffer_events:
            dropped, _ = self._outbox.popleft()
            self._pending.pop(dropped, None)
            self._announced.discard(dropped)
            self.stats.dropped += 1
        while len(self._pending) > MAX_PENDING:
            self._pending.popitem(last=False)
        self.stats.outbox = len(self._outbox)
        self._wake.set()
        return uid

    # -- Redis -----------------------------------------------------------------------------
    async def _sync(self) -> None:
        """Catch up on the stream since the last entry applied (all of it at the start,
        after the operators' overrides still in force), then number from it again."""
        await self.store.ping()
        epoch = await self.store.epoch()
        lost = self.epoch not in ("", "local") and epoch != self.epoch
        if lost:
            # Redis came back without its data (a new epoch): its stream starts anew. What
            # the shared engines took alone stays (the others keep theirs too).
            log.warning("shared state: Redis lost its data; sharing from a new stream")
            self._last_id = "0-0"
        elif self._announced:
            # The shared engines took events alone, in this replica's order: they start
            # again from the stream, where those events (appended next) will stand at the
            # places every other replica applies them. Its subscribers resync to the result.
            self._forget()
        fresh = self._last_id == "0-0"
        if fresh and not lost:
            await self._apply_overrides()
        caught_up = 0
        # Replayed changes are numbered and kept under the shared epoch, so a subscriber of
        # another replica can resume here: from the first entry a replica wrote.
        to_number = self.advisories if fresh else None
        while True:
            entries = await self.store.read(self._last_id, READ_BATCH, 0)
            if not entries:
                break
            if to_number is not None:
                first = next((e for e in entries if e.payload is not None), None)
                if first is not None:
                    to_number.restart(epoch, seq=position_seq(first.position - 1))
                    to_number = None
            for entry in entries:
                self._apply(entry)
            caught_up += len(entries)
        self._preapplied.clear()  # the replay did not meet them: trimmed from the stream
        advisories = self.advisories
        if advisories is not None and advisories.hub.epoch != epoch:
            # Back from alone (every subscriber resyncs), or a stream with nothing to replay.
            advisories.restart(epoch, seq=0 if fresh else None)
        self.epoch = epoch
        self._up(f"{caught_up} events {'replayed' if fresh else 'caught up'}")

    async def _follow(self) -> None:
        attempt = 0
        while True:
            connection = self._connection
            try:
                if not self.stats.up:
                    await self._sync()
                    attempt, connection = 0, self._connection
                entries = await self.store.read(self._last_id, READ_BATCH, READ_BLOCK_MS)
                for entry in entries:
                    self._apply(entry)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self._down(_reason(error), connection)
                await asyncio.sleep(RETRY_S[min(attempt, len(RETRY_S) - 1)])
                attempt += 1

    async def _flush(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self.stats.up:
                continue  # kept in the outbox; _sync's success wakes us
            connection = self._connection
            try:
                await self._append_outbox()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self._down(_reason(error), connection)

    async def _append_outbox(self) -> None:
        while self._outbox:
            batch = [self._outbox[i] for i in range(min(APPEND_BATCH, len(self._outbox)))]
            await self.store.append(self.replica, batch)
            for _ in batch:
                self._outbox.popleft()
            self.stats.appended += len(batch)
            self.stats.outbox = len(self._outbox)

    async def _tick(self) -> None:
        """The replica that holds the ticker lease marks the stream's time."""
        while True:
            await asyncio.sleep(self.config.tick_s)
            if not self.stats.up:
                if self.advisories is not None:
                    self.advisories.expire()  # alone: expiry on this replica's clock
                continue
            connection = self._connection
            try:
                if await self.store.hold_ticker(self.replica, 3 * self.config.tick_s):
                    self._queue(Tick())
                    now = self.clock()
                    if now - self._last_trim >= TRIM_EVERY_S:
                        self._last_trim = now
                        await self.store.trim(now - self.config.retain_s)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self._down(_reason(error), connection)

    # -- applying the stream ---------------------------------------------------------------
    def _apply(self, entry: Entry) -> None:
        self._last_id = entry.entry_id
        if entry.payload is None:  # an entry no replica wrote: skipped, as the stream goes on
            self.stats.unreadable += 1
            return
        if self._preapplied and entry.payload in self._preapplied:
            self._preapplied.discard(entry.payload)  # an override applied before the replay
            return
        event = self._pending.pop(entry.uid, None) if entry.origin == self.replica else None
        if event is not None:
            event = _arrived(event, entry.at_s)  # as a decoded one: at the stream's time
        else:
            try:
                event = codec.decode(entry.payload, at_s=entry.at_s, bounds=self._bounds)
            except BadEvent:
                self.stats.unreadable += 1
                return
        try:
            self._apply_event(entry, event)
        except Exception:  # a bug must not stop this replica following the stream
            self.stats.unreadable += 1
            log.exception("shared state: could not apply event %s", entry.entry_id)

    def _apply_event(self, entry: Entry, event: SharedEvent) -> None:
        """Every event into the shared engines, at the stream's time; another replica's
        into the local ones too."""
        own = entry.origin == self.replica
        advisories = self.advisories
        if isinstance(event, Tick):
            if advisories is not None:
                advisories.expire(position=entry.position, now_s=entry.at_s)
            return
        if isinstance(event, Force | Release):
            moves: list[Transition] = []
            if advisories is not None:
                moves = advisories.apply_operator(event, position=entry.position)
            waiting = self._waiting.pop(entry.uid, None) if own else None
            if waiting is not None and not waiting.done():
                waiting.set_result(moves)
            if not own:
                self.stats.applied += 1
            return
        if own and entry.uid in self._announced:
            self._announced.discard(entry.uid)  # taken (and published) alone already
            return
        finding = self.engines.apply(event)
        if not own:
            self.pipeline.apply(event)
            self.stats.applied += 1
        if advisories is not None:
            advisories.observe(finding, position=entry.position, now_s=entry.at_s)

    async def _apply_overrides(self) -> None:
        """The operators' forces still in force, before the replay (which may not hold
        them any more: trimmed); "still" by the stream's clock, its latest entry's."""
        head = await self.store.head()
        now_s = int(head.partition("-")[0]) / 1000 if head != "0-0" else self.clock()
        for payload in await self.store.overrides():
            self._apply_override(payload, now_s)

    def _apply_override(self, payload: bytes, now_s: float) -> None:
        try:
            event = codec.decode(payload, at_s=now_s, bounds=self._bounds)
        except BadEvent:
            self.stats.unreadable += 1
            return
        if isinstance(event, Force) and event.until_s > now_s and self.advisories:
            self.advisories.apply_operator(event)
            self._preapplied.add(payload)

    def _forget(self) -> None:
        """The shared engines and the advisories in force, as before the first event."""
        self.engines.breaker.clear()
        self.engines.roster.clear()
        if self.advisories is not None:
            self.advisories.hub.forget()
        self._announced.clear()
        self._last_id = "0-0"

    async def _persist_override(self, event: Force | Release) -> None:
        name = f"{event.key.tenant}|{event.key.scope.value}|{event.key.name}"
        with contextlib.suppress(Exception):  # the stream has it; this outlives its trimming
            if isinstance(event, Force):
                await self.store.set_override(name, codec.encode(event))
            else:
                await self.store.clear_override(name)

    # -- up and down -------------------------------------------------------------------------
    def _up(self, detail: str) -> None:
        if not self.stats.up:
            log.info("shared state: connected to Redis (%s)", detail)
        self.stats.up = True
        self._connection += 1
        self._wake.set()

    def _down(self, reason: str, connection: int | None = None) -> None:
        """``connection``: the reconnection a failed Redis call began under; one made since
        (by another task) is newer news than this failure."""
        if connection is not None and connection != self._connection:
            return
        if self.stats.up or not self.epoch:
            log.warning(
                "shared state: Redis unavailable (%s); deciding alone, buffering own events",
                reason,
            )
        was_shared = self.stats.up
        self.stats.up = False
        if self.advisories is not None and (was_shared or not self.epoch):
            # Our own numbering from here: a subscriber cannot resume it at another replica.
            self.advisories.restart(f"{self.epoch or 'local'}-alone-{secrets.token_hex(4)}")
        if not self.epoch:
            self.epoch = "local"

    def describe(self) -> str:
        """For GetState and ``mcp-breaker status``."""
        if self.stats.up:
            return f"redis: up (replica {self.replica}, {self.stats.applied} events from others)"
        return f"redis: down, deciding alone ({len(self._outbox)} events waiting)"


def _arrived(event: SharedEvent, at_s: float) -> SharedEvent:
    """An event as it arrives here: at the stream's time (arrival times are compared).
    As ``replace(event, arrived_s=at_s)``, at a third of its cost: every own event passes
    here on every replica (tests/test_state_events.py holds the two equal)."""
    if not isinstance(event, ToolCall):
        return event
    return build_tool_call(
        turn=event.turn,
        round=event.round,
        server=event.server,
        tool=event.tool,
        fingerprint=event.fingerprint,
        verdict=event.verdict,
        start_ns=event.start_ns,
        end_ns=event.end_ns,
        trace_id=event.trace_id,
        span_ids=event.span_ids,
        dialect=event.dialect,
        harness=event.harness,
        tenant=event.tenant,
        arrived_s=at_s,
    )


def _reason(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text.splitlines()[0][:200]
