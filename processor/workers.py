"""``serve --workers N``: more than one core on one machine.

One Python process holds one core. Here the ``serve`` process becomes a supervisor that
starts N worker processes, each the whole hop (``server.serve``), all listening on the
same receiver and advisory ports with SO_REUSEPORT: the kernel spreads *connections* over
them (gRPC keeps a connection for many exports, so one exporter's spans all reach one
worker; many exporters, or a collector with several connections, spread). The workers
share breaker state the way replicas do (``state.backend: redis``, ``processor/state/``),
so a failure one worker sees refuses the next call at another.

The supervisor serves the one telemetry port: ``/metrics`` is the workers' scrapes merged
as the catalogue says (``telemetry/merge.py``), ``/healthz`` says every worker lives,
``/readyz`` that every worker is ready. It restarts a worker that dies, and on SIGTERM
stops them all and exits with the worst of their exit statuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import multiprocessing
import os
import signal
import socket
import sys
import time
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from processor.config import ServiceConfig, split_endpoint
from processor.errors import StartupError
from processor.telemetry import logs
from processor.telemetry.merge import MergedCollector

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 60.0  # a worker that has not said it listens by then failed to start
RESTART_DELAY_S = 1.0  # a worker that died is started again after this
SCRAPE_TIMEOUT_S = 10.0
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
# Exit statuses, as server.ExitStatus: kept here so the supervisor imports no gRPC.
EXIT_STARTUP_FAILED = 1


@dataclasses.dataclass
class Worker:
    index: int
    process: BaseProcess
    telemetry_port: int = 0


def worker_main(config: ServiceConfig, index: int, report: Connection) -> None:
    """A worker process: the whole hop on shared ports; says its ports once it listens."""
    from processor.server import serve  # in the child: the supervisor needs none of it

    logs.configure(config.log.level, process=f"worker {index}")
    status = asyncio.run(serve(config, reuse_port=True, on_started=report.send))
    report.close()
    sys.exit(status)


CGROUP_CPU_MAX = "/sys/fs/cgroup/cpu.max"  # cgroup v2: "<quota> <period>" or "max <period>"


def usable_cores(cpu_max: str = CGROUP_CPU_MAX) -> int:
    """The cores this process may use: its CPU set (taskset, a container's cpuset), and no
    more than its CPU quota allows (a Kubernetes CPU limit), rounded up."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    try:
        with open(cpu_max, encoding="ascii") as limits:
            quota = quota_cores(limits.read())
    except OSError:  # no cgroup v2 here
        return cores
    return min(cores, quota) if quota else cores


def quota_cores(cpu_max: str) -> int:
    """Whole cores a cgroup v2 ``cpu.max`` allows (0: no quota, or unreadable)."""
    parts = cpu_max.split()
    if len(parts) != 2 or parts[0] == "max":
        return 0
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return 0
    if quota <= 0 or period <= 0:
        return 0
    return -(-quota // period)  # a limit of 1.5 cores runs on two


def too_many_workers(workers: int, cores: int) -> str:
    """What to tell an operator who asked for more workers than there are cores ("" when
    there are enough): the extra workers only take turns on the same cores, and each one
    also applies every other worker's events."""
    if workers <= cores:
        return ""
    return (
        f"server.workers: {workers} workers on {cores} usable "
        f"core{'s' if cores != 1 else ''}: workers beyond the cores take turns on them and "
        "each applies every other worker's events: expect no more throughput than with "
        f"{cores} worker{'s' if cores != 1 else ''} (docs/scaling.md)"
    )


def _claim_ports(config: ServiceConfig) -> tuple[ServiceConfig, list[socket.socket]]:
    """Every shared endpoint with a concrete port: one asked for port 0 gets a free one,
    held by a bound (not listening) SO_REUSEPORT socket until the workers listen on it."""
    held: list[socket.socket] = []

    def concrete(endpoint: str) -> str:
        host, port = split_endpoint(endpoint)
        if port:
            return endpoint
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, 0))
        held.append(sock)
        bracketed = f"[{host}]" if ":" in host else host
        return f"{bracketed}:{sock.getsockname()[1]}"

    receivers = config.receivers
    shared = dataclasses.replace(
        config,
        receivers=dataclasses.replace(
            receivers,
            grpc=dataclasses.replace(receivers.grpc, endpoint=concrete(receivers.grpc.endpoint)),
            http=dataclasses.replace(receivers.http, endpoint=concrete(receivers.http.endpoint)),
        ),
        advisories=dataclasses.replace(
            config.advisories, endpoint=concrete(config.advisories.endpoint)
        ),
    )
    return shared, held


class Supervisor:
    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self._context = multiprocessing.get_context("spawn")  # no forked gRPC state
        self._workers: list[Worker] = []
        self._worker_config = config
        self._stopping = False
        self._merged = MergedCollector()
        self._registry = CollectorRegistry()
        self._registry.register(self._merged)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.ports: dict[str, int] = {}

    async def start(self) -> bool:
        crowded = too_many_workers(self.config.server.workers, usable_cores())
        if crowded:
            log.warning("%s", crowded)
        shared, held = _claim_ports(self.config)
        # Each worker's own telemetry on loopback; the supervisor's is the public one.
        self._worker_config = dataclasses.replace(
            shared,
            server=dataclasses.replace(shared.server, workers=1),
            telemetry=dataclasses.replace(shared.telemetry, metrics_endpoint=f"{LOOPBACK}:0"),
        )
        try:
            for index in range(1, self.config.server.workers + 1):
                worker = await self._spawn(index)
                if worker is None:
                    return False
                self._workers.append(worker)
        finally:
            for sock in held:
                sock.close()
        self.ports = self._ports_of(shared)
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT_S))
        await self._serve_telemetry()
        log.info(
            "mcp-breaker: %d workers (pids %s) share %s; metrics of all of them on port %d",
            len(self._workers),
            ", ".join(str(w.process.pid) for w in self._workers),
            ", ".join(f"{name} on port {port}" for name, port in self.ports.items()),
            self.ports.get("telemetry", 0),
        )
        return True

    @staticmethod
    def _ports_of(config: ServiceConfig) -> dict[str, int]:
        ports = {}
        if config.receivers.grpc.enabled:
            ports["otlp_grpc"] = split_endpoint(config.receivers.grpc.endpoint)[1]
        if config.receivers.http.enabled:
            ports["otlp_http"] = split_endpoint(config.receivers.http.endpoint)[1]
        if config.advisories.enabled:
            ports["advisories"] = split_endpoint(config.advisories.endpoint)[1]
        return ports

    async def _spawn(self, index: int) -> Worker | None:
        receive, send = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=worker_main,
            args=(self._worker_config, index, send),
            name=f"mcp-breaker worker {index}",
        )
        process.start()
        send.close()
        ports = await asyncio.to_thread(_wait_for_ports, receive, process)
        receive.close()
        if ports is None:
            log.error("worker %d did not start (exit status %s)", index, process.exitcode)
            return None
        return Worker(index, process, ports.get("telemetry", 0))

    async def _serve_telemetry(self) -> None:
        telemetry = self.config.telemetry
        if not telemetry.enabled:
            return
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        host, port = split_endpoint(telemetry.metrics_endpoint)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            sock = socket.create_server((host, port), family=family)
        except OSError as error:
            raise StartupError(
                f"telemetry: cannot listen on {telemetry.metrics_endpoint} (set by "
                f"telemetry.metrics_endpoint): {error.strerror}"
            ) from None
        await web.SockSite(self._runner, sock).start()
        self.ports["telemetry"] = sock.getsockname()[1]

    async def _fetch(self, worker: Worker, path: str) -> tuple[int, str]:
        assert self._session is not None
        url = f"http://{LOOPBACK}:{worker.telemetry_port}{path}"
        try:
            async with self._session.get(url, headers={"Accept": OPENMETRICS}) as answer:
                return answer.status, await answer.text()
        except (aiohttp.ClientError, TimeoutError) as error:
            return 0, f"worker {worker.index}: {error or type(error).__name__}"

    async def _metrics(self, request: web.Request) -> web.Response:
        answers = await asyncio.gather(*(self._fetch(w, "/metrics") for w in self._workers))
        scrapes = [text for status, text in answers if status == 200]
        if len(scrapes) < len(answers):
            return web.Response(status=503, text="a worker did not answer its scrape\n")
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))

        def merged() -> bytes:
            self._merged.update(scrapes)
            return encode(self._registry)

        body = await asyncio.to_thread(merged)
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _healthz(self, request: web.Request) -> web.Response:
        dead = [w.index for w in self._workers if not w.process.is_alive()]
        if dead:
            return web.Response(status=503, text=f"workers not running: {dead}\n")
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        answers = await asyncio.gather(*(self._fetch(w, "/readyz") for w in self._workers))
        for worker, (status, text) in zip(self._workers, answers, strict=True):
            if status != 200:
                return web.Response(status=503, text=f"worker {worker.index}: {text.strip()}\n")
        return web.Response(text="ready\n")

    async def watch(self, stopping: asyncio.Event) -> None:
        """Until ``stopping``: a worker that dies is started again, and said so."""
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), timeout=0.5)
            if stopping.is_set():
                return
            for slot, worker in enumerate(self._workers):
                if worker.process.is_alive():
                    continue
                log.error(
                    "worker %d (pid %s) ended with exit status %s; starting it again",
                    worker.index,
                    worker.process.pid,
                    worker.process.exitcode,
                )
                await asyncio.sleep(RESTART_DELAY_S)
                again = await self._spawn(worker.index)
                if again is not None:
                    self._workers[slot] = again

    async def stop(self) -> int:
        """SIGTERM every worker, wait for each to drain; the worst exit status."""
        for worker in self._workers:
            if worker.process.is_alive():
                worker.process.terminate()
        grace = self.config.forward.shutdown_grace_s + 30.0
        statuses = await asyncio.to_thread(_join_all, self._workers, grace)
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()
        worst = max(statuses, default=0)
        log.info("mcp-breaker: every worker stopped (exit statuses %s)", statuses)
        return worst


def _wait_for_ports(receive: Connection, process: BaseProcess) -> dict[str, int] | None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if receive.poll(0.1):
            try:
                ports = receive.recv()
            except EOFError:
                break
            return dict(ports)
        if not process.is_alive():
            break
    if process.is_alive():
        process.terminate()
    process.join(10)
    return None


def _join_all(workers: list[Worker], grace_s: float) -> list[int]:
    deadline = time.monotonic() + grace_s
    statuses = []
    for worker in workers:
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.is_alive():
            log.error("worker %d did not stop in %gs; killed", worker.index, grace_s)
            worker.process.kill()
            worker.process.join(5)
        code = worker.process.exitcode
        statuses.append(code if code is not None and code >= 0 else EXIT_STARTUP_FAILED)
    return statuses


async def supervise(config: ServiceConfig) -> int:
    """``serve`` with ``server.workers`` above 1; the exit status for the console script."""
    supervisor = Supervisor(config)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    try:
        started = await supervisor.start()
    except StartupError as error:
        log.error("cannot start: %s", error)
        started = False
    if not started:
        await supervisor.stop()
        return EXIT_STARTUP_FAILED
    await supervisor.watch(stopping)
    log.info("stopping: every worker stops taking spans and drains its queue")
    return await supervisor.stop()
