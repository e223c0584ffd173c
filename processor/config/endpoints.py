"""Reading the ``host:port`` endpoints the components listen on and send to.

The service dials and binds what these return; ``checks`` says, at start-up, why a
value is not one.
"""

from __future__ import annotations

# The schemes an OTLP/gRPC endpoint may carry, as the OpenTelemetry SDK's gRPC exporter reads
# them: http is plaintext, https is TLS. Without a scheme, forward.insecure decides.
GRPC_ENDPOINT_SCHEMES = {"http": False, "https": True}


def grpc_endpoint_parts(value: str) -> tuple[str, str, str]:
    """``(scheme, host:port, path)`` of a gRPC endpoint; the scheme is empty when absent."""
    scheme, sep, rest = value.partition("://")
    if not sep:
        return "", value, ""
    address, slash, path = rest.partition("/")
    return scheme.lower(), address, slash + path


def grpc_target(endpoint: str, insecure: bool) -> tuple[str, bool]:
    """The ``host:port`` to dial and whether over TLS: a scheme decides, else ``insecure``."""
    scheme, address, _ = grpc_endpoint_parts(endpoint)
    if scheme:
        return address, GRPC_ENDPOINT_SCHEMES[scheme]
    return address, not insecure


def split_endpoint(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return host.strip("[]"), int(port)
