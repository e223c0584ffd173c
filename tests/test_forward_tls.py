"""TLS and mutual TLS to the next hop, gRPC and HTTP, with certificates made for the test,
against real servers that ask for a client certificate."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from aiohttp import web

from processor.config import load_config
from processor.errors import StartupError
from processor.forward.retry import SendOutcome, SendResult
from processor.forward.senders import GrpcSender, HttpSender
from tests.support import LOOPBACK, CaptureCollector
from tests.test_advisories_service import Pki, pki  # noqa: F401 (a fixture)


@pytest.fixture
def client_files(pki: Pki, tmp_path: Path) -> tuple[Path, Path]:  # noqa: F811
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    cert.write_bytes(pki.client_cert)
    key.write_bytes(pki.client_key)
    return cert, key


@pytest.fixture
def mutual_tls_hop(pki: Pki) -> Iterator[CaptureCollector]:  # noqa: F811
    credentials = grpc.ssl_server_credentials(
        [(pki.server_key.read_bytes(), pki.server_cert.read_bytes())],
        root_certificates=pki.ca,
        require_client_auth=True,
    )
    hop = CaptureCollector().start(credentials)
    yield hop
    hop.stop()


def grpc_send(*overrides: str) -> SendResult:
    config = load_config(overrides=list(overrides)).forward

    async def scenario() -> SendResult:
        sender = GrpcSender(config)
        try:
            return await sender.send(b"\x0a\x00", timeout_s=5)
        finally:
            await sender.close()

    return asyncio.run(scenario())


def test_grpc_with_mutual_tls_delivers(
    mutual_tls_hop: CaptureCollector,
    pki: Pki,  # noqa: F811
    client_files: tuple[Path, Path],
) -> None:
    cert, key = client_files
    result = grpc_send(
        f"forward.endpoint=https://{mutual_tls_hop.endpoint}",
        f"forward.ca_file={pki.ca_file}",
        f"forward.cert_file={cert}",
        f"forward.key_file={key}",
    )
    assert result.outcome is SendOutcome.DELIVERED
    assert len(mutual_tls_hop.requests) == 1


def test_grpc_without_the_client_certificate_is_turned_away(
    mutual_tls_hop: CaptureCollector,
    pki: Pki,  # noqa: F811
) -> None:
    result = grpc_send(
        f"forward.endpoint=https://{mutual_tls_hop.endpoint}", f"forward.ca_file={pki.ca_file}"
    )
    assert result.outcome is SendOutcome.RETRYABLE  # UNAVAILABLE: the handshake failed
    assert mutual_tls_hop.requests == []


def test_insecure_false_means_tls_for_a_host_port_endpoint(
    mutual_tls_hop: CaptureCollector,
    pki: Pki,  # noqa: F811
    client_files: tuple[Path, Path],
) -> None:
    cert, key = client_files
    result = grpc_send(
        f"forward.endpoint={mutual_tls_hop.endpoint}",
        "forward.insecure=false",
        f"forward.ca_file={pki.ca_file}",
        f"forward.cert_file={cert}",
        f"forward.key_file={key}",
    )
    assert result.outcome is SendOutcome.DELIVERED


def test_http_scheme_means_plaintext_grpc(next_hop: CaptureCollector) -> None:
    """How the OpenTelemetry SDK writes a plaintext gRPC endpoint: it delivers."""
    result = grpc_send(f"forward.endpoint=http://{next_hop.endpoint}", "forward.insecure=false")
    assert result.outcome is SendOutcome.DELIVERED
    assert len(next_hop.requests) == 1


def test_a_missing_certificate_file_is_a_startup_error_naming_its_key(pki: Pki) -> None:  # noqa: F811
    config = load_config(
        overrides=[
            f"forward.endpoint=https://{LOOPBACK}:1",
            f"forward.ca_file={pki.ca_file}",
            "forward.cert_file=/nonexistent/client.pem",
            "forward.key_file=/nonexistent/client.key",
        ]
    ).forward
    with pytest.raises(StartupError, match=r"^forward\.key_file: cannot read"):
        GrpcSender(config)
    with pytest.raises(StartupError, match=r"^forward\.cert_file: cannot read"):
        HttpSender(config)


def test_http_with_mutual_tls_delivers(
    pki: Pki,  # noqa: F811
    client_files: tuple[Path, Path],
) -> None:
    cert, key = client_files
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca_file))
    server_context.load_cert_chain(pki.server_cert, pki.server_key)
    server_context.verify_mode = ssl.CERT_REQUIRED
    peers: list[object] = []

    async def handler(request: web.Request) -> web.Response:
        transport = request.transport
        peers.append(transport.get_extra_info("peercert") if transport else None)
        return web.Response(body=b"", content_type="application/x-protobuf")

    async def scenario(with_client_cert: bool) -> SendResult:
        app = web.Application()
        app.router.add_post("/v1/traces", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, LOOPBACK, 0, ssl_context=server_context)
        await site.start()
        port = runner.addresses[0][1]
        overrides = [
            "forward.protocol=http",
            f"forward.endpoint=https://{LOOPBACK}:{port}",
            f"forward.ca_file={pki.ca_file}",
        ]
        if with_client_cert:
            overrides += [f"forward.cert_file={cert}", f"forward.key_file={key}"]
        sender = HttpSender(load_config(overrides=overrides).forward)
        try:
            return await sender.send(b"\x0a\x00", timeout_s=5)
        finally:
            await sender.close()
            await runner.cleanup()

    assert asyncio.run(scenario(True)).outcome is SendOutcome.DELIVERED
    assert len(peers) == 1 and peers[0]  # the server saw our certificate
    assert asyncio.run(scenario(False)).outcome is SendOutcome.RETRYABLE
    assert len(peers) == 1
