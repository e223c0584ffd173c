"""The advisory port, for real: the running Service, real gRPC clients, real OTel SDK spans.

Spans are made by the OpenTelemetry SDK in our harness convention (``mcp.tool.call``) and
sent through its OTLP/gRPC exporter; advisories are read back over gRPC with the generated
mcp_breaker.v1 stubs. Span times are the wall clock's (advisories are for harnesses running
now). Every wait is bounded; nothing asserts on elapsed time.
"""

from __future__ import annotations

import datetime
import ipaddress
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from mcp_breaker_client.shared.fingerprint import fingerprint, fingerprints
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from processor.advisories.service import AdvisoryService
from processor.advisories.servicer import MAX_NAME_CHARS
from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from tests.sdk import export_grpc
from tests.support import LOOPBACK, ServiceThread, make_config, terminate, wait_until

SERVER = "playwright"
TOOL = "playwright__browser_navigate"
ERROR = "upstream MCP session is closed"
ARGUMENTS = {"url": "https://artifacts.example.test/run/943"}
NS = 1_000_000_000
CALL_S = 1
TOKENS = "advisories.tokens=tokA=acme,tokB=globex"
ADMIN_TOKEN = "adm-7f3e9c-secret"
ADMIN = f"advisories.admin_tokens={ADMIN_TOKEN}"
WAIT_S = 20.0  # the longest any single wait may take before the test fails
# A subscription lives for the whole test, however long that is on a loaded machine; each
# wait on it is bounded by WAIT_S.
STREAM_DEADLINE_S = 600.0
_turns = itertools.count(1)


# --- spans from a harness ---------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    turn: str
    outcome: str = "failed"
    failure_class: str = "transport"
    tool: str = TOOL
    server: str = SERVER
    arguments: Any = None
    ago_s: float = 0.0  # how long before now the call started


def new_turn() -> str:
    return f"turn-{next(_turns)}"


def harness_spans(
    calls: Iterable[Call], *, tenant: str | None = None, harness: str = "harness-a"
) -> list[ReadableSpan]:
    """One ``mcp.tool.call`` span per call, from a harness whose resource names the tenant."""
    attributes: dict[str, str] = {"service.name": harness}
    if tenant is not None:
        attributes["tenant.id"] = tenant
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.advisories", "1")
    now_ns = time.time_ns()
    for call in calls:
        start = now_ns - int(call.ago_s * NS)
        span = tracer.start_span("mcp.tool.call", kind=SpanKind.CLIENT, start_time=start)
        span.set_attributes(
            {
                "mcp.tool.name": call.tool,
                "mcp.server.name": call.server,
                "mcp.tool.outcome": call.outcome,
                "mcp.tool.arguments": json.dumps(
                    ARGUMENTS if call.arguments is None else call.arguments
                ),
                "mcp.turn.id": call.turn,
            }
        )
        if call.outcome == "failed":
            span.set_attribute("mcp.tool.error", ERROR)
            span.set_attribute("mcp.tool.failure_class", call.failure_class)
        span.end(end_time=start + CALL_S * NS)
    provider.shutdown()
    return list(memory.get_finished_spans())


def send(service: ServiceThread, calls: Iterable[Call], **kwargs: Any) -> None:
    spans = harness_spans(calls, **kwargs)
    assert export_grpc(service.grpc_endpoint, spans) is SpanExportResult.SUCCESS


def fail_three_times(**kwargs: Any) -> list[Call]:
    """Three transport failures in three turns: the server's circuit opens."""
    return [Call(new_turn(), **kwargs) for _ in range(3)]


# --- the advisory port's clients --------------------------------------------------------------


def bearer(token: str | None) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),) if token else ()


class Client:
    """One channel to the advisory port, with the stubs of both services."""

    def __init__(
        self,
        port: int,
        token: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        target = f"{LOOPBACK}:{port}"
        self.channel = (
            grpc.insecure_channel(target)
            if credentials is None
            else grpc.secure_channel(target, credentials)
        )
        self.advisories = pb_grpc.AdvisoriesStub(self.channel)
        self.admin = pb_grpc.AdminStub(self.channel)
        self.metadata = bearer(token)

    def check(self, **fields: Any) -> pb.CheckResponse:
        fields.setdefault("server", SERVER)
        fields.setdefault("tool", TOOL)
        fields.setdefault("turn", new_turn())
        request = pb.CheckRequest(**fields)
        response: pb.CheckResponse = self.advisories.Check(
            request, metadata=self.metadata, timeout=WAIT_S
        )
        return response

    def state(self, **fields: Any) -> pb.GetStateResponse:
        response: pb.GetStateResponse = self.advisories.GetState(
            pb.GetStateRequest(**fields), metadata=self.metadata, timeout=WAIT_S
        )
        return response

    def open_stream(self, **fields: Any) -> Any:
        """The raw Subscribe call, not read: a grpc response iterator."""
        request = pb.SubscribeRequest(**fields)
        return self.advisories.Subscribe(request, metadata=self.metadata, timeout=STREAM_DEADLINE_S)

    def subscribe(self, **fields: Any) -> Stream:
        return Stream(self.open_stream(**fields))

    def close(self) -> None:
        self.channel.close()


class Stream:
    """A Subscribe stream read on its own thread into ``messages``; ``error`` when it ends."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.messages: list[pb.SubscribeResponse] = []
        self.error: grpc.RpcError | None = None
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for message in self.call:
                self.messages.append(message)
        except grpc.RpcError as error:
            self.error = error
        finally:
            self.ended.set()

    def wait_for(self, count: int, what: str = "") -> list[pb.SubscribeResponse]:
        wait_until(
            lambda: len(self.messages) >= count or self.ended.is_set(),
            WAIT_S,
            what or f"{count} messages",
        )
        assert len(self.messages) >= count, f"stream ended early: {self.code()}"
        return self.messages[:count]

    def changes(self) -> list[pb.SubscribeResponse]:
        return [m for m in self.messages if m.WhichOneof("kind") == "change"]

    def wait_for_change(self, predicate: Any, what: str) -> pb.Advisory:
        def found() -> pb.Advisory | None:
            return next((m.change for m in self.changes() if predicate(m.change)), None)

        wait_until(lambda: found() is not None or self.ended.is_set(), WAIT_S, what)
        advisory = found()
        assert advisory is not None, f"stream ended: {self.code()}"
        return advisory

    def code(self) -> grpc.StatusCode | None:
        return self.error.code() if self.error is not None else None

    def cancel(self) -> None:
        self.call.cancel()
        self.ended.wait(WAIT_S)


@contextmanager
def running(*overrides: str) -> Iterator[ServiceThread]:
    """The service; heartbeats rare unless asked for, so streams carry what a test counts."""
    service = ServiceThread(make_config("advisories.heartbeat_s=3600", *overrides))
    try:
        yield service
    finally:
        service.stop()


def port_of(service: ServiceThread) -> int:
    return service.service.ports["advisories"]


def rpc_code(call: Any) -> grpc.StatusCode:
    """The status a unary call, or the first read of a stream, ends with."""
    return rpc_error(call)[0]


def rpc_error(call: Any) -> tuple[grpc.StatusCode, str]:
    """The status and details a unary call, or the first read of a stream, ends with."""
    with pytest.raises(grpc.RpcError) as caught:
        result = call()
        if not isinstance(result, (pb.CheckResponse, pb.GetStateResponse)):
            next(iter(result))
    code: grpc.StatusCode = caught.value.code()
    return code, caught.value.details() or ""


def without_retry(advisories: Any) -> list[pb.Advisory]:
    """By id, with retry_after cleared: it counts down from the moment of each read."""
    copies = []
    for advisory in sorted(advisories, key=lambda a: a.id):
        copy = pb.Advisory()
        copy.CopyFrom(advisory)
        copy.retry_after_seconds = 0
        copies.append(copy)
    return copies


def changes_of(stream: Stream, tenant: str | None = None) -> list[pb.Advisory]:
    return [m.change for m in stream.changes() if tenant is None or m.change.tenant == tenant]


# --- authentication ---------------------------------------------------------------------------


def test_every_call_needs_a_known_token() -> None:
    with running(TOKENS) as service:
        port = port_of(service)
        for token in (None, "not-a-token", "tokA-but-longer"):
            client = Client(port, token)
            assert rpc_code(client.check) is grpc.StatusCode.UNAUTHENTICATED
            assert rpc_code(client.state) is grpc.StatusCode.UNAUTHENTICATED
            assert rpc_code(client.open_stream) is grpc.StatusCode.UNAUTHENTICATED
            client.close()
        # Not a bearer token at all.
        basic = Client(port)
        basic.metadata = (("authorization", "Basic dG9rQTo="),)
        assert rpc_code(basic.state) is grpc.StatusCode.UNAUTHENTICATED
        for token in ("tokA", "tokB"):
            client = Client(port, token)
            assert client.check().verdict == pb.VERDICT_ALLOW
            assert client.state().epoch
            stream = client.subscribe(subscriber_name=f"good-{token}")
            (first,) = stream.wait_for(1)
            assert first.WhichOneof("kind") == "snapshot" and not first.snapshot.resync
            stream.cancel()
            client.close()
        basic.close()


def test_a_tenant_never_sees_another_tenants_advisories() -> None:
    with running(TOKENS) as service:
        port = port_of(service)
        acme, globex = Client(port, "tokA"), Client(port, "tokB")
        acme_stream, globex_stream = acme.subscribe(), globex.subscribe()
        acme_stream.wait_for(1)
        globex_stream.wait_for(1)

        calls = fail_three_times()
        send(service, calls, tenant="acme", harness="harness-acme")
        opened = acme_stream.wait_for_change(
            lambda a: a.scope == pb.SCOPE_SERVER and a.state == pb.STATE_OPEN, "acme's circuit"
        )
        assert (opened.tenant, opened.server, opened.harness) == ("acme", SERVER, "harness-acme")
        # A marker for globex, sent after acme's: once globex has it, it has had everything
        # before it, and none of that was acme's.
        send(service, [Call(new_turn(), server="globex-mail")], tenant="globex")
        globex_stream.wait_for_change(lambda a: a.server == "globex-mail", "globex's marker")
        assert {a.tenant for a in changes_of(globex_stream)} == {"globex"}
        send(service, [Call(new_turn(), server="acme-mail")], tenant="acme")
        acme_stream.wait_for_change(lambda a: a.server == "acme-mail", "acme's marker")
        assert {a.tenant for a in changes_of(acme_stream)} == {"acme"}
        # Three turn blocks, the server's and the tool's circuits, the marker.
        assert len(changes_of(acme_stream)) == 6

        # Snapshots and state: each tenant its own.
        late = globex.subscribe()
        (snapshot,) = late.wait_for(1)
        assert [a.server for a in snapshot.snapshot.advisories] == ["globex-mail"]
        assert {a.tenant for a in acme.state().advisories} == {"acme"}
        assert len(acme.state().advisories) == 6
        assert [a.tenant for a in globex.state().advisories] == ["globex"]

        # Check: the same server, tool and turn are out for acme only.
        assert globex.check().verdict == pb.VERDICT_ALLOW
        assert globex.check(turn=calls[0].turn).verdict == pb.VERDICT_ALLOW
        denied = acme.check()
        assert denied.verdict == pb.VERDICT_DENY
        assert denied.advisory.scope == pb.SCOPE_SERVER and denied.advisory.tenant == "acme"
        in_turn = acme.check(turn=calls[0].turn)
        assert in_turn.verdict == pb.VERDICT_DENY
        for stream in (acme_stream, globex_stream, late):
            stream.cancel()


# --- administration ---------------------------------------------------------------------------


def test_only_an_admin_forces_a_circuit_and_every_action_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    reason = "upstream redeploy, ticket OPS-1234"
    force = pb.ForceCircuitRequest(
        server=SERVER, open=True, duration_seconds=600, reason=reason, tenant="acme"
    )
    with running(TOKENS, ADMIN) as service:
        port = port_of(service)
        acme = Client(port, "tokA")
        stream = acme.subscribe()
        stream.wait_for(1)
        anonymous, tenant, admin = Client(port), Client(port, "tokA"), Client(port, ADMIN_TOKEN)

        code = rpc_code(lambda: anonymous.admin.ForceCircuit(force, timeout=WAIT_S))
        assert code is grpc.StatusCode.UNAUTHENTICATED
        code = rpc_code(
            lambda: tenant.admin.ForceCircuit(force, metadata=tenant.metadata, timeout=WAIT_S)
        )
        assert code is grpc.StatusCode.PERMISSION_DENIED
        assert acme.check().verdict == pb.VERDICT_ALLOW  # nothing was forced

        response = admin.admin.ForceCircuit(force, metadata=admin.metadata, timeout=WAIT_S)
        assert response.advisory.state == pb.STATE_FORCED_OPEN
        pushed = stream.wait_for_change(lambda a: a.state == pb.STATE_FORCED_OPEN, "forced")
        assert (pushed.id, pushed.scope, pushed.server) == (
            response.advisory.id,
            pb.SCOPE_SERVER,
            SERVER,
        )
        assert pushed.cause == reason and reason in pushed.message
        assert pushed.enforced and pushed.tenant == "acme"
        assert 0 < pushed.retry_after_seconds <= 600
        assert pushed.expires_unix_nano > time.time_ns()
        denied = acme.check()
        assert denied.verdict == pb.VERDICT_DENY
        assert denied.advisory.state == pb.STATE_FORCED_OPEN
        assert Client(port, "tokB").check().verdict == pb.VERDICT_ALLOW  # acme's circuit only

        release = pb.ReleaseCircuitRequest(server=SERVER, reason="redeployed", tenant="acme")
        code = rpc_code(
            lambda: tenant.admin.ReleaseCircuit(release, metadata=tenant.metadata, timeout=WAIT_S)
        )
        assert code is grpc.StatusCode.PERMISSION_DENIED
        released = admin.admin.ReleaseCircuit(release, metadata=admin.metadata, timeout=WAIT_S)
        assert released.released
        closed = stream.wait_for_change(lambda a: a.state == pb.STATE_CLOSED, "released")
        assert (closed.id, closed.cause) == (pushed.id, "redeployed")
        assert acme.check().verdict == pb.VERDICT_ALLOW
        again = admin.admin.ReleaseCircuit(release, metadata=admin.metadata, timeout=WAIT_S)
        assert not again.released  # not forced any more
        stream.cancel()

    actions = [r.getMessage() for r in caplog.records if r.name == "processor.advisories.admin"]
    assert any("forced server 'playwright' open" in m and reason in m for m in actions)
    assert any("released server 'playwright': redeployed" in m for m in actions)
    assert sum("admin: refused" in m for m in actions) == 2
    assert ADMIN_TOKEN not in caplog.text and "tokA" not in caplog.text


def test_a_secret_in_an_operators_reason_reaches_nobody(caplog: pytest.LogCaptureFixture) -> None:
    """The reason goes to models (the advisory's message), subscribers and the log."""
    caplog.set_level(logging.DEBUG)
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    reason = f"paging: token {secret} leaked, password=ReasonPw77"
    force = pb.ForceCircuitRequest(server=SERVER, open=True, duration_seconds=600, reason=reason)
    with running(TOKENS, ADMIN) as service:
        admin = Client(port_of(service), ADMIN_TOKEN)
        forced = admin.admin.ForceCircuit(force, metadata=admin.metadata, timeout=WAIT_S)
        released = admin.admin.ReleaseCircuit(
            pb.ReleaseCircuitRequest(server=SERVER, reason=f"rotated {secret}"),
            metadata=admin.metadata,
            timeout=WAIT_S,
        )
        assert released.released
    assert forced.advisory.cause.startswith("paging: token [REDACTED]")
    for text in (forced.advisory.cause, forced.advisory.message, caplog.text):
        assert secret not in text and "ReasonPw77" not in text


# --- TLS and mutual TLS -----------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    ca: bytes
    server_cert: Path
    server_key: Path
    ca_file: Path
    client_cert: bytes
    client_key: bytes
    rogue_cert: bytes  # a client certificate from a CA the service does not trust
    rogue_key: bytes


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    server: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name = issuer[0].subject if issuer else _name(subject)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    elif server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(LOOPBACK))]
            ),
            critical=False,
        ).add_extension(x509.ExtendedKeyUsage([x509.OID_SERVER_AUTH]), critical=False)
    else:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([x509.OID_CLIENT_AUTH]), critical=False
        )
    signer = issuer[1] if issuer else key
    return builder.sign(signer, hashes.SHA256())


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca_key, rogue_ca_key = (
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP256R1()),
    )
    ca = _certificate("mcp-breaker test CA", ca_key, None, ca=True)
    rogue_ca = _certificate("someone else's CA", rogue_ca_key, None, ca=True)
    server_key, client_key, rogue_key = (ec.generate_private_key(ec.SECP256R1()) for _ in "abc")
    server = _certificate("mcp-breaker", server_key, (ca, ca_key), server=True)
    client = _certificate("harness-a", client_key, (ca, ca_key))
    rogue = _certificate("harness-rogue", rogue_key, (rogue_ca, rogue_ca_key))
    files = {"ca.pem": _pem(ca), "server.pem": _pem(server), "server.key": _pem_key(server_key)}
    for name, content in files.items():
        (directory / name).write_bytes(content)
    return Pki(
        ca=_pem(ca),
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        ca_file=directory / "ca.pem",
        client_cert=_pem(client),
        client_key=_pem_key(client_key),
        rogue_cert=_pem(rogue),
        rogue_key=_pem_key(rogue_key),
    )


def tls_settings(pki: Pki, *, mutual: bool) -> list[str]:
    settings = [
        f"advisories.tls.cert_file={pki.server_cert}",
        f"advisories.tls.key_file={pki.server_key}",
    ]
    if mutual:
        settings.append(f"advisories.tls.client_ca_file={pki.ca_file}")
    return settings


def test_tls_serves_a_client_that_trusts_the_ca_and_not_plaintext(pki: Pki) -> None:
    with running(*tls_settings(pki, mutual=False)) as service:
        port = port_of(service)
        secure = Client(port, credentials=grpc.ssl_channel_credentials(root_certificates=pki.ca))
        assert secure.state().epoch
        assert secure.check().verdict == pb.VERDICT_ALLOW
        stream = secure.subscribe()
        assert stream.wait_for(1)[0].WhichOneof("kind") == "snapshot"
        stream.cancel()
        plaintext = Client(port)
        assert rpc_code(plaintext.state) is grpc.StatusCode.UNAVAILABLE
        untrusting = Client(  # trusts another CA only
            port, credentials=grpc.ssl_channel_credentials(root_certificates=pki.rogue_cert)
        )
        assert rpc_code(untrusting.state) is grpc.StatusCode.UNAVAILABLE
        for client in (secure, plaintext, untrusting):
            client.close()


def test_mutual_tls_needs_a_client_certificate_the_ca_signed(pki: Pki) -> None:
    with running(*tls_settings(pki, mutual=True)) as service:
        port = port_of(service)

        def client(cert: bytes | None = None, key: bytes | None = None) -> Client:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=pki.ca, private_key=key, certificate_chain=cert
            )
            return Client(port, credentials=credentials)

        anonymous = client()
        assert rpc_code(anonymous.state) is grpc.StatusCode.UNAVAILABLE
        rogue = client(pki.rogue_cert, pki.rogue_key)
        assert rpc_code(rogue.state) is grpc.StatusCode.UNAVAILABLE
        signed = client(pki.client_cert, pki.client_key)
        assert signed.state().epoch
        assert signed.check().verdict == pb.VERDICT_ALLOW
        plaintext = Client(port)
        assert rpc_code(plaintext.state) is grpc.StatusCode.UNAVAILABLE
        for each in (anonymous, rogue, signed, plaintext):
            each.close()


# --- reconnecting -----------------------------------------------------------------------------


def test_a_subscriber_that_reconnects_gets_exactly_what_it_missed() -> None:
    with running() as service:
        client = Client(port_of(service))
        witness = client.subscribe(subscriber_name="always-connected")
        witness.wait_for(1)
        a = client.subscribe(subscriber_name="a")
        (snapshot,) = a.wait_for(1)
        epoch = snapshot.epoch
        assert snapshot.WhichOneof("kind") == "snapshot" and snapshot.seq == 0

        send(service, [Call(new_turn()), Call(new_turn())])
        seen = a.wait_for(3)[1:]
        assert [m.seq for m in seen] == [1, 2]
        a.cancel()  # disconnected at seq 2
        assert a.code() is grpc.StatusCode.CANCELLED

        # Meanwhile: a third failure (the server's and the tool's circuits open, and its
        # turn block), and one more turn block.
        send(service, [Call(new_turn())])
        send(service, [Call(new_turn())])
        witness.wait_for(1 + 6)
        missed = [m for m in witness.messages[1:] if m.seq > 2]
        assert [m.seq for m in missed] == [3, 4, 5, 6]

        resumed = client.subscribe(subscriber_name="a", resume_epoch=epoch, resume_after_seq=2)
        replayed = resumed.wait_for(4)
        assert [m.WhichOneof("kind") for m in replayed] == ["change"] * 4  # no snapshot
        assert [m.seq for m in replayed] == [3, 4, 5, 6]
        assert [m.change for m in replayed] == [m.change for m in missed]
        assert {m.epoch for m in replayed} == {epoch}
        assert replayed[0].change.scope == pb.SCOPE_SERVER
        assert replayed[1].change.scope == pb.SCOPE_TOOL

        # And then it is live again, from where it is.
        send(service, [Call(new_turn(), server="db")])
        live = resumed.wait_for(5)[4]
        assert (live.seq, live.change.server) == (7, "db")
        assert [m.seq for m in resumed.messages] == [3, 4, 5, 6, 7]
        for stream in (witness, resumed):
            stream.cancel()


def test_a_resume_the_service_cannot_honour_resyncs_with_a_snapshot() -> None:
    with running("advisories.replay_changes=3") as service:
        client = Client(port_of(service))
        a = client.subscribe()
        epoch = a.wait_for(1)[0].epoch
        send(service, [Call(new_turn())])
        assert a.wait_for(2)[1].seq == 1
        a.cancel()
        # Four more failures, six more changes (2..7: the third failure opens the server's
        # and the tool's circuits too). The service holds the last three (5, 6, 7) only.
        send(service, [Call(new_turn()), Call(new_turn()), Call(new_turn())])
        wait_until(lambda: client.state().seq == 6, WAIT_S, "six changes")
        send(service, [Call(new_turn())])
        wait_until(lambda: client.state().seq == 7, WAIT_S, "seven changes")
        state = client.state()
        assert len(state.advisories) == 7  # five turn blocks and the two circuits

        for epoch_given, after in ((epoch, 1), ("another-process", 7), (epoch, 99)):
            stream = client.subscribe(resume_epoch=epoch_given, resume_after_seq=after)
            (message,) = stream.wait_for(1)
            assert message.WhichOneof("kind") == "snapshot", (epoch_given, after)
            assert message.snapshot.resync
            assert (message.epoch, message.seq) == (epoch, 7)
            # GetState is worst first, and each read counts retry_after from its own now.
            assert without_retry(message.snapshot.advisories) == without_retry(state.advisories)
            stream.cancel()
        # Still held: exactly the changes after 4.
        held = client.subscribe(resume_epoch=epoch, resume_after_seq=4)
        assert [m.seq for m in held.wait_for(3)] == [5, 6, 7]
        assert all(m.WhichOneof("kind") == "change" for m in held.messages)
        held.cancel()


# --- a subscriber that falls behind -----------------------------------------------------------

NO_CIRCUITS = ("breaker.consecutive_failures=0", "breaker.min_calls=1000000")  # blocks only
MAX_BATCHES = 1000


def test_a_stalled_subscriber_is_cut_off_and_nobody_else_waits() -> None:
    """One subscriber never reads. Its transport buffers fill, then its queue of 4, and it
    is cut off; the healthy subscriber gets every change and every span is taken in."""
    with running("advisories.subscriber_queue=4", *NO_CIRCUITS) as service:
        port = port_of(service)
        healthy = Client(port).subscribe(subscriber_name="healthy")
        healthy.wait_for(1)
        # BDP probing off: the stalled client's HTTP/2 window stays at the default 64 KiB
        # instead of growing to megabytes, so its transport fills in tens of batches.
        channel = grpc.insecure_channel(f"{LOOPBACK}:{port}", options=[("grpc.http2.bdp_probe", 0)])
        stalled = pb_grpc.AdvisoriesStub(channel).Subscribe(
            pb.SubscribeRequest(subscriber_name="stalled"), timeout=STREAM_DEADLINE_S
        )
        wait_until(lambda: service.metric("mcp_breaker_advisory_subscribers") == 2)
        cut_off = "mcp_breaker_advisory_subscribers_cut_off_total"
        exporter = OTLPSpanExporter(endpoint=service.grpc_endpoint, insecure=True, timeout=30)
        sent = 0

        def batch() -> None:
            nonlocal sent
            # Four turn blocks: the healthy subscriber's queue holds them all (it is
            # drained before the next batch), the stalled one's cannot hold two batches.
            spans = harness_spans(Call(new_turn()) for _ in range(4))
            assert exporter.export(spans) is SpanExportResult.SUCCESS
            sent += len(spans)
            healthy.wait_for(1 + sent, f"change {sent} at the healthy subscriber")

        try:
            for _ in range(MAX_BATCHES):
                batch()
                if service.metric(cut_off) == 1:
                    break
            assert service.metric(cut_off) == 1, f"not cut off after {sent} changes"
            at_cut = sent
            for _ in range(5):  # and the pipeline goes on
                batch()
        finally:
            exporter.shutdown()

        assert at_cut > 4 * 4  # the transport buffered well beyond the queue first
        assert [m.seq for m in healthy.messages[1:]] == list(range(1, sent + 1))
        assert service.metric("mcp_breaker_receiver_accepted_spans_total", transport="grpc") == (
            sent
        )
        assert service.metric(cut_off) == 1

        # Read at last: what its transport held, in order, then the news that it must resync.
        received: list[pb.SubscribeResponse] = []
        with pytest.raises(grpc.RpcError) as caught:
            for message in stalled:
                received.append(message)
        assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert received[0].WhichOneof("kind") == "snapshot"
        seqs = [m.seq for m in received[1:]]
        assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) < at_cut
        wait_until(lambda: service.metric("mcp_breaker_advisory_subscribers") == 1)
        healthy.cancel()
        channel.close()


# --- half-open: probe permits under concurrency -----------------------------------------------


@pytest.mark.parametrize("overrides", [(), ("breaker.probe_permits=3",)], ids=["default", "3"])
def test_concurrent_checks_on_a_half_open_circuit_get_exactly_the_permits(
    overrides: tuple[str, ...],
) -> None:
    # Failures five minutes ago, an open period of one second: by now it is half-open.
    settings = ("breaker.open_base_s=1", "breaker.open_jitter=0", *overrides)
    with running(*settings) as service:
        permits = service.service.config.breaker.probe_permits
        client = Client(port_of(service))
        send(service, [Call(new_turn(), ago_s=300 - i) for i in range(3)])
        wait_until(
            lambda: any(a.scope == pb.SCOPE_SERVER for a in client.state().advisories),
            WAIT_S,
            "the server's circuit",
        )
        askers = 20
        barrier = threading.Barrier(askers)

        def ask(_: int) -> pb.CheckResponse:
            barrier.wait(WAIT_S)
            return client.check()

        with futures.ThreadPoolExecutor(askers) as pool:
            answers = list(pool.map(ask, range(askers)))
        probes = [a for a in answers if a.verdict == pb.VERDICT_PROBE]
        assert len(probes) == permits
        assert len({p.probe_permit for p in probes}) == permits
        assert all(p.advisory.state == pb.STATE_HALF_OPEN for p in probes)
        denied = [a for a in answers if a.verdict == pb.VERDICT_DENY]
        assert len(denied) == askers - permits
        for answer in denied:
            assert answer.advisory.state == pb.STATE_HALF_OPEN
            assert "another call is testing it now" in answer.advisory.message
            assert answer.advisory.retry_after_seconds > 0
        assert service.metric("mcp_breaker_advisory_checks_total", verdict="probe") == permits


# --- heartbeats -------------------------------------------------------------------------------


def test_an_idle_stream_hears_heartbeats() -> None:
    with running("advisories.heartbeat_s=0.1") as service:
        client = Client(port_of(service))
        stream = client.subscribe()
        snapshot, *beats = stream.wait_for(4)
        assert snapshot.WhichOneof("kind") == "snapshot"
        assert [m.WhichOneof("kind") for m in beats] == ["heartbeat"] * 3
        assert all(m.epoch == snapshot.epoch and m.seq == 0 for m in beats)
        stamps = [m.heartbeat.at_unix_nano for m in beats]
        assert stamps == sorted(stamps) and stamps[0] > 0
        # A change in between; the heartbeats after it carry its seq.
        send(service, [Call(new_turn())])
        stream.wait_for_change(lambda a: True, "the change")
        count = len(stream.messages)
        later = stream.wait_for(count + 1)[-1]
        assert later.WhichOneof("kind") == "heartbeat" and later.seq == 1
        stream.cancel()


# --- bad input --------------------------------------------------------------------------------


def test_bad_input_is_refused_and_the_service_keeps_serving() -> None:
    too_long = "x" * (MAX_NAME_CHARS + 1)
    with running(ADMIN) as service:
        client = Client(port_of(service))
        stream = client.subscribe()
        stream.wait_for(1)
        invalid = grpc.StatusCode.INVALID_ARGUMENT
        for fields in (
            {"arguments_json": "{not json"},
            {"arguments_json": "[" * 5_000 + "]" * 5_000},  # JSON, nested too deep to read
            {"tool": too_long},
            {"server": too_long},
            {"turn": too_long},
            {"fingerprint": too_long},
            {"harness": too_long},
        ):
            assert rpc_code(lambda f=fields: client.check(**f)) is invalid, fields
        assert rpc_code(lambda: client.open_stream(harness=too_long)) is invalid
        servers = [f"s{i}" for i in range(257)]
        assert rpc_code(lambda: client.open_stream(servers=servers)) is invalid
        admin = Client(port_of(service), ADMIN_TOKEN)
        for request in (
            pb.ForceCircuitRequest(server=SERVER, open=True, duration_seconds=60),  # no reason
            pb.ForceCircuitRequest(server=SERVER, open=True, duration_seconds=0, reason="r"),
            pb.ForceCircuitRequest(open=True, duration_seconds=60, reason="r"),  # names nothing
            pb.ForceCircuitRequest(server=too_long, open=True, duration_seconds=60, reason="r"),
        ):
            code = rpc_code(
                lambda r=request: admin.admin.ForceCircuit(
                    r, metadata=admin.metadata, timeout=WAIT_S
                )
            )
            assert code is invalid, request
        assert client.state().advisories == []  # nothing was forced

        # Still serving: the open stream, and new calls.
        assert client.check(arguments_json='{"q": 1}').verdict == pb.VERDICT_ALLOW
        send(service, [Call(new_turn())])
        stream.wait_for_change(lambda a: a.state == pb.STATE_TURN_BLOCKED, "a turn block")
        assert stream.code() is None
        stream.cancel()


def test_check_fingerprints_arguments_json_as_the_span_path_does() -> None:
    arguments = {"url": "https://example.test/a", "wait": 2.0, "opts": {"b": 1, "a": [1, 2]}}
    with running() as service:
        client = Client(port_of(service))
        turn = new_turn()
        send(service, [Call(turn, failure_class="tool_error", arguments=arguments)])
        wait_until(lambda: len(client.state().advisories) == 1, WAIT_S, "the turn block")
        (block,) = client.state().advisories
        assert block.scope == pb.SCOPE_TURN_CALL
        assert block.fingerprint == fingerprint(SERVER, TOOL, arguments)
        # The same arguments written differently: the same call, refused.
        same = '{"opts": {"a": [1, 2], "b": 1}, "wait": 2, "url": "https://example.test/a"}'
        denied = client.check(turn=turn, arguments_json=same)
        assert denied.verdict == pb.VERDICT_DENY and denied.advisory.id == block.id
        assert client.check(turn=turn, fingerprint=block.fingerprint).verdict == pb.VERDICT_DENY
        corrected = json.dumps({**arguments, "url": "https://example.test/b"})
        assert client.check(turn=turn, arguments_json=corrected).verdict == pb.VERDICT_ALLOW


def test_check_names_the_server_as_the_span_path_does() -> None:
    """A span that names no server is keyed by its ``server__tool`` prefix; a Check that
    names no server must find the same advisory (and fingerprint), or it would allow."""
    prefixed = f"{SERVER}__{TOOL}"
    with running() as service:
        client = Client(port_of(service))
        turn = new_turn()
        send(service, [Call(turn, tool=prefixed, server="", failure_class="tool_error")])
        wait_until(lambda: len(client.state().advisories) == 1, WAIT_S, "the turn block")
        (block,) = client.state().advisories
        assert block.server == SERVER
        request = {"turn": turn, "tool": prefixed, "arguments_json": json.dumps(ARGUMENTS)}
        assert client.check(server="", **request).verdict == pb.VERDICT_DENY
        assert client.check(server=SERVER, **request).verdict == pb.VERDICT_DENY


def test_a_resume_with_nothing_missed_hears_at_once_that_the_stream_is_live() -> None:
    with running() as service:  # heartbeats once an hour: only the resume can send one
        client = Client(port_of(service))
        first = client.subscribe(subscriber_name="a")
        (snapshot,) = first.wait_for(1)
        first.cancel()
        resumed = client.subscribe(resume_epoch=snapshot.epoch, resume_after_seq=snapshot.seq)
        (hello,) = resumed.wait_for(1)
        assert hello.WhichOneof("kind") == "heartbeat" and hello.seq == snapshot.seq
        resumed.cancel()


def test_a_large_snapshot_comes_in_parts_and_get_state_says_what_it_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No reply may outgrow a client's receive limit: the snapshot is cut into parts (the
    first replaces, the last says no more), and GetState shows the worst and counts the rest."""
    from processor.advisories import servicer as advisory_service

    monkeypatch.setattr(advisory_service, "MAX_PART_BYTES", 3000)
    with running() as service:
        client = Client(port_of(service))
        send(service, [Call(new_turn()) for _ in range(12)])
        wait_until(lambda: len(service.service.advisories.hub) >= 12, WAIT_S, "12 blocks")
        stream = client.subscribe()
        stream.wait_for(2)
        wait_until(
            lambda: any(not m.snapshot.more for m in stream.messages), WAIT_S, "the last part"
        )
        parts = [m for m in stream.messages if m.WhichOneof("kind") == "snapshot"]
        assert len(parts) > 1
        assert [p.snapshot.first for p in parts] == [True] + [False] * (len(parts) - 1)
        assert [p.snapshot.more for p in parts] == [True] * (len(parts) - 1) + [False]
        assert len({p.seq for p in parts}) == 1
        assert all(p.ByteSize() < 3000 + 1024 for p in parts)
        ids = [a.id for p in parts for a in p.snapshot.advisories]
        assert len(ids) == len(set(ids)) == len(service.service.advisories.hub)
        state = client.state()
        assert state.not_shown > 0
        assert len(state.advisories) + state.not_shown == len(ids)
        servers_first = [a.scope for a in state.advisories]
        assert servers_first[0] == pb.SCOPE_SERVER  # the open server circuit: worst first
        stream.cancel()


def test_operator_actions_are_counted_as_transitions_and_a_release_creates_nothing() -> None:
    force = pb.ForceCircuitRequest(server="db", open=True, duration_seconds=60, reason="maint")
    release = pb.ReleaseCircuitRequest(server="db", reason="done")
    with running(ADMIN) as service:
        admin = Client(port_of(service), ADMIN_TOKEN)
        registry = service.service.registry

        def moves(reason: str) -> float | None:
            return registry.get_sample_value(
                "mcp_breaker_circuit_transitions_total",
                {
                    "scope": "server",
                    "from_state": "closed",
                    "to_state": "forced_open",
                    "reason": reason,
                }
                if reason == "forced"
                else {
                    "scope": "server",
                    "from_state": "forced_open",
                    "to_state": "closed",
                    "reason": reason,
                },
            )

        admin.admin.ForceCircuit(force, metadata=admin.metadata, timeout=WAIT_S)
        assert moves("forced") == 1.0
        admin.admin.ReleaseCircuit(release, metadata=admin.metadata, timeout=WAIT_S)
        assert moves("released") == 1.0
        circuits = service.service.breaker.circuits
        before = len(circuits)
        unknown = pb.ReleaseCircuitRequest(server="never-seen", reason="x")
        answer = admin.admin.ReleaseCircuit(unknown, metadata=admin.metadata, timeout=WAIT_S)
        assert answer.released is False and len(circuits) == before


def test_one_tenant_cannot_take_every_stream() -> None:
    with running(TOKENS, "advisories.max_subscribers_per_tenant=2") as service:
        port = port_of(service)
        acme = Client(port, "tokA")
        first, second = acme.subscribe(), acme.subscribe()
        first.wait_for(1)
        second.wait_for(1)
        third = acme.subscribe()
        third.ended.wait(WAIT_S)
        assert third.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        globex = Client(port, "tokB").subscribe()  # another tenant still gets in
        (snapshot,) = globex.wait_for(1)
        assert snapshot.WhichOneof("kind") == "snapshot"
        first.cancel()  # a place frees up
        wait_until(lambda: len(service.service.advisories.broadcaster.subscribers) == 2, WAIT_S)
        again = acme.subscribe()
        again.wait_for(1)
        for stream in (second, globex, again):
            stream.cancel()


# --- fair slots: no caller or tenant takes every stream ---------------------------------------

RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED


def refused(client: Client) -> str:
    """A Subscribe that must be refused for want of a slot: its details."""
    code, details = rpc_error(client.open_stream)
    assert code is RESOURCE_EXHAUSTED, details
    return details


def advisories_of(service: ServiceThread) -> AdvisoryService:
    advisories = service.service.advisories
    assert advisories is not None
    return advisories


def held_streams(service: ServiceThread) -> int:
    return len(advisories_of(service).broadcaster.subscribers)


def test_one_caller_cannot_take_its_tenants_every_stream() -> None:
    tokens = "advisories.tokens=tokA=acme,tokA2=acme,tokB=globex"
    with running(tokens, "advisories.max_subscribers_per_caller=2") as service:
        port = port_of(service)
        caller = Client(port, "tokA")
        streams = [caller.subscribe(), caller.subscribe()]
        for stream in streams:
            stream.wait_for(1)
        assert "advisories.max_subscribers_per_caller" in refused(caller)
        elsewhere = Client(port, "tokA")  # its own connection, the same token: the same caller
        assert "advisories.max_subscribers_per_caller" in refused(elsewhere)
        # The tenant's other token, and another tenant, get in.
        streams += [Client(port, "tokA2").subscribe(), Client(port, "tokB").subscribe()]
        for stream in streams[2:]:
            assert stream.wait_for(1)[0].WhichOneof("kind") == "snapshot"
        streams[0].cancel()  # a place frees up
        wait_until(lambda: held_streams(service) == 3, WAIT_S, "the slot given back")
        streams.append(elsewhere.subscribe())
        streams[-1].wait_for(1)
        for stream in streams[1:]:
            stream.cancel()


def test_without_tokens_each_host_is_a_caller() -> None:
    """No tokens: every caller is the one default tenant, so the tenant cap would lock
    everyone out; the per-caller cap (one peer host) applies instead."""
    caps = ("advisories.max_subscribers_per_caller=3", "advisories.max_subscribers_per_tenant=1")
    with running(*caps) as service:
        port = port_of(service)
        clients = [Client(port) for _ in range(3)]  # three connections from one host
        streams = [client.subscribe() for client in clients]
        for stream in streams:
            stream.wait_for(1)
        details = refused(Client(port))
        assert "advisories.max_subscribers_per_caller" in details
        assert "subscribe again later" in details
        for stream in streams:
            stream.cancel()


def test_tenants_taking_every_stream_they_can_leave_room_for_a_fifth() -> None:
    """Four tenants at their cap filled the service (4 x 250 = 1000) and locked a fifth out.
    Here, scaled down: 8 streams in all, 2 a tenant, 1 kept for each tenant of the map."""
    tokens = "advisories.tokens=" + ",".join(f"tok{i}=tenant{i}" for i in range(1, 6))
    caps = (
        "advisories.max_subscribers=8",
        "advisories.max_subscribers_per_tenant=2",
        "advisories.reserved_subscribers_per_tenant=1",
    )
    with running(tokens, *caps) as service:
        port = port_of(service)
        tenants = {i: Client(port, f"tok{i}") for i in range(1, 6)}
        streams: list[Stream] = []

        def take_all(tenant: int) -> str:
            """Subscribe until refused; the refusal's details."""
            while True:
                stream = tenants[tenant].subscribe()
                if not first_reply(stream):
                    assert stream.code() is RESOURCE_EXHAUSTED and stream.error is not None
                    return stream.error.details() or ""
                streams.append(stream)

        for tenant in (1, 2, 3):
            assert "advisories.max_subscribers_per_tenant" in take_all(tenant)
        assert "reserved for other tenants" in take_all(4)  # the last is the fifth's
        assert held_streams(service) == 7
        assert "advisories.max_subscribers)" in take_all(5)  # it got its one
        slots = advisories_of(service).slots
        assert [slots.of_tenant(f"tenant{i}") for i in range(1, 6)] == [2, 2, 2, 1, 1]
        assert held_streams(service) == 8
        for stream in streams:
            stream.cancel()


def first_reply(stream: Stream) -> bool:
    """Wait for a stream's first message or its end: True if it is live."""
    wait_until(lambda: bool(stream.messages) or stream.ended.is_set(), WAIT_S, "a reply")
    return bool(stream.messages)


# --- a frozen subscriber: writes bounded in time ----------------------------------------------

# A harness process that subscribes and reads; the test freezes it (SIGSTOP). When it runs
# again it reads what its transport held, and prints the changes' seqs and how it ended.
# BDP probing off: its HTTP/2 window stays at 64 KiB, so the service's writes stop soon.
FROZEN_CLIENT = """
import json, sys
import grpc
from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc

target, name, timeout_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
channel = grpc.insecure_channel(target, options=[("grpc.http2.bdp_probe", 0)])
request = pb.SubscribeRequest(subscriber_name=name)
seqs, code, details = [], "", ""
try:
    for message in pb_grpc.AdvisoriesStub(channel).Subscribe(request, timeout=timeout_s):
        if message.WhichOneof("kind") == "change":
            seqs.append(message.seq)
except grpc.RpcError as error:
    code, details = error.code().name, error.details() or ""
print(json.dumps({"seqs": seqs, "code": code, "details": details}))
"""
WRITE_TIMEOUT_S = 1.0
CUT_OFF_MARGIN_S = 10.0  # generous: a loaded machine must not fail the test


def test_a_frozen_subscriber_is_cut_off_in_time_and_nobody_else_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A real harness process, frozen with SIGSTOP while changes are published: its writes
    stop on flow control, and within write_timeout_s it is cut off and its slot freed; the
    healthy subscriber gets every change meanwhile. Its queue is far too large to overflow:
    only the time bound can cut it off."""
    caplog.set_level(logging.INFO)
    settings = (
        f"advisories.write_timeout_s={WRITE_TIMEOUT_S}",
        "advisories.subscriber_queue=1000000",
        "advisories.max_subscribers_per_caller=2",
        *NO_CIRCUITS,
    )
    with running(*settings) as service:
        port = port_of(service)
        advisories = advisories_of(service)
        healthy = Client(port).subscribe(subscriber_name="healthy")
        healthy.wait_for(1)
        frozen = subprocess.Popen(
            [sys.executable, "-c", FROZEN_CLIENT, f"{LOOPBACK}:{port}", "frozen-harness", "120"],
            stdout=subprocess.PIPE,
            cwd=Path(__file__).resolve().parents[1],
        )
        exporter = OTLPSpanExporter(endpoint=service.grpc_endpoint, insecure=True, timeout=30)
        sent = 0

        def batch() -> None:
            nonlocal sent
            spans = harness_spans(Call(new_turn()) for _ in range(20))  # 20 turn blocks
            assert exporter.export(spans) is SpanExportResult.SUCCESS
            sent += len(spans)
            healthy.wait_for(1 + sent, f"change {sent} at the healthy subscriber")

        try:
            wait_until(lambda: held_streams(service) == 2, WAIT_S, "the frozen harness")
            (subscriber,) = [
                s for s in list(advisories.broadcaster.subscribers) if s.name == "frozen-harness"
            ]
            assert "max_subscribers_per_caller" in refused(Client(port))  # both slots held
            os.kill(frozen.pid, signal.SIGSTOP)

            # Publish until its writes stop: changes wait in its queue once the healthy
            # subscriber, served by the same loop, has had them all.
            for _ in range(MAX_BATCHES):
                batch()
                if subscriber.queue or subscriber.cut:
                    break
            blocked_at = time.monotonic()
            assert subscriber.queue or subscriber.cut, f"its writes never stopped ({sent})"

            # Meanwhile the pipeline goes on; it is cut off within the bound.
            deadline = blocked_at + WRITE_TIMEOUT_S + CUT_OFF_MARGIN_S
            while subscriber in advisories.broadcaster.subscribers:
                assert time.monotonic() < deadline, "not cut off within write_timeout_s"
                batch()
                time.sleep(0.05)
            cut_after_s = time.monotonic() - blocked_at
            print(f"cut off {cut_after_s:.2f} s after its writes were seen to stop")
            for _ in range(3):
                batch()
            assert "took no change within 1 s" in subscriber.cut
            assert service.metric("mcp_breaker_advisory_subscribers_cut_off_total") == 1
            assert [m.seq for m in healthy.messages[1:]] == list(range(1, sent + 1))

            # Its slot is free: the same host subscribes again.
            again = Client(port).subscribe(subscriber_name="again")
            assert again.wait_for(1)[0].WhichOneof("kind") == "snapshot"
            again.cancel()

            # Running again, it reads what its transport held, in order, then the cut-off.
            os.kill(frozen.pid, signal.SIGCONT)
            out, _ = frozen.communicate(timeout=WAIT_S)
            ended = json.loads(out)
            assert ended["code"] == "RESOURCE_EXHAUSTED"
            assert "advisories.write_timeout_s" in ended["details"]
            assert ended["seqs"] == list(range(1, len(ended["seqs"]) + 1))
            assert 0 < len(ended["seqs"]) < sent
        finally:
            exporter.shutdown()
            if frozen.poll() is None:
                os.kill(frozen.pid, signal.SIGCONT)
            terminate(frozen)
        healthy.cancel()

    warned = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "frozen-harness" in r.getMessage()
    ]
    assert len(warned) == 1 and "was cut off: took no change within 1 s" in warned[0]


# --- Check: arguments bounded -----------------------------------------------------------------


def test_a_check_with_oversized_arguments_is_refused_before_any_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from processor.advisories import servicer as advisory_service

    read: list[str] = []
    real = fingerprints

    def counted(server: str | None, tool: str, arguments: Any) -> tuple[str, ...]:
        read.append(tool)
        return real(server, tool, arguments)

    monkeypatch.setattr(advisory_service, "fingerprints", counted)
    with running("advisories.max_check_argument_bytes=1000") as service:
        client = Client(port_of(service))
        at_limit = json.dumps({"q": "x" * 991})
        assert len(at_limit.encode()) == 1000
        assert client.check(arguments_json=at_limit).verdict == pb.VERDICT_ALLOW
        assert len(read) == 1
        wide = json.dumps({"q": "é" * 600}, ensure_ascii=False)  # 600 characters, 1210 bytes
        for fields in (
            {"arguments_json": json.dumps({"q": "x" * 992})},  # 1001 bytes
            {"arguments_json": wide},
            {"arguments_json": wide, "fingerprint": "f" * 32},  # not even beside a fingerprint
        ):
            code, details = rpc_error(lambda f=fields: client.check(**f))
            assert code is grpc.StatusCode.INVALID_ARGUMENT, fields
            assert "advisories.max_check_argument_bytes" in details
        assert len(read) == 1  # none of them was read
    with running() as service:  # the default, 16 KiB: the 230 KB Check of issue 14
        client = Client(port_of(service))
        big = json.dumps({"html": "<div>" * 46_000})
        assert (
            rpc_code(lambda: client.check(arguments_json=big)) is grpc.StatusCode.INVALID_ARGUMENT
        )
        assert client.check(arguments_json=json.dumps({"q": "x" * 16_000})).verdict == (
            pb.VERDICT_ALLOW
        )
    assert len(read) == 2
