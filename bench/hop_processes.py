"""The benchmarks' child processes, and what they are measured by.

Start, stop and check a child (its output kept for the report), wait until one listens
(gRPC) or answers ready (HTTP), read a process's CPU seconds from /proc, scrape and drain
serve's metrics, run the load generator, and stop on SIGTERM as on an exception. The hop
benchmark (bench/hop.py) and the other benchmarks that start processes share them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from prometheus_client.parser import text_string_to_metric_families

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0  # SIGTERM, then SIGKILL
DRAIN_TIMEOUT_S = 30.0
LOADGEN_SLACK_S = 60.0  # start-up, payload building and the last calls, over its duration


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    output: Path  # stdout and stderr, for the end-of-run report


def start(name: str, argv: list[str], workdir: Path) -> Child:
    output = workdir / f"{name}.log"
    with output.open("wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO)
    return Child(name, process, output)


def stop(child: Child) -> None:
    if child.process.poll() is None:
        child.process.send_signal(signal.SIGTERM)
        try:
            child.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.process.kill()
            child.process.wait()


def check_alive(child: Child) -> None:
    if child.process.poll() is not None:
        tail = child.output.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{child.name} exited with {child.process.returncode}:\n{tail}")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process and its live children (the workers of
    ``serve --workers``), all their threads, from /proc/PID/stat."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(k) for k in children.read_text().split()] if children.exists() else []
    return _cpu_of(pid) + sum(_cpu_of(kid) for kid in kids)


def _cpu_of(pid: int) -> float:
    # The command name (field 2) may hold spaces; the fields after it are space-separated.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def wait_grpc_ready(child: Child, port: int) -> None:
    with grpc.insecure_channel(f"{LOOPBACK}:{port}") as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=START_TIMEOUT_S)
        except grpc.FutureTimeoutError:
            check_alive(child)
            raise RuntimeError(f"{child.name} did not listen within {START_TIMEOUT_S}s") from None


def wait_http_ready(child: Child, url: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        check_alive(child)
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass  # not listening yet, or 503: not ready yet
        if time.monotonic() > deadline:
            raise RuntimeError(f"{child.name}: {url} not 200 within {START_TIMEOUT_S}s")
        time.sleep(0.1)


def scrape(port: int) -> dict[str, float]:
    """The serve process's metrics, summed by name and by name{label=value}."""
    url = f"http://{LOOPBACK}:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    values: dict[str, float] = defaultdict(float)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[sample.name] += sample.value
            for label, value in sample.labels.items():
                values[f"{sample.name}{{{label}={value}}}"] += sample.value
    return values


def wait_drained(port: int) -> None:
    """The hop answers before it forwards: let it deliver what it holds before reading CPU."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while scrape(port)["mcp_breaker_exporter_queue_spans"] > 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the hop still holds spans after {DRAIN_TIMEOUT_S}s")
        time.sleep(0.05)


def run_loadgen(port: int, variant: str, args: argparse.Namespace) -> dict[str, Any]:
    argv = [sys.executable, str(BENCH / "loadgen.py"), "--target", f"{LOOPBACK}:{port}"]
    argv += ["--payload", variant, "--concurrency", str(args.concurrency)]
    argv += ["--connections", str(getattr(args, "connections", 1))]
    argv += ["--duration", str(args.duration), "--warmup", str(args.warmup)]
    limit_s = args.duration + args.warmup + LOADGEN_SLACK_S
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=limit_s, check=False)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"loadgen did not finish within {limit_s:.0f}s") from None
    if done.returncode != 0:
        raise RuntimeError(f"loadgen exited with {done.returncode}:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def received_bytes(null: Child) -> int | None:
    """What the null receiver printed as it stopped (bytes, since it started); None if it
    never got to say."""
    lines = null.output.read_text(errors="replace").splitlines()
    reports = [line for line in lines if line.startswith("{")]
    return int(json.loads(reports[-1])["bytes"]) if reports else None


def stop_on_sigterm(signum: int, frame: object) -> None:
    # Python's default SIGTERM ends the process at once, leaving the children running;
    # as an exception it unwinds through the ExitStack that stops them.
    raise SystemExit(128 + signum)
