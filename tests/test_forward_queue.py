"""The forwarder: admission, retries against a real gRPC next hop, drain on shutdown.

The retry waits go through an injected sleep, so the tests see the delays the
forwarder chose without waiting for them.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client import CollectorRegistry

from processor import offloop
from processor.config import load_config
from processor.forward import queue
from processor.forward.queue import Admission, FailureReason, Forwarder
from processor.forward.senders import GrpcSender
from processor.inflight.stage import Prepared, StagePath, split_request
from processor.telemetry.metrics import SelfMetrics
from tests.support import CaptureCollector, free_port


def batch(spans: int, name: str = "step") -> Prepared:
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for i in range(spans):
        span = scope.spans.add(name=f"{name} {i}")
        span.trace_id = bytes(range(1, 17))
        span.span_id = (i + 1).to_bytes(8, "big")
    return Prepared(request.SerializeToString(), spans, 0, "", StagePath.PASSTHROUGH)


class Harness:
    """A Forwarder wired to a real GrpcSender; records the retry delays it asked for."""

    def __init__(self, endpoint: str, *overrides: str) -> None:
        self.config = load_config(
            overrides=[f"forward.endpoint={endpoint}", "forward.timeout_s=30", *overrides]
        ).forward
        self.registry = CollectorRegistry()
        self.metrics = SelfMetrics(self.registry)
        self.delays: list[float] = []

    async def _sleep(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0.01)

    def forwarder(self) -> Forwarder:
        return Forwarder(
            self.config,
            GrpcSender(self.config),
            self.metrics,
            sleep=self._sleep,
            jitter=lambda: 0.5,
        )

    def value(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(scenario(), 60))


async def until(predicate: Callable[[], bool]) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


def test_delivers_and_counts(next_hop: CaptureCollector) -> None:
    harness = Harness(next_hop.endpoint)

    async def scenario() -> Any:
        forwarder = harness.forwarder()
        forwarder.start()
        assert await forwarder.offer(batch(3)) is Admission.ACCEPTED
        assert await forwarder.offer(batch(4)) is Admission.ACCEPTED
        return await forwarder.drain(10)

    report = run(scenario)
    assert next_hop.span_count() == 7
    assert report.delivered_spans == 7 and report.undelivered_spans == 0
    assert harness.value("mcp_breaker_exporter_sent_spans_total") == 7


def test_honours_the_next_hops_retry_info(next_hop: CaptureCollector) -> None:
    next_hop.unavailable_for = 2
    next_hop.retry_after_s = 7.25
    harness = Harness(next_hop.endpoint)

    async def scenario() -> None:
        forwarder = harness.forwarder()
        forwarder.start()
        await forwarder.offer(batch(5))
        await forwarder.drain(30)

    run(scenario)
    assert harness.delays == [7.25, 7.25]
    assert next_hop.span_count() == 5
    assert harness.value("mcp_breaker_exporter_send_retries_total") == 2


def test_backs_off_exponentially_without_retry_info(next_hop: CaptureCollector) -> None:
    next_hop.unavailable_for = 3
    harness = Harness(
        next_hop.endpoint,
        "forward.retry.initial_interval_s=1",
        "forward.retry.multiplier=2",
        "forward.retry.max_interval_s=3",
    )

    async def scenario() -> None:
        forwarder = harness.forwarder()
        forwarder.start()
        await forwarder.offer(batch(1))
        await forwarder.drain(30)

    run(scenario)
    assert harness.delays == [1.0, 2.0, 3.0]
    assert next_hop.span_count() == 1


def test_a_next_hop_that_is_down_then_up_gets_everything() -> None:
    port = free_port()
    harness = Harness(f"127.0.0.1:{port}", "forward.retry.max_elapsed_s=0")
    collector = CaptureCollector(port)

    async def scenario() -> None:
        forwarder = harness.forwarder()
        forwarder.start()
        for _ in range(20):
            assert await forwarder.offer(batch(10)) is Admission.ACCEPTED
        await until(lambda: len(harness.delays) >= 20)  # every batch has failed at least once
        collector.start()
        report = await forwarder.drain(30)
        assert report.undelivered_spans == 0

    try:
        run(scenario)
        assert collector.span_count() == 200
    finally:
        collector.stop()


def test_refuses_when_full_and_takes_again_once_drained(next_hop: CaptureCollector) -> None:
    harness = Harness(next_hop.endpoint, "forward.queue.max_spans=10", "forward.queue.consumers=1")
    next_hop.stall()

    async def scenario() -> None:
        forwarder = harness.forwarder()
        forwarder.start()
        assert await forwarder.offer(batch(6)) is Admission.ACCEPTED
        assert await forwarder.offer(batch(4)) is Admission.ACCEPTED
        assert await forwarder.offer(batch(1)) is Admission.QUEUE_FULL
        assert forwarder.stats().spans == 10
        next_hop.release()
        await until(lambda: forwarder.stats().spans == 0)
        assert await forwarder.offer(batch(1)) is Admission.ACCEPTED
        await forwarder.drain(10)

    run(scenario)
    assert next_hop.span_count() == 11


def test_the_byte_bound_refuses_too(next_hop: CaptureCollector) -> None:
    one = batch(50)
    harness = Harness(next_hop.endpoint, f"forward.queue.max_bytes={len(one.payload) + 10}")
    next_hop.stall()

    async def scenario() -> None:
        forwarder = harness.forwarder()
        forwarder.start()
        assert await forwarder.offer(one) is Admission.ACCEPTED
        assert await forwarder.offer(batch(1)) is Admission.QUEUE_FULL
        next_hop.release()
        await forwarder.drain(10)

    run(scenario)


def test_an_oversized_batch_is_taken_into_an_empty_queue(next_hop: CaptureCollector) -> None:
    """Otherwise a request bigger than the bound would be refused for ever."""
    harness = Harness(next_hop.endpoint, "forward.queue.max_spans=5")

    async def scenario() -> None:
        forwarder = harness.forwarder()
        forwarder.start()
        assert await forwarder.offer(batch(8)) is Admission.ACCEPTED
        await forwarder.drain(10)

    run(scenario)
    assert next_hop.span_count() == 8


def test_drain_reports_what_it_could_not_deliver(next_hop: CaptureCollector) -> None:
    harness = Harness(next_hop.endpoint, "forward.queue.consumers=1")
    next_hop.stall()

    async def scenario() -> Any:
        forwarder = harness.forwarder()
        forwarder.start()
        await forwarder.offer(batch(3))
        await forwarder.offer(batch(4))
        report = await forwarder.drain(0.2)
        assert await forwarder.offer(batch(1)) is Admission.STOPPING
        return report

    report = run(scenario)
    next_hop.release()
    assert (report.undelivered_spans, report.undelivered_batches) == (7, 2)
    assert (
        harness.value("mcp_breaker_exporter_send_failed_spans_total", reason=FailureReason.SHUTDOWN)
        == 7
    )


def test_permanent_errors_are_counted_not_retried() -> None:
    # Nothing serves TraceService on a plain gRPC health-only server: UNIMPLEMENTED.
    import grpc

    server = grpc.server(__import__("concurrent.futures").futures.ThreadPoolExecutor(2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    harness = Harness(f"127.0.0.1:{port}")

    async def scenario() -> None:
        forwarder = harness.forwarder()
        forwarder.start()
        await forwarder.offer(batch(3))
        await until(lambda: forwarder.stats().spans == 0)
        await forwarder.drain(1)

    try:
        run(scenario)
    finally:
        server.stop(0)
    assert harness.delays == []
    assert (
        harness.value(
            "mcp_breaker_exporter_send_failed_spans_total", reason=FailureReason.PERMANENT
        )
        == 3
    )


def test_partial_success_downstream_is_counted(next_hop: CaptureCollector) -> None:
    next_hop.partial_reject = 2
    harness = Harness(next_hop.endpoint)

    async def scenario() -> None:
        forwarder = harness.forwarder()
        forwarder.start()
        await forwarder.offer(batch(5))
        await forwarder.drain(10)

    run(scenario)
    assert harness.value("mcp_breaker_exporter_sent_spans_total") == 3
    assert (
        harness.value(
            "mcp_breaker_exporter_send_failed_spans_total",
            reason=FailureReason.REJECTED_BY_NEXT_HOP,
        )
        == 2
    )


def test_waiting_batches_go_out_merged_into_one_export(next_hop: CaptureCollector) -> None:
    harness = Harness(next_hop.endpoint, "forward.queue.consumers=1")
    next_hop.stall()

    async def scenario() -> None:
        forwarder = harness.forwarder()
        forwarder.start()
        await forwarder.offer(batch(2, "first"))
        await until(lambda: forwarder.stats().in_flight == 1)
        for name in ("second", "third", "fourth"):
            await forwarder.offer(batch(3, name))
        next_hop.release()
        await forwarder.drain(10)

    run(scenario)
    per_request = [
        sum(len(s.spans) for r in q.resource_spans for s in r.scope_spans)
        for q in next_hop.requests
    ]
    assert per_request == [2, 9]
    assert next_hop.span_count() == 11
    assert harness.value("mcp_breaker_exporter_sent_spans_total") == 11


def test_merging_stops_at_max_request_bytes(next_hop: CaptureCollector) -> None:
    one = batch(3)
    harness = Harness(
        next_hop.endpoint,
        "forward.queue.consumers=1",
        f"forward.max_request_bytes={2 * len(one.payload)}",
    )
    next_hop.stall()

    async def scenario() -> None:
        forwarder = harness.forwarder()
        forwarder.start()
        await forwarder.offer(batch(3))
        await until(lambda: forwarder.stats().in_flight == 1)
        for _ in range(5):
            await forwarder.offer(batch(3))
        next_hop.release()
        await forwarder.drain(10)

    run(scenario)
    assert [len(q.resource_spans) for q in next_hop.requests] == [1, 2, 2, 1]
    assert next_hop.span_count() == 18


def test_a_request_over_max_request_bytes_goes_out_in_pieces(next_hop: CaptureCollector) -> None:
    """OTLP/HTTP takes 20 MiB in; a gRPC next hop usually 4 MiB: nothing is refused."""
    one = batch(200)
    harness = Harness(next_hop.endpoint, f"forward.max_request_bytes={len(one.payload) // 4}")

    async def scenario() -> None:
        forwarder = harness.forwarder()
        forwarder.start()
        assert await forwarder.offer(one) is Admission.ACCEPTED
        await forwarder.drain(10)

    run(scenario)
    assert len(next_hop.requests) >= 4
    assert all(q.ByteSize() <= len(one.payload) // 4 for q in next_hop.requests)
    assert next_hop.span_count() == 200
    assert harness.value("mcp_breaker_exporter_sent_spans_total") == 200


def test_a_request_over_max_request_bytes_is_cut_off_the_loop(
    next_hop: CaptureCollector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cutting a 25 MB request held the loop 42-46 ms (bench/loop_stall.py): it is cut in a
    worker thread, at the shorter switch interval and with full collections deferred, as
    a large request is analysed."""
    one = batch(200)
    harness = Harness(next_hop.endpoint, f"forward.max_request_bytes={len(one.payload) // 4}")
    cut_where: list[tuple[str, float, int]] = []

    def split_noting(payload: bytes, limit: int) -> list[tuple[bytes, int]]:
        cut_where.append(
            (threading.current_thread().name, sys.getswitchinterval(), gc.get_threshold()[2])
        )
        return split_request(payload, limit)

    monkeypatch.setattr(queue, "split_request", split_noting)

    async def scenario() -> str:
        forwarder = harness.forwarder()
        forwarder.start()
        assert await forwarder.offer(one) is Admission.ACCEPTED
        await forwarder.drain(10)
        return threading.current_thread().name

    loop_thread = run(scenario)
    assert [(switch, old) for _, switch, old in cut_where] == [
        (offloop.ANALYSIS_SWITCH_S, offloop.DEFERRED_OLD_THRESHOLD)
    ]
    assert cut_where[0][0] != loop_thread
    assert len(next_hop.requests) >= 4 and next_hop.span_count() == 200
    assert sys.getswitchinterval() > offloop.ANALYSIS_SWITCH_S  # put back
