"""Wires the pipeline together and owns start-up and shutdown.

    receivers (gRPC 4317, HTTP 4318) ─▶ intake ─▶ stage ─▶ forwarder ─▶ next hop
    stage ─▶ pipeline ─▶ findings ─▶ metrics (scraped on 9464), other consumers
    pipeline ─▶ advisories (4320): Subscribe, Check, GetState; Admin
    telemetry (9464): /metrics /healthz /readyz; gRPC health on the OTLP port

Shutdown order matters: stop taking spans first (health says NOT_SERVING, listeners close
after their in-flight requests), then drain the forwarder within the grace period and say
what could not be delivered, then close the telemetry port. How each port is built:
receive/listeners.py; what the service says as it starts and stops: telemetry/service_log.py.
"""

from __future__ import annotations

import asyncio
import enum
import gc
import logging
import resource
import signal
import ssl
from collections.abc import Callable, Sequence

import grpc
from aiohttp import web
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry

from processor.advisories.admin import AdminServicer
from processor.advisories.service import AdvisoryService
from processor.advisories.servicer import AdvisoriesServicer
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from processor.allocator import tune_allocator
from processor.auth.tls import grpc_server_credentials, ssl_server_context
from processor.auth.tokens import TokenMap
from processor.classify.classifier import Classifier
from processor.config import Backend, QueueStorage, ReceiverAuth, ServiceConfig, SpanTenant
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
from processor.receive.listeners import (
    ADVISORY_MAX_STREAMS,
    ADVISORY_SPARE_CONNECTIONS,
    GRPC_MAX_CONNECTIONS,
    TELEMETRY_IDLE_TIMEOUT_S,
    TELEMETRY_MAX_CONNECTIONS,
    bind,
    gated_caps,
    grpc_server,
    listening_socket,
)
from processor.receive.portgate import INTERNAL_HOST, PortGate
from processor.request.otlp import SERVICE_NAME
from processor.state.replica import SharedState
from processor.state.store import RedisStore, client_for
from processor.telemetry import http as telemetry_http
from processor.telemetry.advisories import AdvisoryCollector
from processor.telemetry.findings import FindingMetrics
from processor.telemetry.gates import GateCollector
from processor.telemetry.metrics import ConnectionCollector, QueueCollector, SelfMetrics
from processor.telemetry.service_log import log_drained, log_forgotten, log_started
from processor.telemetry.state import SharedStateCollector
from processor.telemetry.stores import StoreCollector

log = logging.getLogger(__name__)

# In-flight export RPCs get this long to finish once the receivers stop.
RECEIVER_STOP_GRACE_S = 5.0
TICK_INTERVAL_S = 0.5  # most often held calls (and advisories) are checked for expiry
ADVISORY_MAX_MESSAGE_BYTES = 1024 * 1024  # a Check or Subscribe request is small
ADVISORY_STOP_GRACE_S = 1.0  # subscribers' streams are cut at shutdown; they reconnect


class ExitStatus(enum.IntEnum):
    """What ``mcp-breaker serve`` exits with (docs/delivery.md#exit-status)."""

    OK = 0  # every accepted span was delivered, given up on (counted), or kept on disk
    STARTUP_FAILED = 1  # the configuration or start-up failed; no span was taken
    # Shutdown: spans accepted into the memory queue were not delivered in the grace period.
    UNDELIVERED = 3  # (2 is argparse's: a command line it cannot read)


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


# The cycle collector's thresholds. Its pauses hold the interpreter lock, so the event
# loop waits them out even while a worker thread analyses. CPython's default (700, 10, 10)
# ran a full collection every 70,000 allocations, with the bounded stores full (seen
# spans, circuits, turns: hundreds of thousands of entries) about a tenth of the
# analysis's CPU; full collections stay as rare here as at (10,000, 10, 10), which took
# that back: one per million allocations. But a young collection walks more than its
# threshold says: CPython counts allocations less deallocations, and with the stores full
# each new entry frees an old one, so the young generation grows far past it (70,000
# objects at 10,000). The longest collection with the memory full (bench/classify.py, the
# steady row): 19-35 ms at (10,000, 10, 10), 5-14 ms here. A middle one during a
# 10,000-span analysis, which /healthz waited out (bench/loop_stall.py): 20-35 ms there,
# at most 6.5 ms here. The collector's CPU is the same at both.
GC_YOUNG_THRESHOLD = 2_000  # allocations, less deallocations, between young collections
GC_MIDDLE_THRESHOLD = 5  # young collections between middle ones
GC_OLD_THRESHOLD = 100  # middle collections between full ones


def tune_garbage_collection() -> None:
    """Collect in short pauses, fully as seldom as before, and never walk what start-up
    built (it lives as long as the process): the objects made so far are moved out of the
    collector's sight."""
    gc.set_threshold(GC_YOUNG_THRESHOLD, GC_MIDDLE_THRESHOLD, GC_OLD_THRESHOLD)
    gc.freeze()


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
                self.pipeline.classifier.read_spans,
                config.forward.strip_attributes,
                lambda: self.pipeline.classifier.read,
            )
        self.stage = (
            stage
            if stage is not None
            else Stage(
                (analyse,),
                on_hook_error=self.metrics.stage_errors.inc,
                let_go=self.pipeline.let_go,
            )
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
        log_started(
            self.config,
            self.ports,
            shared=self.shared,
            advisories=self.advisories,
            forwarder=self.forwarder,
        )

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
        sock = listening_socket(endpoint, what, key, self._reuse_port)
        try:
            internal = bind(server, f"{INTERNAL_HOST}:0", credentials, what, key)
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
        server = grpc_server(receivers.grpc.max_recv_msg_bytes, gated, receivers.grpc)
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
        server = grpc_server(
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
        sock = listening_socket(endpoint, what, key, self._reuse_port and name == "otlp_http")
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
            log_forgotten(self.advisories.hub.in_force())
        report = None
        if self.forwarder is not None:
            grace = self.config.forward.shutdown_grace_s
            report = await self.forwarder.drain(grace)
            log_drained(
                report,
                self.forwarder,
                grace,
                opened=self._opened,
                exits_with=ExitStatus.UNDELIVERED,
            )
        for listener in self._listeners.values():
            listener.close()
        self._listeners.clear()
        for runner in self._runners.values():
            await runner.cleanup()
        self._runners.clear()
        return report


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
    tune_allocator()
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
