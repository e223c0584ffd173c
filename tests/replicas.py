"""Replicas of the service as real processes sharing one real Redis, for the scaling tests.

Each ``ReplicaProcess`` is ``python -m processor serve`` with every port on a free one of
its own, ``state.backend=redis`` on the test's ``redis-server``, and a next hop if given.
It can be stopped (SIGTERM), killed (SIGKILL) and started again on the same ports; its
log is kept in a file. The helpers speak to it as harnesses and SREs do: OTLP/gRPC in,
``Check`` and ``GetState`` on the advisory port, ``/metrics`` and ``/readyz``.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import grpc
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families

from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from tests.sdk import RESOURCE
from tests.support import LISTEN_KEYS, LOOPBACK, free_port, wait_until

START_TIMEOUT_S = 60.0
SERVER, TOOL = "playwright", "browser_navigate"
SESSION_CLOSED = "mcp-beaver: upstream MCP session is closed"


class ReplicaProcess:
    def __init__(self, name: str, redis_url: str, workdir: Path, *settings: str) -> None:
        self.name = name
        self.redis_url = redis_url
        self.workdir = workdir
        self.settings = settings
        self.ports = {key: free_port() for key in LISTEN_KEYS}
        self.log_path = workdir / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def otlp(self) -> str:
        return f"{LOOPBACK}:{self.ports['grpc']}"

    @property
    def advisories(self) -> str:
        return f"{LOOPBACK}:{self.ports['advisories']}"

    @property
    def telemetry(self) -> str:
        return f"http://{LOOPBACK}:{self.ports['telemetry']}"

    def start(self, *, ready: bool = True) -> ReplicaProcess:
        listen = [f"{LISTEN_KEYS[key]}={LOOPBACK}:{port}" for key, port in self.ports.items()]
        flags = [
            *listen,
            "state.backend=redis",
            f"state.redis.url={self.redis_url}",
            "state.redis.tick_s=0.2",
            *self.settings,
        ]
        command = [sys.executable, "-m", "processor", "serve"]
        command += [arg for flag in flags for arg in ("--set", flag)]
        log = self.log_path.open("ab")
        environment = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BREAKER_")}
        self.process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=environment
        )
        if ready:
            wait_until(self.is_ready, START_TIMEOUT_S, f"{self.name} ready\n{self.log_tail()}")
        return self

    def is_ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"{self.name} exited {self.process.returncode}\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(self.telemetry + "/readyz", timeout=2) as response:
                return int(response.status) == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def stop(self) -> int:
        process, self.process = self.process, None
        if process is None:
            return 0
        process.send_signal(signal.SIGTERM)
        return process.wait(timeout=60)

    def kill(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            process.kill()
            process.wait(timeout=30)

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return f"--- {self.name} log ---\n" + "\n".join(text)

    # -- as a harness and an SRE -----------------------------------------------------------
    def state(self) -> pb.GetStateResponse:
        with grpc.insecure_channel(self.advisories) as channel:
            stub = pb_grpc.AdvisoriesStub(channel)  # type: ignore[no-untyped-call]
            response: pb.GetStateResponse = stub.GetState(pb.GetStateRequest(), timeout=10)
            return response

    def check(self, **fields: str) -> pb.CheckResponse:
        with grpc.insecure_channel(self.advisories) as channel:
            stub = pb_grpc.AdvisoriesStub(channel)  # type: ignore[no-untyped-call]
            response: pb.CheckResponse = stub.Check(pb.CheckRequest(**fields), timeout=10)
            return response

    def metric(self, name: str, **labels: str) -> float | None:
        with urllib.request.urlopen(self.telemetry + "/metrics", timeout=10) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and sample.labels == labels:
                    return float(sample.value)
        return None


def circuits_of(state: pb.GetStateResponse) -> dict[tuple[int, str, str], tuple[int, int]]:
    """The circuits a replica says are out: (scope, tenant, key) -> (state, expiry)."""
    return {
        (a.scope, a.tenant, a.key): (a.state, a.expires_unix_nano)
        for a in state.advisories
        if a.scope in (pb.SCOPE_SERVER, pb.SCOPE_TOOL)
    }


class FreshIds(IdGenerator):
    """Ids from the operating system: the SDK's default draws from ``random``, which
    hypothesis seeds alike for every example, so a second example would send the first
    one's ids again and the service would ignore them as an exporter's retry."""

    def generate_span_id(self) -> int:
        return secrets.randbits(64) or 1

    def generate_trace_id(self) -> int:
        return secrets.randbits(128) or 1


def tool_calls(
    turns: list[str],
    *,
    outcome: str = "failed",
    tool: str = TOOL,
    server: str = SERVER,
    start_ns: int | None = None,
) -> list[ReadableSpan]:
    """One ``mcp.tool.call`` span per turn, a second apart, ending now-ish (span time)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE, id_generator=FreshIds())
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("replicas.harness")
    start = start_ns if start_ns is not None else time.time_ns() - len(turns) * 10**9
    for index, turn in enumerate(turns):
        began = start + index * 10**9
        span = tracer.start_span("mcp.tool.call", kind=SpanKind.CLIENT, start_time=began)
        span.set_attributes(
            {
                "mcp.tool.name": tool,
                "mcp.server.name": server,
                "mcp.tool.outcome": outcome,
                "mcp.turn.id": turn,
            }
        )
        if outcome == "failed":
            span.set_attribute("mcp.tool.error", SESSION_CLOSED)
        span.end(end_time=began + 200_000_000)
    provider.shutdown()
    return list(memory.get_finished_spans())
