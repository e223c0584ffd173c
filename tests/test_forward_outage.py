"""What a failing next hop logs: the first failure, a summary per interval, the recovery.

``OutageLog`` runs on a fake clock here; the last test runs the forwarder against a real
gRPC next hop that refuses its first requests.
"""

from __future__ import annotations

import asyncio
import logging
import re

import pytest

from processor.forward.outage import OutageLog
from processor.forward.queue import Admission
from tests.support import CaptureCollector
from tests.test_forward_queue import Harness, batch, run

TARGET = "collector:4317"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def outage(clock: Clock) -> OutageLog:
    return OutageLog(TARGET, clock=clock, summary_interval_s=60)


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records]


def fail_for(outage: OutageLog, clock: Clock, seconds: float, every_s: float = 0.5) -> int:
    """Ten consumers failing an attempt each, every ``every_s``, for ``seconds``."""
    attempts = 0
    end = clock.now + seconds
    while clock.now < end:
        for _ in range(10):
            outage.attempt_failed(
                "UNAVAILABLE: connection refused", spans=512, retry_in_s=5.0, held_spans=5120
            )
            attempts += 1
        clock.now += every_s
    return attempts


def test_an_outage_logs_its_start_a_summary_per_interval_and_its_end(
    outage: OutageLog, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    attempts = fail_for(outage, clock, 300)
    outage.delivered()
    logged = lines(caplog)
    assert attempts == 6000
    assert logged[0] == (
        "WARNING",
        "next hop collector:4317: UNAVAILABLE: connection refused; retrying 512 spans in "
        "5.0s (while it fails, a summary every 60s)",
    )
    summaries = logged[1:-1]
    assert len(summaries) == 4, summaries  # at 60, 120, 180, 240 s; 300 s is the recovery
    assert summaries[0] == (
        "WARNING",
        "next hop collector:4317 still failing after 1m00s: 1200 failed attempts in the last "
        "1m00s, 5120 spans waiting; last error: UNAVAILABLE: connection refused",
    )
    assert all("1200 failed attempts in the last 1m00s" in m for _, m in summaries[1:])
    assert logged[-1] == (
        "INFO",
        "next hop collector:4317: delivering again after 5m00s of failures (6000 failed attempts)",
    )


def test_a_healthy_next_hop_logs_nothing(
    outage: OutageLog, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for _ in range(100):
        outage.delivered()
    assert caplog.records == []


def test_spans_given_up_on_the_first_at_once_then_in_the_summary(
    outage: OutageLog, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    outage.attempt_failed("UNAVAILABLE", spans=10, retry_in_s=1, held_spans=30)
    for spans in (10, 20, 30):
        clock.now += 25
        outage.gave_up(
            "UNAVAILABLE", spans=spans, attempts=9, reason="retries_exhausted", held_spans=0
        )
    outage.delivered()
    logged = lines(caplog)
    assert logged[1] == (
        "ERROR",
        "dropped 10 spans bound for collector:4317 after 9 attempt(s): retries_exhausted "
        "(UNAVAILABLE)",
    )
    assert logged[2] == (
        "WARNING",
        "next hop collector:4317 still failing after 1m15s: 3 failed attempts in the last "
        "1m15s, 0 spans waiting, 50 spans in 2 requests dropped (retries_exhausted 2); last "
        "error: UNAVAILABLE",
    )
    assert logged[3] == (
        "INFO",
        "next hop collector:4317: delivering again after 1m15s of failures (4 failed "
        "attempts, 60 spans dropped)",
    )
    assert len(logged) == 4


def test_a_permanent_error_on_a_healthy_hop_is_an_error_line_then_a_recovery(
    outage: OutageLog, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    outage.gave_up(
        "INVALID_ARGUMENT: bad span", spans=4, attempts=1, reason="permanent", held_spans=0
    )
    clock.now += 0.2
    outage.delivered()
    assert lines(caplog) == [
        (
            "ERROR",
            "dropped 4 spans bound for collector:4317 after 1 attempt(s): permanent "
            "(INVALID_ARGUMENT: bad span)",
        ),
        (
            "INFO",
            "next hop collector:4317: delivering again after 0s of failures (1 failed "
            "attempt, 4 spans dropped)",
        ),
    ]


def test_each_outage_starts_afresh_after_a_recovery(
    outage: OutageLog, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    for _ in range(2):
        outage.attempt_failed("UNAVAILABLE", spans=1, retry_in_s=1, held_spans=1)
        clock.now += 5
        outage.delivered()
    assert [level for level, _ in lines(caplog)] == ["WARNING", "INFO", "WARNING", "INFO"]
    assert not outage.failing


def test_shutdown_says_what_the_last_summary_did_not(
    outage: OutageLog, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    outage.close(0)  # nothing failing: nothing to say
    fail_for(outage, clock, 10)
    outage.close(5120)
    logged = lines(caplog)
    assert len(logged) == 2
    assert logged[1][1].startswith(
        "next hop collector:4317 still failing after 10s: 199 failed attempts in the last 10s, "
        "5120 spans waiting"
    )


def test_the_forwarder_logs_an_outage_once_not_per_attempt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Twenty requests on ten consumers, a next hop refusing the first forty attempts:
    a start and a recovery, not forty lines. (Answers to concurrent attempts may come
    back out of order, a success before the last refusal: that is a second, short
    outage, and its lines say so; the attempts add up either way.)"""
    next_hop = CaptureCollector().start()
    next_hop.unavailable_for = 40
    harness = Harness(next_hop.endpoint, "forward.queue.consumers=10")
    caplog.set_level(logging.INFO, logger="processor.forward")

    async def scenario() -> None:
        forwarder = harness.forwarder()
        forwarder.start()
        for i in range(20):
            assert await forwarder.offer(batch(3, name=f"r{i}")) is Admission.ACCEPTED
            await asyncio.sleep(0)  # one request each, not merged
        await forwarder.drain(60)

    try:
        run(scenario)
    finally:
        next_hop.stop()
    assert next_hop.span_count() == 60
    assert harness.value("mcp_breaker_exporter_send_retries_total") == 40
    logged = lines(caplog)
    outages = len(logged) // 2
    # Only answers in flight together can come back out of order: at most one short
    # outage per consumer (10), and never one per failed attempt (40).
    assert 1 <= outages <= 10, logged
    assert [level for level, _ in logged] == ["WARNING", "INFO"] * outages, logged
    recoveries = [message for level, message in logged if level == "INFO"]
    assert all(m.startswith(f"next hop {next_hop.endpoint}: delivering again") for m in recoveries)
    counts = [int(re.search(r"\((\d+) failed attempts?\)", m).group(1)) for m in recoveries]  # type: ignore[union-attr]
    assert sum(counts) == 40, logged
