"""The telemetry port: Prometheus exposition, /healthz, /readyz, and gRPC health."""

from __future__ import annotations

import urllib.request

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from tests.sdk import export_grpc, export_http, record_spans
from tests.support import CaptureCollector, ServiceThread, make_config, wait_until


def scrape(url: str, accept: str = "") -> tuple[str, str]:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers["Content-Type"], response.read().decode()


def test_metrics_count_what_passed_through(next_hop: CaptureCollector) -> None:
    service = ServiceThread(make_config(f"forward.endpoint={next_hop.endpoint}"))
    try:
        export_grpc(service.grpc_endpoint, record_spans(12))
        export_http(service.http_url, record_spans(8, mcp_every=2))
        wait_until(lambda: next_hop.span_count() == 20)
        wait_until(lambda: service.metric("mcp_breaker_exporter_sent_spans_total") == 20)
        content_type, text = scrape(
            service.telemetry_url + "/metrics", "application/openmetrics-text; version=1.0.0"
        )
    finally:
        service.stop()
    assert content_type.startswith("application/openmetrics-text")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("mcp_breaker_receiver_accepted_spans_total", (("transport", "grpc"),))] == 12
    assert samples[("mcp_breaker_receiver_accepted_spans_total", (("transport", "http"),))] == 8
    assert samples[("mcp_breaker_stage_requests_total", (("path", "passthrough"),))] == 1
    assert samples[("mcp_breaker_stage_requests_total", (("path", "parsed"),))] == 1
    assert samples[("mcp_breaker_exporter_sent_spans_total", ())] == 20
    assert samples[("mcp_breaker_exporter_queue_capacity_spans", ())] == 100_000
    assert samples[("mcp_breaker_exporter_queue_spans", ())] == 0
    assert samples[("mcp_breaker_receiver_refused_spans_total", (("transport", "http"),))] == 0


def test_plain_prometheus_text_by_default() -> None:
    service = ServiceThread(make_config())
    try:
        content_type, text = scrape(service.telemetry_url + "/metrics")
    finally:
        service.stop()
    assert content_type.startswith("text/plain")
    assert "# TYPE mcp_breaker_receiver_accepted_spans_total counter" in text
    assert "mcp_breaker_exporter_queue_spans" not in text  # no next hop, no queue
    assert "mcp_breaker_released_spans_total" in text


def test_health_endpoints_and_grpc_health() -> None:
    service = ServiceThread(make_config())
    channel = grpc.insecure_channel(service.grpc_endpoint)
    try:
        assert scrape(service.telemetry_url + "/healthz")[1] == "ok\n"
        assert scrape(service.telemetry_url + "/readyz")[1] == "ready\n"
        stub = health_pb2_grpc.HealthStub(channel)
        for name in ("", "opentelemetry.proto.collector.trace.v1.TraceService"):
            answer = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        channel.close()
        service.stop()


def test_released_spans_are_counted_without_a_next_hop() -> None:
    service = ServiceThread(make_config())
    try:
        export_grpc(service.grpc_endpoint, record_spans(9))
        assert service.metric("mcp_breaker_released_spans_total") == 9
        assert service.metric("mcp_breaker_receiver_accepted_spans_total", transport="grpc") == 9
    finally:
        service.stop()
