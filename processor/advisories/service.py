"""The advisory port (4320): gRPC servicers that translate between the wire and the hub.

    pipeline ─▶ AdvisoryService (a sink) ─▶ hub.observe ─▶ Broadcaster ─▶ one queue per subscriber
    Check / GetState ─▶ Checker, hub         (Admin: admin.py)

Everything runs on the service's event loop. Publishing never waits: each subscriber has a
bounded queue, and one that falls behind (its queue full, or a change not taken within
``write_timeout_s``: a frozen client stops every write to it) is cut off (RESOURCE_EXHAUSTED)
and must resubscribe, which resyncs it; the span pipeline and other subscribers never wait
for it. Streams are capped per caller, per tenant and in all (slots.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import grpc
from mcp_breaker_client.shared.conventions import server_prefix
from mcp_breaker_client.shared.fingerprint import fingerprints

from processor.advisories import convert
from processor.advisories.auth import Authenticator
from processor.advisories.check import Checker, CheckResult, HalfOpen, Verdict
from processor.advisories.hub import AdvisoryHub, Audience, Change, changes_nothing
from processor.advisories.model import TURN_BLOCKED, Advisory
from processor.advisories.slots import Limits, Refused, Slot, Slots, caller_of
from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from processor.auth.tokens import TokenMap, metadata_bearer_token
from processor.config import AdvisoriesConfig
from processor.engines.breaker import Breaker, CallDecision
from processor.engines.circuit import State, Transition
from processor.engines.roster import RosterFinding
from processor.errors import IllegalTransition
from processor.state.events import Force, Release
from processor.telemetry.logs import SENDER_DRIVEN

SharedProbes = Callable[[list[str], int, float], Awaitable[int]]
"""(half-open circuits as "circuit:period" names, permits, lease seconds) -> a permit on
every one, or 0."""

log = logging.getLogger(__name__)

MAX_FILTER_SERVERS = 256
MAX_NAME_CHARS = 512
# A snapshot or a GetState reply is cut into messages of at most this many bytes, well under
# gRPC's 4 MiB default receive limit, so any client can read one.
MAX_PART_BYTES = 1024 * 1024
PER_ITEM_OVERHEAD_BYTES = 8  # the field tag and length prefix of each advisory
_SEVERITY = {
    State.FORCED_OPEN.value: 0,
    State.OPEN.value: 1,
    TURN_BLOCKED: 2,
    State.HALF_OPEN.value: 3,
}
_VERDICT = {Verdict.ALLOW: pb.VERDICT_ALLOW, Verdict.DENY: pb.VERDICT_DENY}
_VERDICT[Verdict.PROBE] = pb.VERDICT_PROBE


# Why a subscriber was cut off: its stream ends with RESOURCE_EXHAUSTED saying so.
RESYNC = "the service's advisories were reset (another epoch)"


class CutOff(Exception):
    """The subscriber was cut off (``Subscriber.cut`` says why): its stream ends."""


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
        messages = [(advisory, _change(self.epoch, (seq, advisory))) for seq, advisory in changes]
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


async def _tenant(service: AdvisoryService, context: grpc.aio.ServicerContext) -> str:
    tenant = service.auth.tenant(metadata_bearer_token(context.invocation_metadata()))
    if tenant is None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "a valid bearer token is required")
    assert tenant is not None
    return tenant


async def _slot(service: AdvisoryService, tenant: str, context: grpc.aio.ServicerContext) -> Slot:
    """A slot for one more stream, or RESOURCE_EXHAUSTED naming the limit it would pass.
    The caller: the bearer token, or without tokens the peer's host."""
    token = None if service.auth.open else metadata_bearer_token(context.invocation_metadata())
    try:
        return service.slots.take(tenant, caller_of(token, context.peer()))
    except Refused as refused:
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{refused}; subscribe again later")
        raise  # not reached: abort raises


async def text_argument(context: grpc.aio.ServicerContext, what: str, value: str) -> str:
    if len(value) > MAX_NAME_CHARS:
        await context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"{what} is longer than {MAX_NAME_CHARS} characters"
        )
    return value


async def _servers(context: grpc.aio.ServicerContext, servers: Sequence[str]) -> None:
    """A server filter is bounded in count and in the length of each name."""
    if len(servers) > MAX_FILTER_SERVERS:
        await context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"at most {MAX_FILTER_SERVERS} servers"
        )
    for server in servers:
        await text_argument(context, "a server name", server)


class AdvisoriesServicer(pb_grpc.AdvisoriesServicer):
    def __init__(self, service: AdvisoryService) -> None:
        self.service = service

    async def Subscribe(
        self, request: pb.SubscribeRequest, context: grpc.aio.ServicerContext
    ) -> None:
        # Written with context.write, not yielded: a write to a client that stopped reading
        # waits on its flow control, and only a write of our own can be given a deadline.
        service = self.service
        tenant = await _tenant(service, context)
        await _servers(context, request.servers)
        audience = Audience(
            tenant=tenant,
            servers=frozenset(request.servers),
            harness=await text_argument(context, "harness", request.harness),
        )
        # Printable only: the name goes into logs, where a newline would forge a line.
        name = "".join(c for c in request.subscriber_name[:MAX_NAME_CHARS] if c.isprintable())
        name = name or context.peer()
        slot = await _slot(service, tenant, context)
        subscriber = Subscriber(audience, name, service.config.subscriber_queue, slot)
        try:
            first = self._start(request, subscriber)
            await self._serve(subscriber, first, context)
        finally:
            service.leave(subscriber)

    def _start(
        self, request: pb.SubscribeRequest, subscriber: Subscriber
    ) -> list[pb.SubscribeResponse]:
        """What the stream starts with (a snapshot, or what it missed), and the subscriber
        registered: no await between reading the hub and registering, so no change can fall
        between."""
        service, hub, audience = self.service, self.service.hub, subscriber.audience
        missed = (
            hub.since(request.resume_epoch, request.resume_after_seq, audience)
            if request.resume_epoch
            else None
        )
        first: list[pb.SubscribeResponse] = []
        if missed is None:
            now = service.clock()
            parts = _parts([_wire(a, now) for a in hub.snapshot(audience)])
            for index, part in enumerate(parts):
                snapshot = pb.Snapshot(
                    advisories=part,
                    resync=bool(request.resume_epoch),
                    first=index == 0,
                    more=index < len(parts) - 1,
                )
                first.append(pb.SubscribeResponse(epoch=hub.epoch, seq=hub.seq, snapshot=snapshot))
        else:
            first.extend(_change(hub.epoch, change) for change in missed)
        service.broadcaster.subscribers.add(subscriber)
        # Cut like a warning: a harness (or anyone who reaches the port) may subscribe and
        # cancel at will, and each time would be a line.
        log.info(
            "advisories: %s subscribed (tenant %r, %s)",
            subscriber.name,
            audience.tenant,
            "resumed" if missed is not None else "snapshot",
            extra=SENDER_DRIVEN,
        )
        if not first:  # resumed with nothing missed: say at once that the stream is live
            first.append(self._heartbeat())
        return first

    async def _serve(
        self,
        subscriber: Subscriber,
        first: list[pb.SubscribeResponse],
        context: grpc.aio.ServicerContext,
    ) -> None:
        """The stream, until the client goes or the subscriber is cut off."""
        heartbeat_s = self.service.config.heartbeat_s
        try:
            await self._write(subscriber, context, None)
            for message in first:
                await self._write(subscriber, context, message)
            while True:
                try:
                    async with asyncio.timeout(heartbeat_s):
                        await subscriber.ready.wait()
                except TimeoutError:
                    await self._write(subscriber, context, self._heartbeat())
                    continue
                subscriber.ready.clear()
                while subscriber.queue:
                    queued_at, message = subscriber.queue.popleft()
                    await self._write(subscriber, context, message, queued_at)
                if subscriber.cut:
                    raise CutOff
        except CutOff:
            await self._end(subscriber, context)

    async def _write(
        self,
        subscriber: Subscriber,
        context: grpc.aio.ServicerContext,
        message: pb.SubscribeResponse | None,
        queued_at: float | None = None,
    ) -> None:
        """Send ``message`` within write_timeout_s of ``queued_at`` (default: now); CutOff
        when it is not taken by then, or when the subscriber is cut off meanwhile.

        ``None`` sends the initial metadata, on its own before any message: a write cut
        short must never be the one that carries it (the abort would send it again)."""
        if subscriber.cut:
            raise CutOff
        timeout_s = self.service.config.write_timeout_s
        left_s = timeout_s if queued_at is None else queued_at + timeout_s - time.monotonic()
        try:
            if left_s <= 0:
                raise TimeoutError
            async with asyncio.timeout(left_s) as deadline:
                subscriber.writing = deadline
                if message is None:
                    await context.send_initial_metadata(())
                else:
                    await context.write(message)
        except TimeoutError:
            if not subscriber.cut:
                subscriber.cut_off(
                    f"took no change within {timeout_s:g} s (advisories.write_timeout_s)"
                )
                self.service.stats.cut_off += 1
            raise CutOff from None
        finally:
            subscriber.writing = None

    async def _end(self, subscriber: Subscriber, context: grpc.aio.ServicerContext) -> None:
        """A cut-off subscriber: its slot is freed at once, then it is told."""
        self.service.leave(subscriber)
        level = logging.INFO if subscriber.cut == RESYNC else logging.WARNING
        log.log(
            level,
            "advisories: %s was cut off: %s",
            subscriber.name,
            subscriber.cut,
            extra=SENDER_DRIVEN,
        )
        details = f"cut off: {subscriber.cut}; subscribe again to resync"
        try:
            # The status queues behind what the transport still holds for the client, so it
            # too waits on a client that does not read: it gets it when it reads again, or
            # never if its connection ends first. This stream is over either way.
            async with asyncio.timeout(self.service.config.write_timeout_s):
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, details)
        except TimeoutError:
            pass  # gRPC ends the call with the abort it has recorded

    def _heartbeat(self) -> pb.SubscribeResponse:
        hub, at = self.service.hub, int(self.service.clock() * convert.NS)
        return pb.SubscribeResponse(
            epoch=hub.epoch, seq=hub.seq, heartbeat=pb.Heartbeat(at_unix_nano=at)
        )

    async def Check(
        self, request: pb.CheckRequest, context: grpc.aio.ServicerContext
    ) -> pb.CheckResponse:
        service = self.service
        tenant = await _tenant(service, context)
        # Before any work: reading and fingerprinting arguments costs in their size.
        limit = service.config.max_check_argument_bytes
        if _utf8_over(request.arguments_json, limit):
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"arguments_json is over {limit} bytes (advisories.max_check_argument_bytes)",
            )
        for what in ("turn", "server", "tool", "fingerprint", "harness"):
            await text_argument(context, what, getattr(request, what))
        # The server as the classifier names it from spans, or nothing would match.
        server = (
            request.server
            or server_prefix(request.tool)
            or service.tool_servers.get(request.tool, "")
        )
        prints: tuple[str, ...] = (request.fingerprint,) if request.fingerprint else ()
        if not prints and request.arguments_json:
            try:
                arguments = json.loads(request.arguments_json)
            except (ValueError, RecursionError):  # nested too deep is not readable JSON
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "arguments_json is not JSON")
            # Either form a span of this call may have carried: arguments, or their digest.
            prints = fingerprints(server or None, request.tool, arguments)
        now = service.clock()
        result = service.checker.assess(
            tenant=tenant,
            turn=request.turn,
            server=server,
            tool=request.tool,
            fingerprints=prints,
            now_s=now,
        )
        if isinstance(result, HalfOpen):
            result = await _permit(service, result, now)
        counts = service.stats.checks
        counts[result.verdict.value] = counts.get(result.verdict.value, 0) + 1
        response = pb.CheckResponse(verdict=_VERDICT[result.verdict], probe_permit=result.permit)
        if result.advisory is not None:
            response.advisory.CopyFrom(_wire(result.advisory))
        return response

    async def GetState(
        self, request: pb.GetStateRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetStateResponse:
        service = self.service
        tenant = await _tenant(service, context)
        await _servers(context, request.servers)
        audience = Audience(tenant=tenant, servers=frozenset(request.servers))
        in_force = sorted(service.hub.snapshot(audience), key=_worst_first)
        now = service.clock()
        shown = _parts([_wire(a, now) for a in in_force])[0]
        return pb.GetStateResponse(
            advisories=shown,
            epoch=service.hub.epoch,
            seq=service.hub.seq,
            not_shown=len(in_force) - len(shown),
            shared_state=service.shared_state(),
        )


async def _permit(service: AdvisoryService, wanted: HalfOpen, now: float) -> CheckResult:
    """A probe permit: held here, or, with replicas, by the shared arbiter (exactly
    ``probe_permits`` across all of them; a lease expires unanswered after its time)."""
    arbiter = service.shared_probes
    if arbiter is None:
        return service.checker.grant_here(wanted, now)
    config = service.hub.breaker.config
    names = [
        f"{key.tenant}|{key.scope.value}|{key.name}:{period:.3f}" for key, period in wanted.circuits
    ]
    try:
        permit = await arbiter(names, config.probe_permits, config.probe_lease_s)
    except Exception:  # Redis away: the replica decides on its own, as for everything else
        log.warning("advisories: the shared probe arbiter did not answer; granting here")
        return service.checker.grant_here(wanted, now)
    if permit:
        return service.checker.granted(wanted, permit, now)
    return service.checker.waiting(wanted, now)


def _parts(advisories: list[pb.Advisory]) -> list[list[pb.Advisory]]:
    """Advisories cut into runs of at most MAX_PART_BYTES encoded (at least one run)."""
    parts: list[list[pb.Advisory]] = [[]]
    size = 0
    for advisory in advisories:
        encoded = advisory.ByteSize() + PER_ITEM_OVERHEAD_BYTES
        if parts[-1] and size + encoded > MAX_PART_BYTES:
            parts.append([])
            size = 0
        parts[-1].append(advisory)
        size += encoded
    return parts


def _utf8_over(text: str, limit: int) -> bool:
    """Is ``text`` longer than ``limit`` bytes in UTF-8? (Encoded only when it might be.)"""
    if len(text) > limit:
        return True
    return len(text) * 4 > limit and len(text.encode("utf-8", "surrogatepass")) > limit


def _worst_first(advisory: Advisory) -> tuple[int, str]:
    return (_SEVERITY.get(advisory.state, len(_SEVERITY)), advisory.id)


# The wire's times are int64 nanoseconds: a time past this is not one it can carry.
_WIRE_MAX_S = 2**62 / convert.NS  # well inside it: no rounding reaches 2**63


def _wire(advisory: Advisory, now_s: float | None = None) -> pb.Advisory:
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


def _change(epoch: str, change: Change) -> pb.SubscribeResponse:
    seq, advisory = change
    return pb.SubscribeResponse(epoch=epoch, seq=seq, change=_wire(advisory))
