"""``AdvisoryClient`` against the real service (``ServiceThread``), over real gRPC.

Failures are sent as the OpenTelemetry SDK writes them (``record_tool_call``) through its
OTLP exporter; the advisories they raise come back over the ``Subscribe`` stream. Broken
networks are made by a TCP proxy between client and service that can cut every
connection, hold new ones off, freeze traffic, or point at another service.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from mcp_breaker_client import AdvisoryClient, ClientConfig, Decision, ReconnectPolicy, TlsConfig
from mcp_breaker_client.tracing import record_tool_call
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from processor.advisories.v1 import advisories_pb2 as pb
from tests.sdk import RESOURCE, export_grpc
from tests.support import LOOPBACK, ServiceThread, make_config, wait_until

HARNESS = "subscriber-tests"
SERVER, TOOL = "playwright", "browser_navigate"
ARGUMENTS = {"url": "https://artifacts.example.test/run/1"}
CLOSED_UPSTREAM = "upstream MCP session is closed (connect 127.0.0.1:9: connection refused)"
# Quick to reconnect; a Check may take its time (on a loaded machine, 1 s is not enough):
# the deadline is a bound on waiting here, and only the fail-open test wants it short.
FAST = ClientConfig(reconnect=ReconnectPolicy(initial_s=0.05, max_s=0.5), check_timeout_s=30)
QUICK_HEARTBEATS = "advisories.heartbeat_s=0.2"


def failing_calls(*turns: str, tenant: str = "") -> list[ReadableSpan]:
    """One failed ``browser_navigate`` per turn, as the harness records it."""
    memory = InMemorySpanExporter()
    attributes = {"service.name": HARNESS, **({"tenant.id": tenant} if tenant else {})}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("harness")
    for turn in turns:
        with record_tool_call(
            tracer, tool=TOOL, server=SERVER, turn_id=turn, round_number=1, arguments=ARGUMENTS
        ) as call:
            call.failed(CLOSED_UPSTREAM, is_error=True)
    provider.shutdown()
    return list(memory.get_finished_spans())


def refuses(client: AdvisoryClient, turn: str) -> bool:
    return client.check(turn, SERVER, TOOL, ARGUMENTS).refused


class TcpProxy:
    """A loopback TCP relay to ``target`` that a test can break in the ways networks do."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._listener = socket.create_server((LOOPBACK, 0))
        self.port = self._listener.getsockname()[1]
        self._held = False
        self._flowing = threading.Event()
        self._flowing.set()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def cut(self, *, hold: bool) -> None:
        """Close every connection; with ``hold``, refuse new ones until ``release``."""
        self._held = hold
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _close(sock)

    def release(self) -> None:
        self._held = False

    def retarget(self, target: str) -> None:
        self.target = target

    def freeze(self) -> None:
        """Connections stay open but nothing crosses them (a silently dead peer)."""
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._listener.close()
        self.cut(hold=True)

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            if self._held:
                _close(downstream)
                continue
            host, _, port = self.target.rpartition(":")
            try:
                upstream = socket.create_connection((host, int(port)), timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(downstream)
                continue
            with self._lock:
                self._sockets += [downstream, upstream]
            for source, sink in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self._flowing.wait()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in recv, as close() may not
    sock.close()


@pytest.fixture
def services() -> Iterator[Callable[..., ServiceThread]]:
    started: list[ServiceThread] = []

    def start(*overrides: str) -> ServiceThread:
        service = ServiceThread(make_config(QUICK_HEARTBEATS, *overrides))
        started.append(service)
        return service

    yield start
    for service in started:
        if service.service._started:
            service.stop()


@pytest.fixture
def clients() -> Iterator[Callable[..., AdvisoryClient]]:
    made: list[AdvisoryClient] = []

    def make(target: str, **kwargs: Any) -> AdvisoryClient:
        kwargs.setdefault("harness", HARNESS)
        kwargs.setdefault("config", FAST)
        client = AdvisoryClient(target, **kwargs)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def advisory_port(service: ServiceThread) -> str:
    return f"{LOOPBACK}:{service.service.ports['advisories']}"


def hub_seq(service: ServiceThread) -> int:
    advisories = service.service.advisories
    assert advisories is not None
    return advisories.hub.seq


def test_a_snapshot_first_then_each_change_and_check_agrees(
    services: Callable[..., ServiceThread], clients: Callable[..., AdvisoryClient]
) -> None:
    service = services()
    export_grpc(service.grpc_endpoint, failing_calls("turn-before"))
    wait_until(lambda: hub_seq(service) >= 1, what="the first advisory")

    client = clients(advisory_port(service))
    assert client.wait_until_synced(20)
    assert client.stats.snapshots == 1 and refuses(client, "turn-before")  # from the snapshot
    (held,) = client.advisories()
    assert held.scope == pb.SCOPE_TURN_TOOL and held.state == pb.STATE_TURN_BLOCKED
    assert "unavailable" in held.message and "upstream MCP session is closed" in held.message

    export_grpc(service.grpc_endpoint, failing_calls("turn-after"))
    wait_until(lambda: refuses(client, "turn-after"), what="the change")
    assert client.stats.changes >= 1 and client.stats.snapshots == 1
    assert not refuses(client, "a third turn")
    assert client.position == (service.service.advisories.hub.epoch, hub_seq(service))

    remote = client.check_remote("turn-after", SERVER, TOOL, ARGUMENTS)
    assert remote.decision is Decision.DENY and remote.answered
    assert remote.advisory is not None and remote.advisory.id == held.id.replace(
        "turn-before", "turn-after"
    )
    allowed = client.check_remote("a third turn", SERVER, TOOL, ARGUMENTS)
    assert allowed.decision is Decision.ALLOW and allowed.answered


def test_after_a_broken_connection_it_resumes_with_exactly_what_it_missed(
    services: Callable[..., ServiceThread], clients: Callable[..., AdvisoryClient]
) -> None:
    service = services()
    proxy = TcpProxy(advisory_port(service))
    try:
        client = clients(proxy.endpoint)
        assert client.wait_until_synced(20)
        proxy.cut(hold=True)
        wait_until(lambda: not client.synced, what="the client to notice")

        seq = hub_seq(service)
        export_grpc(service.grpc_endpoint, failing_calls("turn-while-away"))
        wait_until(lambda: hub_seq(service) > seq, what="a change while the client is away")
        assert not refuses(client, "turn-while-away")

        proxy.release()
        wait_until(lambda: refuses(client, "turn-while-away"), what="the missed change")
        stats = client.stats
        assert (stats.snapshots, stats.resumed, stats.resyncs) == (1, 1, 0)
        assert stats.broken >= 1
    finally:
        proxy.close()


def test_a_restarted_service_cannot_resume_the_stream_so_the_mirror_is_replaced(
    services: Callable[..., ServiceThread], clients: Callable[..., AdvisoryClient]
) -> None:
    before = services()
    export_grpc(before.grpc_endpoint, failing_calls("turn-1"))
    wait_until(lambda: hub_seq(before) >= 1)
    proxy = TcpProxy(advisory_port(before))
    try:
        client = clients(proxy.endpoint)
        assert client.wait_until_synced(20) and refuses(client, "turn-1")

        after = services()  # another epoch, nothing in force
        proxy.cut(hold=True)
        proxy.retarget(advisory_port(after))
        proxy.release()
        wait_until(lambda: client.stats.resyncs == 1, what="the resync snapshot")
        assert not refuses(client, "turn-1") and client.advisories() == []
        assert client.position[0] == after.service.advisories.hub.epoch
    finally:
        proxy.close()


def test_a_subscriber_cut_off_for_falling_behind_comes_back_with_a_fresh_snapshot(
    services: Callable[..., ServiceThread], clients: Callable[..., AdvisoryClient]
) -> None:
    service = services("advisories.subscriber_queue=1")
    client = clients(advisory_port(service))
    assert client.wait_until_synced(20)

    # Three advisories from one request are published before the stream can send any.
    turns = ("turn-a", "turn-b", "turn-c")
    export_grpc(service.grpc_endpoint, failing_calls(*turns))
    wait_until(lambda: all(refuses(client, t) for t in turns), what="all three advisories")
    assert client.stats.cut_off == 1
    assert client.stats.snapshots == 2  # the first, and the fresh one after the cut-off
    assert service.service.advisories.stats.cut_off == 1


def test_a_silent_stream_is_abandoned_and_subscribed_again(
    services: Callable[..., ServiceThread], clients: Callable[..., AdvisoryClient]
) -> None:
    service = services()
    proxy = TcpProxy(advisory_port(service))
    try:
        config = ClientConfig(
            reconnect=FAST.reconnect, idle_timeout_s=1.0, check_timeout_s=FAST.check_timeout_s
        )
        client = clients(proxy.endpoint, config=config)
        assert client.wait_until_synced(20)
        proxy.freeze()  # no heartbeats get through, and no error either
        wait_until(lambda: client.stats.stalled >= 1, what="the watchdog")
        proxy.thaw()
        wait_until(lambda: client.synced and client.stats.connects >= 2, what="a new stream")
        export_grpc(service.grpc_endpoint, failing_calls("turn-after-silence"))
        wait_until(lambda: refuses(client, "turn-after-silence"))
    finally:
        proxy.close()


def test_check_remote_fails_open_when_the_service_is_gone_and_the_mirror_still_answers(
    services: Callable[..., ServiceThread], clients: Callable[..., AdvisoryClient]
) -> None:
    service = services()
    client = clients(advisory_port(service))
    assert client.wait_until_synced(20)
    export_grpc(service.grpc_endpoint, failing_calls("turn-1"))
    wait_until(lambda: refuses(client, "turn-1"))

    service.stop()
    wait_until(lambda: not client.synced, what="the stream to end")
    result = client.check_remote("turn-1", SERVER, TOOL, ARGUMENTS, timeout_s=0.5)
    assert result.decision is Decision.ALLOW and not result.answered
    assert client.stats.remote_checks_failed_open == 1
    assert refuses(client, "turn-1")  # what it knew still holds until it expires


def test_a_half_open_circuit_gives_one_probe_permit(
    services: Callable[..., ServiceThread], clients: Callable[..., AdvisoryClient]
) -> None:
    service = services(
        "breaker.min_calls=1",
        "breaker.consecutive_failures=1",
        "breaker.open_base_s=2",
        "breaker.open_jitter=0",
    )
    client = clients(advisory_port(service))
    assert client.wait_until_synced(20)
    export_grpc(service.grpc_endpoint, failing_calls("turn-1"))
    # One failure opens the server's circuit, for every turn; after its open period (2 s)
    # it is half-open. (Waited for as "held", not "refusing": a slow machine may only
    # ever see it half-open.)
    wait_until(
        lambda: any(a.scope == pb.SCOPE_SERVER for a in client.advisories()),
        what="the server's circuit advisory",
    )
    wait_until(
        lambda: client.check("a later turn", SERVER, TOOL).decision is Decision.PROBE_NEEDED,
        what="half-open after the open period",
    )
    first = client.check_remote("a later turn", SERVER, TOOL, ARGUMENTS)
    second = client.check_remote("yet another turn", SERVER, TOOL, ARGUMENTS)
    assert first.decision is Decision.PROBE and first.probe_permit > 0
    assert second.decision is Decision.DENY  # another caller holds the permit
    assert second.advisory is not None and "testing" in second.advisory.message


# -- security --------------------------------------------------------------------------------------
def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    usage: x509.ObjectIdentifier | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer[0].subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if usage == ExtendedKeyUsageOID.SERVER_AUTH:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(LOOPBACK))]
            ),
            critical=False,
        )
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


def _pem(item: x509.Certificate | ec.EllipticCurvePrivateKey) -> bytes:
    if isinstance(item, x509.Certificate):
        return item.public_bytes(serialization.Encoding.PEM)
    return item.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def test_mutual_tls_and_a_bearer_token(
    tmp_path: Path,
    services: Callable[..., ServiceThread],
    clients: Callable[..., AdvisoryClient],
) -> None:
    ca_key = _key()
    ca = _certificate("test CA", ca_key, None, ca=True)
    server_key, client_key = _key(), _key()
    server_cert = _certificate(
        "localhost", server_key, (ca, ca_key), usage=ExtendedKeyUsageOID.SERVER_AUTH
    )
    client_cert = _certificate(
        "harness", client_key, (ca, ca_key), usage=ExtendedKeyUsageOID.CLIENT_AUTH
    )
    files = {
        "ca.pem": _pem(ca),
        "server.pem": _pem(server_cert),
        "server.key": _pem(server_key),
        "client.pem": _pem(client_cert),
        "client.key": _pem(client_key),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    service = services(
        f"advisories.tls.cert_file={tmp_path / 'server.pem'}",
        f"advisories.tls.key_file={tmp_path / 'server.key'}",
        f"advisories.tls.client_ca_file={tmp_path / 'ca.pem'}",
        "advisories.tokens=secret-a=team-a",
    )
    export_grpc(service.grpc_endpoint, failing_calls("turn-1", tenant="team-a"))
    export_grpc(service.grpc_endpoint, failing_calls("turn-2", tenant="team-b"))
    wait_until(lambda: hub_seq(service) >= 2)

    tls = TlsConfig.from_files(
        root_certificates=tmp_path / "ca.pem",
        certificate_chain=tmp_path / "client.pem",
        private_key=tmp_path / "client.key",
    )
    client = clients(advisory_port(service), token="secret-a", tls=tls)
    assert client.wait_until_synced(20)
    assert refuses(client, "turn-1") and not refuses(client, "turn-2")  # its tenant only
    assert client.check_remote("turn-1", SERVER, TOOL, ARGUMENTS).refused

    stranger = clients(advisory_port(service), token="not-a-token", tls=tls)
    assert not stranger.wait_until_synced(20)
    assert stranger.failure.startswith("UNAUTHENTICATED")
    stranger._reader.join(20)  # it stopped: a retry cannot fix a bad token
    assert not stranger._reader.is_alive() and stranger.stats.connects == 1


def test_a_roster_collapse_reaches_the_harness_as_a_request_to_relist(
    services: Callable[..., ServiceThread], clients: Callable[..., AdvisoryClient]
) -> None:
    """The tools offered fell to none mid-turn: the harness hears it (no call is refused),
    and hears that it is over once a listing offers the tools again."""
    service = services()
    client = clients(advisory_port(service), harness=str(RESOURCE.attributes["service.name"]))
    assert client.wait_until_synced(20)
    turn = "turn-roster"

    def listings(*rounds: tuple[int, int]) -> list[ReadableSpan]:
        memory = InMemorySpanExporter()
        provider = TracerProvider(resource=RESOURCE)
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer("tests.roster")
        for model_round, offered in rounds:
            span = tracer.start_span("mcp.tools.list")
            span.set_attributes(
                {
                    "mcp.tools.configured": 12,
                    "mcp.tools.registered": 12,
                    "mcp.tools.offered": offered,
                    "mcp.turn.id": turn,
                    "mcp.turn.round": model_round,
                }
            )
            span.end()
        provider.shutdown()
        return list(memory.get_finished_spans())

    export_grpc(service.grpc_endpoint, listings((1, 86), (3, 86), (5, 0)))
    wait_until(lambda: client.roster_collapse(turn) is not None, what="the collapse")
    advisory = client.roster_collapse(turn)
    assert advisory is not None and advisory.state == pb.STATE_ROSTER_COLLAPSED
    assert "fell from 86 to none in round 5" in advisory.message
    assert not refuses(client, turn)  # it asks for a re-list; every call may still go
    export_grpc(service.grpc_endpoint, listings((7, 86)))
    wait_until(lambda: client.roster_collapse(turn) is None, what="the recovery")
