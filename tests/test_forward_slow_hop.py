"""A next hop slower than forward.timeout_s: each span reaches it a bounded number of times.

Issue 29: with a fixed per-attempt deadline, a next hop four times slower than it took
every attempt (each timed out after the next hop had the request) and received each span
3.6 times after 30 s, 6.3 times after 90 s, while none was counted as sent. The deadline
now learns (processor/forward/deadline.py). The next hop here is a real gRPC server that
takes ``latency_s`` to answer every export, and counts each span it receives by its id;
the tests count deliveries, never time.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from processor.request.otlp import EXPORT_METHOD
from tests.support import LOOPBACK, ServiceThread, free_port, make_config, wait_until

TIMEOUT_S = 0.5
SLOWER = 4  # the next hop takes SLOWER x forward.timeout_s to answer every export
MOST_COPIES = 4  # docs/delivery.md: 2 + floor(log2(4))
REQUESTS = 8  # fewer than forward.queue.consumers (10): each has a consumer of its own
SPANS_PER_REQUEST = 5


class SlowHop:
    """An OTLP/gRPC next hop that answers each export after ``latency_s``, having taken it
    at once: what it received is counted whether or not its answer arrives in time."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.port = free_port()
        self.received: Counter[bytes] = Counter()  # copies received, by span id
        self._lock = threading.Lock()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
        handler = grpc.unary_unary_rpc_method_handler(self._export)
        self._server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "opentelemetry.proto.collector.trace.v1.TraceService", {"Export": handler}
                ),
            )
        )
        self._server.add_insecure_port(f"{LOOPBACK}:{self.port}")

    def _export(self, payload: bytes, context: grpc.ServicerContext) -> bytes:
        request = ExportTraceServiceRequest.FromString(payload)
        with self._lock:
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    self.received.update(span.span_id for span in scope.spans)
        time.sleep(self.latency_s)  # a slow backend: it has the spans, the answer lags
        return bytes(ExportTraceServiceResponse().SerializeToString())

    def copies(self) -> Counter[bytes]:
        with self._lock:
            return Counter(self.received)

    @property
    def endpoint(self) -> str:
        return f"{LOOPBACK}:{self.port}"


@pytest.fixture
def slow_hop() -> Iterator[SlowHop]:
    hop = SlowHop(SLOWER * TIMEOUT_S)
    hop._server.start()
    yield hop
    hop._server.stop(0).wait()


def requests() -> list[bytes]:
    payloads = []
    for n in range(REQUESTS):
        request = ExportTraceServiceRequest()
        resource = request.resource_spans.add()
        resource.resource.attributes.add(key="service.name").value.string_value = "orders"
        scope = resource.scope_spans.add()
        for i in range(SPANS_PER_REQUEST):
            span = scope.spans.add(name=f"GET /orders/{n}")
            span.trace_id = (n + 1).to_bytes(16, "big")
            span.span_id = (n * SPANS_PER_REQUEST + i + 1).to_bytes(8, "big")
        payloads.append(bytes(request.SerializeToString()))
    return payloads


def running(hop: SlowHop, *overrides: str) -> ServiceThread:
    return ServiceThread(
        make_config(
            f"forward.endpoint={hop.endpoint}",
            f"forward.timeout_s={TIMEOUT_S}",
            "forward.retry.initial_interval_s=0.05",
            "forward.retry.max_interval_s=0.2",
            *overrides,
        )
    )


def export_all(service: ServiceThread) -> None:
    with grpc.insecure_channel(service.grpc_endpoint) as channel:
        export = channel.unary_unary(EXPORT_METHOD)
        for payload in requests():
            export(payload, timeout=20)


SENT = "mcp_breaker_exporter_sent_spans_total"
TOTAL = REQUESTS * SPANS_PER_REQUEST


def test_a_next_hop_4x_slower_receives_each_span_at_most_4_times_and_all_are_sent(
    slow_hop: SlowHop,
) -> None:
    service = running(slow_hop)
    try:
        export_all(service)
        wait_until(lambda: service.metric(SENT) == TOTAL, timeout_s=120, what="all sent")
        learnt = service.metric("mcp_breaker_exporter_attempt_timeout_seconds")
    finally:
        service.stop()
    copies = slow_hop.copies()
    assert len(copies) == TOTAL  # every span arrived
    assert max(copies.values()) <= MOST_COPIES, copies.most_common(3)
    assert learnt > SLOWER * TIMEOUT_S  # new exports now wait for it


def test_with_the_growth_turned_off_it_receives_them_again_and_again_none_sent(
    slow_hop: SlowHop,
) -> None:
    """What issue 29 measured, and what max_timeout_s = timeout_s still does: the same
    next hop receives every span more often than the bound above, and none is sent."""
    service = running(slow_hop, f"forward.max_timeout_s={TIMEOUT_S}")
    try:
        export_all(service)
        wait_until(
            lambda: (
                len(slow_hop.copies()) == TOTAL and min(slow_hop.copies().values()) > MOST_COPIES
            ),
            timeout_s=120,
            what="every span received more than the bound",
        )
        assert service.metric(SENT) == 0
    finally:
        service.stop()
