"""The Admin service: an operator forces a circuit open or closed, or releases it.

Every call needs an admin token (``advisories.admin_tokens``) and is logged with the
caller's address, the circuit and the reason, never the token. A forced circuit reaches
subscribers as an advisory like any other, and its moves are counted with the rest.
"""

from __future__ import annotations

import logging

import grpc
from mcp_breaker_client.shared.redact import redact

from processor.advisories import convert
from processor.advisories.service import AdvisoryService
from processor.advisories.servicer import MAX_NAME_CHARS, text_argument
from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from processor.auth.tokens import metadata_bearer_token
from processor.engines.breaker import NO_SERVER
from processor.engines.circuit import CircuitKey, Scope, State
from processor.state.events import Force, Release

log = logging.getLogger(__name__)

MAX_FORCE_S = 7 * 24 * 3600.0  # a week: longer is a configuration change, not an override


class AdminServicer(pb_grpc.AdminServicer):
    def __init__(self, service: AdvisoryService) -> None:
        self.service = service

    async def _admin(self, context: grpc.aio.ServicerContext, action: str) -> None:
        token = metadata_bearer_token(context.invocation_metadata())
        if not token:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "an admin token is required")
        if not self.service.auth.is_admin(token):
            log.warning("admin: refused %s from %s: not an admin token", action, context.peer())
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "not an admin token")

    async def ForceCircuit(
        self, request: pb.ForceCircuitRequest, context: grpc.aio.ServicerContext
    ) -> pb.ForceCircuitResponse:
        await self._admin(context, "force")
        service = self.service
        if not request.server and not request.tool:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "name a server or a tool")
        if not request.reason.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a reason is required")
        if not 0 < request.duration_seconds <= MAX_FORCE_S:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"duration_seconds must be in (0, {MAX_FORCE_S:.0f}]",
            )
        for what in ("server", "tool", "reason", "tenant"):
            await text_argument(context, what, getattr(request, what))
        key = _key(request.server, request.tool, request.tenant)
        target = State.FORCED_OPEN if request.open else State.FORCED_CLOSED
        now = service.clock()
        # The reason reaches models, subscribers and the log: an operator pasting an error
        # text into it is as likely to paste a credential as a tool is.
        reason = redact(request.reason)
        event = Force(
            key=key,
            target=target,
            until_s=now + request.duration_seconds,
            reason=reason,
            at_s=now,
        )
        # Applied here, or, with replicas, at every one through the shared stream.
        moves = await service.operator(event)
        service.on_operator(moves)
        log.warning(
            "admin: %s forced %s %r %s for %.0fs (tenant %r): %s",
            context.peer(),
            key.scope.value,
            key.name,
            "open" if request.open else "closed",
            request.duration_seconds,
            key.tenant,
            reason,
        )
        advisory = service.hub.circuit_advisory(key, reason=reason, now_s=now)
        assert advisory is not None
        return pb.ForceCircuitResponse(advisory=convert.to_wire(advisory))

    async def ReleaseCircuit(
        self, request: pb.ReleaseCircuitRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReleaseCircuitResponse:
        await self._admin(context, "release")
        for what in ("server", "tool", "reason", "tenant"):
            await text_argument(context, what, getattr(request, what))
        service = self.service
        key = _key(request.server, request.tool, request.tenant)
        now = service.clock()
        reason = redact(request.reason, max_chars=MAX_NAME_CHARS) or "released by an operator"
        if service.hub.breaker.circuits.peek(key) is None:
            return pb.ReleaseCircuitResponse(released=False)  # creates nothing
        moves = await service.operator(Release(key=key, reason=reason, at_s=now))
        if not moves:
            return pb.ReleaseCircuitResponse(released=False)
        service.on_operator(moves)
        peer = context.peer()
        log.warning("admin: %s released %s %r: %s", peer, key.scope.value, key.name, reason)
        return pb.ReleaseCircuitResponse(released=True)


def _key(server: str, tool: str, tenant: str) -> CircuitKey:
    if tool:
        return CircuitKey(Scope.TOOL, f"{server or NO_SERVER}/{tool}", tenant)
    return CircuitKey(Scope.SERVER, server, tenant)
