"""Wires the pipeline together and owns start-up and shutdown.

    receivers (gRPC 4317, HTTP 4318) ─▶ intake ─▶ stage ─▶ forwarder ─▶ next hop
    stage ─▶ pipeline ─▶ findings ─▶ metrics (scraped on 9464), other consumers
    pipeline ─▶ advisories (4320): Subscribe, Check, GetState; Admin
    telemetry (9464): /metrics /healthz /readyz; gRPC health on the OTLP port

Shutdown order matters: stop taking spans first (health says NOT_SERVING, listeners close
after their in-flight requests), then drain the forwarder within the grace period and say
what could not be delivered, then close the telemetry port.
"""

from __future__ import annotations

import asyncio
import enum
import gc
import logging
import os
import resource
import signal
import socket
import ssl
from collections.abc import Callable, Sequence

import grpc
from aiohttp import web
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry

from processor.advisories.admin import AdminServicer
from processor.advisories.model import Advisory
from processor.advisories.service import AdvisoriesServicer, AdvisoryService
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from processor.auth.tls import grpc_server_credentials, ssl_server_context
from processor.auth.tokens import TokenMap
from processor.classify.classifier import Classifier
from processor.config import (
    Backend,
    GrpcReceiverConfig,
    QueueStorage,
    ReceiverAuth,
    ServiceConfig,
    SpanTenant,
    split_endpoint,
)
from processor.engines.breaker import Breaker
from processor.engines.roster import RosterHealth
from processor.errors import StartupError
from processor.forward.queue import Downstream, DrainReport, Forwarder, Release
from processor.forward.senders import Sender, make_sender
from processor.forward.store import DiskStore, MemoryStore, Store
from processor.inflight.pipeline import Pipeline, Sink
from processor.inflight.stage import SpanHook, Stage
from processor.inflight.strip import StripAfter
from processor.receive import grpc as grpc_receiver
from processor.receive import http as http_receiver
from processor.receive.connections import ConnectionLimit
from processor.receive.gate import Gate
from processor.receive.intake import Intake
from processor.receive.portgate import INTERNAL_HOST, GatePeers, PortGate
from processor.request.otlp import SERVICE_NAME
from processor.state.replica import SharedState
from processor.state.store import RedisStore, client_for
from processor.telemetry import http as telemetry_http
from processor.telemetry.advisories import AdvisoryCollector
from processor.telemetry.findings import FindingMetrics
from processor.telemetry.gates import GateCollector
from processor.telemetry.metrics import ConnectionCollector, QueueCollector, SelfMetrics
from processor.telemetry.state import SharedStateCollector
from processor.telemetry.stores import StoreCollector

log = logging.getLogger(__name__)

# In-flight export RPCs get this long to finish once the receivers stop.
RECEIVER_STOP_GRACE_S = 5.0
GRPC_BACKSTOP_FACTOR = 2  # gRPC's own concurrency limit, over receivers.grpc.max_concurrent_rpcs
TICK_INTERVAL_S = 0.5  # most often held calls (and advisories) are checked for expiry
ADVISORY_MAX_MESSAGE_BYTES = 1024 * 1024  # a Check or Subscribe request is small
ADVISORY_STOP_GRACE_S = 1.0  # subscribers' streams are cut at shutdown; they reconnect
# The telemetry port answers scrapes and probes: a few connections, briefly held.
TELEMETRY_MAX_CONNECTIONS = 128
TELEMETRY_IDLE_TIMEOUT_S = 30.0
# Connections each gRPC port's gate holds (processor/receive/portgate.py). At the cap the
# quietest idle one makes room, so more exporters than this still get in, by turns.
GRPC_MAX_CONNECTIONS = 512
# The advisory port: one per subscriber stream at most, and some for Check callers.
ADVISORY_SPARE_CONNECTIONS = 64
# A gated connection holds three descriptors (the caller's, and both ends of the relay
# to gRPC); what the caps may take is kept under the open-files limit, less this for
# everything else (logs, the disk queue, Redis, the next hop, gRPC's own).
GATED_DESCRIPTORS = 3
RESERVED_DESCRIPTORS = 64
# HTTP/2 streams one client may have open on a connection (SETTINGS_MAX_CONCURRENT_STREAMS;
# grpc-core's default is unlimited). With grpc-core's overload protection (on by
# default, and set here so it stays on) a stream counts until gRPC has freed it, not only
# until the client resets it: a rapid-reset client gets REFUSED_STREAM past this many
# instead of a call each. An OTLP exporter sends one export at a time per connection;
# an advisory caller may hold up to advisories.max_subscribers_per_caller (100) streams.
RECEIVER_MAX_STREAMS = 100
ADVISORY_MAX_STREAMS = 128
# Pings without data a client may send; a third too soon is a GOAWAY (too_many_pings)
# from grpc-core itself. Its defaults, stated so they stay.
MIN_PING_INTERVAL_WITHOUT_DATA_MS = 5 * 60 * 1000
MAX_PING_STRIKES = 2


class ExitStatus(enum.IntEnum):
    """What ``mcp-breaker serve`` exits with (docs/delivery.md#exit-status)."""

    OK = 0  # every accepted span was delivered, given up on (counted), or kept on disk
    STARTUP_FAILED = 1  # the configuration or start-up failed; no span was taken
    # Shutdown: spans accepted into the memory queue were not delivered in the grace period.
    UNDELIVERED = 3  # (2 is argparse's: a command line it cannot read)


def _socket(endpoint: str, reuse_port: bool = False) -> socket.socket:
    host, port = split_endpoint(endpoint)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, reuse_port=reuse_port)


def _listen(endpoint: str, what: str, key: str, reuse_port: bool = False) -> socket.socket:
    try:
        return _socket(endpoint, reuse_port)
    except OSError as error:
        raise StartupError(_cannot_listen(what, endpoint, key, error)) from None


def _cannot_listen(what: str, endpoint: str, key: str, error: OSError | None) -> str:
    """What could not listen, where, the key that sets it, and the system's reason."""
    reason = f": {os.strerror(error.errno)}" if error is not None and error.errno else ""
    return f"{what}: cannot listen on {endpoint} (set by {key}){reason}"


def _bind_error(endpoint: str) -> OSError | None:
    """Why gRPC could not bind, which it does not say: what a plain bind there gets."""
    try:
        _socket(endpoint).close()
    except OSError as error:
        return error
    return None


def _grpc_server(
    max_receive_bytes: int,
    gate: PortGate,
    limits: GrpcReceiverConfig | None = None,
    max_streams: int = RECEIVER_MAX_STREAMS,
) -> grpc.aio.Server:
    """A gRPC server for the internal port behind ``gate`` (which owns the public one, so
    no two instances share it: gRPC's port sharing is off)."""
    options: list[tuple[str, int]] = [
        ("grpc.max_receive_message_length", max_receive_bytes),
        ("grpc.so_reuseport", 0),
        # Against stream floods and rapid reset (CVE-2023-44487): see the constants.
        ("grpc.max_concurrent_streams", max_streams),
        ("grpc.http.overload_protection", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", MIN_PING_INTERVAL_WITHOUT_DATA_MS),
        ("grpc.http2.max_ping_strikes", MAX_PING_STRIKES),
    ]
    interceptors = (GatePeers(gate),)
    if limits is None:
        return grpc.aio.server(options=options, interceptors=interceptors)
    # What an outsider's connections may hold: idle ones are closed, old ones recycled (an
    # OTLP exporter reconnects by itself), dead peers found by keepalive pings, and a
    # connection that never completes its handshake dropped.
    options += [
        ("grpc.max_connection_idle_ms", _ms(limits.max_connection_idle_s)),
        ("grpc.max_connection_age_ms", _ms(limits.max_connection_age_s)),
        ("grpc.max_connection_age_grace_ms", _ms(limits.max_connection_age_grace_s)),
        ("grpc.keepalive_time_ms", _ms(limits.keepalive_time_s)),
        ("grpc.keepalive_timeout_ms", _ms(limits.keepalive_timeout_s)),
        ("grpc.server_handshake_timeout_ms", _ms(limits.handshake_timeout_s)),
    ]
    # max_concurrent_rpcs is enforced by the export handler, which tells a sender to retry;
    # gRPC's own limit, twice it, is a backstop (its RESOURCE_EXHAUSTED carries no delay).
    backstop = GRPC_BACKSTOP_FACTOR * limits.max_concurrent_rpcs
    return grpc.aio.server(
        options=options, interceptors=interceptors, maximum_concurrent_rpcs=backstop
    )


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def gated_caps(wanted: dict[str, int], ungated: int, open_files: int) -> dict[str, int]:
    """The gated ports' connection caps, cut in proportion where ``wanted`` would take
    more descriptors than ``open_files`` leaves once ``ungated`` connections (the HTTP
    ports', one descriptor each) and the reserve are counted; at least one each."""
    room = max(0, open_files - RESERVED_DESCRIPTORS - ungated) // GATED_DESCRIPTORS
    total = sum(wanted.values())
    if total <= room:
        return dict(wanted)
    return {name: max(1, cap * room // total) for name, cap in wanted.items()}


def raise_open_files_limit() -> None:
    """Raise the soft limit on open files to the hard one, as the Go runtime does for the
    Collector: every connection is a descriptor, and the default soft limit (1024) is
    what an outsider's idle connections exhaust first."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):  # not allowed here: keep what we were given
        pass


# Allocations between two young-generation collections (CPython's default is 700). The
# analysis builds and drops a few dozen small objects per MCP span, while its bounded stores
# (seen spans, circuits, turns: up to hundreds of thousands of entries) live long; at the
# default, collection was about a tenth of the analysis's CPU (bench/classify.py), and this
# takes most of it back. Cycles are still collected, only in larger batches.
GC_YOUNG_THRESHOLD = 10_000


def tune_garbage_collection() -> None:
    """Collect less often, and never walk what start-up built (it lives as long as the
    process): the objects made so far are moved out of the collector's sight."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)
    gc.freeze()


def _bind(
    server: grpc.aio.Server,
    endpoint: str,
    credentials: grpc.ServerCredentials | None,
    what: str,
    key: str,
) -> int:
    """The port ``server`` listens on, or a StartupError naming what could not listen."""
    try:
        if credentials is None:
            port = server.add_insecure_port(endpoint)
        else:
            port = server.add_secure_port(endpoint, credentials)
    except RuntimeError:
        port = 0
    if not port:
        raise StartupError(_cannot_listen(what, endpoint, key, _bind_error(endpoint)))
    return int(port)


class Service:
    """The running processor. ``start()``, then ``stop()``; ports are known after start."""

    def __init__(
        self,
        config: ServiceConfig,
        *,
        registry: CollectorRegistry | None = None,
        stage: Stage | None = None,
        sender: Sender | None = None,
        event_sinks: Sequence[Sink] = (),
        reuse_port: bool = False,
    ) -> None:
        """``reuse_port``: one of the workers of ``serve --workers``, which listen on the
        same receiver and advisory ports (the kernel spreads connections over them)."""
        self.config = config
        self._reuse_port = reuse_port
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = SelfMetrics(self.registry)
        self.breaker = Breaker(config.breaker)
        classifier = Classifier(config.classify)
        self.finding_metrics = FindingMetrics(config.telemetry, self.breaker, classifier.stats)
        self.registry.register(self.finding_metrics)
        # One token map for the OTLP receivers and the advisory port (StartupError if the
        # tokens file cannot be read).
        self.tokens = TokenMap(
            config.advisories.tokens, config.auth.tokens_file, config.auth.tokens_reload_s
        )
        self.advisories = (
            AdvisoryService(
                config.advisories,
                self.breaker,
                tool_servers=config.classify.tool_servers,
                on_operator=self.finding_metrics.count_transitions,
                tokens=self.tokens,
            )
            if config.advisories.enabled
            else None
        )
        shared = config.state.backend is Backend.REDIS
        consumers: list[Sink] = [self.finding_metrics]
        if self.advisories is not None:
            if not shared:  # shared: the advisories hear of every event from the stream
                consumers.append(self.advisories)
            self.registry.register(AdvisoryCollector(self.advisories))
        receivers = config.receivers
        self.pipeline = Pipeline(
            classifier,
            self.breaker,
            (*consumers, *event_sinks),
            RosterHealth(config.roster),
            tenant_must_match=receivers.auth is not ReceiverAuth.NONE
            and receivers.span_tenant is SpanTenant.MATCH,
        )
        self.shared: SharedState | None = None
        if shared:
            redis = config.state.redis
            store = RedisStore(client_for(redis), redis.key_prefix)
            self.shared = SharedState(redis, store, self.pipeline, self.advisories)
            self.pipeline.share = self.shared.share
            if self.advisories is not None:
                self.advisories.shared_probes = store.probe
                self.advisories.operator = self.shared.operate
                self.advisories.shared_state = self.shared.describe
            self.registry.register(SharedStateCollector(self.shared.stats))
        self.registry.register(StoreCollector(self.pipeline.store_sizes, self._advisory_sizes))
        # Payload attributes go once the pipeline has read them (and even if it failed).
        analyse: SpanHook = self.pipeline
        if config.forward.strip_attributes:
            analyse = StripAfter(
                self.pipeline,
                # Read after each request: the classifier rebinds its span map per request.
                lambda: self.pipeline.classifier.spans.values(),
                config.forward.strip_attributes,
                lambda: self.pipeline.classifier.read,
            )
        self.stage = (
            stage
            if stage is not None
            else Stage((analyse,), on_hook_error=self.metrics.stage_errors.inc)
        )
        self._ticker: asyncio.Task[None] | None = None
        self._sender = sender
        self.forwarder: Forwarder | None = None
        self.ports: dict[str, int] = {}
        self._grpc_server: grpc.aio.Server | None = None
        self._advisory_server: grpc.aio.Server | None = None
        self._health = health.aio.HealthServicer()
        self._runners: dict[str, web.AppRunner] = {}
        self._listeners: dict[str, asyncio.Server] = {}  # by name, as the runners
        self._http_connections = ConnectionLimit(config.receivers.http.max_connections)
        # The gRPC ports' gates: caps fitted to the open-files limit at start.
        self._gates = {
            "grpc": PortGate(ConnectionLimit(GRPC_MAX_CONNECTIONS)),
            "advisories": PortGate(
                ConnectionLimit(config.advisories.max_subscribers + ADVISORY_SPARE_CONNECTIONS)
            ),
        }
        limits = {name: gate.limit for name, gate in self._gates.items()}
        self.registry.register(ConnectionCollector({"http": self._http_connections, **limits}))
        self.registry.register(GateCollector(self._gates))
        self._started = False  # serving now (readiness)
        self._opened = False  # start() completed: intake was open, spans may have come

    def _advisory_sizes(self) -> dict[str, tuple[int, int]]:
        if self.advisories is None:
            return {}
        return {"advisories": (len(self.advisories.hub), self.config.advisories.max_advisories)}

    async def start(self) -> None:
        config = self.config
        if self.shared is not None:
            # Replayed before intake opens and /readyz says yes: a restart forgets nothing.
            await self.shared.start()
        downstream: Downstream
        if config.forward.endpoint:
            queue = config.forward.queue
            store: Store = (
                DiskStore(queue.directory, fsync=queue.fsync)
                if queue.storage is QueueStorage.DISK
                else MemoryStore()
            )
            sender = self._sender or make_sender(config.forward)
            self.forwarder = Forwarder(
                config.forward,
                sender,
                self.metrics,
                store=store,
                on_rejected=self.finding_metrics.count_rejected_spans,
            )
            self.forwarder.start()
            self.registry.register(QueueCollector(self.forwarder.stats))
            downstream = self.forwarder
        else:
            downstream = Release(self.metrics)
        intake = Intake(self.stage, downstream, self.metrics)

        receivers = config.receivers
        gate = Gate(receivers.auth, self.tokens)
        if receivers.grpc.enabled:
            await self._start_grpc(intake, gate)
        if receivers.http.enabled:
            http = receivers.http
            app = http_receiver.make_app(
                intake,
                http.max_body_bytes,
                gate=gate,
                read_timeout_s=http.read_timeout_s,
                max_inflight_bytes=http.max_inflight_bytes,
            )
            await self._start_http(
                "otlp_http",
                app,
                http.endpoint,
                "receivers.http.endpoint",
                limit=self._http_connections,
                idle_timeout_s=http.idle_timeout_s,
                ssl_context=ssl_server_context(receivers.tls, "receivers.tls"),
            )
        if self.advisories is not None:
            await self._start_advisories(self.advisories)
        if config.telemetry.enabled:
            app = telemetry_http.make_app(
                self.registry, self.readiness, prepare=(self.finding_metrics.prepare_scrape,)
            )
            await self._start_http(
                "telemetry", app, config.telemetry.metrics_endpoint, "telemetry.metrics_endpoint"
            )
        self._ticker = asyncio.create_task(self._tick(), name="classify-expiry")
        self._started = True
        self._opened = True
        self._log_started()

    def _fit_gated_caps(self) -> None:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return
        http = self.config.receivers.http
        ungated = (http.max_connections if http.enabled else 0) + TELEMETRY_MAX_CONNECTIONS
        wanted = {name: gate.limit.cap for name, gate in self._gates.items()}
        caps = gated_caps(wanted, ungated, soft)
        if caps != wanted:
            log.warning(
                "open files limited to %d: gRPC connection caps cut to %s (from %s) so "
                "that connections cannot exhaust descriptors; raise the limit (ulimit -n)",
                soft,
                caps,
                wanted,
            )
        for name, cap in caps.items():
            self._gates[name].limit.cap = cap

    async def _start_gate(
        self,
        name: str,
        server: grpc.aio.Server,
        credentials: grpc.ServerCredentials | None,
        listen: tuple[str, str, str],
    ) -> int:
        """Binds ``server`` to an internal port and opens its public one (``listen``: the
        endpoint, what listens, its key) through the gate; returns the public port."""
        endpoint, what, key = listen
        sock = _listen(endpoint, what, key, self._reuse_port)
        try:
            internal = _bind(server, f"{INTERNAL_HOST}:0", credentials, what, key)
            await server.start()
            await self._gates[name].start(sock, internal)
        except BaseException:
            sock.close()
            raise
        return int(sock.getsockname()[1])

    async def _start_grpc(self, intake: Intake, gate: Gate) -> None:
        receivers = self.config.receivers
        self._fit_gated_caps()
        gated = self._gates["grpc"]
        server = _grpc_server(receivers.grpc.max_recv_msg_bytes, gated, receivers.grpc)
        handler = grpc_receiver.trace_service_handler(
            intake, gate, max_in_progress=receivers.grpc.max_concurrent_rpcs
        )
        server.add_generic_rpc_handlers((handler,))
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        credentials = grpc_server_credentials(receivers.tls, "receivers.tls")
        listen = (receivers.grpc.endpoint, "OTLP/gRPC receiver", "receivers.grpc.endpoint")
        port = await self._start_gate("grpc", server, credentials, listen)
        self._grpc_server = server
        self.ports["otlp_grpc"] = port
        for name in ("", SERVICE_NAME):
            await self._health.set(name, health_pb2.HealthCheckResponse.SERVING)

    async def _start_advisories(self, advisories: AdvisoryService) -> None:
        config = self.config.advisories
        if not self.config.receivers.grpc.enabled:
            self._fit_gated_caps()
        server = _grpc_server(
            ADVISORY_MAX_MESSAGE_BYTES, self._gates["advisories"], max_streams=ADVISORY_MAX_STREAMS
        )
        pb_grpc.add_AdvisoriesServicer_to_server(AdvisoriesServicer(advisories), server)  # type: ignore[no-untyped-call]
        pb_grpc.add_AdminServicer_to_server(AdminServicer(advisories), server)  # type: ignore[no-untyped-call]
        credentials = grpc_server_credentials(config.tls, "advisories.tls")
        listen = (config.endpoint, "advisories", "advisories.endpoint")
        port = await self._start_gate("advisories", server, credentials, listen)
        self._advisory_server = server
        self.ports["advisories"] = port

    async def _start_http(
        self,
        name: str,
        app: web.Application,
        endpoint: str,
        key: str,
        *,
        limit: ConnectionLimit | None = None,
        idle_timeout_s: float | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        what = {"otlp_http": "OTLP/HTTP receiver", "telemetry": "telemetry"}[name]
        sock = _listen(endpoint, what, key, self._reuse_port and name == "otlp_http")
        # Bodies are decompressed by the receiver itself, with a cap against gzip bombs.
        # The keep-alive timeout also closes a connection that never sends a request.
        limit = limit or ConnectionLimit(TELEMETRY_MAX_CONNECTIONS)
        app.middlewares.append(limit.middleware)
        runner = web.AppRunner(
            app,
            auto_decompress=False,
            access_log=None,
            keepalive_timeout=idle_timeout_s or TELEMETRY_IDLE_TIMEOUT_S,
        )
        await runner.setup()
        assert runner.server is not None
        loop = asyncio.get_running_loop()
        listener = await loop.create_server(limit.wrap(runner.server), sock=sock, ssl=ssl_context)
        self._listeners[name] = listener
        self._runners[name] = runner
        self.ports[name] = sock.getsockname()[1]

    async def _tick(self) -> None:
        # Calls held for their other half are decided when the wait runs out, even if no
        # further request arrives to notice it.
        interval = min(TICK_INTERVAL_S, self.config.classify.pair_wait_s / 4)
        while True:
            await asyncio.sleep(interval)
            try:
                self.pipeline.tick()
                # Shared state: expiry runs at the stream's ticks, on every replica alike.
                if self.advisories is not None and self.shared is None:
                    self.advisories.expire()
            except Exception:  # a bug here must not stop expiry for good: said, and on
                self.metrics.stage_errors.inc()
                log.exception("deciding the calls whose other half did not come failed")

    def _log_started(self) -> None:
        receiver_ports = {
            name: port for name, port in self.ports.items() if name in ("otlp_grpc", "otlp_http")
        }
        config = self.config.receivers
        security = "TLS" if config.tls.cert_file else "plaintext"
        log.info(
            "mcp-breaker receiving %s (%s, authentication: %s)",
            ", ".join(f"{name} on port {port}" for name, port in receiver_ports.items()),
            "mutual TLS" if config.tls.client_ca_file else security,
            config.auth.value,
        )
        if config.auth is ReceiverAuth.NONE:
            log.warning(
                "receivers: no authentication (receivers.auth: none): anyone who reaches "
                "port %s can steer the breaker, for any tenant a span names "
                "(docs/security.md)",
                " or ".join(str(port) for port in receiver_ports.values()),
            )
        if self.shared is None:
            log.info(
                "breaker state in memory (state.backend: memory): it starts empty, and a "
                "restart forgets open circuits and turn blocks; state.backend: redis keeps "
                "them (docs/scaling.md)"
            )
        if "telemetry" in self.ports:
            log.info("metrics, /healthz and /readyz on port %d", self.ports["telemetry"])
        if "advisories" in self.ports:
            tls = self.config.advisories.tls
            security = (
                "mutual TLS" if tls.client_ca_file else "TLS" if tls.cert_file else "plaintext"
            )
            log.info("advisories on port %d (%s)", self.ports["advisories"], security)
            if self.advisories is not None and self.advisories.auth.open:
                log.warning(
                    "advisories: no tokens configured (advisories.tokens): any client that "
                    "reaches port %d can subscribe; admin calls are refused",
                    self.ports["advisories"],
                )
        if self.forwarder is not None:
            forward = self.config.forward
            log.info(
                "forwarding to %s over %s%s (queue: %d spans, %d bytes, in %s, %d consumers)",
                self.forwarder.target,
                forward.protocol.value,
                " with TLS" if forward.tls else "",
                forward.queue.max_spans,
                forward.queue.max_bytes,
                self.forwarder.storage,
                forward.queue.consumers,
            )
            if self.forwarder.recovered_batches:
                log.warning(
                    "disk queue: %s were left undelivered by the last run; sending them first",
                    _spans_in_requests(
                        self.forwarder.recovered_spans, self.forwarder.recovered_batches
                    ),
                )
            stripped = self.config.forward.strip_attributes
            if stripped:
                log.info(
                    "removing %s from MCP spans before they are forwarded "
                    "(forward.strip_attributes)",
                    ", ".join(stripped),
                )
        else:
            log.warning(
                "no next hop configured (forward.endpoint is empty): spans are analysed "
                "and then released, not forwarded"
            )
        # Last, once every port listens: the line a person (or a script) waits for.
        log.info(
            "ready: spans accepted on %s; breaker state %s; next hop %s",
            " and ".join(f"port {port}" for port in receiver_ports.values()) or "no port",
            "in memory" if self.shared is None else "shared on Redis",
            self.forwarder.target if self.forwarder is not None else "none",
        )

    @staticmethod
    def _log_forgotten(in_force: list[Advisory]) -> None:
        refusing = [a for a in in_force if a.blocking]
        if refusing:
            log.info(
                "stopping with %d advisories refusing calls (%s): breaker state is in memory, "
                "so the next start will not know of them, and their tools will be called "
                "again until they fail again (state.backend: redis keeps them)",
                len(refusing),
                ", ".join(sorted({a.id for a in refusing})[:5])
                + (", ..." if len(refusing) > 5 else ""),
            )

    async def readiness(self) -> tuple[bool, str]:
        if not self._started:
            return False, "receivers are not listening yet"
        if self.shared is not None and not self.shared.ready:
            return False, "replaying the shared state"
        if self.forwarder is not None:
            timeout = self.config.telemetry.ready_probe_timeout_s
            if not await self.forwarder.reachable(timeout):
                return False, f"next hop {self.forwarder.target} is not reachable"
        return True, "ready"

    async def stop(self) -> DrainReport | None:
        """Stop taking spans, drain the forwarder, report what was not delivered."""
        self._started = False
        await self._health.enter_graceful_shutdown()
        if self._grpc_server is not None:
            self._gates["grpc"].stop_accepting()  # held connections stay for their calls
            await self._grpc_server.stop(RECEIVER_STOP_GRACE_S)
            self._gates["grpc"].close()
        if "otlp_http" in self._listeners:
            self._listeners.pop("otlp_http").close()  # no new connections
        if "otlp_http" in self._runners:
            await self._runners.pop("otlp_http").cleanup()
        if self._advisory_server is not None:
            self._gates["advisories"].stop_accepting()
            await self._advisory_server.stop(ADVISORY_STOP_GRACE_S)
            self._gates["advisories"].close()
        if self._ticker is not None:
            self._ticker.cancel()
            self.pipeline.flush()
        if self.shared is not None:
            await self.shared.stop()  # after the flush: its events are shared too
        elif self.advisories is not None:
            self._log_forgotten(self.advisories.hub.in_force())
        report = None
        if self.forwarder is not None:
            grace = self.config.forward.shutdown_grace_s
            report = await self.forwarder.drain(grace)
            if report.undelivered_spans:
                log.error(
                    "shutdown: %s could not be delivered to %s within %gs, and are lost "
                    "(exit status %d)",
                    _spans_in_requests(report.undelivered_spans, report.undelivered_batches),
                    self.forwarder.target,
                    grace,
                    ExitStatus.UNDELIVERED,
                )
            elif report.kept_spans:
                log.warning(
                    "shutdown: %s could not be delivered to %s within %gs; they stay in the "
                    "disk queue (%s) and go out at the next start",
                    _spans_in_requests(report.kept_spans, report.kept_batches),
                    self.forwarder.target,
                    grace,
                    self.forwarder.storage,
                )
            elif self._opened or report.delivered_spans:
                # Said only of a service that took spans: after a failed start, "every
                # accepted span was delivered" would claim work that never happened.
                log.info("shutdown: every accepted span was delivered to %s", self.forwarder.target)
        for listener in self._listeners.values():
            listener.close()
        self._listeners.clear()
        for runner in self._runners.values():
            await runner.cleanup()
        self._runners.clear()
        return report


def _spans_in_requests(spans: int, requests: int) -> str:
    """``42 spans in 2 requests``, ``1 span in 1 request``: as a person writes it."""
    return f"{_counted(spans, 'span')} in {_counted(requests, 'request')}"


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


async def serve(
    config: ServiceConfig,
    *,
    reuse_port: bool = False,
    on_started: Callable[[dict[str, int]], None] | None = None,
) -> int:
    """Run until SIGTERM or SIGINT; the exit status for the console script (ExitStatus).
    ``reuse_port`` and ``on_started`` (given the ports listened on): for a worker of
    ``serve --workers`` (processor/workers.py)."""
    raise_open_files_limit()
    try:
        service = Service(config, reuse_port=reuse_port)
    except StartupError as error:
        log.error("cannot start: %s", error)
        return ExitStatus.STARTUP_FAILED
    try:
        await service.start()
    except StartupError as error:
        log.error("cannot start: %s", error)
        await service.stop()
        return ExitStatus.STARTUP_FAILED
    tune_garbage_collection()
    if on_started is not None:
        on_started(dict(service.ports))
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    await stopping.wait()
    log.info("stopping: no longer accepting spans, draining the queue")
    report = await service.stop()
    if report is not None and report.undelivered_spans:
        return ExitStatus.UNDELIVERED
    return ExitStatus.OK
