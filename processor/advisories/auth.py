"""Who is asking: bearer tokens to tenants, admin tokens, and the advisory port's TLS.

Tokens are compared in constant time and never logged; a caller is named in logs by its
tenant and peer address only.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from pathlib import Path

import grpc

from processor.config import AdvisoriesConfig, AdvisoryTlsConfig
from processor.errors import StartupError

DEFAULT_TENANT = ""
BEARER = "bearer "


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    for key, value in metadata or ():
        is_bearer = isinstance(value, str) and value[: len(BEARER)].lower() == BEARER
        if key.lower() == "authorization" and is_bearer:
            assert isinstance(value, str)
            return value[len(BEARER) :].strip()
    return None


class Authenticator:
    def __init__(self, config: AdvisoriesConfig) -> None:
        self._tokens = tuple(config.tokens.items())
        self._admin = tuple(config.admin_tokens)

    @property
    def open(self) -> bool:
        """No tokens configured: every caller is the default tenant."""
        return not self._tokens

    def tenant(self, token: str | None) -> str | None:
        """The caller's tenant, or None when it must be refused."""
        if self.open:
            return DEFAULT_TENANT
        if not token:
            return None
        found = None
        for known, tenant in self._tokens:  # every entry, so timing says nothing
            if hmac.compare_digest(known.encode(), token.encode()):
                found = tenant
        return found

    def is_admin(self, token: str | None) -> bool:
        if not token:
            return False
        matched = False
        for known in self._admin:
            matched |= hmac.compare_digest(known.encode(), token.encode())
        return matched


def server_credentials(tls: AdvisoryTlsConfig) -> grpc.ServerCredentials | None:
    """TLS credentials for the advisory port, or None for plaintext."""
    if not tls.cert_file:
        return None

    def read(what: str, path: str) -> bytes:
        try:
            return Path(path).read_bytes()
        except OSError as error:
            problem = f"advisories.tls.{what}: cannot read {path}: {error.strerror}"
            raise StartupError(problem) from None

    pair = (read("key_file", tls.key_file), read("cert_file", tls.cert_file))
    client_ca = read("client_ca_file", tls.client_ca_file) if tls.client_ca_file else None
    return grpc.ssl_server_credentials(
        [pair], root_certificates=client_ca, require_client_auth=client_ca is not None
    )
