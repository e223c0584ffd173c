"""The OTLP receivers: gRPC and HTTP, how much each takes in, and who may send."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from processor.config.checks import endpoint_problem, not_positive
from processor.config.server_tls import ServerTlsConfig

DEFAULT_GRPC_ENDPOINT = "0.0.0.0:4317"
DEFAULT_HTTP_ENDPOINT = "0.0.0.0:4318"
# OTLP: a gRPC server MUST enforce a receive limit; 4 MiB is what clients cap requests at.
DEFAULT_GRPC_MAX_RECV_MSG_BYTES = 4 * 1024 * 1024
# OTLP/HTTP: the Collector's confighttp default, measured after decompression.
DEFAULT_HTTP_MAX_BODY_BYTES = 20 * 1024 * 1024
# Connections an outsider can open and hold: each is a file descriptor and a buffer.
DEFAULT_HTTP_MAX_CONNECTIONS = 512  # over it a new connection is closed at once
DEFAULT_HTTP_IDLE_TIMEOUT_S = 60.0  # a connection with no request in flight is closed after this
DEFAULT_HTTP_READ_TIMEOUT_S = 30.0  # a request's body must arrive within this
# The bytes all OTLP/HTTP requests together may hold while they are read and decoded (an
# OTLP/JSON body counts several times its size, processor/receive/http.py): three max-size
# protobuf bodies at once, or dozens of the usual few hundred KiB, not hundreds of either.
# A request bigger than this alone is still taken when nothing else is in flight.
DEFAULT_HTTP_MAX_INFLIGHT_BYTES = 64 * 1024 * 1024
DEFAULT_GRPC_MAX_CONNECTION_IDLE_S = 300.0  # gRPC closes a connection with no RPC after this
# Clients reconnect (OTLP exporters do so by themselves), which also spreads them over
# replicas behind a Service; in-flight RPCs get the grace period to finish.
DEFAULT_GRPC_MAX_CONNECTION_AGE_S = 3600.0
DEFAULT_GRPC_MAX_CONNECTION_AGE_GRACE_S = 30.0
DEFAULT_GRPC_KEEPALIVE_TIME_S = 60.0  # ping an idle client this often...
DEFAULT_GRPC_KEEPALIVE_TIMEOUT_S = 20.0  # ...and drop it when the ping is not answered
DEFAULT_GRPC_HANDSHAKE_TIMEOUT_S = 10.0  # a connection that never speaks HTTP/2 is dropped
DEFAULT_GRPC_MAX_CONCURRENT_RPCS = 1000  # Export calls in progress at once, all connections


class ReceiverAuth(enum.StrEnum):
    """Who may send spans to the OTLP receivers."""

    NONE = "none"  # anyone who reaches the port; a span's tenant attribute names its tenant
    TOKEN = "token"  # a bearer token from the token map; the token's tenant is the tenant
    CERTIFICATE = "certificate"  # mutual TLS; the client certificate's common name is the tenant


class SpanTenant(enum.StrEnum):
    """With authentication on, what a span's own tenant attribute may say."""

    IGNORE = "ignore"  # the sender's identity decides; the attribute is not read
    MATCH = "match"  # a resource naming another tenant is forwarded but not analysed


@dataclass(frozen=True, kw_only=True)
class GrpcReceiverConfig:
    """OTLP/gRPC ``TraceService/Export``."""

    enabled: bool = True
    endpoint: str = DEFAULT_GRPC_ENDPOINT
    # Over it the request is refused with RESOURCE_EXHAUSTED (checked after gzip too).
    max_recv_msg_bytes: int = DEFAULT_GRPC_MAX_RECV_MSG_BYTES
    max_concurrent_rpcs: int = DEFAULT_GRPC_MAX_CONCURRENT_RPCS
    max_connection_idle_s: float = DEFAULT_GRPC_MAX_CONNECTION_IDLE_S
    max_connection_age_s: float = DEFAULT_GRPC_MAX_CONNECTION_AGE_S
    max_connection_age_grace_s: float = DEFAULT_GRPC_MAX_CONNECTION_AGE_GRACE_S
    keepalive_time_s: float = DEFAULT_GRPC_KEEPALIVE_TIME_S
    keepalive_timeout_s: float = DEFAULT_GRPC_KEEPALIVE_TIMEOUT_S
    handshake_timeout_s: float = DEFAULT_GRPC_HANDSHAKE_TIMEOUT_S

    def validate(self, prefix: str) -> list[str]:
        problems = not_positive(
            prefix,
            self,
            "max_recv_msg_bytes",
            "max_concurrent_rpcs",
            "max_connection_idle_s",
            "max_connection_age_s",
            "max_connection_age_grace_s",
            "keepalive_time_s",
            "keepalive_timeout_s",
            "handshake_timeout_s",
        )
        return [p for p in [endpoint_problem(f"{prefix}.endpoint", self.endpoint), *problems] if p]


@dataclass(frozen=True, kw_only=True)
class HttpReceiverConfig:
    """OTLP/HTTP ``POST /v1/traces`` in protobuf and JSON."""

    enabled: bool = True
    endpoint: str = DEFAULT_HTTP_ENDPOINT
    # Over it the request gets 413; applies to the body after decompression.
    max_body_bytes: int = DEFAULT_HTTP_MAX_BODY_BYTES
    max_connections: int = DEFAULT_HTTP_MAX_CONNECTIONS
    idle_timeout_s: float = DEFAULT_HTTP_IDLE_TIMEOUT_S
    read_timeout_s: float = DEFAULT_HTTP_READ_TIMEOUT_S
    # Over it, a request is answered 503 with Retry-After before its body is read.
    max_inflight_bytes: int = DEFAULT_HTTP_MAX_INFLIGHT_BYTES

    def validate(self, prefix: str) -> list[str]:
        keys = (
            "max_body_bytes",
            "max_connections",
            "idle_timeout_s",
            "read_timeout_s",
            "max_inflight_bytes",
        )
        problems = not_positive(prefix, self, *keys)
        return [p for p in [endpoint_problem(f"{prefix}.endpoint", self.endpoint), *problems] if p]


@dataclass(frozen=True, kw_only=True)
class ReceiversConfig:
    grpc: GrpcReceiverConfig = field(default_factory=GrpcReceiverConfig)
    http: HttpReceiverConfig = field(default_factory=HttpReceiverConfig)
    # none: anyone who reaches the ports steers the breaker (said at start-up). token: the
    # bearer tokens of the token map (advisories.tokens and auth.tokens_file), as the
    # Collector's bearertokenauth. certificate: mutual TLS (tls.client_ca_file).
    auth: ReceiverAuth = ReceiverAuth.NONE
    span_tenant: SpanTenant = SpanTenant.IGNORE
    # TLS on both receivers; with client_ca_file, every client must present a certificate.
    tls: ServerTlsConfig = field(default_factory=ServerTlsConfig)

    def validate(self, prefix: str) -> list[str]:
        problems = self.grpc.validate(f"{prefix}.grpc") + self.http.validate(f"{prefix}.http")
        if not self.grpc.enabled and not self.http.enabled:
            problems.append(f"{prefix}: at least one of grpc and http must be enabled")
        if self.auth is ReceiverAuth.CERTIFICATE and not self.tls.client_ca_file:
            problems.append(
                f"{prefix}.auth: certificate needs mutual TLS: set {prefix}.tls.cert_file, "
                "key_file and client_ca_file"
            )
        return problems + self.tls.validate(f"{prefix}.tls")
