"""The advisory port's second line: a time the wire cannot carry fails no call.

The shared stream's decoder refuses every event that could make one (test_state_events,
test_state_stream_fuzz); should an advisory still hold such a time, GetState, Check and
Subscribe answer, over real gRPC, with that time as 0 ("not known"), not UNKNOWN "Value
out of range" for every caller.
"""

from __future__ import annotations

import asyncio
import math

import grpc

from processor.advisories.model import TURN_BLOCKED, Advisory, AdvisoryScope, turn_tool_id
from processor.advisories.service import AdvisoryService
from processor.advisories.servicer import AdvisoriesServicer
from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from processor.config import AdvisoriesConfig, BreakerConfig
from processor.engines.breaker import Breaker
from processor.engines.refusals import Evidence
from tests.support import LOOPBACK

NOW_S = 1_796_000_000.0
SERVER, TOOL, TURN = "web", "search", "turn-1"


def beyond_the_wire(expires_s: float, since_s: float) -> Advisory:
    return Advisory(
        id=turn_tool_id("", TURN, SERVER, TOOL),
        scope=AdvisoryScope.TURN_TOOL,
        key=f"{TURN}|{SERVER}/{TOOL}",
        state=TURN_BLOCKED,
        tenant="",
        server=SERVER,
        tool=TOOL,
        turn=TURN,
        message="blocked for the rest of the turn",
        expires_s=expires_s,
        evidence=Evidence(
            calls=1,
            failures=1,
            since_s=since_s,
            first_failure_trace_id=None,
            first_failure_span_id=None,
            failure_class="transport",
            excerpt="",
            retry_after_s=None,
        ),
    )


async def ask(
    service: AdvisoryService,
) -> tuple[pb.GetStateResponse, pb.CheckResponse, pb.SubscribeResponse]:
    server = grpc.aio.server()
    pb_grpc.add_AdvisoriesServicer_to_server(AdvisoriesServicer(service), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port(f"{LOOPBACK}:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"{LOOPBACK}:{port}") as channel:
            stub = pb_grpc.AdvisoriesStub(channel)  # type: ignore[no-untyped-call]
            state = await stub.GetState(pb.GetStateRequest(), timeout=10)
            check = await stub.Check(
                pb.CheckRequest(server=SERVER, tool=TOOL, turn=TURN), timeout=10
            )
            stream = stub.Subscribe(pb.SubscribeRequest(subscriber_name="guard"), timeout=10)
            first = await stream.read()
            stream.cancel()
            return state, check, first
    finally:
        await server.stop(0)


def test_a_time_the_wire_cannot_carry_is_sent_as_unknown_and_every_call_answers() -> None:
    for expires_s, since_s in ((1e21, 1e30), (math.inf, math.nan), (-1e21, -math.inf)):
        service = AdvisoryService(AdvisoriesConfig(), Breaker(BreakerConfig()), clock=lambda: NOW_S)
        service.hub.publish([beyond_the_wire(expires_s, since_s)], NOW_S)

        state, check, first = asyncio.run(ask(service))

        (shown,) = state.advisories
        assert shown.id == turn_tool_id("", TURN, SERVER, TOOL)
        assert (shown.expires_unix_nano, shown.evidence.since_unix_nano) == (0, 0)
        assert check.verdict == pb.VERDICT_DENY
        assert check.advisory.id == shown.id and check.advisory.expires_unix_nano == 0
        assert first.WhichOneof("kind") == "snapshot"
        assert [a.id for a in first.snapshot.advisories] == [shown.id]


def test_a_time_the_wire_carries_is_sent_as_it_is() -> None:
    service = AdvisoryService(AdvisoriesConfig(), Breaker(BreakerConfig()), clock=lambda: NOW_S)
    service.hub.publish([beyond_the_wire(NOW_S + 60, NOW_S - 5)], NOW_S)

    state, _, _ = asyncio.run(ask(service))

    (shown,) = state.advisories
    assert shown.expires_unix_nano == int((NOW_S + 60) * 1e9)
    assert shown.evidence.since_unix_nano == int((NOW_S - 5) * 1e9)
