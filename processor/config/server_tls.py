"""TLS on a listening port: the OTLP receivers' and the advisory port's, the same settings."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class ServerTlsConfig:
    """TLS on a listening port. No files: plaintext (for loopback and sidecars)."""

    cert_file: str = ""
    key_file: str = ""
    # Set it for mutual TLS: every client must present a certificate this CA signed.
    client_ca_file: str = ""

    def validate(self, prefix: str) -> list[str]:
        if bool(self.cert_file) != bool(self.key_file):
            return [f"{prefix}: cert_file and key_file go together, got only one"]
        if self.client_ca_file and not self.cert_file:
            return [f"{prefix}.client_ca_file: mutual TLS needs cert_file and key_file too"]
        return []
