"""The advisory benchmark's service: a ``serve`` process of its own, read through /metrics.

Every port is on 127.0.0.1 and chosen free. Across-turn circuits are set never to open
unless a part asks otherwise, so that each failing span makes exactly one change. Also
here: the timeouts every part waits with, and the CPU each process spent.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

# Sibling modules: bench/ is on sys.path when these files are run as scripts.
from hop_processes import Child, check_alive, cpu_seconds, start, stop, wait_http_ready
from ports import free_port

LOOPBACK = "127.0.0.1"
CALL_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 30.0
DELIVERY_WAIT_S = 15.0  # after the last span, for every subscriber to read every change
EXPECTED_LOG = ("no next hop", "no tokens configured", "no authentication", "was cut off")
METRIC_SUBSCRIBERS = "mcp_breaker_advisory_subscribers"
METRIC_CUT_OFF = "mcp_breaker_advisory_subscribers_cut_off_total"
METRIC_ACCEPTED = 'mcp_breaker_receiver_accepted_spans_total{transport="grpc"}'
METRIC_CHANGES = "mcp_breaker_advisory_changes_total"
# Across-turn circuits never open, so that each span makes exactly one change: its turn's.
BREAKER_SETTINGS = ("breaker.consecutive_failures=0", f"breaker.min_calls={2**31 - 1}")


def wait(predicate: Callable[[], bool], what: str, timeout_s: float = CONNECT_TIMEOUT_S) -> bool:
    """Poll a condition until a deadline; False if it never held (a count, not a timing)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            if what:
                raise RuntimeError(f"timed out waiting for {what}")
            return False
        time.sleep(0.01)
    return True


@dataclass
class Service:
    child: Child
    otlp: str
    advisories: str
    metrics_port: int

    def metric(self, name: str) -> float:
        """One sample from the service's /metrics (name and labels as the text format
        writes them), 0 when it is not there."""
        check_alive(self.child)
        url = f"http://{LOOPBACK}:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=CALL_TIMEOUT_S) as response:
            text = response.read().decode()
        found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
        return float(found.group(1)) if found else 0.0


def start_service(
    workdir: Path,
    children: ExitStack,
    args: argparse.Namespace,
    name: str = "serve",
    breaker: Sequence[str] = BREAKER_SETTINGS,
) -> Service:
    otlp, advisories, metrics = free_port(), free_port(), free_port()
    argv = [sys.executable, "-m", "processor", "serve", "--log-level", "warning"]
    for setting in (
        f"receivers.grpc.endpoint={LOOPBACK}:{otlp}",
        "receivers.http.enabled=false",
        f"telemetry.metrics_endpoint={LOOPBACK}:{metrics}",
        f"advisories.endpoint={LOOPBACK}:{advisories}",
        f"advisories.subscriber_queue={args.subscriber_queue}",
        # Every subscriber here is one host, which the per-caller cap would count as one.
        "advisories.max_subscribers_per_caller=100000",
        *breaker,
        *args.serve_settings,
    ):
        argv += ["--set", setting]
    child = start(name, argv, workdir)
    children.callback(stop, child)
    wait_http_ready(child, f"http://{LOOPBACK}:{metrics}/readyz")
    return Service(child, f"{LOOPBACK}:{otlp}", f"{LOOPBACK}:{advisories}", metrics)


def cpu(service: Service) -> tuple[float, float]:
    """CPU seconds so far: the service's, and this process's (the subscribers' reading)."""
    return cpu_seconds(service.child.process.pid), cpu_seconds(os.getpid())


def cpu_per_span(
    before: tuple[float, float], after: tuple[float, float], spans: int
) -> dict[str, float]:
    return {
        "service_ms": (after[0] - before[0]) * 1e3 / spans,
        "bench_ms": (after[1] - before[1]) * 1e3 / spans,
    }
