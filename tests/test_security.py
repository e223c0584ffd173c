"""No outsider steers the breaker: each attack of issue 14 through the running service.

Authenticated intake (tokens, mutual TLS) and tenants from identity; span times from the
future; names that would fill memory; idle connections; bodies that would hold the event
loop; forged log lines. Real gRPC and HTTP on loopback, the OpenTelemetry SDK's exporters
as the clients, the service in-process or as a process where the attack is on the process
(its descriptors, its memory, its log).
"""

from __future__ import annotations

import json
import resource
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.trace.export import SpanExportResult

from processor.advisories.v1 import advisories_pb2 as pb
from processor.receive import http as receive_http
from processor.request.otlp import SERVICE_NAME
from tests.support import (
    LOOP_THREAD,
    LOOPBACK,
    CaptureCollector,
    Decisions,
    ServiceThread,
    make_config,
    wait_until,
)
from tests.test_advisories_service import (
    Call,
    Client,
    Pki,
    harness_spans,
    new_turn,
    pki,  # noqa: F401 (a fixture)
)

TOKENS = "advisories.tokens=tokA=acme,tokB=globex"
# One run of the official mcp SDK, client and server processes (tests/fixtures/real-spans).
REAL_SDK_RUN = Path(__file__).parent / "fixtures" / "real-spans" / "mcp2-native.otlp.bin"
TOKEN_AUTH = "receivers.auth=token"
EXPORT = f"/{SERVICE_NAME}/Export"
NS = 1_000_000_000
FAR_FUTURE_NS = 17216481514400226216  # the end time that broke GetState (uint64, past int64)


@contextmanager
def running(*overrides: str, next_hop: CaptureCollector | None = None) -> Iterator[ServiceThread]:
    hop = [f"forward.endpoint={next_hop.endpoint}"] if next_hop else []
    service = ServiceThread(make_config(*hop, *overrides))
    try:
        yield service
    finally:
        service.stop()


def advisory_port(service: ServiceThread) -> int:
    return int(service.service.ports["advisories"])


def grpc_export(service: ServiceThread, token: str | None, spans: list[Any]) -> SpanExportResult:
    """The OpenTelemetry SDK's gRPC exporter, with the token as its headers carry it."""
    headers = {"authorization": f"Bearer {token}"} if token else None
    exporter = GrpcExporter(
        endpoint=service.grpc_endpoint, insecure=True, headers=headers, timeout=20
    )
    try:
        return exporter.export(spans)
    finally:
        exporter.shutdown()


def http_export(service: ServiceThread, token: str | None, spans: list[Any]) -> SpanExportResult:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    exporter = HttpExporter(endpoint=service.http_url, headers=headers, timeout=20)
    try:
        return exporter.export(spans)
    finally:
        exporter.shutdown()


def raw_export(
    target: str,
    request: ExportTraceServiceRequest,
    metadata: tuple[tuple[str, str], ...] = (),
    credentials: grpc.ChannelCredentials | None = None,
) -> ExportTraceServiceResponse:
    channel = (
        grpc.insecure_channel(target)
        if credentials is None
        else grpc.secure_channel(target, credentials)
    )
    with channel:
        call = channel.unary_unary(
            EXPORT,
            request_serializer=ExportTraceServiceRequest.SerializeToString,
            response_deserializer=ExportTraceServiceResponse.FromString,
        )
        response: ExportTraceServiceResponse = call(request, metadata=metadata, timeout=20)
        return response


def failing_call(
    index: int,
    *,
    tool: str = "payments__charge",
    server: str = "payments",
    turn: str = "t1",
    end_ns: int | None = None,
    tenant: str | None = None,
) -> ExportTraceServiceRequest:
    """One failing harness tool-call span, built by hand to carry what the SDK would refuse
    to write (an end time past int64, megabyte names)."""
    now = time.time_ns()
    span = Span(
        name="mcp.tool.call",
        trace_id=(0x5EC0 + index).to_bytes(16, "big"),
        span_id=(0x5EC1 + index).to_bytes(8, "big"),
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=now - NS,
        end_time_unix_nano=now if end_ns is None else end_ns,
    )
    attributes = {
        "mcp.tool.name": tool,
        "mcp.server.name": server,
        "mcp.tool.outcome": "failed",
        "mcp.tool.failure_class": "transport",
        "mcp.tool.error": "connection refused",
        "mcp.turn.id": turn,
    }
    for key, value in attributes.items():
        span.attributes.append(KeyValue(key=key, value=AnyValue(string_value=value)))
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_attributes = {"service.name": "harness-x", **({"tenant.id": tenant} if tenant else {})}
    for key, value in resource_attributes.items():
        resource_spans.resource.attributes.append(
            KeyValue(key=key, value=AnyValue(string_value=value))
        )
    resource_spans.scope_spans.add().spans.append(span)
    return request


def open_circuits(client: Client) -> list[tuple[str, str]]:
    return [
        (advisory.server, advisory.key)
        for advisory in client.state().advisories
        if advisory.state in (pb.STATE_OPEN, pb.STATE_FORCED_OPEN)
    ]


# --- authenticated intake ---------------------------------------------------------------------


def test_an_export_without_a_known_token_is_refused_and_nothing_is_read_or_sent() -> None:
    hop = CaptureCollector().start()
    try:
        with running(TOKENS, TOKEN_AUTH, next_hop=hop) as service:
            spans = harness_spans([Call(new_turn())], tenant="acme")
            assert grpc_export(service, None, spans) is SpanExportResult.FAILURE
            assert grpc_export(service, "tokWRONG", spans) is SpanExportResult.FAILURE
            assert http_export(service, None, spans) is SpanExportResult.FAILURE
            with pytest.raises(grpc.RpcError) as refused:
                raw_export(service.grpc_endpoint, failing_call(1))
            assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
            body = failing_call(2).SerializeToString()
            request = urllib.request.Request(
                service.http_url, body, {"Content-Type": "application/x-protobuf"}
            )
            with pytest.raises(urllib.error.HTTPError) as answered:
                urllib.request.urlopen(request, timeout=20)
            assert answered.value.code == 401
            assert answered.value.headers["WWW-Authenticate"].startswith("Bearer")
            refusals = service.metric(
                "mcp_breaker_receiver_requests_total", transport="grpc", outcome="unauthenticated"
            )
            assert refusals >= 3  # the SDK's two exports (no retry: not retryable) and ours
            assert service.metric("mcp_breaker_tool_calls_total") == 0
            # The token that is known is let in, and its spans are forwarded.
            assert grpc_export(service, "tokA", spans) is SpanExportResult.SUCCESS
            assert http_export(service, "tokB", spans) is SpanExportResult.SUCCESS
            wait_until(lambda: hop.span_count() == 2)
        assert hop.span_count() == 2  # nothing of the refused exports went on
    finally:
        hop.stop()


def test_spans_naming_another_tenant_change_nothing_for_that_tenant() -> None:
    """The issue's reproduction: three fake failing spans with tenant.id=globex, sent with
    acme's token, opened globex's payments server. Now the token decides the tenant."""
    with running(TOKENS, TOKEN_AUTH) as service:
        acme = Client(advisory_port(service), "tokA")
        globex = Client(advisory_port(service), "tokB")
        try:
            for index in range(3):
                request = failing_call(index, turn=new_turn(), tenant="globex")
                raw_export(service.grpc_endpoint, request, (("authorization", "Bearer tokA"),))
            wait_until(lambda: ("payments", "payments") in open_circuits(acme))
            assert open_circuits(globex) == []
            verdict = globex.check(server="payments", tool="payments__charge").verdict
            assert verdict == pb.VERDICT_ALLOW
            assert acme.check(server="payments", tool="payments__charge").verdict == (
                pb.VERDICT_DENY
            )
        finally:
            acme.close()
            globex.close()


def test_another_tenants_copy_of_a_span_neither_hides_nor_pairs_with_it() -> None:
    """A hostile sender replays a victim's span ids first, under its own token: the
    victim's spans are still read (not dropped as duplicates), and each tenant's
    circuits stand on its own spans alone."""
    with running(TOKENS, TOKEN_AUTH) as service:
        acme = Client(advisory_port(service), "tokA")
        globex = Client(advisory_port(service), "tokB")
        try:
            turns = [new_turn() for _ in range(3)]
            for token in ("tokB", "tokA"):  # the same trace and span ids, globex's first
                for index, turn in enumerate(turns):
                    request = failing_call(index, turn=turn)
                    raw_export(
                        service.grpc_endpoint, request, (("authorization", f"Bearer {token}"),)
                    )
            for client in (acme, globex):
                wait_until(lambda c=client: ("payments", "payments") in open_circuits(c))
            assert service.metric("mcp_breaker_duplicate_spans_total") == 0
            calls = {
                advisory.tenant: advisory.evidence.calls
                for client in (acme, globex)
                for advisory in client.state().advisories
                if advisory.scope == pb.SCOPE_SERVER
            }
            assert calls == {"acme": 3, "globex": 3}
        finally:
            acme.close()
            globex.close()


def test_another_tenants_server_halves_never_pair_with_a_tenants_client_halves() -> None:
    """The official mcp SDK's spans of one run (a capture): the client process's under
    acme's token, then the server process's under globex's, same trace and parent ids, as
    a sender that saw acme's trace context in its requests would send them. No call mixes
    the two: acme's calls are its client spans alone, globex's its server spans alone."""
    capture = ExportTraceServiceRequest.FromString(REAL_SDK_RUN.read_bytes())
    by_process = {
        next(a.value.string_value for a in r.resource.attributes if a.key == "service.name"): r
        for r in capture.resource_spans
    }
    sent = {"tokA": by_process["capture-mcp2-native-client"]}
    sent["tokB"] = by_process["capture-mcp2-native-server"]
    span_ids = {  # of the tool calls' spans (not the listings', nor the turn's)
        token: {
            span.span_id
            for scope in resource.scope_spans
            for span in scope.spans
            if "tools/call" in span.name
        }
        for token, resource in sent.items()
    }
    decisions = Decisions()
    service = ServiceThread(
        make_config(TOKENS, TOKEN_AUTH, "classify.pair_wait_s=0.2"), event_sinks=[decisions]
    )
    try:
        for token, resource in sent.items():
            request = ExportTraceServiceRequest(resource_spans=[resource])
            raw_export(service.grpc_endpoint, request, (("authorization", f"Bearer {token}"),))
        every_span = span_ids["tokA"] | span_ids["tokB"]
        wait_until(lambda: every_span <= {i for d in decisions.all() for i in d.call.span_ids})
        calls = 5  # the run's tool calls, each told once by each side alone
        told = {"acme": set(), "globex": set()}
        for decision in decisions.all():
            told[decision.call.tenant].add(frozenset(decision.call.span_ids))
        assert all(spans <= span_ids["tokA"] for spans in told["acme"])
        assert all(spans <= span_ids["tokB"] for spans in told["globex"])
        assert len(told["acme"]) == len(told["globex"]) == calls
    finally:
        service.stop()


def test_with_span_tenant_match_a_resource_naming_another_tenant_is_not_read() -> None:
    hop = CaptureCollector().start()
    try:
        with running(TOKENS, TOKEN_AUTH, "receivers.span_tenant=match", next_hop=hop) as service:
            acme = Client(advisory_port(service), "tokA")
            for index in range(3):
                request = failing_call(index, turn=new_turn(), tenant="globex")
                raw_export(service.grpc_endpoint, request, (("authorization", "Bearer tokA"),))
            wait_until(lambda: hop.span_count() == 3)  # forwarded all the same
            assert open_circuits(acme) == []
            mismatches = service.metric(
                "mcp_breaker_classification_errors_total", kind="tenant_mismatch"
            )
            assert mismatches == 3
            # Naming its own tenant (or none) is read as ever.
            for index in range(3, 6):
                request = failing_call(index, turn=new_turn(), tenant="acme")
                raw_export(service.grpc_endpoint, request, (("authorization", "Bearer tokA"),))
            wait_until(lambda: ("payments", "payments") in open_circuits(acme))
            acme.close()
    finally:
        hop.stop()


def test_a_tokens_file_is_shared_by_both_ports_and_read_again_when_it_changes(
    tmp_path: Path,
) -> None:
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("tokFile=filetenant\n")
    settings = (TOKEN_AUTH, f"auth.tokens_file={tokens_file}", "auth.tokens_reload_s=0.1")
    with running(*settings) as service:
        spans = harness_spans([Call(new_turn())])
        assert grpc_export(service, "tokFile", spans) is SpanExportResult.SUCCESS
        client = Client(advisory_port(service), "tokFile")
        assert client.state().advisories is not None  # the advisory port takes it too
        client.close()
        tokens_file.write_text("tokRotated=filetenant\n")
        wait_until(lambda: grpc_export(service, "tokFile", spans) is SpanExportResult.FAILURE)
        assert grpc_export(service, "tokRotated", spans) is SpanExportResult.SUCCESS


def test_mutual_tls_names_the_tenant_by_the_client_certificate(pki: Pki, tmp_path: Path) -> None:  # noqa: F811
    settings = (
        "receivers.auth=certificate",
        f"receivers.tls.cert_file={pki.server_cert}",
        f"receivers.tls.key_file={pki.server_key}",
        f"receivers.tls.client_ca_file={pki.ca_file}",
    )
    with running(*settings) as service:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=pki.ca,
            private_key=pki.client_key,
            certificate_chain=pki.client_cert,
        )
        for index in range(3):
            request = failing_call(index, turn=new_turn(), tenant="someone-else")
            raw_export(service.grpc_endpoint, request, credentials=credentials)
        # Over HTTPS too, with the same certificate.
        cert, key = tmp_path / "client.pem", tmp_path / "client.key"
        cert.write_bytes(pki.client_cert)
        key.write_bytes(pki.client_key)
        context = ssl.create_default_context(cadata=pki.ca.decode())
        context.load_cert_chain(cert, key)
        url = service.http_url.replace("http://", "https://")
        body = failing_call(9, turn=new_turn(), tenant="someone-else").SerializeToString()
        request = urllib.request.Request(url, body, {"Content-Type": "application/x-protobuf"})
        assert urllib.request.urlopen(request, timeout=20, context=context).status == 200
        # The certificate's common name is the tenant: its circuits are harness-a's.
        advisories = service.service.advisories
        assert advisories is not None
        wait_until(lambda: len(advisories.hub.in_force()) > 0)
        assert {advisory.tenant for advisory in advisories.hub.in_force()} == {"harness-a"}
        # A client from another CA cannot even connect.
        rogue = grpc.ssl_channel_credentials(
            root_certificates=pki.ca, private_key=pki.rogue_key, certificate_chain=pki.rogue_cert
        )
        with pytest.raises(grpc.RpcError) as refused:
            raw_export(service.grpc_endpoint, failing_call(10), credentials=rogue)
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE


def test_without_authentication_the_start_up_log_says_anyone_can_steer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with running() as service:
        port = service.service.ports["otlp_grpc"]
    assert "no authentication (receivers.auth: none)" in caplog.text
    assert str(port) in caplog.text


# --- time from the future ---------------------------------------------------------------------


def test_a_span_from_the_far_future_leaves_the_advisory_api_working() -> None:
    with running() as service:
        client = Client(advisory_port(service))
        try:
            for index in range(3):
                request = failing_call(index, turn=new_turn(), end_ns=FAR_FUTURE_NS)
                raw_export(service.grpc_endpoint, request)
            wait_until(lambda: ("payments", "payments") in open_circuits(client))
            now_ns = time.time_ns()
            for advisory in client.state().advisories:
                # Every time on the wire fits its type and is bounded by our clock.
                assert advisory.expires_unix_nano < now_ns + 4 * 3600 * NS
                assert advisory.retry_after_seconds <= 3600 + 300 + 60
            assert client.check(server="payments", tool="payments__charge").verdict == (
                pb.VERDICT_DENY
            )
            stream = client.open_stream()
            first = next(stream)
            assert first.WhichOneof("kind") == "snapshot"
            assert any(a.server == "payments" for a in first.snapshot.advisories)
            stream.cancel()
            clamped = service.metric(
                "mcp_breaker_classification_errors_total", kind="span_time_clamped"
            )
            assert clamped == 3
        finally:
            client.close()


# --- names that would fill memory -------------------------------------------------------------


def test_long_names_are_cut_before_they_are_kept_labelled_or_sent() -> None:
    long_tool = "payments__" + "x" * 20_000
    with running() as service:
        client = Client(advisory_port(service))
        try:
            for index in range(3):
                request = failing_call(index, tool=long_tool, turn="t" * 20_000 + str(index))
                raw_export(service.grpc_endpoint, request)
            wait_until(lambda: len(client.state().advisories) > 0)
            for advisory in client.state().advisories:
                assert len(advisory.tool) <= 256 and len(advisory.turn) <= 256
                assert len(advisory.key) <= 3 * 256 + 4
        finally:
            client.close()
        cut = service.metric("mcp_breaker_classification_errors_total", kind="name_cut")
        assert cut == 6  # a tool name and a turn name for each call
        for store in ("circuits", "turns", "seen_spans", "advisories"):
            held = service.metric("mcp_breaker_store_entries", store=store)
            cap = service.metric("mcp_breaker_store_capacity_entries", store=store)
            assert 0 < held <= cap, store


# --- the process: descriptors, memory, the log ------------------------------------------------


def _limit_open_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))  # as the reproduction


@contextmanager
def serve_process(*flags: str, limit_files: bool = False) -> Iterator[tuple[Any, dict[str, int]]]:
    from tests.support import LISTEN_KEYS, answers, free_port, terminate

    ports = {name: free_port() for name in LISTEN_KEYS}
    listen = [f"{LISTEN_KEYS[name]}={LOOPBACK}:{port}" for name, port in ports.items()]
    process = subprocess.Popen(
        [sys.executable, "-m", "processor", "serve"]
        + [arg for flag in (*listen, *flags) for arg in ("--set", flag)],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_limit_open_files if limit_files else None,
    )
    try:
        url = f"http://{LOOPBACK}:{ports['telemetry']}/healthz"
        wait_until(lambda: process.poll() is not None or answers(url), what="service up")
        assert process.poll() is None, "serve exited at start"
        yield process, ports
    finally:
        terminate(process)


def _timed_get(url: str) -> float:
    started = time.monotonic()
    urllib.request.urlopen(url, timeout=30).read()
    return time.monotonic() - started


def test_idle_connections_leave_export_and_healthz_answering() -> None:
    """1,100 idle TCP connections against a process limited to 1,024 open files (its hard
    limit too, so it cannot raise it): HTTP and gRPC export and /healthz still answer."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    with serve_process(limit_files=True) as (process, ports):
        idle: list[socket.socket] = []
        try:
            for _ in range(1100):
                idle.append(socket.create_connection((LOOPBACK, ports["http"]), timeout=10))
            time.sleep(0.5)  # let the service accept what it will
            healthz = _timed_get(f"http://{LOOPBACK}:{ports['telemetry']}/healthz")
            spans = harness_spans([Call(new_turn())])
            started = time.monotonic()
            http = HttpExporter(endpoint=f"http://{LOOPBACK}:{ports['http']}/v1/traces", timeout=20)
            assert http.export(spans) is SpanExportResult.SUCCESS
            http.shutdown()
            http_s = time.monotonic() - started
            started = time.monotonic()
            grpc_exporter = GrpcExporter(
                endpoint=f"{LOOPBACK}:{ports['grpc']}", insecure=True, timeout=20
            )
            assert grpc_exporter.export(spans) is SpanExportResult.SUCCESS
            grpc_exporter.shutdown()
            grpc_s = time.monotonic() - started
            metrics = urllib.request.urlopen(
                f"http://{LOOPBACK}:{ports['telemetry']}/metrics", timeout=30
            ).read()
            print(f"with 1100 idle connections: /healthz {healthz * 1000:.0f} ms, HTTP export "
                  f"{http_s * 1000:.0f} ms, gRPC export {grpc_s * 1000:.0f} ms")  # fmt: skip
            series = 'mcp_breaker_receiver_connections_evicted_total{transport="http"}'
            evicted = next(
                float(line.split()[-1])
                for line in metrics.decode().splitlines()
                if line.startswith(series)
            )
            assert evicted >= 1100 + 1 - 512  # quiet ones made room, the exporter's was kept
        finally:
            for sock in idle:
                sock.close()
        assert process.poll() is None
    _, log = process.communicate()
    assert "Too many open files" not in log


def test_forged_newlines_and_escapes_in_names_reach_the_log_escaped() -> None:
    forged = "payments__charge\n2026-01-01 00:00:00,000 ERROR   forged: \x1b[31mowned"
    with serve_process() as (process, ports):
        turn = new_turn()
        for index in range(2):  # the second is a dead call: logged with the tool's name
            request = failing_call(index, tool=forged, turn=turn)
            raw_export(f"{LOOPBACK}:{ports['grpc']}", request)
        time.sleep(1.0)
    _, log = process.communicate()
    assert "dead call to payments/payments__charge\\n2026-01-01" in log
    assert not any(line.startswith("2026-01-01 00:00:00,000 ERROR") for line in log.splitlines())
    assert "\x1b" not in log


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_twenty_thousand_character_names_stay_under_a_memory_cap() -> None:
    """The issue's attack: 12,000 calls, each with a new 20,000-character tool, server and
    turn name, took the process from 57 to 1,517 MB. Names are now cut at 256 characters."""
    calls, per_request = 12_000, 50
    with serve_process() as (process, ports):
        target = f"{LOOPBACK}:{ports['grpc']}"
        raw_export(target, failing_call(0))
        before = _rss_bytes(process.pid)
        with grpc.insecure_channel(target) as channel:
            export = channel.unary_unary(
                EXPORT,
                request_serializer=ExportTraceServiceRequest.SerializeToString,
                response_deserializer=ExportTraceServiceResponse.FromString,
            )
            for first in range(1, calls, per_request):
                request = ExportTraceServiceRequest()
                for index in range(first, first + per_request):
                    name = f"{index:06d}" + "n" * 20_000
                    one = failing_call(index, tool=f"s{name}__t{name}", server=name, turn=name)
                    request.resource_spans.extend(one.resource_spans)
                export(request, timeout=60)
        grown = _rss_bytes(process.pid) - before
        print(f"RSS grew by {grown / 2**20:.0f} MB over {calls} calls with 20,000-char names")
        assert grown < 400 * 2**20  # was 1,460 MB for the same attack


# --- a loop nobody can stall ------------------------------------------------------------------
# A big request is opened in a worker thread, so the event loop answers everyone else
# meanwhile. Each test holds that opening mid-way (a gate in its place) and asks /healthz:
# opened on the loop, the gate would hold the loop too, and /healthz would not answer.
# How long the loop is held in fact is bench/stall.py's to measure (docs/security.md).

HELD_S = 60.0  # a bound on waiting, never a measurement


class Gate:
    """In place of a function: holds each caller until released, and says who called."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.entered = threading.Event()
        self.released = threading.Event()
        self.callers: list[str] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.callers.append(threading.current_thread().name)
        self.entered.set()
        self.released.wait(HELD_S)
        return self.function(*args, **kwargs)


def answered_while_held(gate: Gate, send: Callable[[], object], healthz: str) -> object:
    """Send in a thread; while the gate holds it, /healthz must answer. What send gave."""
    outcome: list[object] = []
    sender = threading.Thread(target=lambda: outcome.append(send()), name="sender")
    sender.start()
    try:
        assert gate.entered.wait(HELD_S), "the request was never opened"
        with urllib.request.urlopen(healthz, timeout=HELD_S) as response:
            assert response.status == 200  # the loop answers while the request is held
    finally:
        gate.released.set()
        sender.join(HELD_S)
    assert outcome, "the request was not answered"
    assert LOOP_THREAD not in gate.callers, gate.callers
    return outcome[0]


def test_a_large_body_with_a_million_attributes_does_not_stall_other_senders(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 9 MB request of one MCP span whose resource holds a million attributes: opened
    off the event loop, and its span decided (only the resource's service and tenant
    names are read of the million)."""
    request = failing_call(1)
    attributes = request.resource_spans[0].resource.attributes
    attributes.extend(
        KeyValue(key=f"k{i}", value=AnyValue(string_value="v")) for i in range(1_000_000)
    )
    assert len(request.SerializeToString()) > 9_000_000
    with running("receivers.grpc.max_recv_msg_bytes=33554432") as service:
        stage = service.service.stage
        gate = Gate(stage.open)
        monkeypatch.setattr(stage, "open", gate)
        healthz = f"{service.telemetry_url}/healthz"
        response = answered_while_held(
            gate, lambda: raw_export(service.grpc_endpoint, request), healthz
        )
        assert isinstance(response, ExportTraceServiceResponse)
        assert response.partial_success.rejected_spans == 0
        labels = {"server": "payments", "tool": "payments__charge"}
        failed = {**labels, "outcome": "failed", "failure_class": "transport"}
        wait_until(
            lambda: service.metric("mcp_breaker_tool_calls_total", **failed) == 1,
            what="the call decided",
        )


def test_an_unreadable_mcp_request_is_forwarded_as_a_plain_one_would_be() -> None:
    """Nesting past the decoder's limit: the same answer with or without the bytes 'mcp'."""
    hop = CaptureCollector().start()
    try:
        with running(next_hop=hop) as service:
            for name in ("plain step", "mcp.tool.call"):
                request = failing_call(len(name))
                span = request.resource_spans[0].scope_spans[0].spans[0]
                span.name = name
                if name == "plain step":
                    del span.attributes[:]  # no byte "mcp" anywhere: the pass-through path
                value = span.attributes.add(key="deep").value
                for _ in range(40):
                    value = value.kvlist_value.values.add(key="k").value
                value.string_value = "x"
                response = raw_export(service.grpc_endpoint, request)
                assert response.partial_success.rejected_spans == 0
            unreadable = service.metric("mcp_breaker_stage_requests_total", path="unreadable")
            assert unreadable == 1
            assert service.metric("mcp_breaker_stage_requests_total", path="passthrough") == 1
            # Both went on as received; this next hop's decoder refuses both alike.
            wait_until(lambda: len(hop.refused) == 2)
    finally:
        hop.stop()


def test_a_client_disconnecting_mid_body_is_not_a_traceback() -> None:
    with serve_process() as (process, ports):
        for _ in range(200):
            with socket.create_connection((LOOPBACK, ports["http"]), timeout=10) as sock:
                sock.sendall(
                    b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Type: application/x-protobuf\r\nContent-Length: 100000\r\n\r\n"
                    + b"\x0a"
                    * 100
                )
        healthz = f"http://{LOOPBACK}:{ports['telemetry']}/healthz"
        assert _timed_get(healthz) < 30
    _, log = process.communicate()
    assert "Traceback" not in log
    assert "Error handling request" not in log


def test_a_token_in_a_request_aiohttp_cannot_parse_is_not_logged() -> None:
    """A header with a control character, and a header line over aiohttp's limit: both
    carry a sender's token, and aiohttp's own error quotes the raw bytes."""
    token = "tokA-aaaaaaaa"
    with serve_process() as (process, ports):
        for request in (
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + token.encode()
            + b"\x01\r\nContent-Length: 0\r\n\r\n",
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + token.encode()
            + b"A" * 9000
            + b"\r\n\r\n",
        ):
            with socket.create_connection((LOOPBACK, ports["http"]), timeout=10) as sock:
                sock.sendall(request)
                assert b" 400 " in sock.recv(4096).split(b"\r\n", 1)[0]
    _, log = process.communicate()
    assert token not in log
    assert "Traceback" not in log
    assert log.count("unparsable HTTP request from 127.0.0.1") == 2, log


def test_json_body_of_many_spans_is_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 100,000-span OTLP/JSON body is decoded off the event loop, and taken in whole."""
    spans = [
        {
            "traceId": f"{index + 1:032x}",
            "spanId": f"{index + 1:016x}",
            "name": f"step {index}",
            "startTimeUnixNano": "1",
            "endTimeUnixNano": "2",
        }
        for index in range(100_000)
    ]
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()
    with running() as service:
        gate = Gate(receive_http.request_from_json)
        monkeypatch.setattr(receive_http, "request_from_json", gate)
        json_type = {"Content-Type": "application/json"}
        request = urllib.request.Request(service.http_url, body, json_type)

        def send() -> int:
            with urllib.request.urlopen(request, timeout=HELD_S) as response:
                return int(response.status)

        assert answered_while_held(gate, send, f"{service.telemetry_url}/healthz") == 200
        accepted = service.metric("mcp_breaker_receiver_accepted_spans_total", transport="http")
        assert accepted == 100_000
