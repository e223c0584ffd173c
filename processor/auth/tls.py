"""TLS on our listening ports, from one kind of settings (``ServerTlsConfig``): credentials
for a gRPC server and an ``ssl`` context for an HTTP one. A file that cannot be read is a
start-up error naming its key."""

from __future__ import annotations

import ssl
from pathlib import Path

import grpc

from processor.config import ServerTlsConfig
from processor.errors import StartupError


def _read(prefix: str, what: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise StartupError(f"{prefix}.{what}: cannot read {path}: {error.strerror}") from None


def grpc_server_credentials(tls: ServerTlsConfig, prefix: str) -> grpc.ServerCredentials | None:
    """None for plaintext; with ``client_ca_file``, every client must present a certificate."""
    if not tls.cert_file:
        return None
    pair = (_read(prefix, "key_file", tls.key_file), _read(prefix, "cert_file", tls.cert_file))
    client_ca = _read(prefix, "client_ca_file", tls.client_ca_file) if tls.client_ca_file else None
    return grpc.ssl_server_credentials(
        [pair], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


def ssl_server_context(tls: ServerTlsConfig, prefix: str) -> ssl.SSLContext | None:
    if not tls.cert_file:
        return None
    for what in ("cert_file", "key_file", "client_ca_file"):
        if getattr(tls, what):
            _read(prefix, what, getattr(tls, what))  # the same error as gRPC's, if unreadable
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
        if tls.client_ca_file:
            context.load_verify_locations(tls.client_ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
    except ssl.SSLError as error:
        raise StartupError(f"{prefix}: cannot use the certificate or key: {error}") from None
    return context
