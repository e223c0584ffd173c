"""The Advisories gRPC servicer (Subscribe, Check, GetState): it checks each request's
token and arguments, takes a stream's slot, and writes between the wire and the
AdvisoryService (service.py). Admin: admin.py.

A subscriber's stream starts with a snapshot (or what it missed, when it resumes), then
its changes as the broadcaster queues them, and a heartbeat when there are none; one
that does not take a change within ``write_timeout_s`` is cut off (RESOURCE_EXHAUSTED).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence

import grpc
from mcp_breaker_client.shared.conventions import server_prefix
from mcp_breaker_client.shared.fingerprint import fingerprints

from processor.advisories import convert
from processor.advisories.check import CheckResult, HalfOpen, Verdict
from processor.advisories.hub import Audience
from processor.advisories.model import TURN_BLOCKED, Advisory
from processor.advisories.service import (
    RESYNC,
    AdvisoryService,
    Subscriber,
    wire_advisory,
    wire_change,
)
from processor.advisories.slots import Refused, Slot, caller_of
from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from processor.auth.tokens import metadata_bearer_token
from processor.engines.circuit import State
from processor.telemetry.logs import SENDER_DRIVEN

# The port's lines keep the logger they always had (operators filter on it).
log = logging.getLogger("processor.advisories.service")

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


class CutOff(Exception):
    """The subscriber was cut off (``Subscriber.cut`` says why): its stream ends."""


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
            parts = _parts([wire_advisory(a, now) for a in hub.snapshot(audience)])
            for index, part in enumerate(parts):
                snapshot = pb.Snapshot(
                    advisories=part,
                    resync=bool(request.resume_epoch),
                    first=index == 0,
                    more=index < len(parts) - 1,
                )
                first.append(pb.SubscribeResponse(epoch=hub.epoch, seq=hub.seq, snapshot=snapshot))
        else:
            first.extend(wire_change(hub.epoch, change) for change in missed)
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
            response.advisory.CopyFrom(wire_advisory(result.advisory))
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
        shown = _parts([wire_advisory(a, now) for a in in_force])[0]
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
