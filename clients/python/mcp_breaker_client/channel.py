"""The gRPC channel to the advisory port: plaintext or TLS (mutual TLS with a client
certificate), and the bearer token every call carries.

Plaintext is for loopback and sidecars only: the token would cross the network in clear.
The token goes in ``authorization: Bearer <token>`` metadata, as the service reads it
(``processor/advisories/auth.py``); it is never logged here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

Metadata = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsConfig:
    """TLS to the advisory port. PEM bytes; ``None`` roots means the system's CAs."""

    root_certificates: bytes | None = None
    # Both, for mutual TLS (the service's advisories.tls.client_ca_file is set).
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    # The name the server's certificate must carry, when it differs from the target's
    # host (a certificate for "breaker.internal" reached through an IP address).
    server_name: str = ""

    def __post_init__(self) -> None:
        if (self.certificate_chain is None) != (self.private_key is None):
            raise ValueError("TlsConfig: certificate_chain and private_key go together")

    @classmethod
    def from_files(
        cls,
        *,
        root_certificates: str | Path | None = None,
        certificate_chain: str | Path | None = None,
        private_key: str | Path | None = None,
        server_name: str = "",
    ) -> TlsConfig:
        def read(path: str | Path | None) -> bytes | None:
            return Path(path).read_bytes() if path else None

        return cls(
            root_certificates=read(root_certificates),
            certificate_chain=read(certificate_chain),
            private_key=read(private_key),
            server_name=server_name,
        )


def open_channel(
    target: str, tls: TlsConfig | None, options: list[tuple[str, Any]] | None = None
) -> grpc.Channel:
    """A channel to ``target`` (host:port); plaintext when ``tls`` is None."""
    options = list(options or [])
    if tls is None:
        return grpc.insecure_channel(target, options=options)
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    credentials = grpc.ssl_channel_credentials(
        root_certificates=tls.root_certificates,
        private_key=tls.private_key,
        certificate_chain=tls.certificate_chain,
    )
    return grpc.secure_channel(target, credentials, options=options)


def bearer_metadata(token: str | None) -> Metadata:
    return (("authorization", f"Bearer {token}"),) if token else ()
