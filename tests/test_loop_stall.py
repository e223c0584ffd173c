"""A large request is analysed while the event loop goes on serving everyone else.

The service's own event loop, its receivers, real gRPC clients and an HTTP probe; what is
asserted is order and counts, never time: the loop's turns counted between a request's
engine steps; /healthz, the advisory port and another sender answered while a request's
analysis is held mid-way (had it been on the loop, they could not be until its release);
a small request analysed without an await; the room the forwarder admitted kept until
the request is given or let go (bench/loop_stall.py measures the latencies).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from prometheus_client import CollectorRegistry

from processor import offloop
from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from processor.engines.breaker import CallDecision
from processor.forward.queue import Admission, Forwarder, Release
from processor.forward.senders import GrpcSender
from processor.inflight.enrich import PREFIX
from processor.inflight.stage import Stage
from processor.receive import intake
from processor.receive.intake import ANALYSE_IN_PLACE_SPANS, Intake, IntakeOutcome, Transport
from processor.request.otlp import EXPORT_METHOD
from processor.request.sender import Sender
from processor.request.sparse import RequestSpans
from processor.server import Service
from processor.telemetry.metrics import SelfMetrics
from tests.classify_builders import CLIENT, key_values, make_request, make_span
from tests.support import (
    LOOP_THREAD,
    LOOPBACK,
    CaptureCollector,
    ServiceThread,
    make_config,
    wait_until,
)

LARGE = 4 * ANALYSE_IN_PLACE_SPANS  # analysed in a thread
SMALL = ANALYSE_IN_PLACE_SPANS  # analysed in place
WAIT_S = 60.0  # a bound on waiting for an answer, never a measurement
# A bound on waiting for an answer while a request is held: shorter than the hold, so that
# an answer that had to wait for the hold to end fails the test rather than passing late.
HELD_WAIT_S = 10.0
FRAMEWORK_CAPTURES = Path(__file__).resolve().parent / "fixtures" / "frameworks"


def tool_calls(count: int, first: int = 1) -> bytes:
    """``count`` tool calls as a harness reports them, one span each, each decided alone;
    one in five failed, each in a turn of its own."""
    spans = []
    for index in range(first, first + count):
        span = make_span("mcp.tool.call", kind=CLIENT, trace=index, span=index)
        span.attributes.extend(
            key_values(
                {
                    "mcp.tool.name": f"tool_{index % 7}",
                    "mcp.server.name": "payments",
                    "mcp.tool.outcome": "failed" if index % 5 == 0 else "ok",
                    "mcp.turn.id": f"turn-{index}",
                }
            )
        )
        spans.append(span)
    return bytes(make_request(*spans).SerializeToString())


def export(endpoint: str, payload: bytes, timeout_s: float = WAIT_S) -> ExportTraceServiceResponse:
    with grpc.insecure_channel(endpoint) as channel:
        call = channel.unary_unary(EXPORT_METHOD)  # bytes in, bytes out
        return ExportTraceServiceResponse.FromString(call(payload, timeout=timeout_s))


def advisory_check(service: ServiceThread, timeout_s: float) -> pb.CheckResponse:
    endpoint = f"{LOOPBACK}:{service.service.ports['advisories']}"
    with grpc.insecure_channel(endpoint) as channel:
        stub = pb_grpc.AdvisoriesStub(channel)  # type: ignore[no-untyped-call]
        answer: pb.CheckResponse = stub.Check(
            pb.CheckRequest(server="payments", tool="tool_1"), timeout=timeout_s
        )
        return answer


def healthz(service: ServiceThread, timeout_s: float = WAIT_S) -> int:
    with urllib.request.urlopen(f"{service.telemetry_url}/healthz", timeout=timeout_s) as answer:
        return int(answer.status)


class TurnCounter:
    """Counts the service loop's turns: a callback that asks to run again each time."""

    def __init__(self) -> None:
        self.turns = 0
        self._running = True

    async def start(self) -> None:
        asyncio.get_running_loop().call_soon(self._turn)

    def _turn(self) -> None:
        self.turns += 1
        if self._running:
            asyncio.get_running_loop().call_soon(self._turn)

    def stop(self) -> None:
        self._running = False


class Decisions:
    """A consumer of the pipeline: each call decision, and the loop's turn it came in."""

    def __init__(self, counter: TurnCounter) -> None:
        self._counter = counter
        self.seen: list[tuple[CallDecision, int]] = []

    def __call__(self, finding: object) -> None:
        if isinstance(finding, CallDecision):
            self.seen.append((finding, self._counter.turns))


class Hold:
    """A stage hook that holds the first request it reads until released, as a long
    analysis would hold it, wherever the stage runs it."""

    def __init__(self) -> None:
        self.reading = threading.Event()
        self._released = threading.Event()
        self.read_on: list[str] = []

    def __call__(self, request: RequestSpans, sender: Sender) -> None:
        self.read_on.append(threading.current_thread().name)
        if not self.reading.is_set():
            self.reading.set()
            self._released.wait(WAIT_S)

    def release(self) -> None:
        self._released.set()


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=2) as executor:
        yield executor


def served(next_hop: CaptureCollector, **kwargs: Any) -> ServiceThread:
    return ServiceThread(make_config(f"forward.endpoint={next_hop.endpoint}"), **kwargs)


def test_the_loop_turns_between_the_engine_steps_of_a_large_request(
    next_hop: CaptureCollector,
) -> None:
    counter = TurnCounter()
    decisions = Decisions(counter)
    service = served(next_hop, event_sinks=[decisions])
    try:
        service.call(counter.start())
        assert export(service.grpc_endpoint, tool_calls(SMALL)).partial_success.rejected_spans == 0
        small = [turn for _, turn in decisions.seen]
        decisions.seen.clear()
        assert export(service.grpc_endpoint, tool_calls(LARGE, SMALL + 1)) is not None
        large = decisions.seen
    finally:
        counter.stop()
        service.stop()

    # In place, a request's decisions are told in one go: the loop does not turn between.
    assert len(small) == SMALL and len(set(small)) == 1
    # In a thread, the loop runs other work between its steps, and nothing is lost.
    assert len(large) == LARGE
    assert len({turn for _, turn in large}) > 1
    # Told in span time, as in place.
    starts = [decision.call.start_ns for decision, _ in large]
    assert starts == sorted(starts)
    forwarded = next_hop.spans()
    assert len(forwarded) == SMALL + LARGE
    assert all(any(kv.key.startswith(PREFIX) for kv in span.attributes) for span in forwarded)


def test_probes_advisories_and_other_senders_are_answered_while_a_large_request_is_read(
    next_hop: CaptureCollector, pool: ThreadPoolExecutor
) -> None:
    hold = Hold()
    service = served(next_hop, stage=Stage((hold,)))
    try:
        large: Future[ExportTraceServiceResponse] = pool.submit(
            export, service.grpc_endpoint, tool_calls(LARGE)
        )
        assert hold.reading.wait(WAIT_S)
        assert healthz(service, HELD_WAIT_S) == 200
        assert advisory_check(service, HELD_WAIT_S) is not None
        plain = make_request(Span(name="GET /orders", trace_id=b"\x01" * 16, span_id=b"\x02" * 8))
        assert export(service.grpc_endpoint, plain.SerializeToString(), HELD_WAIT_S) is not None
        # All answered while the large request is still held mid-analysis.
        assert not large.done()
        hold.release()
        assert large.result(WAIT_S).partial_success.rejected_spans == 0
    finally:
        hold.release()
        service.stop()
    assert hold.read_on[0] != LOOP_THREAD
    assert len(next_hop.spans()) == LARGE + 1


def test_a_sender_that_gives_up_mid_analysis_leaves_no_room_held(
    next_hop: CaptureCollector,
) -> None:
    hold = Hold()
    service = served(next_hop, stage=Stage((hold,)))
    try:
        with pytest.raises(grpc.RpcError) as gave_up:
            # The sender stops waiting while its request is held mid-analysis.
            export(service.grpc_endpoint, tool_calls(LARGE), timeout_s=2.0)
        assert gave_up.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        assert hold.reading.wait(WAIT_S)
        hold.release()
        # The next request is read once the first is done, and is delivered.
        second = tool_calls(LARGE, LARGE + 1)
        assert export(service.grpc_endpoint, second) is not None
        forwarder = service.service.forwarder
        assert forwarder is not None

        def drained() -> bool:
            return forwarder.stats().spans == 0 and span_ids(second) <= delivered()

        def delivered() -> set[bytes]:
            return {span.span_id for span in next_hop.spans()}

        wait_until(drained, WAIT_S)
        # The first request is given up whole, or, when its analysis ended before the
        # server heard its sender go, delivered whole (its sender's retry would be a
        # duplicate, annotated the same): never in part, and no room is left held.
        first = span_ids(tool_calls(LARGE))
        assert len(next_hop.spans()) in (LARGE, 2 * LARGE)
        assert first <= delivered() or not first & delivered()
    finally:
        hold.release()
        service.stop()


def span_ids(payload: bytes) -> set[bytes]:
    request = ExportTraceServiceRequest.FromString(payload)
    return {
        span.span_id
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    }


def test_a_small_request_is_analysed_without_an_await() -> None:
    async def scenario() -> Any:
        service = Service(make_config())
        release = Release(service.metrics)
        accepting = Intake(service.stage, release, service.metrics).accept_protobuf(
            tool_calls(SMALL), Transport.GRPC
        )
        with pytest.raises(StopIteration) as finished:  # done at the first step: no await
            accepting.send(None)
        return finished.value.value

    result = asyncio.run(scenario())
    assert result.outcome is IntakeOutcome.ACCEPTED


def forwarded_by_a_fresh_service(payload: bytes) -> list[bytes]:
    next_hop = CaptureCollector().start()
    service = served(next_hop)
    try:
        assert export(service.grpc_endpoint, payload) is not None
        spans = count_spans(payload)
        wait_until(lambda: len(next_hop.spans()) == spans, WAIT_S)
        return sorted(span.SerializeToString() for span in next_hop.spans())
    finally:
        service.stop()
        next_hop.stop()


def count_spans(payload: bytes) -> int:
    request = ExportTraceServiceRequest.FromString(payload)
    return sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)


def every_framework_capture() -> bytes:
    """The recorded runs of the agent frameworks (tests/fixtures/frameworks) as one request:
    every layer of their calls, both halves of the SDK's; encoded requests concatenate."""
    return b"".join(path.read_bytes() for path in sorted(FRAMEWORK_CAPTURES.glob("*.otlp.bin")))


@pytest.mark.parametrize(
    "payload",
    [tool_calls(LARGE), every_framework_capture()],
    ids=["harness calls", "framework captures"],
)
def test_what_a_thread_analyses_is_what_the_loop_would(
    monkeypatch: pytest.MonkeyPatch, payload: bytes
) -> None:
    """The same large request, read in place and in a thread by two fresh services: the
    same spans forwarded, with the same annotations (the thread lets go of the request
    once it is encoded)."""
    assert Stage().open(payload).analysed_spans > ANALYSE_IN_PLACE_SPANS  # to a thread
    monkeypatch.setattr(intake, "ANALYSE_IN_PLACE_SPANS", 10 * LARGE)
    in_place = forwarded_by_a_fresh_service(payload)
    monkeypatch.undo()
    in_a_thread = forwarded_by_a_fresh_service(payload)
    assert in_place == in_a_thread


def test_a_request_analysed_in_a_thread_is_let_go_there_and_one_in_place_is_kept() -> None:
    """Its spans and what the hooks kept of them, freed in the worker thread a slice at a
    time once it is encoded (release.let_go), not when the next request comes, perhaps
    analysed on the loop. One analysed in place is kept, as the hooks after it read it."""
    service = Service(make_config())
    kept: list[RequestSpans] = []
    stage = Stage(
        (service.pipeline, lambda request, sender: kept.append(request)),
        let_go=service.pipeline.let_go,
    )
    classifier = service.pipeline.classifier

    small = stage.prepare(stage.open(tool_calls(SMALL)))
    assert len(classifier.spans) == SMALL and spans_held(kept[-1]) == SMALL

    on_loop = threading.current_thread().name
    in_thread: list[str] = []

    def step(run: Any) -> None:  # the engine steps, run where the loop would run them
        in_thread.append(threading.current_thread().name)
        run()

    with ThreadPoolExecutor(max_workers=1) as worker:
        opened = stage.open(tool_calls(LARGE, first=SMALL + 1))
        large = worker.submit(stage.prepare_in_thread, opened, Sender(), step).result(WAIT_S)
    assert in_thread and on_loop not in in_thread
    assert classifier.spans == {} and classifier.read == {} and classifier.undecided == {}
    assert spans_held(kept[-1]) == 0
    # What was forwarded was encoded before: every span, each with its decision.
    assert count_spans(large.payload) == LARGE
    assert large.payload.count(f"{PREFIX}state".encode()) == LARGE
    assert small.payload.count(f"{PREFIX}state".encode()) == SMALL


def spans_held(request: RequestSpans) -> int:
    return sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)


def test_a_large_request_is_opened_with_the_shorter_switch_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Opening one large request reads its spans in a thread: the loop waits a switch
    interval for each of its turns meanwhile, as while one is analysed, and no full
    collection starts (offloop.py)."""
    seen: list[tuple[float, int]] = []
    service = Service(make_config())

    class Opening(Stage):
        def open(self, payload: bytes) -> Any:
            seen.append((sys.getswitchinterval(), gc.get_threshold()[2]))
            return super().open(payload)

    stage = Opening((service.pipeline,), let_go=service.pipeline.let_go)
    monkeypatch.setattr(intake, "OFFLOAD_BYTES", 1000)
    before = (sys.getswitchinterval(), gc.get_threshold())
    assert before[0] > offloop.ANALYSIS_SWITCH_S

    async def scenario() -> Any:
        accepting = Intake(stage, Release(service.metrics), service.metrics)
        return await accepting.accept_protobuf(tool_calls(SMALL), Transport.GRPC)

    assert asyncio.run(scenario()).outcome is IntakeOutcome.ACCEPTED
    assert seen == [(offloop.ANALYSIS_SWITCH_S, offloop.DEFERRED_OLD_THRESHOLD)]
    assert (sys.getswitchinterval(), gc.get_threshold()) == before


def test_a_request_analysed_in_a_thread_is_analysed_with_full_collections_deferred() -> None:
    """No full collection walks the heap while the request's objects are in it: the
    collector's thresholds as they were once the request is let go; one analysed in place
    runs under them."""
    service = Service(make_config())
    old_thresholds: list[tuple[str, int]] = []

    def note(request: RequestSpans, sender: Sender) -> None:
        old_thresholds.append((threading.current_thread().name, gc.get_threshold()[2]))

    stage = Stage((service.pipeline, note), let_go=service.pipeline.let_go)
    before = gc.get_threshold()
    assert before[2] != offloop.DEFERRED_OLD_THRESHOLD

    async def scenario() -> list[Any]:
        accepting = Intake(stage, Release(service.metrics), service.metrics)
        small = await accepting.accept_protobuf(tool_calls(SMALL), Transport.GRPC)
        large = await accepting.accept_protobuf(tool_calls(LARGE, first=SMALL + 1), Transport.GRPC)
        return [small.outcome, large.outcome]

    assert asyncio.run(scenario()) == [IntakeOutcome.ACCEPTED] * 2
    loop_thread = threading.current_thread().name
    assert old_thresholds[0] == (loop_thread, before[2])
    assert old_thresholds[1][0] != loop_thread
    assert old_thresholds[1][1] == offloop.DEFERRED_OLD_THRESHOLD
    assert gc.get_threshold() == before


def test_the_room_admitted_is_kept_until_the_request_is_taken_or_withdrawn(
    next_hop: CaptureCollector,
) -> None:
    config = make_config(f"forward.endpoint={next_hop.endpoint}", "forward.queue.max_spans=10")
    stage = Stage()
    prepared = stage.prepare(stage.open(tool_calls(5)))

    async def scenario() -> tuple[list[Admission], tuple[int, int]]:
        forwarder = Forwarder(
            config.forward, GrpcSender(config.forward), SelfMetrics(CollectorRegistry())
        )
        answers = [forwarder.admit(6, 600)]
        answers.append(forwarder.admit(6, 600))  # the first one's room is still kept
        forwarder.withdraw(6, 600)
        answers.append(forwarder.admit(6, 600))
        answers.append(await forwarder.take(prepared, (6, 600)))
        stats = forwarder.stats()  # the batch holds its own size now, not what it was admitted as
        await forwarder.drain(0)  # never started: what it holds is let go
        return answers, (stats.spans, stats.batches)

    answers, held = asyncio.run(scenario())
    accepted, full = Admission.ACCEPTED, Admission.QUEUE_FULL
    assert answers == [accepted, full, accepted, accepted]
    assert held == (5, 1)
