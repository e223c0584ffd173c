"""HTTP/2 abuse against the running service's gRPC ports, with a raw HTTP/2 client (h2).

Rapid reset (CVE-2023-44487: a stream opened and reset at once, thousands a second on one
connection) ends in a GOAWAY while a well-behaved sender's exports keep succeeding; a
flood of connections that only send the preface, past the open-files limit of a process
limited to 1,024, leaves a sender served: the quietest connections make room for it.
"""

from __future__ import annotations

import multiprocessing
import resource
import socket
import statistics
import threading
import time
import urllib.request
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from processor.receive.h2frames import ENHANCE_YOUR_CALM
from processor.request.otlp import SERVICE_NAME
from tests.support import LOOPBACK, wait_until
from tests.test_advisories_service import Call, Client, harness_spans, new_turn
from tests.test_security import running, serve_process

PAIRS = 100_000  # HEADERS + RST_STREAM pairs of the probe that found the hole
FLUSH_EVERY = 100
ANSWER_WAIT_S = 60.0  # a bound on waiting for the server's answer, never a measurement
BASELINE_EXPORTS = 10  # the sender's exports before the attack: its normal latency
FLOOD = 1100  # preface-only connections, against 1,024 open files
HEADERS = [
    (":method", "POST"),
    (":scheme", "http"),
    (":path", f"/{SERVICE_NAME}/Export"),
    (":authority", "mcp-breaker"),
    ("content-type", "application/grpc"),
    ("te", "trailers"),
]


@dataclass
class Burst:
    sent: int = 0
    goaway: h2.events.ConnectionTerminated | None = None
    closed: bool = False


def rapid_reset(port: int, pairs: int = PAIRS) -> Burst:
    """Opens and resets ``pairs`` streams on one connection, as fast as it can write,
    until the server says GOAWAY or closes the connection."""
    burst = Burst()
    sock = socket.create_connection((LOOPBACK, port), timeout=30)
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    try:
        sock.sendall(connection.data_to_send())
        while burst.sent < pairs and burst.goaway is None and not burst.closed:
            for _ in range(FLUSH_EVERY):
                stream = connection.get_next_available_stream_id()
                connection.send_headers(stream, HEADERS)
                connection.reset_stream(stream)
            burst.sent += FLUSH_EVERY
            sock.sendall(connection.data_to_send())
            _read_what_came(sock, connection, burst)
        # On a loaded machine the gate may not have read all of it yet: what the kernel
        # buffered while gRPC's backpressure paused the gate's reading is still to come.
        # Its answer to what it reads is the one that counts.
        waited_until = time.monotonic() + ANSWER_WAIT_S
        while burst.goaway is None and not burst.closed and time.monotonic() < waited_until:
            time.sleep(0.05)
            _read_what_came(sock, connection, burst)
    except (BrokenPipeError, ConnectionResetError):
        burst.closed = True
    except h2.exceptions.ProtocolError:  # a stream refused after the GOAWAY: it ended
        burst.closed = True
    finally:
        sock.close()
    return burst


def _read_what_came(
    sock: socket.socket, connection: h2.connection.H2Connection, burst: Burst
) -> None:
    sock.setblocking(False)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                burst.closed = True
                return
            for event in connection.receive_data(data):
                if isinstance(event, h2.events.ConnectionTerminated):
                    burst.goaway = event
    except BlockingIOError:
        pass
    finally:
        sock.setblocking(True)


@dataclass
class Sender:
    """A well-behaved sender: the OpenTelemetry SDK's gRPC exporter, exporting in a loop;
    the time of each export, and whether the attack was on when it began."""

    endpoint: str
    results: list[SpanExportResult] = field(default_factory=list)
    seconds: list[tuple[bool, float]] = field(default_factory=list)
    attacked: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        exporter = GrpcExporter(endpoint=self.endpoint, insecure=True, timeout=20)
        try:
            while not self.stop.is_set() or self.during() < 3:
                started, attack_on = time.monotonic(), self.attacked.is_set()
                self.results.append(exporter.export(harness_spans([Call(new_turn())])))
                self.seconds.append((attack_on, time.monotonic() - started))
        finally:
            exporter.shutdown()

    def during(self, attack_on: bool = True) -> int:
        return sum(on is attack_on for on, _ in self.seconds)

    def median_ms(self, attack_on: bool) -> float:
        return statistics.median(s for on, s in self.seconds if on is attack_on) * 1000


def _started() -> bool:
    return True


def _attack(port: int) -> tuple[int, int | None, bool]:
    """A rapid-reset burst from a process of its own (so its Python does not take the
    sender's time): pairs sent, the GOAWAY's code, closed."""
    burst = rapid_reset(port)
    return burst.sent, burst.goaway.error_code if burst.goaway else None, burst.closed


def test_rapid_reset_ends_in_a_goaway_while_a_sender_gets_its_exports_through() -> None:
    """Three bursts of 100,000 pairs, each from its own process, while the SDK's exporter
    exports in a loop: every burst is cut off, every export succeeds; its time during the
    attack is printed as a ratio to its time before it (never asserted: a shared machine)."""
    with running() as service:
        port = int(service.service.ports["otlp_grpc"])
        sender = Sender(service.grpc_endpoint)
        thread = threading.Thread(target=sender.run)
        thread.start()
        spawn = multiprocessing.get_context("spawn")
        try:
            wait_until(lambda: sender.during(False) >= BASELINE_EXPORTS, what="the baseline")
            with ProcessPoolExecutor(1, mp_context=spawn) as pool:
                pool.submit(_started).result(ANSWER_WAIT_S)  # the worker up, this module loaded
                sender.attacked.set()
                bursts = [pool.submit(_attack, port).result(ANSWER_WAIT_S * 2) for _ in range(3)]
        finally:
            sender.stop.set()
            thread.join(60)
        for sent, code, closed in bursts:
            assert code is not None or closed, (sent, code, closed)
            if code is not None:
                assert code == ENHANCE_YOUR_CALM
        assert sender.results and set(sender.results) == {SpanExportResult.SUCCESS}
        goaways = service.metric(
            "mcp_breaker_receiver_goaways_total", transport="grpc", reason="rapid_reset"
        )
        assert goaways == 3
        alone, attacked = sender.median_ms(False), sender.median_ms(True)
        print(f"rapid reset x3: cut after {[b[0] for b in bursts]} pairs; the sender's "
              f"{len(sender.results)} exports all succeeded, median {attacked:.1f} ms "
              f"during the attack against {alone:.1f} ms before it "
              f"(x{attacked / alone:.2f})")  # fmt: skip


def test_rapid_reset_on_the_advisory_port_ends_in_a_goaway_while_getstate_answers() -> None:
    with running() as service:
        port = int(service.service.ports["advisories"])
        client = Client(port)
        answered: list[int] = []
        done = threading.Event()

        def ask() -> None:
            while not done.is_set() or len(answered) < 3:
                answered.append(len(client.state().advisories))

        thread = threading.Thread(target=ask)
        thread.start()
        try:
            burst = rapid_reset(port)
        finally:
            done.set()
            thread.join(60)
            client.close()
        assert burst.goaway is not None or burst.closed
        assert len(answered) >= 3  # every GetState meanwhile answered (an error would raise)
        goaways = service.metric(
            "mcp_breaker_receiver_goaways_total", transport="advisories", reason="rapid_reset"
        )
        assert goaways == 1


def _preface_connection(port: int) -> socket.socket:
    sock = socket.create_connection((LOOPBACK, port), timeout=10)
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    sock.sendall(connection.data_to_send())  # the preface and SETTINGS, then nothing
    return sock


def _export_seconds(port: int) -> float:
    exporter = GrpcExporter(endpoint=f"{LOOPBACK}:{port}", insecure=True, timeout=20)
    try:
        started = time.monotonic()
        assert exporter.export(harness_spans([Call(new_turn())])) is SpanExportResult.SUCCESS
        return time.monotonic() - started
    finally:
        exporter.shutdown()


def _sample(text: str, series: str) -> float:
    return next(float(line.split()[-1]) for line in text.splitlines() if line.startswith(series))


def test_a_preface_flood_past_the_file_limit_leaves_a_sender_served() -> None:
    """1,100 connections that send the HTTP/2 preface and nothing more, against a process
    limited to 1,024 open files (its hard limit too): a gRPC export, an HTTP export and
    /healthz still answer, because the gate closes the quietest connection to make room."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    with serve_process(limit_files=True) as (process, ports):
        alone = [_export_seconds(ports["grpc"]) for _ in range(3)]
        flood: list[socket.socket] = []
        try:
            for _ in range(FLOOD):
                flood.append(_preface_connection(ports["grpc"]))
            time.sleep(0.5)  # let the service accept what it will
            attacked = [_export_seconds(ports["grpc"]) for _ in range(3)]
            healthz = f"http://{LOOPBACK}:{ports['telemetry']}/healthz"
            assert urllib.request.urlopen(healthz, timeout=30).status == 200
            metrics = (
                urllib.request.urlopen(
                    f"http://{LOOPBACK}:{ports['telemetry']}/metrics", timeout=30
                )
                .read()
                .decode()
            )
        finally:
            for sock in flood:
                sock.close()
        held = _sample(metrics, 'mcp_breaker_receiver_connections{transport="grpc"}')
        evicted = _sample(
            metrics, 'mcp_breaker_receiver_connections_evicted_total{transport="grpc"}'
        )
        assert 0 < held < FLOOD  # capped under the file limit
        refused = _sample(
            metrics, 'mcp_breaker_receiver_connections_refused_total{transport="grpc"}'
        )
        # What did not fit was made room for, never turned away: the exporters got in.
        assert evicted >= FLOOD - held and refused == 0
        ratio = statistics.median(attacked) / statistics.median(alone)
        print(f"{FLOOD} preface-only connections under 1,024 open files: gRPC export "
              f"{statistics.median(attacked) * 1000:.1f} ms against "
              f"{statistics.median(alone) * 1000:.1f} ms alone (x{ratio:.2f}); "
              f"{held:.0f} held, {evicted:.0f} evicted")  # fmt: skip
        assert process.poll() is None
    _, log = process.communicate()
    assert "Too many open files" not in log
