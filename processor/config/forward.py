"""The forwarder: the next OTLP hop, the queue in front of it and the retries to it."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from processor.config.checks import grpc_endpoint_problem, not_positive
from processor.config.endpoints import grpc_target

DEFAULT_FORWARD_ENDPOINT = ""  # empty: no next hop, spans are analysed and released
DEFAULT_FORWARD_TIMEOUT_S = 5.0  # per attempt, as the Collector's exporterhelper
# The per-attempt deadline grows from timeout_s, learnt from a next hop slower than it, up
# to this (processor/forward/deadline.py): 8 x the 5 s default outlasts a next hop 4 x
# slower, which then receives each request at most 4 times instead of once per retry.
DEFAULT_FORWARD_MAX_TIMEOUT_S = 60.0
# Batches waiting in the queue are merged into one export up to this size; OTLP clients
# SHOULD keep requests under 4 MiB, the usual receive limit of the next hop.
DEFAULT_FORWARD_MAX_REQUEST_BYTES = 4 * 1024 * 1024
DEFAULT_QUEUE_MAX_SPANS = 100_000
DEFAULT_QUEUE_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_QUEUE_CONSUMERS = 10
# Where the queue keeps what it holds: in memory (lost with the process) or on disk.
DEFAULT_QUEUE_DIRECTORY = ""  # storage disk needs one; nothing is written to disk otherwise
# What a sender is told to wait when the queue is full (RetryInfo / Retry-After).
DEFAULT_BACKPRESSURE_RETRY_AFTER_S = 2.0
DEFAULT_RETRY_INITIAL_INTERVAL_S = 5.0
DEFAULT_RETRY_MAX_INTERVAL_S = 30.0
DEFAULT_RETRY_MULTIPLIER = 1.5
DEFAULT_RETRY_RANDOMIZATION = 0.5  # each delay is drawn from [d*(1-r), d*(1+r)]
DEFAULT_RETRY_MAX_ELAPSED_S = 300.0  # 0 means retry until shutdown
DEFAULT_SHUTDOWN_GRACE_S = 10.0
# Removed from MCP spans before they are forwarded: what the harness convention asks a
# harness to record for mcp-breaker's sake (the fingerprint and the hidden-failure check
# read them in flight), which the tracing backend behind us was never meant to keep.
DEFAULT_STRIP_ATTRIBUTES = ("mcp.tool.arguments", "mcp.tool.result")


class ForwardProtocol(enum.StrEnum):
    GRPC = "grpc"
    HTTP = "http"


class QueueStorage(enum.StrEnum):
    MEMORY = "memory"  # lost with the process; nothing written anywhere
    DISK = "disk"  # files in forward.queue.directory: survives a crash and a restart


class Compression(enum.StrEnum):
    NONE = "none"
    GZIP = "gzip"


@dataclass(frozen=True, kw_only=True)
class QueueConfig:
    """The bounded queue in front of the next hop. Full means the sender is told to retry."""

    # The bounds hold for both storages: in memory they bound memory, on disk the disk
    # (the disk queue keeps in memory only what is being sent).
    max_spans: int = DEFAULT_QUEUE_MAX_SPANS
    max_bytes: int = DEFAULT_QUEUE_MAX_BYTES
    consumers: int = DEFAULT_QUEUE_CONSUMERS
    backpressure_retry_after_s: float = DEFAULT_BACKPRESSURE_RETRY_AFTER_S
    storage: QueueStorage = QueueStorage.MEMORY
    directory: str = DEFAULT_QUEUE_DIRECTORY
    # Disk only: every commit waits for the disk itself (fsync), so an accepted request
    # survives a power loss too, not only the process; off, it survives the process.
    fsync: bool = False

    def validate(self, prefix: str) -> list[str]:
        keys = ("max_spans", "max_bytes", "consumers", "backpressure_retry_after_s")
        problems = not_positive(prefix, self, *keys)
        if self.storage is QueueStorage.DISK and not self.directory.strip():
            problems.append(
                f"{prefix}.directory: must be set when {prefix}.storage is disk (a directory "
                "the service can write, on a volume that outlives the process)"
            )
        if self.storage is QueueStorage.MEMORY:
            for key, value in (("directory", repr(self.directory)), ("fsync", "true")):
                if getattr(self, key):
                    problems.append(
                        f"{prefix}.{key}: only used by the disk queue, got {value} with "
                        f"{prefix}.storage memory (set {prefix}.storage: disk, or remove it)"
                    )
        return problems


@dataclass(frozen=True, kw_only=True)
class RetryConfig:
    """Exponential backoff with jitter on OTLP's retryable codes; server RetryInfo wins."""

    enabled: bool = True
    initial_interval_s: float = DEFAULT_RETRY_INITIAL_INTERVAL_S
    max_interval_s: float = DEFAULT_RETRY_MAX_INTERVAL_S
    multiplier: float = DEFAULT_RETRY_MULTIPLIER
    randomization: float = DEFAULT_RETRY_RANDOMIZATION
    # When zero, a batch is retried until it is delivered or the service shuts down.
    max_elapsed_s: float = DEFAULT_RETRY_MAX_ELAPSED_S

    def validate(self, prefix: str) -> list[str]:
        problems = not_positive(prefix, self, "initial_interval_s")
        if self.max_interval_s < self.initial_interval_s:
            problems.append(
                f"{prefix}.max_interval_s: must be at least initial_interval_s "
                f"({self.initial_interval_s}), got {self.max_interval_s}"
            )
        if self.multiplier < 1:
            problems.append(f"{prefix}.multiplier: must be at least 1, got {self.multiplier}")
        if not 0 <= self.randomization < 1:
            problems.append(f"{prefix}.randomization: must be in [0, 1), got {self.randomization}")
        if self.max_elapsed_s < 0:
            problems.append(
                f"{prefix}.max_elapsed_s: must be zero (forever) or positive, "
                f"got {self.max_elapsed_s}"
            )
        return problems


@dataclass(frozen=True, kw_only=True)
class ForwardConfig:
    """The next OTLP hop (a Collector, Tempo, Jaeger...)."""

    # gRPC: host:port, http://host:port (plaintext) or https://host:port (TLS), as the
    # OpenTelemetry SDK's gRPC exporter reads it. HTTP: a base URL (http://host:4318).
    # Empty: no next hop.
    endpoint: str = DEFAULT_FORWARD_ENDPOINT
    protocol: ForwardProtocol = ForwardProtocol.GRPC
    # gzip costs about 5 us per span here; on loopback or a LAN, none is cheaper.
    compression: Compression = Compression.NONE
    # gRPC with a host:port endpoint: false turns on TLS. A scheme in the endpoint wins.
    insecure: bool = True
    ca_file: str = ""  # TLS: the CA to trust (PEM); empty trusts the system roots
    # TLS: a client certificate and its key (PEM), for a next hop that asks for mutual TLS.
    cert_file: str = ""
    key_file: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = DEFAULT_FORWARD_TIMEOUT_S
    # Equal to timeout_s: every attempt waits timeout_s, whatever the next hop's latency.
    max_timeout_s: float = DEFAULT_FORWARD_MAX_TIMEOUT_S
    max_request_bytes: int = DEFAULT_FORWARD_MAX_REQUEST_BYTES
    shutdown_grace_s: float = DEFAULT_SHUTDOWN_GRACE_S
    # Attribute keys removed from MCP spans after the analysis, before forwarding.
    strip_attributes: tuple[str, ...] = DEFAULT_STRIP_ATTRIBUTES
    queue: QueueConfig = field(default_factory=QueueConfig)
    retry: RetryConfig = field(default_factory=RetryConfig)

    @property
    def tls(self) -> bool:
        """Whether the connection to the next hop is TLS."""
        if self.protocol is ForwardProtocol.HTTP:
            return self.endpoint.lower().startswith("https://")
        return grpc_target(self.endpoint, self.insecure)[1]

    def validate(self, prefix: str) -> list[str]:
        endpoint: str | None = None
        if self.protocol is ForwardProtocol.GRPC:
            endpoint = grpc_endpoint_problem(f"{prefix}.endpoint", self.endpoint)
        elif self.endpoint and not self.endpoint.lower().startswith(("http://", "https://")):
            endpoint = (
                f"{prefix}.endpoint: must be an http:// or https:// URL for protocol http, "
                f"got {self.endpoint!r}"
            )
        problems: list[str | None] = [endpoint]
        if bool(self.cert_file) != bool(self.key_file):
            problems.append(f"{prefix}: cert_file and key_file go together, got only one")
        if self.endpoint and endpoint is None and not self.tls:
            for key in ("ca_file", "cert_file"):
                if getattr(self, key):
                    problems.append(
                        f"{prefix}.{key}: set, but {self.endpoint!r} is not reached over TLS "
                        "(use https://, or insecure: false for a host:port gRPC endpoint)"
                    )
        if self.queue.storage is QueueStorage.DISK and not self.endpoint:
            problems.append(
                f"{prefix}.queue.storage: disk needs {prefix}.endpoint: without a next hop "
                "spans are released, never queued"
            )
        problems += not_positive(prefix, self, "timeout_s", "max_request_bytes")
        if self.max_timeout_s < self.timeout_s:
            problems.append(
                f"{prefix}.max_timeout_s: must be at least timeout_s ({self.timeout_s}), "
                f"got {self.max_timeout_s}"
            )
        if self.shutdown_grace_s < 0:
            problems.append(
                f"{prefix}.shutdown_grace_s: must not be negative, got {self.shutdown_grace_s}"
            )
        if any(not key.strip() for key in self.strip_attributes):
            problems.append(f"{prefix}.strip_attributes: an attribute key must not be empty")
        problems += self.queue.validate(f"{prefix}.queue") + self.retry.validate(f"{prefix}.retry")
        return [p for p in problems if p]
