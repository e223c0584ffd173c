"""The hop end to end: the real SDK in front, real next hops behind, the service between.

Backpressure, an outage of the next hop, a real collector (rotel) as the next hop, and
shutdown on SIGTERM with the process as a user runs it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from processor.config import leaf_keys
from tests.sdk import export_grpc, export_http, record_spans
from tests.support import (
    LISTEN_KEYS,
    LOOPBACK,
    CaptureCollector,
    ServiceThread,
    free_port,
    make_config,
    start_serve,
    wait_until,
)

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def span_ids(spans: list[ReadableSpan]) -> set[bytes]:
    return {s.context.span_id.to_bytes(8, "big") for s in spans}


def encoded(spans: list[ReadableSpan]) -> bytes:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return bytes(encode_spans(spans).SerializeToString())


def retry_delay_s(error: grpc.RpcError) -> float | None:
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                info = error_details_pb2.RetryInfo()
                if detail.Unpack(info):
                    return info.retry_delay.ToNanoseconds() / 1e9
    return None


class TestBackpressure:
    def test_a_full_queue_tells_the_sender_to_retry_and_loses_nothing(
        self, next_hop: CaptureCollector
    ) -> None:
        service = ServiceThread(
            make_config(
                f"forward.endpoint={next_hop.endpoint}",
                "forward.queue.max_spans=20",
                "forward.queue.consumers=1",
                "forward.queue.backpressure_retry_after_s=3",
            )
        )
        batches = [record_spans(10) for _ in range(4)]
        next_hop.stall()
        channel = grpc.insecure_channel(service.grpc_endpoint)
        export = channel.unary_unary(EXPORT)
        try:
            export(encoded(batches[0]), timeout=10)
            export(encoded(batches[1]), timeout=10)
            with pytest.raises(grpc.RpcError) as refused:
                export(encoded(batches[2]), timeout=10)
            assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
            assert retry_delay_s(refused.value) == 3.0

            request = urllib.request.Request(
                service.http_url,
                data=encoded(batches[3]),
                headers={"Content-Type": "application/x-protobuf"},
            )
            with pytest.raises(urllib.error.HTTPError) as refused_http:
                urllib.request.urlopen(request, timeout=10)
            assert refused_http.value.code == 503
            assert refused_http.value.headers["Retry-After"] == "3"
            assert (
                service.metric("mcp_breaker_receiver_refused_spans_total", transport="grpc") == 10
            )

            # The next hop recovers; the senders retry what they were refused.
            next_hop.release()
            wait_until(lambda: next_hop.span_count() == 20, what="queued spans delivered")
            export(encoded(batches[2]), timeout=10)
            urllib.request.urlopen(request, timeout=10).read()
            wait_until(lambda: next_hop.span_count() == 40, what="retried spans delivered")
        finally:
            channel.close()
            service.stop()
        delivered = {s.span_id for s in next_hop.spans()}
        assert delivered == set().union(*(span_ids(b) for b in batches))

    def test_the_sdk_exporter_retries_a_refusal_by_itself(self, next_hop: CaptureCollector) -> None:
        service = ServiceThread(
            make_config(
                f"forward.endpoint={next_hop.endpoint}",
                "forward.queue.max_spans=5",
                "forward.queue.consumers=1",
                "forward.queue.backpressure_retry_after_s=1",
            )
        )
        first, second = record_spans(5), record_spans(5)
        next_hop.stall()
        try:
            assert export_grpc(service.grpc_endpoint, first) is SpanExportResult.SUCCESS
            releaser = threading.Timer(1.5, next_hop.release)
            releaser.start()
            # Refused at first (queue full), retried by the SDK after RetryInfo's delay.
            assert export_grpc(service.grpc_endpoint, second) is SpanExportResult.SUCCESS
            releaser.join()
            wait_until(lambda: next_hop.span_count() == 10)
            assert service.metric("mcp_breaker_receiver_refused_spans_total", transport="grpc") >= 5
        finally:
            next_hop.release()
            service.stop()
        assert {s.span_id for s in next_hop.spans()} == span_ids(first) | span_ids(second)


def test_a_next_hop_outage_loses_no_span() -> None:
    port = free_port()
    service = ServiceThread(
        make_config(f"forward.endpoint={LOOPBACK}:{port}", "forward.retry.max_elapsed_s=0")
    )
    sent: set[bytes] = set()
    collector = CaptureCollector(port)
    try:
        for i in range(6):  # sent while the next hop is down
            spans = record_spans(25, mcp_every=4 if i % 2 else 0)
            export = export_grpc if i % 2 else export_http
            target = service.grpc_endpoint if i % 2 else service.http_url
            assert export(target, spans) is SpanExportResult.SUCCESS
            sent |= span_ids(spans)
        wait_until(lambda: service.metric("mcp_breaker_exporter_send_retries_total") >= 6)
        collector.start()
        spans = record_spans(25)
        assert export_grpc(service.grpc_endpoint, spans) is SpanExportResult.SUCCESS
        sent |= span_ids(spans)
        wait_until(lambda: collector.span_count() >= len(sent), what="every span delivered")
    finally:
        service.stop()
        collector.stop()
    assert {s.span_id for s in collector.spans()} == sent
    assert collector.span_count() == len(sent) == 175


def _rotel_binary() -> str:
    import rotel

    return str(Path(rotel.__file__).parent / "rotel-agent")


@dataclass(frozen=True)
class Rotel:
    endpoint: str  # where it listens for OTLP/gRPC
    process: subprocess.Popen[bytes]  # to pause it (SIGSTOP) and resume it


@pytest.fixture
def rotel(rotel_collector: Rotel) -> str:
    return rotel_collector.endpoint


@pytest.fixture
def rotel_collector(next_hop: CaptureCollector, tmp_path: Path) -> Iterator[Rotel]:
    """A real collector (rotel) listening on OTLP/gRPC and exporting to ``next_hop``."""
    port, http_port = free_port(), free_port()
    log_path = tmp_path / "rotel.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                _rotel_binary(),
                "start",
                "--otlp-grpc-endpoint",
                f"{LOOPBACK}:{port}",
                "--otlp-http-endpoint",
                f"{LOOPBACK}:{http_port}",
                "--exporter",
                "otlp",
                "--otlp-exporter-endpoint",
                f"http://{next_hop.endpoint}",
                "--otlp-exporter-protocol",
                "grpc",
                "--batch-timeout",
                "100ms",
                "--pid-file",
                str(tmp_path / "rotel.pid"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: _listening(port), what="rotel listening")
        yield Rotel(f"{LOOPBACK}:{port}", process)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex((LOOPBACK, port)) == 0


def test_a_real_collector_as_the_next_hop_gets_every_span_intact(
    rotel: str, next_hop: CaptureCollector
) -> None:
    service = ServiceThread(make_config(f"forward.endpoint={rotel}"))
    plain, with_mcp = record_spans(30), record_spans(30, mcp_every=3)
    try:
        assert export_grpc(service.grpc_endpoint, plain, gzip=True) is SpanExportResult.SUCCESS
        assert export_http(service.http_url, with_mcp) is SpanExportResult.SUCCESS
        wait_until(lambda: next_hop.span_count() == 60, what="rotel to pass on 60 spans")
        ready = urllib.request.urlopen(service.telemetry_url + "/readyz", timeout=10)
        assert ready.status == 200
    finally:
        service.stop()
    received = {s.span_id: s for s in next_hop.spans()}
    assert set(received) == span_ids(plain) | span_ids(with_mcp)
    for original in plain + with_mcp:
        span = received[original.context.span_id.to_bytes(8, "big")]
        assert span.name == original.name
        assert span.trace_id == original.context.trace_id.to_bytes(16, "big")
        attributes = {kv.key: kv.value for kv in span.attributes}
        added = {key for key in attributes if key.startswith("mcp.breaker.")}
        assert set(attributes) - added == set(original.attributes or {})
        # A tool call span leaves judged (its own outcome at least); no other span is touched.
        assert ("mcp.breaker.outcome" in added) == original.name.startswith("tools/call")
    resources = [r.resource for r in next_hop.requests[0].resource_spans]
    names = {
        kv.value.string_value for r in resources for kv in r.attributes if kv.key == "service.name"
    }
    assert names == {"harness-under-test"}


class TestProcess:
    """``mcp-breaker serve`` as a person runs it: a process, its log, its signals."""

    @staticmethod
    def start(
        *flags: str, env: dict[str, str] | None = None
    ) -> tuple[subprocess.Popen[str], dict[str, int]]:
        return start_serve(*flags, env=env)

    def test_the_tests_set_every_port_the_service_listens_on(self) -> None:
        """A new listening key must join LISTEN_KEYS, or tests would bind its default."""
        listening = {
            ".".join(path)
            for path, _, _ in leaf_keys()
            if path[-1].endswith("endpoint") and path != ("forward", "endpoint")
        }
        assert listening == set(LISTEN_KEYS.values())

    def test_an_unknown_environment_variable_is_warned_about_in_the_log(self) -> None:
        process, _ = self.start(env={"MCP_BREAKER_FORWARD_ENDPNT": f"{LOOPBACK}:1"})
        log = self.stop(process)
        assert (
            "WARNING processor.cli: environment variable MCP_BREAKER_FORWARD_ENDPNT: not a "
            "setting; ignored (did you mean MCP_BREAKER_FORWARD_ENDPOINT?)"
        ) in log
        assert "no next hop configured" in log  # the typo set nothing

    def stop(self, process: subprocess.Popen[str], status: int = 0) -> str:
        process.send_signal(signal.SIGTERM)
        _, log = process.communicate(timeout=60)
        assert process.returncode == status, log
        return log

    def test_sigterm_drains_the_queue_before_exiting(self) -> None:
        port = free_port()
        process, ports = self.start(
            "--forward-endpoint",
            f"{LOOPBACK}:{port}",
            "--set",
            "forward.shutdown_grace_s=30",
            "--set",
            "forward.retry.initial_interval_s=0.1",
        )
        spans = record_spans(40)
        assert export_grpc(f"{LOOPBACK}:{ports['grpc']}", spans) is SpanExportResult.SUCCESS
        collector = CaptureCollector(port)
        try:
            process.send_signal(signal.SIGTERM)
            collector.start()  # the next hop comes back during the grace period
            _, log = process.communicate(timeout=60)
        finally:
            collector.stop()
        assert process.returncode == 0
        assert "every accepted span was delivered" in log
        assert (
            "removing mcp.tool.arguments, mcp.tool.result from MCP spans before they are "
            "forwarded (forward.strip_attributes)"
        ) in log
        assert {s.span_id for s in collector.spans()} == span_ids(spans)

    def test_sigterm_says_what_it_could_not_deliver(self) -> None:
        port = free_port()  # nothing listens there, ever
        process, ports = self.start(
            "--forward-endpoint",
            f"{LOOPBACK}:{port}",
            "--set",
            "forward.shutdown_grace_s=0.5",
            "--log-level",
            "error",
        )
        assert (
            export_grpc(f"{LOOPBACK}:{ports['grpc']}", record_spans(40)) is SpanExportResult.SUCCESS
        )
        assert (
            export_grpc(f"{LOOPBACK}:{ports['grpc']}", record_spans(2)) is SpanExportResult.SUCCESS
        )
        log = self.stop(process, status=3)  # ExitStatus.UNDELIVERED, as documented
        assert (
            f"shutdown: 42 spans in 2 requests could not be delivered to {LOOPBACK}:{port} "
            "within 0.5s, and are lost (exit status 3)"
        ) in log

    def test_without_a_next_hop_the_log_says_spans_are_released(self) -> None:
        process, ports = self.start()
        try:
            status = urllib.request.urlopen(
                f"http://{LOOPBACK}:{ports['telemetry']}/readyz", timeout=10
            ).status
            assert status == 200
            assert (
                export_grpc(f"{LOOPBACK}:{ports['grpc']}", record_spans(3))
                is SpanExportResult.SUCCESS
            )
        finally:
            log = self.stop(process)
        assert "no next hop configured" in log and "released" in log

    def test_readyz_fails_while_the_next_hop_is_unreachable(self) -> None:
        process, ports = self.start("--forward-endpoint", f"{LOOPBACK}:{free_port()}")
        try:
            with pytest.raises(urllib.error.HTTPError) as unready:
                urllib.request.urlopen(f"http://{LOOPBACK}:{ports['telemetry']}/readyz", timeout=10)
            assert unready.value.code == 503
            assert b"not reachable" in unready.value.read()
            healthz = urllib.request.urlopen(f"http://{LOOPBACK}:{ports['telemetry']}/healthz")
            assert healthz.status == 200
        finally:
            self.stop(process)

    @pytest.mark.parametrize(
        ("key", "what"),
        [
            ("receivers.grpc.endpoint", "OTLP/gRPC receiver"),
            ("receivers.http.endpoint", "OTLP/HTTP receiver"),
            ("advisories.endpoint", "advisories"),
            ("telemetry.metrics_endpoint", "telemetry"),
        ],
    )
    def test_a_port_in_use_is_a_clear_startup_error(self, key: str, what: str) -> None:
        """It names what could not listen, where, the key and why; and, since no span
        was ever taken, nothing about delivery even with a next hop configured."""
        import socket

        with socket.socket() as taken:
            taken.bind((LOOPBACK, 0))
            taken.listen()
            port = taken.getsockname()[1]
            flags = [f"{name}={LOOPBACK}:0" for name in LISTEN_KEYS.values() if name != key]
            flags += [f"{key}={LOOPBACK}:{port}", f"forward.endpoint={LOOPBACK}:{free_port()}"]
            result = subprocess.run(
                [sys.executable, "-m", "processor", "serve"]
                + [arg for flag in flags for arg in ("--set", flag)],
                capture_output=True,
                text=True,
                timeout=60,
            )
        assert result.returncode == 1
        assert (
            f"cannot start: {what}: cannot listen on {LOOPBACK}:{port} (set by {key}): "
            "Address already in use"
        ) in result.stderr
        assert "deliver" not in result.stderr and "shutdown" not in result.stderr, result.stderr
