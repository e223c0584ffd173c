"""``serve --workers N``: processes sharing the ports, one breaker through Redis, one
telemetry port. The merge of the workers' scrapes is tested as plain functions; the rest
with real processes, a real redis-server and the OpenTelemetry SDK's exporter."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from processor.cli import main
from processor.config import load_config
from processor.errors import ConfigError
from processor.telemetry.merge import merge
from processor.workers import quota_cores, too_many_workers, usable_cores
from tests.prometheus_server import promtool_check_metrics
from tests.redis_server import RedisServer
from tests.support import LISTEN_KEYS, LOOPBACK, answers, free_port, terminate, wait_until
from tests.test_advisories_service import Call, harness_spans, new_turn

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"

# --- the configuration ------------------------------------------------------------------------


def test_more_than_one_worker_needs_the_redis_backend() -> None:
    with pytest.raises(ConfigError) as error:
        load_config(overrides=["server.workers=2"])
    (problem,) = error.value.problems
    assert problem.startswith("server.workers: 2 workers need state.backend: redis")
    assert "or run one worker" in problem
    with pytest.raises(ConfigError) as error:
        load_config(
            overrides=[
                "server.workers=2",
                "state.backend=redis",
                "forward.queue.storage=disk",
                "forward.queue.directory=/tmp/q",
            ]
        )
    assert any("cannot share one disk queue" in p for p in error.value.problems)
    config = load_config(overrides=["server.workers=2", "state.backend=redis"])
    assert config.server.workers == 2


def test_more_workers_than_cores_is_said_at_start() -> None:
    assert too_many_workers(2, 2) == ""
    assert too_many_workers(1, 1) == ""
    warning = too_many_workers(4, 2)
    assert warning.startswith("server.workers: 4 workers on 2 usable cores:")
    assert "expect no more throughput than with 2 workers" in warning
    assert "than with 1 worker (" in too_many_workers(2, 1)
    assert "on 1 usable core:" in too_many_workers(2, 1)
    assert 1 <= usable_cores() <= (os.cpu_count() or 1)


def test_a_cpu_quota_bounds_the_usable_cores(tmp_path: Path) -> None:
    assert quota_cores("max 100000") == 0
    assert quota_cores("100000 100000") == 1
    assert quota_cores("150000 100000") == 2  # 1.5 cores run on two
    assert quota_cores("50000 100000") == 1
    assert quota_cores("") == quota_cores("garbage here") == quota_cores("0 100000") == 0
    limits = tmp_path / "cpu.max"
    limits.write_text("100000 100000\n")
    assert usable_cores(str(limits)) == 1
    limits.write_text("max 100000\n")
    assert usable_cores(str(limits)) == usable_cores(str(tmp_path / "absent"))


def test_the_command_line_says_why_before_starting(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--workers", "2"]) == 1
    assert "server.workers: 2 workers need state.backend: redis" in capsys.readouterr().err


# --- merging the workers' scrapes -------------------------------------------------------------

WORKER_1 = """\
# TYPE mcp_breaker_receiver_accepted_spans counter
# HELP mcp_breaker_receiver_accepted_spans Spans taken in.
mcp_breaker_receiver_accepted_spans_total{transport="grpc"} 10.0
mcp_breaker_receiver_accepted_spans_created{transport="grpc"} 100.0
# TYPE mcp_breaker_circuit_state stateset
# HELP mcp_breaker_circuit_state State.
mcp_breaker_circuit_state{key="p",scope="server",mcp_breaker_circuit_state="open"} 1.0
mcp_breaker_circuit_state{key="p",scope="server",mcp_breaker_circuit_state="closed"} 0.0
# TYPE mcp_breaker_shared_state_up gauge
# HELP mcp_breaker_shared_state_up Up.
mcp_breaker_shared_state_up 1.0
# TYPE mcp_breaker_tool_call_duration_seconds histogram
# HELP mcp_breaker_tool_call_duration_seconds Durations.
mcp_breaker_tool_call_duration_seconds_bucket{le="1.0"} 2.0
mcp_breaker_tool_call_duration_seconds_bucket{le="+Inf"} 3.0
mcp_breaker_tool_call_duration_seconds_count 3.0
mcp_breaker_tool_call_duration_seconds_sum 4.5
# EOF
"""
WORKER_2 = (
    WORKER_1.replace(" 10.0\n", " 5.0\n")
    .replace('_created{transport="grpc"} 100.0', '_created{transport="grpc"} 90.0')
    .replace("mcp_breaker_shared_state_up 1.0", "mcp_breaker_shared_state_up 0.0")
)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)  # type: ignore[no-untyped-call]
        for sample in family.samples
    }


def test_counters_and_histograms_add_up_and_replicated_state_appears_once() -> None:
    families = {family.name: family for family in merge([WORKER_1, WORKER_2])}
    accepted = {s.name: s.value for s in families["mcp_breaker_receiver_accepted_spans"].samples}
    assert accepted == {
        "mcp_breaker_receiver_accepted_spans_total": 15.0,
        "mcp_breaker_receiver_accepted_spans_created": 90.0,  # the earliest worker's
    }
    state = families["mcp_breaker_circuit_state"]
    assert state.type == "stateset"
    assert [s.value for s in state.samples] == [1.0, 0.0]  # once, not added
    assert families["mcp_breaker_shared_state_up"].samples[0].value == 0.0  # up only if all
    histogram = {s.name + s.labels.get("le", ""): s.value
                 for s in families["mcp_breaker_tool_call_duration_seconds"].samples}  # fmt: skip
    assert histogram == {
        "mcp_breaker_tool_call_duration_seconds_bucket1.0": 4.0,
        "mcp_breaker_tool_call_duration_seconds_bucket+Inf": 6.0,
        "mcp_breaker_tool_call_duration_seconds_count": 6.0,
        "mcp_breaker_tool_call_duration_seconds_sum": 9.0,
    }


def test_a_series_only_one_worker_has_is_shown_as_it_is() -> None:
    only = WORKER_1.replace("# EOF\n", "") + (
        "# TYPE mcp_breaker_advisory_subscribers gauge\n"
        "# HELP mcp_breaker_advisory_subscribers Subscribed.\n"
        "mcp_breaker_advisory_subscribers 7.0\n# EOF\n"
    )
    families = {family.name: family for family in merge([WORKER_2, only])}
    assert families["mcp_breaker_advisory_subscribers"].samples[0].value == 7.0


# --- real workers -----------------------------------------------------------------------------


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


class Workers:
    """``mcp-breaker serve --workers 2`` as a process, every port chosen here."""

    def __init__(self, redis: RedisServer, tmp_path: Path) -> None:
        self.ports = {name: free_port() for name in LISTEN_KEYS}
        listen = [f"{LISTEN_KEYS[name]}={LOOPBACK}:{port}" for name, port in self.ports.items()]
        settings = [*listen, "state.backend=redis", f"state.redis.url={redis.url}"]
        self.log = tmp_path / "serve.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "processor", "serve", "--workers", "2"]
            + [arg for setting in settings for arg in ("--set", setting)],
            stderr=self.log.open("w"),
            env={**os.environ},
        )
        wait_until(lambda: self.process.poll() is not None or self.ready(), 90, "two workers ready")
        assert self.process.poll() is None, self.log.read_text()

    def url(self, path: str) -> str:
        return f"http://{LOOPBACK}:{self.ports['telemetry']}{path}"

    def ready(self) -> bool:
        return answers(self.url("/readyz"))

    def scrape(self, accept: str = "text/plain") -> str:
        request = urllib.request.Request(self.url("/metrics"), headers={"Accept": accept})
        return urllib.request.urlopen(request, timeout=30).read().decode()

    def worker_pids(self) -> list[int]:
        found = subprocess.run(
            ["pgrep", "-P", str(self.process.pid)], capture_output=True, text=True, check=False
        )
        pids = [int(pid) for pid in found.stdout.split()]
        # multiprocessing's resource tracker is a child too; the workers run spawn_main.
        return [pid for pid in pids if b"spawn_main" in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.fixture
def workers(redis: RedisServer, tmp_path: Path) -> Iterator[Workers]:
    running = Workers(redis, tmp_path)
    yield running
    terminate(running.process)


def export(workers: Workers, calls: list[Call]) -> None:
    """Each export on a connection of its own: connections are what the kernel spreads."""
    exporter = OTLPSpanExporter(
        endpoint=f"{LOOPBACK}:{workers.ports['grpc']}", insecure=True, timeout=20
    )
    try:
        assert exporter.export(harness_spans(calls)) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()


def value(text: str, series: str) -> float:
    match = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
    assert match, f"{series} not in the scrape"
    return float(match.group(1))


def test_two_workers_share_the_ports_one_breaker_and_one_telemetry_port(
    workers: Workers,
) -> None:
    pids = workers.worker_pids()
    assert len(pids) == 2
    for _ in range(3):  # three turns fail, ended before the calls below began: it opens
        export(workers, [Call(new_turn(), ago_s=10)])
    # Each worker applies the failures the other took (a decision reads only its own
    # copy, so a call judged before they arrive is judged without them).
    wait_until(lambda: value(workers.scrape(), "mcp_breaker_shared_events_applied_total") >= 3)
    calls = 20
    for _ in range(calls):
        export(workers, [Call(new_turn())])  # each refused up front: a dead call
    wait_until(
        lambda: (
            value(workers.scrape(), 'mcp_breaker_receiver_accepted_spans_total{transport="grpc"}')
            == 3 + calls
        )
    )
    log = workers.log.read_text()
    # Both workers took connections, and each judged its calls by the one shared breaker.
    # (The log shows a few dead calls a minute per worker, then a count: the metrics
    # count every one.)
    dead = re.findall(r"\[worker (\d)\] processor\.inflight\.pipeline: dead call", log)
    assert set(dead) == {"1", "2"}, log
    text = workers.scrape()
    counted = re.findall(r"^mcp_breaker_dead_calls_total\{[^}]*\} (\S+)$", text, re.M)
    assert sum(float(n) for n in counted) == calls
    # Replicated state once: one open server circuit, not one per worker.
    assert value(text, 'mcp_breaker_circuits{scope="server",state="open"}') == 1
    series = (
        'mcp_breaker_circuit_state{key="playwright",mcp_breaker_circuit_state="open",'
        'scope="server"}'
    )
    assert value(text, series) == 1
    checked = promtool_check_metrics(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "# EOF" in workers.scrape(OPENMETRICS)  # OpenMetrics when asked, as one worker
    # SIGTERM: every worker drains and stops; the supervisor says how they ended.
    workers.process.send_signal(signal.SIGTERM)
    assert workers.process.wait(timeout=60) == 0
    for pid in pids:
        assert (
            not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
        )
    assert "every worker stopped (exit statuses [0, 0])" in workers.log.read_text()


def test_a_worker_that_dies_is_started_again(workers: Workers) -> None:
    first, _ = workers.worker_pids()
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: first not in workers.worker_pids() and len(workers.worker_pids()) == 2, 60)
    wait_until(workers.ready, 60)
    assert "ended with exit status -9; starting it again" in workers.log.read_text()
    export(workers, [Call(new_turn(), outcome="ok")])
    time.sleep(0.2)
    assert answers(workers.url("/healthz"))


def start_on_a_taken_port(redis: RedisServer, *, prefix: tuple[str, ...] = ()) -> str:
    """``serve --workers 2`` while another program holds the gRPC port without SO_REUSEPORT,
    so that no worker can listen: its exit status 1 is asserted, its stderr returned."""
    with socket.create_server((LOOPBACK, 0)) as taken:
        ports = {name: free_port() for name in LISTEN_KEYS}
        ports["grpc"] = taken.getsockname()[1]
        settings = [f"{LISTEN_KEYS[name]}={LOOPBACK}:{port}" for name, port in ports.items()]
        settings += ["state.backend=redis", f"state.redis.url={redis.url}"]
        done = subprocess.run(
            [*prefix, sys.executable, "-m", "processor", "serve", "--workers", "2"]
            + [arg for setting in settings for arg in ("--set", setting)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    return done.stderr


def test_a_worker_that_cannot_start_fails_the_start(redis: RedisServer) -> None:
    stderr = start_on_a_taken_port(redis)
    assert "OTLP/gRPC receiver: cannot listen on" in stderr
    assert "worker 1 did not start" in stderr


def test_two_workers_pinned_to_one_core_are_warned_of(redis: RedisServer) -> None:
    one_core = str(min(os.sched_getaffinity(0)))  # one this process may run on
    stderr = start_on_a_taken_port(redis, prefix=("taskset", "--cpu-list", one_core))
    assert "WARNING" in stderr
    assert "server.workers: 2 workers on 1 usable core:" in stderr
    # With the cores to spare, no such warning.
    assert "usable core" not in start_on_a_taken_port(redis) or usable_cores() < 2
