"""A test CA, a server certificate for 127.0.0.1 and localhost, and a client certificate.

    python certificates.py DIR    # writes ca.pem, server.pem, server.key, client.pem, client.key

For the TLS tests of the TypeScript client; run with the repository's venv, whose test
extra has ``cryptography``. Short-lived (one hour), EC P-256, nothing secret.
"""

from __future__ import annotations

import datetime
import ipaddress
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

Issuer = tuple[x509.Certificate, ec.EllipticCurvePrivateKey]


def certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: Issuer | None,
    *,
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
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if usage == ExtendedKeyUsageOID.SERVER_AUTH:
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


def pem(item: x509.Certificate | ec.EllipticCurvePrivateKey) -> bytes:
    if isinstance(item, x509.Certificate):
        return item.public_bytes(serialization.Encoding.PEM)
    return item.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def main(directory: Path) -> None:
    ca_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    ca = certificate("test CA", ca_key, None)
    server = certificate("localhost", server_key, (ca, ca_key), usage=ExtendedKeyUsageOID.SERVER_AUTH)
    client = certificate("harness", client_key, (ca, ca_key), usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    files = {
        "ca.pem": pem(ca),
        "server.pem": pem(server),
        "server.key": pem(server_key),
        "client.pem": pem(client),
        "client.key": pem(client_key),
    }
    for name, data in files.items():
        (directory / name).write_bytes(data)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
