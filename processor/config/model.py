"""The configuration model: one frozen, keyword-only dataclass per component.

Every default is a named constant with its unit in the name, and this module is the one
place they are written down (``docs/configuration.md`` is checked against it by a test).
``validate()`` returns one line per problem, naming the key and the bad value; the loader
collects them all so a person fixes a file in one pass. Nothing is clamped silently.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

from processor.config.state import Backend, StateConfig, retention_problems

# --- receivers ----------------------------------------------------------------------------
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

# --- forwarder ----------------------------------------------------------------------------
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

# --- classification -----------------------------------------------------------------------
DEFAULT_TURN_KEYS = ("mcp.turn.id",)  # span attributes naming the turn; else the trace id
DEFAULT_ROUND_KEYS = ("mcp.turn.round",)
# Seconds. The two halves of a call are exported by two processes (the agent, the MCP
# server), each through the OpenTelemetry SDK's batch span processor, which sends every
# 5 s by default: one half can arrive up to that much after the other, and a shorter wait
# (the Collector's servicegraph connector holds 2 s) decides calls alone, as unknown,
# whose server half was on its way. Only an undecided half waits; its span is not held.
DEFAULT_PAIR_WAIT_S = 10.0
DEFAULT_MAX_PENDING_CALLS = 10_000
DEFAULT_MAX_SEEN_SPANS = 200_000
DEFAULT_SEEN_TTL_S = 600.0  # an exporter's retry of the same spans comes within minutes
# MCP spans whose annotations are remembered for a later copy: about 600 bytes each.
DEFAULT_MAX_ANNOTATED_SPANS = 20_000
DEFAULT_MAX_SESSIONS = 10_000

# --- the breaker ----------------------------------------------------------------------------
DEFAULT_TURN_KEY = "cause"  # transport/timeout block the tool; other failures the call
DEFAULT_TURN_IDLE_S = 3600.0  # a turn's state is dropped after this long without a call
DEFAULT_MAX_TURNS = 50_000
DEFAULT_MAX_BLOCKS_PER_TURN = 256
DEFAULT_CLOCK_SKEW_S = 5.0  # spans from different hosts may disagree by this much
# Agent tool calls come minutes apart, not milliseconds: an hour of history per key.
DEFAULT_WINDOW_S = 3600.0
DEFAULT_MAX_WINDOW_CALLS = 100  # per key: the memory bound of the window
DEFAULT_MIN_CALLS = 3
DEFAULT_FAILURE_RATIO = 1.0  # "only failures", as the sirens-echo seed asks
DEFAULT_CONSECUTIVE_FAILURES = 3
DEFAULT_OPEN_BASE_S = 300.0
DEFAULT_OPEN_MULTIPLIER = 2.0
DEFAULT_OPEN_MAX_S = 3600.0
DEFAULT_OPEN_JITTER = 0.1  # each open period is drawn from [d*(1-j), d*(1+j)]
DEFAULT_PROBE_PERMITS = 1
DEFAULT_PROBE_LEASE_S = 120.0
DEFAULT_MAX_CIRCUITS = 10_000
DEFAULT_BLAST_RADIUS_RATIO = 0.5  # more than this share of a server's tools open: it is out
DEFAULT_BLAST_RADIUS_MIN_TOOLS = 2
# A failure that arrives late can still revise the calls decided this long before it (arrival
# time): one BatchSpanProcessor delay (5 s) on each side of a client/server pair, and more.
DEFAULT_REORDER_WINDOW_S = 10.0
DEFAULT_REORDER_MAX_CALLS = 10_000  # calls held for revision, across all turns


class TurnKey(enum.StrEnum):
    CAUSE = "cause"
    CALL = "call"
    TOOL = "tool"


class Rule(enum.StrEnum):
    """The breaker's rules, each of which can be put in shadow mode on its own."""

    TURN_CALL = "turn_call"  # within a turn, per identical call
    TURN_TOOL = "turn_tool"  # within a turn, per tool
    TOOL = "tool"  # across turns, per tool
    SERVER = "server"  # across turns, per server


# --- roster health -----------------------------------------------------------------------
DEFAULT_COLLAPSE_FRACTION = 0.0  # offered at or below this share of the turn's best: collapse
DEFAULT_ROSTER_MAX_TURNS = 50_000
DEFAULT_ROSTER_TURN_IDLE_S = 3600.0

# --- self-telemetry and logs --------------------------------------------------------------
DEFAULT_METRICS_ENDPOINT = "0.0.0.0:9464"
DEFAULT_ADVISORIES_ENDPOINT = "0.0.0.0:4320"
DEFAULT_HEARTBEAT_S = 5.0  # an idle stream hears from us this often
DEFAULT_SUBSCRIBER_QUEUE = 1024  # changes waiting for one subscriber before it is cut off
DEFAULT_MAX_SUBSCRIBERS = 1000
DEFAULT_MAX_SUBSCRIBERS_PER_TENANT = 250
DEFAULT_REPLAY_CHANGES = 10_000  # changes kept so a reconnecting subscriber can resume
DEFAULT_MAX_ADVISORIES = 10_000  # advisories in force at once (turn blocks included)
DEFAULT_HALF_OPEN_TTL_S = 600.0  # a half-open advisory nobody probes is dropped after this
DEFAULT_READY_PROBE_TIMEOUT_S = 1.0
DEFAULT_TENANT_ATTRIBUTE = "tenant.id"
# A span's times come from its sender: no later than our clock plus this, so a span from
# the future cannot set a deadline, a window or a wire timestamp (counted when moved).
DEFAULT_MAX_CLOCK_SKEW_S = 300.0
# Tool, server, turn, tenant and harness names are cut to this many characters before they
# are stored, labelled or sent: memory per key is bounded in bytes, not only in keys.
DEFAULT_MAX_NAME_CHARS = 256
DEFAULT_WRITE_TIMEOUT_S = 10.0  # a subscriber that takes no change for this long is cut off
DEFAULT_MAX_SUBSCRIBERS_PER_CALLER = 100  # streams per token (per peer address without tokens)
DEFAULT_RESERVED_SUBSCRIBERS_PER_TENANT = 16  # kept free for each tenant under the global cap
DEFAULT_MAX_CHECK_ARGUMENT_BYTES = 16 * 1024  # a Check's arguments, as sent
DEFAULT_TOKENS_RELOAD_S = 5.0  # the tokens file is looked at for changes this often
DEFAULT_MAX_SERIES_PER_METRIC = 2000  # label sets per metric before the overflow series
DEFAULT_SERIES_IDLE_S = 3600.0  # a series not updated for an hour is dropped
DEFAULT_LOG_LEVEL = "info"


class ReceiverAuth(enum.StrEnum):
    """Who may send spans to the OTLP receivers."""

    NONE = "none"  # anyone who reaches the port; a span's tenant attribute names its tenant
    TOKEN = "token"  # a bearer token from the token map; the token's tenant is the tenant
    CERTIFICATE = "certificate"  # mutual TLS; the client certificate's common name is the tenant


class SpanTenant(enum.StrEnum):
    """With authentication on, what a span's own tenant attribute may say."""

    IGNORE = "ignore"  # the sender's identity decides; the attribute is not read
    MATCH = "match"  # a resource naming another tenant is forwarded but not analysed


class ForwardProtocol(enum.StrEnum):
    GRPC = "grpc"
    HTTP = "http"


class QueueStorage(enum.StrEnum):
    MEMORY = "memory"  # lost with the process; nothing written anywhere
    DISK = "disk"  # SQLite in forward.queue.directory: survives a crash and a restart


class Compression(enum.StrEnum):
    NONE = "none"
    GZIP = "gzip"


class LogLevel(enum.StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def endpoint_problem(key: str, value: str, *, allow_empty: bool = False) -> str | None:
    """Why ``value`` is not a ``host:port`` endpoint, or None when it is."""
    if not value:
        return None if allow_empty else f"{key}: must be host:port, got an empty value"
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        return f"{key}: must be host:port with a port from 0 to 65535, got {value!r}"
    return None


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


def grpc_target(endpoint: str, insecure: bool) -> tuple[str, bool]:
    """The ``host:port`` to dial and whether over TLS: a scheme decides, else ``insecure``."""
    scheme, address, _ = grpc_endpoint_parts(endpoint)
    if scheme:
        return address, GRPC_ENDPOINT_SCHEMES[scheme]
    return address, not insecure


def not_positive(prefix: str, config: object, *keys: str) -> list[str]:
    """One problem per key whose value is zero or negative."""
    return [
        f"{prefix}.{key}: must be positive, got {getattr(config, key)}"
        for key in keys
        if getattr(config, key) <= 0
    ]


def split_endpoint(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return host.strip("[]"), int(port)


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
    tls: ServerTlsConfig = field(default_factory=lambda: ServerTlsConfig())

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


@dataclass(frozen=True, kw_only=True)
class ClassifyConfig:
    """Reading MCP spans: turn keys, pairing of client and server spans, identity."""

    turn_keys: tuple[str, ...] = DEFAULT_TURN_KEYS
    round_keys: tuple[str, ...] = DEFAULT_ROUND_KEYS
    # How long the undecided half of a call waits for its other half before it is decided
    # alone (the mcp SDK 2.x client span says nothing about the outcome; its server span does).
    pair_wait_s: float = DEFAULT_PAIR_WAIT_S
    max_pending_calls: int = DEFAULT_MAX_PENDING_CALLS
    # Spans already read are remembered this long, so a span exported twice counts once.
    max_seen_spans: int = DEFAULT_MAX_SEEN_SPANS
    seen_ttl_s: float = DEFAULT_SEEN_TTL_S
    # A span's second copy goes out with the first copy's mcp.breaker.* attributes while
    # it is among this many (and within seen_ttl_s); past that, bare.
    max_annotated_spans: int = DEFAULT_MAX_ANNOTATED_SPANS
    max_sessions: int = DEFAULT_MAX_SESSIONS
    # The last resort for naming a call's server: tool name -> server name.
    tool_servers: dict[str, str] = field(default_factory=dict)
    # Regular expressions over a result's text that mark a failure hidden under isError false.
    hidden_failure_patterns: tuple[str, ...] = ()
    # The resource attribute naming the tenant a harness belongs to: circuits, turn blocks
    # and advisories are kept apart per tenant. Spans without it belong to no tenant ("").
    tenant_attribute: str = DEFAULT_TENANT_ATTRIBUTE
    max_clock_skew_s: float = DEFAULT_MAX_CLOCK_SKEW_S
    max_name_chars: int = DEFAULT_MAX_NAME_CHARS

    def validate(self, prefix: str) -> list[str]:
        problems = not_positive(
            prefix,
            self,
            "max_clock_skew_s",
            "max_name_chars",
            "pair_wait_s",
            "seen_ttl_s",
            "max_pending_calls",
            "max_seen_spans",
            "max_annotated_spans",
            "max_sessions",
        )
        if not self.turn_keys:
            problems.append(f"{prefix}.turn_keys: must name at least one attribute")
        for pattern in self.hidden_failure_patterns:
            try:
                re.compile(pattern)
            except re.error as error:
                problems.append(
                    f"{prefix}.hidden_failure_patterns: {pattern!r} is not a valid regular "
                    f"expression ({error})"
                )
        return problems


@dataclass(frozen=True, kw_only=True)
class BreakerConfig:
    """Within a turn: one failure per key. Across turns: a circuit per tool and per server."""

    turn_key: TurnKey = TurnKey.CAUSE
    turn_idle_s: float = DEFAULT_TURN_IDLE_S
    max_turns: int = DEFAULT_MAX_TURNS
    max_blocks_per_turn: int = DEFAULT_MAX_BLOCKS_PER_TURN
    clock_skew_s: float = DEFAULT_CLOCK_SKEW_S
    window_s: float = DEFAULT_WINDOW_S
    max_window_calls: int = DEFAULT_MAX_WINDOW_CALLS
    min_calls: int = DEFAULT_MIN_CALLS
    failure_ratio: float = DEFAULT_FAILURE_RATIO
    # Zero turns the fast path off.
    consecutive_failures: int = DEFAULT_CONSECUTIVE_FAILURES
    open_base_s: float = DEFAULT_OPEN_BASE_S
    open_multiplier: float = DEFAULT_OPEN_MULTIPLIER
    open_max_s: float = DEFAULT_OPEN_MAX_S
    open_jitter: float = DEFAULT_OPEN_JITTER
    probe_permits: int = DEFAULT_PROBE_PERMITS
    probe_lease_s: float = DEFAULT_PROBE_LEASE_S
    max_circuits: int = DEFAULT_MAX_CIRCUITS
    # More than this share of a server's tools (at least blast_radius_min_tools known)
    # open at once: the server circuit opens too.
    blast_radius_ratio: float = DEFAULT_BLAST_RADIUS_RATIO
    blast_radius_min_tools: int = DEFAULT_BLAST_RADIUS_MIN_TOOLS
    # Spans out of order: a late failure revises the calls decided this long before it.
    reorder_window_s: float = DEFAULT_REORDER_WINDOW_S
    reorder_max_calls: int = DEFAULT_REORDER_MAX_CALLS
    # Decide and annotate, but mark every decision not enforced.
    shadow: bool = False
    shadow_rules: tuple[str, ...] = ()

    def validate(self, prefix: str) -> list[str]:
        problems = not_positive(
            prefix,
            self,
            "turn_idle_s",
            "window_s",
            "open_base_s",
            "probe_lease_s",
            "max_turns",
            "max_blocks_per_turn",
            "max_window_calls",
            "min_calls",
            "probe_permits",
            "max_circuits",
            "blast_radius_min_tools",
            "reorder_max_calls",
        )
        if self.reorder_window_s < 0:
            problems.append(
                f"{prefix}.reorder_window_s: must not be negative, got {self.reorder_window_s}"
            )
        if self.clock_skew_s < 0:
            problems.append(f"{prefix}.clock_skew_s: must not be negative, got {self.clock_skew_s}")
        if not 0 < self.failure_ratio <= 1:
            problems.append(f"{prefix}.failure_ratio: must be in (0, 1], got {self.failure_ratio}")
        if self.consecutive_failures < 0:
            problems.append(
                f"{prefix}.consecutive_failures: must be zero (off) or positive, "
                f"got {self.consecutive_failures}"
            )
        if self.open_multiplier < 1:
            problems.append(
                f"{prefix}.open_multiplier: must be at least 1, got {self.open_multiplier}"
            )
        if self.open_max_s < self.open_base_s:
            problems.append(
                f"{prefix}.open_max_s: must be at least open_base_s ({self.open_base_s}), "
                f"got {self.open_max_s}"
            )
        if not 0 <= self.open_jitter < 1:
            problems.append(f"{prefix}.open_jitter: must be in [0, 1), got {self.open_jitter}")
        if not 0 <= self.blast_radius_ratio < 1:
            problems.append(
                f"{prefix}.blast_radius_ratio: must be in [0, 1), got {self.blast_radius_ratio}"
            )
        rules = {r.value for r in Rule}
        for rule in self.shadow_rules:
            if rule not in rules:
                problems.append(
                    f"{prefix}.shadow_rules: unknown rule {rule!r}; "
                    f"choose from {', '.join(sorted(rules))}"
                )
        return problems


@dataclass(frozen=True, kw_only=True)
class RosterConfig:
    """Tool listings: when the surface offered to the model counts as collapsed."""

    # 0.0: only a drop to zero tools is a collapse; 0.5: a drop to half the turn's best.
    collapse_fraction: float = DEFAULT_COLLAPSE_FRACTION
    max_turns: int = DEFAULT_ROSTER_MAX_TURNS
    turn_idle_s: float = DEFAULT_ROSTER_TURN_IDLE_S

    def validate(self, prefix: str) -> list[str]:
        problems = []
        if not 0 <= self.collapse_fraction < 1:
            problems.append(
                f"{prefix}.collapse_fraction: must be in [0, 1), got {self.collapse_fraction}"
            )
        return problems + not_positive(prefix, self, "max_turns", "turn_idle_s")


@dataclass(frozen=True, kw_only=True)
class TelemetryConfig:
    """Self-telemetry: Prometheus /metrics, /healthz and /readyz on one port."""

    enabled: bool = True
    metrics_endpoint: str = DEFAULT_METRICS_ENDPOINT
    ready_probe_timeout_s: float = DEFAULT_READY_PROBE_TIMEOUT_S
    # Tool, server and harness names come from senders: each metric keyed by them holds
    # at most this many series, then folds new ones into an overflow series.
    max_series_per_metric: int = DEFAULT_MAX_SERIES_PER_METRIC
    series_idle_s: float = DEFAULT_SERIES_IDLE_S
    exemplars: bool = True  # trace ids on the dead-call counter and the duration histogram

    def validate(self, prefix: str) -> list[str]:
        problems = not_positive(
            prefix, self, "ready_probe_timeout_s", "max_series_per_metric", "series_idle_s"
        )
        endpoint = endpoint_problem(f"{prefix}.metrics_endpoint", self.metrics_endpoint)
        return [endpoint, *problems] if endpoint else problems


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


AdvisoryTlsConfig = ServerTlsConfig  # the advisory port's TLS: the same settings


@dataclass(frozen=True, kw_only=True)
class AdvisoriesConfig:
    """The advisory service: harnesses subscribe to the breaker's decisions on its own port."""

    enabled: bool = True
    endpoint: str = DEFAULT_ADVISORIES_ENDPOINT
    tls: ServerTlsConfig = field(default_factory=ServerTlsConfig)
    # Bearer token -> tenant. Empty: no authentication, everyone is the default tenant.
    tokens: dict[str, str] = field(default_factory=dict)
    # Tokens allowed to force circuits open or closed. Empty: admin calls are refused.
    admin_tokens: tuple[str, ...] = ()
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    subscriber_queue: int = DEFAULT_SUBSCRIBER_QUEUE
    max_subscribers: int = DEFAULT_MAX_SUBSCRIBERS
    # One tenant's harnesses cannot take every stream the service will hold.
    max_subscribers_per_tenant: int = DEFAULT_MAX_SUBSCRIBERS_PER_TENANT
    # One token (one peer address, without tokens) cannot take its tenant's every stream.
    max_subscribers_per_caller: int = DEFAULT_MAX_SUBSCRIBERS_PER_CALLER
    # Under max_subscribers, this many streams stay free for each tenant of the token map
    # until it uses them: tenants at their own cap cannot lock another tenant out.
    reserved_subscribers_per_tenant: int = DEFAULT_RESERVED_SUBSCRIBERS_PER_TENANT
    # A subscriber that does not take a change for this long (a frozen or stalled client)
    # is cut off with RESOURCE_EXHAUSTED, whatever its queue holds.
    write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S
    max_check_argument_bytes: int = DEFAULT_MAX_CHECK_ARGUMENT_BYTES
    replay_changes: int = DEFAULT_REPLAY_CHANGES
    max_advisories: int = DEFAULT_MAX_ADVISORIES
    half_open_ttl_s: float = DEFAULT_HALF_OPEN_TTL_S

    def validate(self, prefix: str) -> list[str]:
        problems = not_positive(
            prefix,
            self,
            "heartbeat_s",
            "subscriber_queue",
            "max_subscribers",
            "max_subscribers_per_tenant",
            "max_subscribers_per_caller",
            "write_timeout_s",
            "max_check_argument_bytes",
            "replay_changes",
            "max_advisories",
            "half_open_ttl_s",
        )
        if self.reserved_subscribers_per_tenant < 0:
            problems.append(
                f"{prefix}.reserved_subscribers_per_tenant: must be 0 or more, "
                f"got {self.reserved_subscribers_per_tenant}"
            )
        endpoint = endpoint_problem(f"{prefix}.endpoint", self.endpoint)
        if endpoint:
            problems.append(endpoint)
        if any(not token.strip() for token in (*self.tokens, *self.admin_tokens)):
            problems.append(f"{prefix}.tokens: a token must not be empty")
        return problems + self.tls.validate(f"{prefix}.tls")


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """The process: how many workers share the receiver ports on this machine."""

    # Processes that each run the whole hop, sharing the receiver and advisory ports
    # (SO_REUSEPORT: the kernel spreads connections over them) and one telemetry port
    # whose metrics are their sum. They share breaker state the way replicas do, so more
    # than one needs state.backend: redis.
    workers: int = 1

    def validate(self, prefix: str) -> list[str]:
        return not_positive(prefix, self, "workers")


@dataclass(frozen=True, kw_only=True)
class AuthConfig:
    """The token map, shared by the OTLP receivers and the advisory port: bearer token ->
    tenant. ``advisories.tokens`` holds tokens inline; ``tokens_file`` holds more, one
    ``token=tenant`` a line (``#`` comments), and is read again when it changes, so a token
    is added or revoked without a restart."""

    tokens_file: str = ""
    tokens_reload_s: float = DEFAULT_TOKENS_RELOAD_S

    def validate(self, prefix: str) -> list[str]:
        return not_positive(prefix, self, "tokens_reload_s")


@dataclass(frozen=True, kw_only=True)
class LogConfig:
    level: LogLevel = LogLevel.INFO

    def validate(self, prefix: str) -> list[str]:
        return []


@dataclass(frozen=True, kw_only=True)
class ServiceConfig:
    """Everything ``mcp-breaker serve`` reads. Empty input gives exactly these defaults."""

    server: ServerConfig = field(default_factory=ServerConfig)
    receivers: ReceiversConfig = field(default_factory=ReceiversConfig)
    forward: ForwardConfig = field(default_factory=ForwardConfig)
    classify: ClassifyConfig = field(default_factory=ClassifyConfig)
    breaker: BreakerConfig = field(default_factory=BreakerConfig)
    roster: RosterConfig = field(default_factory=RosterConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    advisories: AdvisoriesConfig = field(default_factory=AdvisoriesConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    state: StateConfig = field(default_factory=StateConfig)
    log: LogConfig = field(default_factory=LogConfig)

    def validate(self) -> list[str]:
        return (
            self.server.validate("server")
            + self.receivers.validate("receivers")
            + self.forward.validate("forward")
            + self.classify.validate("classify")
            + self.breaker.validate("breaker")
            + self.roster.validate("roster")
            + self.telemetry.validate("telemetry")
            + self.advisories.validate("advisories")
            + self.auth.validate("auth")
            + self.state.validate("state")
            + self.log.validate("log")
            + self._token_problems()
            + self._worker_problems()
            + retention_problems(
                self.state,
                needed_s=max(
                    self.breaker.window_s,
                    self.breaker.turn_idle_s,
                    self.breaker.open_max_s,
                    self.roster.turn_idle_s,
                ),
                needed_by="the longest of breaker.window_s, breaker.turn_idle_s, "
                "breaker.open_max_s and roster.turn_idle_s",
            )
        )

    def _worker_problems(self) -> list[str]:
        workers = self.server.workers
        if workers <= 1:
            return []
        problems = []
        if self.state.backend is Backend.MEMORY:
            problems.append(
                f"server.workers: {workers} workers need state.backend: redis: each worker "
                "is a process with a breaker of its own, and with the memory backend each "
                "would judge only the connections it happens to get. Set state.backend: "
                "redis and state.redis.url (docs/scaling.md), or run one worker"
            )
        if self.forward.queue.storage is QueueStorage.DISK:
            problems.append(
                f"server.workers: {workers} workers cannot share one disk queue "
                "(forward.queue.storage: disk): run one worker per queue directory"
            )
        return problems

    def _token_problems(self) -> list[str]:
        if self.receivers.auth is not ReceiverAuth.TOKEN:
            return []
        if self.advisories.tokens or self.auth.tokens_file:
            return []
        return ["receivers.auth: token needs tokens: set advisories.tokens or auth.tokens_file"]


# --- the offline analysis (mcp-breaker analyze) -------------------------------------------
# Spans are analysed in span-end order: a span may come this much later in its file than a
# span that ended after it (exporters batch and retry; client and server halves are
# recorded by different processes) and still be put in its place.
DEFAULT_REORDER_WINDOW_S = 60.0
DEFAULT_REORDER_MAX_SPANS = 50_000  # MCP spans held for reordering at most, all files together
# One JSON line or one protobuf record, after decompression: larger ones are skipped.
DEFAULT_MAX_RECORD_BYTES = 64 * 1024 * 1024
DEFAULT_IDS_PER_FIGURE = 20  # trace and span ids listed behind each figure of the report
DEFAULT_WORST_TURNS = 20  # turns reported in full, worst first
# Rows of each table keyed by names the senders chose (servers, tools, circuits,
# namespaces...): the rest are counted in one "other" row.
DEFAULT_MAX_REPORT_ROWS = 10_000


@dataclass(frozen=True, kw_only=True)
class AnalyzeConfig:
    """``mcp-breaker analyze``: how recorded traces are read, and how much the report keeps.

    Set by the command's flags (it is not part of ``ServiceConfig``, which configures the
    service the analysis replays). Times are span times, Unix nanoseconds; ``None`` leaves
    that end of the window open.
    """

    reorder_window_s: float = DEFAULT_REORDER_WINDOW_S
    reorder_max_spans: int = DEFAULT_REORDER_MAX_SPANS
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    ids_per_figure: int = DEFAULT_IDS_PER_FIGURE
    worst_turns: int = DEFAULT_WORST_TURNS
    max_report_rows: int = DEFAULT_MAX_REPORT_ROWS
    since_ns: int | None = None
    until_ns: int | None = None

    def validate(self) -> list[str]:
        flags = {
            "reorder_window_s": "--reorder-window",
            "reorder_max_spans": "--reorder-spans",
            "max_record_bytes": "--max-record-bytes",
            "worst_turns": "--worst",
            "max_report_rows": "--max-rows",
        }
        problems = [
            f"{flag}: must be positive, got {getattr(self, key)}"
            for key, flag in flags.items()
            if getattr(self, key) <= 0
        ]
        if self.ids_per_figure < 0:
            problems.append(f"--ids: must not be negative, got {self.ids_per_figure}")
        if (
            self.since_ns is not None
            and self.until_ns is not None
            and self.until_ns <= self.since_ns
        ):
            problems.append("--until: must be later than --since")
        return problems
