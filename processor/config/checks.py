"""The checks every component's ``validate()`` shares: endpoints and positive numbers.

Each returns the problem as one line naming the key and the bad value (or nothing), for
the loader to report together with all the others.
"""

from __future__ import annotations

from processor.config.endpoints import GRPC_ENDPOINT_SCHEMES, grpc_endpoint_parts


def endpoint_problem(key: str, value: str, *, allow_empty: bool = False) -> str | None:
    """Why ``value`` is not a ``host:port`` endpoint, or None when it is."""
    if not value:
        return None if allow_empty else f"{key}: must be host:port, got an empty value"
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        return f"{key}: must be host:port with a port from 0 to 65535, got {value!r}"
    return None


def grpc_endpoint_problem(key: str, value: str) -> str | None:
    """Why ``value`` cannot be a gRPC next hop, or None; empty means no next hop."""
    if not value:
        return None
    scheme, address, path = grpc_endpoint_parts(value)
    if scheme and scheme not in GRPC_ENDPOINT_SCHEMES:
        return (
            f"{key}: unsupported scheme {scheme!r} in {value!r}; an OTLP/gRPC endpoint is "
            "host:port, http://host:port (plaintext) or https://host:port (TLS)"
        )
    if path not in ("", "/"):
        return (
            f"{key}: an OTLP/gRPC endpoint has no path, got {value!r} (for OTLP/HTTP to "
            "/v1/traces, set forward.protocol: http)"
        )
    return endpoint_problem(key, address)


def not_positive(prefix: str, config: object, *keys: str) -> list[str]:
    """One problem per key whose value is zero or negative."""
    return [
        f"{prefix}.{key}: must be positive, got {getattr(config, key)}"
        for key in keys
        if getattr(config, key) <= 0
    ]
