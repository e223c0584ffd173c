"""Test doubles and harnesses: a real gRPC next hop that records, and the service in a thread.

Everything here speaks real gRPC/HTTP on loopback; nothing is mocked below the socket.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Coroutine
from concurrent import futures
from typing import Any, TypeVar

import grpc
from google.protobuf import duration_pb2
from google.protobuf.any_pb2 import Any as AnyProto
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from bench.ports import free_port
from processor.config import load_config
from processor.config.service import ServiceConfig
from processor.engines.breaker import CallDecision
from processor.server import Service

T = TypeVar("T")
LOOPBACK = "127.0.0.1"
# Every key that makes the service listen, by a short name. A test that starts the service
# sets each of them, so nothing it starts sits on a default port, where another
# engineer's ./scripts/serve (or a second test run) may already be.
LISTEN_KEYS = {
    "grpc": "receivers.grpc.endpoint",
    "http": "receivers.http.endpoint",
    "telemetry": "telemetry.metrics_endpoint",
    "advisories": "advisories.endpoint",
}


def terminate(process: subprocess.Popen[bytes] | None, timeout_s: float = 30.0) -> None:
    """SIGTERM a child that still runs, and SIGKILL it if it will not go."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout_s)


def wait_until(predicate: Callable[[], bool], timeout_s: float = 20.0, what: str = "") -> None:
    """Poll a condition; a deadline on waiting, never an assertion about elapsed time."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.02)


class CaptureCollector:
    """A next hop: a real gRPC OTLP server that records what it receives.

    ``unavailable_for`` makes it answer UNAVAILABLE (with RetryInfo when ``retry_after_s``
    is set) to that many requests first; ``stall()`` holds requests until ``release()``
    (``stall(record_first=True)``: it records them, then holds the answer, as a next hop
    that took a request but whose answer never arrives). ``strict`` refuses a request that
    does not decode with INVALID_ARGUMENT, as a collector that checks its input would (the
    protobuf runtime here, upb, refuses invalid UTF-8 in a string and nesting deeper than
    100 messages); otherwise such a request gets INTERNAL, as from gRPC's own decoder.
    """

    def __init__(self, port: int | None = None, *, strict: bool = False) -> None:
        self.port = port or free_port()
        self.strict = strict
        self.requests: list[ExportTraceServiceRequest] = []
        self.refused: list[bytes] = []  # requests refused as undecodable, as they came
        self.attempts = 0
        self.metadata: list[tuple[tuple[str, str], ...]] = []
        self.unavailable_for = 0
        self.retry_after_s: float | None = None
        self.partial_reject = 0
        self._lock = threading.Lock()
        self._open = threading.Event()
        self._open.set()
        self._record_first = False
        self._server: grpc.Server | None = None

    def _export(self, payload: bytes, context: grpc.ServicerContext) -> bytes:
        if not self._record_first:
            self._open.wait(60)
            if not context.is_active():  # the sender gave up while we stalled: not delivered
                return b""
        try:
            request = ExportTraceServiceRequest.FromString(payload)
        except DecodeError as error:
            with self._lock:
                self.refused.append(payload)
            code = grpc.StatusCode.INVALID_ARGUMENT if self.strict else grpc.StatusCode.INTERNAL
            context.abort(code, f"cannot decode the request: {error}")
        with self._lock:
            self.attempts += 1
            if self.unavailable_for > 0:
                self.unavailable_for -= 1
                metadata = ()
                if self.retry_after_s is not None:
                    delay = duration_pb2.Duration()
                    delay.FromNanoseconds(int(self.retry_after_s * 1e9))
                    status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message="busy")
                    packed = AnyProto()
                    packed.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
                    status.details.append(packed)
                    metadata = (("grpc-status-details-bin", status.SerializeToString()),)
                context.abort_with_status(
                    _RichStatus(grpc.StatusCode.UNAVAILABLE, "busy", metadata)
                )
            self.requests.append(request)
            self.metadata.append(tuple(context.invocation_metadata()))
            response = ExportTraceServiceResponse()
            if self.partial_reject:
                response.partial_success.rejected_spans = self.partial_reject
                response.partial_success.error_message = "rejected for the test"
        if self._record_first:
            self._open.wait(60)
        return bytes(response.SerializeToString())

    def start(self, credentials: grpc.ServerCredentials | None = None) -> CaptureCollector:
        """Serve on loopback: plaintext, or with ``credentials`` (TLS, mutual TLS)."""
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        handler = grpc.unary_unary_rpc_method_handler(self._export)  # raw bytes both ways
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "opentelemetry.proto.collector.trace.v1.TraceService", {"Export": handler}
                ),
            )
        )
        if credentials is None:
            server.add_insecure_port(f"{LOOPBACK}:{self.port}")
        else:
            server.add_secure_port(f"{LOOPBACK}:{self.port}", credentials)
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        self._open.set()
        if self._server is not None:
            self._server.stop(0).wait()
            self._server = None

    def stall(self, *, record_first: bool = False) -> None:
        self._record_first = record_first
        self._open.clear()

    def release(self) -> None:
        self._open.set()
        self._record_first = False

    @property
    def endpoint(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def spans(self) -> list[Span]:
        with self._lock:
            return [
                span
                for request in self.requests
                for resource in request.resource_spans
                for scope in resource.scope_spans
                for span in scope.spans
            ]

    def span_count(self) -> int:
        return len(self.spans())


class _RichStatus(grpc.Status):  # type: ignore[misc]
    def __init__(self, code: grpc.StatusCode, details: str, metadata: Any) -> None:
        self.code = code
        self.details = details
        self.trailing_metadata = metadata


def make_config(*overrides: str, **env: str) -> ServiceConfig:
    """A config with every port ephemeral on loopback, plus the given ``--set`` overrides."""
    base = [
        *(f"{key}={LOOPBACK}:0" for key in LISTEN_KEYS.values()),
        "forward.retry.initial_interval_s=0.05",
        "forward.retry.max_interval_s=0.5",
        # The default (10 s) waits out two SDKs batching every 5 s; a test sends both
        # halves itself, and waits less for a half that is to be decided alone.
        "classify.pair_wait_s=2",
    ]
    return load_config(environ=env, overrides=[*base, *overrides])


LOOP_THREAD = "service-loop"  # the name of ServiceThread's event-loop thread


class ServiceThread:
    """The real Service on its own event loop in a background thread."""

    def __init__(self, config: ServiceConfig, **kwargs: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name=LOOP_THREAD
        )
        self._thread.start()
        self.service = self.call(self._make(config, kwargs))
        self.call(self.service.start())

    @staticmethod
    async def _make(config: ServiceConfig, kwargs: dict[str, Any]) -> Service:
        return Service(config, **kwargs)

    def call(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout_s)

    @property
    def grpc_endpoint(self) -> str:
        return f"{LOOPBACK}:{self.service.ports['otlp_grpc']}"

    @property
    def http_url(self) -> str:
        return f"http://{LOOPBACK}:{self.service.ports['otlp_http']}/v1/traces"

    @property
    def telemetry_url(self) -> str:
        return f"http://{LOOPBACK}:{self.service.ports['telemetry']}"

    def metric(self, name: str, **labels: str) -> float:
        value = self.service.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value

    def stop(self) -> Any:
        try:
            return self.call(self.service.stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


def answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2).read()
    except OSError:
        return False
    return True


START_ATTEMPTS = 3  # a free port can still be taken by someone else before serve binds it


def start_serve(
    *flags: str, env: dict[str, str] | None = None, stderr: int | None = subprocess.PIPE
) -> tuple[subprocess.Popen[str], dict[str, int]]:
    """``mcp-breaker serve`` as a process on free loopback ports, once /healthz answers.

    ``free_port`` keeps clear of the ports outgoing connections take; should a port still
    be taken before serve binds it (another program on the machine), serve exits saying
    it cannot listen, and it is started again on other free ports."""
    attempt = 0
    while True:
        attempt += 1
        ports = {name: free_port() for name in LISTEN_KEYS}
        listen = [f"{LISTEN_KEYS[name]}={LOOPBACK}:{port}" for name, port in ports.items()]
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "processor",
                "serve",
                *(arg for flag in listen for arg in ("--set", flag)),
                *flags,
            ],
            stderr=stderr,
            text=True,
            env={**os.environ, **(env or {})},
        )
        url = f"http://{LOOPBACK}:{ports['telemetry']}/healthz"
        wait_until(
            lambda process=process, url=url: process.poll() is not None or answers(url),
            what="service up",
        )
        if process.poll() is None:
            return process, ports
        _, log = process.communicate()
        taken = log is None or "cannot listen on" in log  # no log kept: assume so
        if not taken or attempt == START_ATTEMPTS:
            raise AssertionError(f"serve exited with {process.returncode}: {log}")


class Decisions:
    """An event sink that keeps the service's call decisions as they were first told (a
    revision of a call told before is not a second call), safe to read from a test."""

    def __init__(self) -> None:
        self._items: list[CallDecision] = []
        self._lock = threading.Lock()

    def __call__(self, finding: object) -> None:
        if isinstance(finding, CallDecision) and not finding.late:
            with self._lock:
                self._items.append(finding)

    def all(self) -> list[CallDecision]:
        with self._lock:
            return list(self._items)

    def of_tool(self, tool: str) -> list[CallDecision]:
        """This tool's decisions, in span time."""
        found = [d for d in self.all() if d.call.tool == tool]
        return sorted(found, key=lambda d: d.call.start_ns)
