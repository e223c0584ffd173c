"""Nothing lost, even when things go wrong: the running service, with real next hops.

- one sender's bad request among 3,000 valid spans from three others, with a strict Python
  next hop and with rotel: only the bad span is given up, named by its sender;
- ``kill -9`` with the disk queue while the next hop holds its answers, then a restart:
  every span accepted arrives, the duplicates are exactly the spans in flight at the kill;
- SIGTERM: the documented exit status when spans are lost, 0 when they are on disk;
- backpressure with the SDK's retries: every MCP span arrives annotated, none is counted
  as a duplicate; a true duplicate goes out annotated like its first copy;
- ``--forward-endpoint http://...`` delivers, ``ftp://...`` is refused at start-up.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.poison import invalid_utf8_request, sender_request, span_id, too_deep_request
from tests.sdk import export_grpc, record_spans
from tests.support import (
    LOOPBACK,
    CaptureCollector,
    ServiceThread,
    free_port,
    make_config,
    start_serve,
    wait_until,
)
from tests.test_hop import (  # noqa: F401 (rotel_collector: a fixture)
    EXPORT,
    Rotel,
    encoded,
    rotel_collector,
    span_ids,
)

PERMANENT = {"reason": "permanent"}


def exporter(endpoint: str) -> Callable[[bytes], bytes]:
    """Export raw request bytes over a channel of its own (a sender of its own)."""
    channel = grpc.insecure_channel(endpoint)
    call = channel.unary_unary(EXPORT)
    return lambda payload: call(payload, timeout=20)


def three_senders() -> tuple[list[bytes], set[bytes]]:
    """3,000 valid spans: three services, ten requests of 100 spans each."""
    requests, ids = [], set()
    for number, service in enumerate(("checkout", "search", "billing")):
        for request in range(10):
            first = number * 1000 + request * 100
            requests.append(sender_request(service, first, 100))
            ids |= {span_id(i) for i in range(first, first + 100)}
    return requests, ids


def poison_through(
    service: ServiceThread, pause: Callable[[], None], resume: Callable[[], None], bad: bytes
) -> set[bytes]:
    """The warm-up request in flight and the next hop paused, then the valid requests and
    the bad one from senders of their own: they wait, and go out merged into one export."""
    requests, valid = three_senders()
    pause()
    exporter(service.grpc_endpoint)(sender_request("warm-up", 90_000, 1))
    wait_until(lambda: service.metric("mcp_breaker_exporter_in_flight_requests") == 1)
    senders = [exporter(service.grpc_endpoint) for _ in range(3)]
    for index, payload in enumerate(requests):
        senders[index % 3](payload)  # each told OK: taken into the queue
        if index == 16:
            exporter(service.grpc_endpoint)(bad)  # the poisoner is told OK too
    assert service.metric("mcp_breaker_exporter_queue_spans") == 3002
    resume()
    return valid | {span_id(90_000)}


@pytest.mark.parametrize(
    "bad",
    [invalid_utf8_request("poison", 50_000), too_deep_request("poison", 50_000)],
    ids=["invalid-utf8", "too-deep"],
)
def test_a_strict_next_hop_refuses_one_request_and_only_its_span_is_lost(
    bad: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    hop = CaptureCollector(strict=True).start()
    service = ServiceThread(
        make_config(f"forward.endpoint={hop.endpoint}", "forward.queue.consumers=1")
    )
    try:
        with caplog.at_level(logging.INFO, logger="processor.forward.queue"):
            expected = poison_through(service, hop.stall, hop.release, bad)
            wait_until(lambda: service.metric("mcp_breaker_exporter_queue_spans") == 0)
        received = Counter(span.span_id for span in hop.spans())
        assert set(received) == expected and set(received.values()) == {1}
        assert len(hop.refused) >= 2  # the merged export, then its halves with the bad span
        assert service.metric("mcp_breaker_exporter_send_failed_spans_total", **PERMANENT) == 1
        assert (
            service.metric("mcp_breaker_exporter_rejected_spans_total", service_name="poison") == 1
        )
        assert service.metric("mcp_breaker_exporter_sent_spans_total") == 3001
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert errors and all("service.name poison from 127.0.0.1" in e for e in errors), errors
    finally:
        service.stop()
        hop.stop()


def test_rotel_refuses_one_request_and_only_its_span_is_lost(
    rotel_collector: Rotel,  # noqa: F811
    next_hop: CaptureCollector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """rotel answers INTERNAL for a request that does not decode (as gRPC servers do); it is
    paused with SIGSTOP while the requests wait, and resumed with SIGCONT."""
    pid = rotel_collector.process.pid
    service = ServiceThread(
        make_config(
            f"forward.endpoint={rotel_collector.endpoint}",
            "forward.queue.consumers=1",
            "forward.timeout_s=20",
        )
    )
    try:
        with caplog.at_level(logging.INFO, logger="processor.forward.queue"):
            expected = poison_through(
                service,
                lambda: os.kill(pid, signal.SIGSTOP),
                lambda: os.kill(pid, signal.SIGCONT),
                invalid_utf8_request("poison", 50_000),
            )
            wait_until(lambda: next_hop.span_count() >= len(expected), what="rotel passes on")
            wait_until(lambda: service.metric("mcp_breaker_exporter_queue_spans") == 0)
        assert {span.span_id for span in next_hop.spans()} == expected
        assert (
            service.metric("mcp_breaker_exporter_rejected_spans_total", service_name="poison") == 1
        )
        assert service.metric("mcp_breaker_exporter_send_failed_spans_total", **PERMANENT) == 1
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert any("sent by service.name poison from 127.0.0.1: INTERNAL" in e for e in errors), (
            errors
        )
    finally:
        os.kill(pid, signal.SIGCONT)
        service.stop()


class TestCrash:
    """``kill -9`` with the disk queue: what was on disk is delivered after the restart."""

    def test_kill_9_then_restart_delivers_every_accepted_span(self, tmp_path: Path) -> None:
        hop = CaptureCollector().start()
        # It takes what it is sent and never answers: as if its answers were lost.
        hop.stall(record_first=True)
        flags = [
            "--forward-endpoint",
            hop.endpoint,
            "--set",
            "forward.queue.storage=disk",
            "--set",
            f"forward.queue.directory={tmp_path / 'queue'}",
            "--set",
            "forward.queue.consumers=2",
            "--set",
            "forward.timeout_s=60",
        ]
        process, ports = start_serve(*flags, stderr=subprocess.DEVNULL)
        sent: list[bytes] = []
        try:
            for i in range(12):
                spans = record_spans(50, mcp_every=5 if i % 3 == 0 else 0)
                assert export_grpc(f"{LOOPBACK}:{ports['grpc']}", spans) is SpanExportResult.SUCCESS
                sent += [s.context.span_id.to_bytes(8, "big") for s in spans]
            wait_until(lambda: len(hop.requests) >= 2, what="two exports in flight")
            in_flight = hop.span_count()
            process.kill()  # SIGKILL: no drain, no goodbye
            process.wait(30)
        finally:
            hop.release()
        assert 0 < in_flight < len(sent)
        process, _ = start_serve(*flags)
        try:
            wait_until(lambda: len(set(s.span_id for s in hop.spans())) >= len(sent))
        finally:
            process.send_signal(signal.SIGTERM)
            _, log = process.communicate(timeout=60)
            hop.stop()
        assert process.returncode == 0, log
        received = Counter(span.span_id for span in hop.spans())
        assert set(received) == set(sent)  # nothing missing
        duplicates = sum(received.values()) - len(received)
        assert duplicates == in_flight  # exactly what the next hop had taken, sent again
        assert (
            f"disk queue: {len(sent)} spans in 12 requests were left undelivered by the last run"
        ) in log
        assert "every accepted span was delivered" in log


class TestExitStatus:
    def test_sigterm_with_spans_on_the_disk_queue_exits_0_and_the_next_start_sends_them(
        self, tmp_path: Path
    ) -> None:
        port = free_port()  # nothing listens there yet
        flags = [
            "--forward-endpoint",
            f"{LOOPBACK}:{port}",
            "--set",
            "forward.queue.storage=disk",
            "--set",
            f"forward.queue.directory={tmp_path}",
            "--set",
            "forward.shutdown_grace_s=0.5",
        ]
        process, ports = start_serve(*flags)
        spans = record_spans(30)
        assert export_grpc(f"{LOOPBACK}:{ports['grpc']}", spans) is SpanExportResult.SUCCESS
        process.send_signal(signal.SIGTERM)
        _, log = process.communicate(timeout=60)
        assert process.returncode == 0, log
        assert (
            f"shutdown: 30 spans in 1 request could not be delivered to {LOOPBACK}:{port} "
            f"within 0.5s; they stay in the disk queue ({tmp_path}/forward-queue.sqlite3) and "
            "go out at the next start"
        ) in log
        hop = CaptureCollector(port).start()
        process, _ = start_serve(*flags)
        try:
            wait_until(lambda: hop.span_count() >= 30)
        finally:
            process.send_signal(signal.SIGTERM)
            _, log = process.communicate(timeout=60)
            hop.stop()
        assert process.returncode == 0, log
        assert {s.span_id for s in hop.spans()} == span_ids(spans)


class TestBackpressure:
    def test_refused_and_retried_requests_arrive_annotated_and_are_not_duplicates(
        self, next_hop: CaptureCollector
    ) -> None:
        service = ServiceThread(
            make_config(
                f"forward.endpoint={next_hop.endpoint}",
                "forward.queue.max_spans=100",
                "forward.queue.consumers=1",
                "forward.queue.backpressure_retry_after_s=1",
            )
        )
        batches = [record_spans(50, mcp_every=2) for _ in range(6)]
        results: list[SpanExportResult] = []
        next_hop.stall()
        try:
            threads = [
                threading.Thread(
                    target=lambda b=b: results.append(export_grpc(service.grpc_endpoint, b))
                )
                for b in batches
            ]
            for thread in threads:
                thread.start()
            wait_until(
                lambda: (
                    service.metric("mcp_breaker_receiver_refused_spans_total", transport="grpc")
                    >= 100
                ),
                what="requests refused for backpressure",
            )
            next_hop.release()
            for thread in threads:
                thread.join(60)
            wait_until(lambda: next_hop.span_count() >= 300)
        finally:
            next_hop.release()
            service.stop()
        assert results == [SpanExportResult.SUCCESS] * 6
        received = next_hop.spans()
        assert {s.span_id for s in received} == set().union(*(span_ids(b) for b in batches))
        calls = [s for s in received if s.name.startswith("tools/call")]
        assert len(calls) == 6 * 25
        for span in calls:  # judged: their own outcome at least (pending their server half)
            keys = {kv.key for kv in span.attributes}
            assert {"mcp.breaker.outcome", "mcp.breaker.failure_class"} <= keys, span.name
        assert service.metric("mcp_breaker_duplicate_spans_total") == 0
        assert service.metric("mcp_breaker_tool_calls_total", **tool_labels()) == 150

    def test_a_true_duplicate_is_counted_once_and_annotated_like_the_first(
        self, next_hop: CaptureCollector
    ) -> None:
        service = ServiceThread(make_config(f"forward.endpoint={next_hop.endpoint}"))
        payload = encoded(record_spans(20, mcp_every=2))  # an exporter's retry: same bytes
        try:
            send = exporter(service.grpc_endpoint)
            send(payload)
            send(payload)
            wait_until(lambda: next_hop.span_count() == 40)
        finally:
            service.stop()
        first, second = (
            {s.span_id: annotations(s) for s in request_spans(r)} for r in next_hop.requests
        )
        assert first == second and sum(bool(a) for a in first.values()) == 10
        assert service.metric("mcp_breaker_duplicate_spans_total") == 10


def tool_labels() -> dict[str, str]:
    return {
        "server": "",
        "tool": "browser_navigate",
        "outcome": "failed",
        "failure_class": "transport",
    }


def annotations(span: object) -> dict[str, object]:
    return {
        kv.key: kv.value.SerializeToString()
        for kv in span.attributes  # type: ignore[attr-defined]
        if kv.key.startswith("mcp.breaker.")
    }


def request_spans(request: ExportTraceServiceRequest) -> Iterator[object]:
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            yield from scope.spans


class TestEndpoints:
    def test_an_sdk_style_http_endpoint_delivers(self, next_hop: CaptureCollector) -> None:
        process, ports = start_serve("--forward-endpoint", f"http://{next_hop.endpoint}")
        spans = record_spans(10)
        try:
            assert export_grpc(f"{LOOPBACK}:{ports['grpc']}", spans) is SpanExportResult.SUCCESS
            wait_until(lambda: next_hop.span_count() == 10)
        finally:
            process.send_signal(signal.SIGTERM)
            _, log = process.communicate(timeout=60)
        assert process.returncode == 0, log
        assert f"forwarding to http://{next_hop.endpoint} over grpc (queue:" in log
        assert {s.span_id for s in next_hop.spans()} == span_ids(spans)

    def test_a_scheme_that_cannot_work_is_refused_at_startup(self) -> None:
        result = subprocess.run(
            [sys.executable, "-m", "processor", "serve", "--forward-endpoint", "ftp://c:4317"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 1
        assert result.stderr == (
            "mcp-breaker: invalid configuration:\n"
            "  - forward.endpoint: unsupported scheme 'ftp' in 'ftp://c:4317'; an OTLP/gRPC "
            "endpoint is host:port, http://host:port (plaintext) or https://host:port (TLS)\n"
        )
