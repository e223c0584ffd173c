"""The advisory service behind port 4320: the hub, and the broadcaster that hands each of
its changes to every subscriber that may see it.

    pipeline ─▶ AdvisoryService (a sink) ─▶ hub.observe ─▶ Broadcaster ─▶ one queue per subscriber
    Check / GetState ─▶ Checker, hub         (the gRPC servicers: servicer.py, admin.py)

Everything runs on the service's event loop. Publishing never waits: each subscriber has a
bounded queue, and one that falls behind (its queue full, or a change not taken within
``write_timeout_s``: a frozen client stops every write to it) is cut off (RESOURCE_EXHAUSTED)
and must resubscribe, which resyncs it; the span pipeline and other subscribers never wait
for it. Streams are capped per caller, per tenant and in all (slots.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from processor.advisories import convert
from processor.advisories.auth import Authenticator
from processor.advisories.check import Checker
from processor.advisories.hub import AdvisoryHub, Audience, Change, changes_nothing
from processor.advisories.model import Advisory
from processor.advisories.slots import Limits, Slot, Slots
from processor.advisories.v1 import advisories_pb2 as pb
from processor.auth.tokens import TokenMap
from processor.config import AdvisoriesConfig
from processor.engines.breaker import Breaker, CallDecision
from processor.engines.circuit import Transition
from processor.engines.roster import RosterFinding
from processor.errors import IllegalTransition
from processor.state.events import Force, Release

SharedProbes = Callable[[list[str], int, float], Awaitable[int]]
"""(half-open circuits as "circuit:period" names, permits, lease seconds) -> a permit on
every one, or 0."""

log = logging.getLogger(__name__)


# Why a subscriber was cut off: its stream ends with RESOURCE_EXHAUSTED saying so.
RESYNC = "the service's advisories were reset (another epoch)"


@dataclass(eq=False)
class Subscriber:
    audience: Audience
    name: str
    limit: int
    slot: Slot
    # Each change with when it was queued (time.monotonic()): it must be taken within
    # write_timeout_s of that.
    queue: deque[tuple[float, pb.SubscribeResponse]] = field(default_factory=deque)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    cut: str = ""  # why it was cut off; empty while it is served
    writing: asyncio.Timeout | None = None  # the deadline of the write in progress

    def cut_off(self, why: str) -> None:
        """Stop serving it, at once: even a write to it that waits on its transport stops."""
        if self.cut:
            return
        self.cut = why
        self.queue.clear()
        self.ready.set()
        if self.writing is not None and not self.writing.expired():
            self.writing.reschedule(0)  # a time in the past: expires now


@dataclass(slots=True)
class AdvisoryStats:
    changes: int = 0
    cut_off: int = 0
    checks: dict[str, int] = field(default_factory=dict)


class Broadcaster:
    def __init__(self, epoch: str) -> None:
        self.epoch = epoch
        self.subscribers: set[Subscriber] = set()

    def send(self, changes: Sequence[Change], stats: AdvisoryStats) -> None:
        if not changes:
            return
        stats.changes += len(changes)
        now = time.monotonic()
        # One wire message per change, shared by every subscriber that may see it.
        messages = [
            (advisory, wire_change(self.epoch, (seq, advisory))) for seq, advisory in changes
        ]
        for subscriber in self.subscribers:
            if subscriber.cut:
                continue
            queued = False
            for advisory, message in messages:
                if not subscriber.audience.sees(advisory):
                    continue
                if len(subscriber.queue) >= subscriber.limit:
                    # It will resync; others are not held up.
                    subscriber.cut_off(
                        f"fell behind: more than {subscriber.limit} changes waiting "
                        "(advisories.subscriber_queue)"
                    )
                    stats.cut_off += 1
                    break
                subscriber.queue.append((now, message))
                queued = True
            if queued:  # only streams with something to do wake up
                subscriber.ready.set()


class AdvisoryService:
    """The hub and the broadcaster behind the advisory port; a consumer of findings."""

    def __init__(
        self,
        config: AdvisoriesConfig,
        breaker: Breaker,
        clock: Callable[[], float] = time.time,
        epoch: str | None = None,
        tool_servers: Mapping[str, str] | None = None,
        on_operator: Callable[[Sequence[Transition]], None] = lambda moves: None,
        tokens: TokenMap | None = None,
    ) -> None:
        self.config = config
        # Where an operator's force and release are counted (the metrics' transitions).
        self.on_operator = on_operator
        self.tool_servers = dict(tool_servers or {})  # classify.tool_servers
        self.hub = AdvisoryHub(config, breaker, epoch)
        self.checker = Checker(self.hub)
        self.auth = Authenticator(config, tokens)
        self.slots = Slots(Limits.of(config), self.auth.tenants)
        self.broadcaster = Broadcaster(self.hub.epoch)
        self.stats = AdvisoryStats()
        self.clock = clock

        # With shared state (processor/state/): who hands out probe permits across the
        # replicas, and what to say of the shared state in GetState.
        self.shared_probes: SharedProbes | None = None
        self.shared_state: Callable[[], str] = lambda: "memory"
        self.operator: Callable[[Force | Release], Awaitable[list[Transition]]] = self._operate

    def __call__(self, finding: object) -> None:
        # Most of what the pipeline hands over changes no advisory (a raw event: its
        # decision or finding follows), so it is let go before the hub is asked.
        if isinstance(finding, (CallDecision, RosterFinding)) and not changes_nothing(finding):
            self.observe(finding)

    def observe(
        self, finding: object, *, position: int | None = None, now_s: float | None = None
    ) -> None:
        """A finding of the engines; ``position``: the shared stream's event it came from
        (its changes are numbered from it), ``now_s``: that event's time."""
        now = self.clock() if now_s is None else now_s
        self.hub.at(position)
        try:
            if isinstance(finding, CallDecision):
                changes = self.hub.observe(finding, now)
            elif isinstance(finding, RosterFinding):
                changes = self.hub.observe_roster(finding, now)
            else:
                return
        finally:
            self.hub.at(None)
        self.broadcaster.send(changes, self.stats)

    def expire(self, *, position: int | None = None, now_s: float | None = None) -> None:
        self.hub.at(position)
        try:
            changes = self.hub.expire(self.clock() if now_s is None else now_s)
        finally:
            self.hub.at(None)
        self.broadcaster.send(changes, self.stats)

    def apply_operator(
        self, event: Force | Release, *, position: int | None = None
    ) -> list[Transition]:
        """An operator's force or release, into the breaker and out to subscribers."""
        breaker = self.hub.breaker
        moves: list[Transition] = []
        if isinstance(event, Force):
            try:
                moves.append(
                    breaker.force(event.key, event.target, event.until_s, event.reason, event.at_s)
                )
            except IllegalTransition:  # already forced the same way: renew it
                released = breaker.release(event.key, "renewed by an operator", event.at_s)
                moves += [released] if released is not None else []
                moves.append(
                    breaker.force(event.key, event.target, event.until_s, event.reason, event.at_s)
                )
        else:
            released = breaker.release(event.key, event.reason, event.at_s)
            moves += [released] if released is not None else []
        if moves:
            advisory = self.hub.circuit_advisory(event.key, reason=event.reason, now_s=event.at_s)
            self.hub.at(position)
            try:
                changes = self.hub.publish([advisory], event.at_s) if advisory else []
            finally:
                self.hub.at(None)
            self.broadcaster.send(changes, self.stats)
        return moves

    async def _operate(self, event: Force | Release) -> list[Transition]:
        return self.apply_operator(event)

    def restart(self, epoch: str, *, seq: int | None = None) -> None:
        """Another epoch: every subscriber resyncs (it is cut off, and resubscribes)."""
        self.hub.restart(epoch, seq=seq)
        self.broadcaster.epoch = epoch
        for subscriber in self.broadcaster.subscribers:
            subscriber.cut_off(RESYNC)

    def leave(self, subscriber: Subscriber) -> None:
        """A stream ended or was cut off: no more changes for it, and its slot is free."""
        self.broadcaster.subscribers.discard(subscriber)
        self.slots.give_back(subscriber.slot)


# The wire's times are int64 nanoseconds: a time past this is not one it can carry.
_WIRE_MAX_S = 2**62 / convert.NS  # well inside it: no rounding reaches 2**63


def wire_advisory(advisory: Advisory, now_s: float | None = None) -> pb.Advisory:
    """The advisory on the wire, whatever its times. The stream's decoder refuses every
    event that could make one the wire cannot carry (protobuf's "Value out of range"); if
    one got through anyway, failing here would fail GetState, Check and every Subscribe
    for every caller, so it goes out with that time as 0 ("not known"), and says so."""
    try:
        return convert.to_wire(advisory, now_s)
    except (ValueError, OverflowError) as error:
        log.error("advisories: %s has a time the wire cannot carry (%s)", advisory.id, error)
    evidence = advisory.evidence
    if evidence is not None:
        evidence = replace(evidence, since_s=_representable(evidence.since_s or 0.0))
    shown = replace(advisory, expires_s=_representable(advisory.expires_s), evidence=evidence)
    return convert.to_wire(replace(shown, retry_after_s=_representable(shown.retry_after_s)), now_s)


def _representable(seconds: float) -> float:
    return seconds if 0.0 <= seconds < _WIRE_MAX_S else 0.0


def wire_change(epoch: str, change: Change) -> pb.SubscribeResponse:
    seq, advisory = change
    return pb.SubscribeResponse(epoch=epoch, seq=seq, change=wire_advisory(advisory))
