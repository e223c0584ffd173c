"""Isolation: a refused export never takes down the spans the next hop would take.

The forwarder runs against a real gRPC next hop that refuses what does not decode (as a
collector does); waiting requests are merged into one export by stalling the next hop
while they arrive. Only the spans it refuses are given up, counted, and named by sender.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from processor.config import load_config
from processor.forward.isolate import ISOLATION_MAX_EXPORTS, Piece, halves
from processor.forward.queue import Admission, FailureReason, Forwarder
from processor.forward.senders import GrpcSender
from processor.inflight.stage import Prepared, StagePath, count_spans_shallow
from processor.request.sender import Sender
from processor.telemetry.metrics import SelfMetrics
from tests.poison import invalid_utf8_request, sender_request, span_id, too_deep_request
from tests.support import CaptureCollector

FAILED = "mcp_breaker_exporter_send_failed_spans_total"


@pytest.fixture
def strict_hop() -> Iterator[CaptureCollector]:
    collector = CaptureCollector(strict=True).start()
    yield collector
    collector.stop()


def prepared(payload: bytes, peer: str) -> Prepared:
    spans = count_spans_shallow(payload)
    return Prepared(payload, spans, 0, "", StagePath.PASSTHROUGH, Sender(peer=peer))


class Run:
    """A forwarder to ``hop``, one consumer, what it said was rejected, by whom."""

    def __init__(self, hop: CaptureCollector) -> None:
        self.hop = hop
        self.config = load_config(
            overrides=[f"forward.endpoint={hop.endpoint}", "forward.queue.consumers=1"]
        ).forward
        self.registry = CollectorRegistry()
        self.rejected: list[tuple[str, int]] = []

    async def merged(self, batches: list[Prepared]) -> None:
        """Offer ``batches`` while the next hop is stalled, so they go out as one export."""
        forwarder = Forwarder(
            self.config,
            GrpcSender(self.config),  # on the running loop: grpc.aio channels belong to one
            SelfMetrics(self.registry),
            on_rejected=lambda service, spans: self.rejected.append((service, spans)),
        )
        forwarder.start()
        self.hop.stall()
        first = prepared(sender_request("warm-up", 90_000, 1), "ipv4:10.0.0.9:1000")
        assert await forwarder.offer(first) is Admission.ACCEPTED
        while not forwarder.stats().in_flight:
            await asyncio.sleep(0.01)
        for batch in batches:
            assert await forwarder.offer(batch) is Admission.ACCEPTED
        self.hop.release()
        report = await forwarder.drain(30)
        assert report.undelivered_spans == 0

    def failed(self, reason: FailureReason) -> float:
        return self.registry.get_sample_value(FAILED, {"reason": reason.value}) or 0.0


def delivered_ids(hop: CaptureCollector) -> set[bytes]:
    return {span.span_id for span in hop.spans()}


def valid_senders() -> tuple[list[Prepared], set[bytes]]:
    """3,000 valid spans: three services, ten requests of 100 spans each."""
    batches, ids = [], set()
    for number, service in enumerate(("checkout", "search", "billing")):
        for request in range(10):
            first = number * 1000 + request * 100
            batches.append(prepared(sender_request(service, first, 100), f"ipv4:10.0.0.{number}:1"))
            ids |= {span_id(i) for i in range(first, first + 100)}
    return batches, ids


@pytest.mark.parametrize(
    "bad",
    [invalid_utf8_request("poison", 50_000), too_deep_request("poison", 50_000)],
    ids=["invalid-utf8", "too-deep"],
)
def test_one_bad_request_costs_only_its_own_span(
    strict_hop: CaptureCollector, bad: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    batches, valid = valid_senders()
    batches.insert(17, prepared(bad, "ipv4:192.0.2.7:40001"))
    run = Run(strict_hop)
    with caplog.at_level(logging.INFO, logger="processor.forward.queue"):
        asyncio.run(asyncio.wait_for(run.merged(batches), 60))
    assert valid <= delivered_ids(strict_hop)
    assert span_id(50_000) not in delivered_ids(strict_hop)
    assert strict_hop.span_count() == 3001  # the 3,000 and the warm-up span, once each
    assert run.rejected == [("poison", 1)]
    assert run.failed(FailureReason.PERMANENT) == 1
    assert run.registry.get_sample_value("mcp_breaker_exporter_sent_spans_total") == 3001
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1, errors
    assert "refused 1 span(s) for good, sent by service.name poison from 192.0.2.7" in errors[0]
    assert "INVALID_ARGUMENT" in errors[0]
    assert any("sending them apart" in r.getMessage() for r in caplog.records)


def test_the_bad_span_is_found_inside_its_request(strict_hop: CaptureCollector) -> None:
    """Bisection goes on within the request: its other 40 spans are delivered too."""
    batches, valid = valid_senders()
    batches.append(prepared(invalid_utf8_request("poison", 60_020, valid_around=20), "10.9.9.9"))
    valid |= {span_id(i) for i in range(60_000, 60_041) if i != 60_020}
    run = Run(strict_hop)
    asyncio.run(asyncio.wait_for(run.merged(batches), 60))
    assert delivered_ids(strict_hop) - {span_id(90_000)} == valid
    assert run.rejected == [("poison", 1)]
    # Halvings: about two exports per level, a few dozen here, not one per span.
    assert len(strict_hop.refused) <= 2 + 2 * 12


def test_a_next_hop_that_refuses_everything_is_not_flooded(
    strict_hop: CaptureCollector, caplog: pytest.LogCaptureFixture
) -> None:
    """Every request bad: the splitting stops at its budget, and what is left is given up
    whole (named, and said to be whole)."""
    batches = [
        prepared(invalid_utf8_request(f"bad-{i % 3}", 70_000 + i), "10.1.1.1") for i in range(300)
    ]
    run = Run(strict_hop)
    with caplog.at_level(logging.INFO, logger="processor.forward.queue"):
        asyncio.run(asyncio.wait_for(run.merged(batches), 60))
    assert len(strict_hop.refused) <= 1 + ISOLATION_MAX_EXPORTS
    assert run.failed(FailureReason.PERMANENT) == 300
    assert sum(spans for _, spans in run.rejected) == 300
    assert {service for service, _ in run.rejected} == {"bad-0", "bad-1", "bad-2"}
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    # One line per sender, then summaries: not one line per request.
    assert 3 <= len(errors) <= 4, errors
    assert any("could not be split further within" in e for e in errors)


def test_a_refusal_about_the_endpoint_is_not_split() -> None:
    """UNIMPLEMENTED (no trace service there) would refuse every part alike."""
    import concurrent.futures

    import grpc

    server = grpc.server(concurrent.futures.ThreadPoolExecutor(2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    hop: Any = type("Hop", (), {"endpoint": f"127.0.0.1:{port}"})()
    config = load_config(overrides=[f"forward.endpoint={hop.endpoint}"]).forward
    registry = CollectorRegistry()
    sends: list[int] = []

    async def scenario() -> None:
        sender = GrpcSender(config)
        original = sender.send

        async def counting(payload: bytes, timeout_s: float) -> Any:
            sends.append(len(payload))
            return await original(payload, timeout_s)

        sender.send = counting  # type: ignore[method-assign]
        forwarder = Forwarder(config, sender, SelfMetrics(registry))
        for i in range(5):
            await forwarder.offer(prepared(sender_request("svc", i * 10, 10), "10.0.0.1"))
        forwarder.start()
        await forwarder.drain(10)

    try:
        asyncio.run(asyncio.wait_for(scenario(), 30))
    finally:
        server.stop(0)
    assert len(sends) == 1  # merged, refused, given up: no halves tried
    assert registry.get_sample_value(FAILED, {"reason": "permanent"}) == 50


def test_halves_split_requests_first_then_spans_and_stop_at_one_span() -> None:
    origin = Sender(peer="10.0.0.1")
    requests = [Piece(sender_request("s", i * 10, 10), 10, origin) for i in range(5)]
    assert halves(requests) == [requests[:2], requests[2:]]
    (first,), (second,) = halves(requests[:1])
    assert (first.span_count, second.span_count) == (5, 5)
    assert first.sender == second.sender == origin
    lone = Piece(sender_request("s", 0, 1), 1, origin)
    assert halves([lone]) == []
