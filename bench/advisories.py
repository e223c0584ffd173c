"""The advisory benchmark: how long a failing span takes to reach every subscribed harness.

    .venv/bin/python bench/advisories.py            # 100 subscribers, 200 spans a run: ~1 min
    .venv/bin/python bench/advisories.py --quick    # 10 subscribers, 30 spans: a smoke test

The service runs as ``python -m processor serve`` in a process of its own, every port on
127.0.0.1 and chosen free, so the benchmark's threads do not share its GIL. This process
holds the subscribers (raw ``Advisories/Subscribe`` streams, each on a channel and a TCP
connection of its own, all read by one grpc.aio event loop in a thread) and, from its
main thread, sends the spans (a raw ``TraceService/Export`` call with a request encoded in
advance). The machine's cores are shared by both processes.

1. Delivery. ``--events`` failing ``mcp.tool.call`` spans in our harness convention, each
   of its own turn, ``--interval-ms`` apart, one request each. Each opens a within-turn
   block, and the service pushes one ``turn_tool`` change per span (across-turn circuits
   are set never to open, so that is the only change; the run checks it). Latency: from
   just before the Export call to the moment a subscriber reads the change naming that
   turn; over every (subscriber, event) pair, and for the first subscriber to get each
   event. Baselines, same run: the Export round trip, with and without subscribers; and
   CPU per span of the service and of this process. The default spacing (100 ms) keeps
   one span's fan-out from overlapping the next: on a small machine, pushing one change
   to 100 subscribers takes the service about 25 ms of CPU, so at 20 ms apart the
   figures measure a queue, not a delivery.
2. A stalled subscriber. The same again with one more subscriber that never reads. The
   others should not notice; the service should cut it off (its stream, read at last,
   ends with RESOURCE_EXHAUSTED); every span should still be accepted. Spans keep coming
   after ``--events`` until the service's cut-off counter moves (or a cap).
3. Check. Sequential unary ``Advisories/Check`` calls from one client (a blocked call:
   DENY; an unknown turn: ALLOW) next to a baseline, the gRPC health Check on the OTLP
   port, alternated, in the same run.

Figures only: nothing here judges a time. The checks at the end are about correctness
(every change delivered, every span accepted, the stalled stream cut off, verdicts).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Coroutine, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

# A sibling module: bench/ is on sys.path when these files are run as scripts.
from hop import (
    Child,
    check_alive,
    cpu_seconds,
    free_port,
    start,
    stop,
    stop_on_sigterm,
    wait_http_ready,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc

T = TypeVar("T")
LOOPBACK = "127.0.0.1"
EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
CALL_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 30.0
DELIVERY_WAIT_S = 15.0  # after the last span, for every subscriber to read every change
DRAIN_QUIET_S = 2.0  # reading the stalled stream at last: this long without a message
WARMUP_EVENTS = 10
BASELINE_EVENTS = 50  # at most: spans sent before anyone subscribes
STALL_EXTRA_BATCH = 20  # spans sent at a time while waiting for the stalled one to be cut
TOOL = "fetch_page"
ERROR = (
    "upstream MCP session is closed (reconnect also failed: reconnect upstream MCP "
    '"http://127.0.0.1:8931/mcp": sending "notifications/initialized": Bad Request)'
)
ARGUMENTS = json.dumps({"url": "https://artifacts.example.test/run/1539078028959944794"})
HARNESS = "advisory-bench-harness"
METRIC_SUBSCRIBERS = "mcp_breaker_advisory_subscribers"
METRIC_CUT_OFF = "mcp_breaker_advisory_subscribers_cut_off_total"
METRIC_ACCEPTED = 'mcp_breaker_receiver_accepted_spans_total{transport="grpc"}'
METRIC_CHANGES = "mcp_breaker_advisory_changes_total"
SERVERS = 20  # the spans name this many MCP servers in turn
# Across-turn circuits never open, so that each span makes exactly one change: its turn's.
BREAKER_SETTINGS = ("breaker.consecutive_failures=0", f"breaker.min_calls={2**31 - 1}")
# A channel that keeps its HTTP/2 window at 64 KB: gRPC's default grows it (BDP probing)
# to a few MB, so a subscriber that never reads takes thousands of changes before the
# service's queue for it even starts to fill.
SMALL_WINDOW = (("grpc.http2.bdp_probe", 0),)


# --- the spans ----------------------------------------------------------------------------


@dataclass
class Event:
    """One failing call: its turn, its request (encoded), and what its export did."""

    turn: str
    server: str
    payload: bytes
    t0_ns: int = 0  # just before the Export call
    t1_ns: int = 0  # when it returned
    ok: bool = False
    error: str = ""


def _attribute(key: str, value: str | int) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def failing_call(label: str, index: int, number: int) -> Event:
    """A failed ``mcp.tool.call`` span as our harness writes it, alone in its request."""
    turn, server = f"bench-{label}-turn-{index:05d}", f"bench-mcp-{number % SERVERS:02d}"
    start_ns = time.time_ns()  # now: the block is in force for turn_idle_s from here
    span = Span(
        name="mcp.tool.call",
        trace_id=(0x5EED << 64 | number).to_bytes(16, "big"),
        span_id=(0xB0 << 48 | number).to_bytes(8, "big"),
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=start_ns,
        end_time_unix_nano=start_ns + 250_000_000,
    )
    span.attributes.extend(
        _attribute(key, value)
        for key, value in (
            ("mcp.tool.name", TOOL),
            ("mcp.server.name", server),
            ("mcp.tool.outcome", "failed"),
            ("mcp.tool.error", ERROR),
            ("mcp.tool.arguments", ARGUMENTS),
            ("mcp.turn.id", turn),
            ("mcp.turn.round", 1),
        )
    )
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.append(_attribute("service.name", HARNESS))
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name, scope_spans.scope.version = "advisory-bench.harness", "1"
    scope_spans.spans.append(span)
    return Event(turn, server, request.SerializeToString())


class Numbering:
    def __init__(self) -> None:
        self._next = 1

    @property
    def made(self) -> int:
        return self._next - 1

    def events(self, label: str, count: int) -> list[Event]:
        first, self._next = self._next, self._next + count
        return [failing_call(label, i, first + i) for i in range(count)]


class Sender:
    """Exports from the calling thread, one request at a time, on a channel of its own."""

    def __init__(self, target: str) -> None:
        self.channel = grpc.insecure_channel(target)
        grpc.channel_ready_future(self.channel).result(timeout=CONNECT_TIMEOUT_S)
        self._export = self.channel.unary_unary(
            EXPORT_METHOD,
            request_serializer=None,  # the requests are bytes already
            response_deserializer=ExportTraceServiceResponse.FromString,
        )

    def send(self, events: Sequence[Event], interval_s: float) -> None:
        """One span every ``interval_s`` (or right after the last one returned, if later)."""
        began = time.perf_counter()
        for i, event in enumerate(events):
            delay = began + i * interval_s - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            event.t0_ns = time.perf_counter_ns()
            try:
                response = self._export(event.payload, timeout=CALL_TIMEOUT_S)
                event.ok = not response.partial_success.rejected_spans
                event.error = "" if event.ok else "partial success: rejected"
            except grpc.RpcError as error:
                event.error = error.code().name
            event.t1_ns = time.perf_counter_ns()

    def close(self) -> None:
        self.channel.close()


# --- the subscribers ----------------------------------------------------------------------


@dataclass
class Stream:
    """What one subscriber read: when each turn's change arrived, and how the stream ended."""

    name: str
    got: dict[str, int] = field(default_factory=dict)  # turn -> perf_counter_ns when read
    snapshot: bool = False
    ended: str = ""  # the status code name once the stream ended


class Fleet:
    """Subscribers on one grpc.aio event loop in a thread of its own.

    Every subscriber has its own channel and, through a channel-local subchannel pool,
    its own TCP connection, as separate harness processes would.
    """

    def __init__(self, target: str) -> None:
        self.target = target
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._channels: list[grpc.aio.Channel] = []
        self._calls: list[Any] = []
        self._readers: list[asyncio.Task[None]] = []

    def call(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout_s)

    def _open(self, name: str, options: Sequence[tuple[str, Any]] = ()) -> Any:
        channel = grpc.aio.insecure_channel(
            self.target, options=[("grpc.use_local_subchannel_pool", 1), *options]
        )
        self._channels.append(channel)
        call = pb_grpc.AdvisoriesStub(channel).Subscribe(  # type: ignore[no-untyped-call]
            pb.SubscribeRequest(subscriber_name=name)
        )
        self._calls.append(call)
        return call

    def subscribe(self, count: int, label: str) -> list[Stream]:
        async def go() -> list[Stream]:
            streams = [Stream(f"{label}-{i:03d}") for i in range(count)]
            for stream in streams:
                task = asyncio.create_task(self._read(self._open(stream.name), stream))
                self._readers.append(task)
            return streams

        streams = self.call(go())
        wait(lambda: all(s.snapshot or s.ended for s in streams), "every snapshot")
        if failed := [s for s in streams if s.ended]:
            raise RuntimeError(f"{len(failed)} subscribers ended at once: {failed[0].ended}")
        return streams

    def stall(self, options: Sequence[tuple[str, Any]] = ()) -> Any:
        """A subscriber that never reads: its call starts, and nothing takes its messages."""

        async def go() -> Any:
            return self._open("stalled", options)

        return self.call(go())

    @staticmethod
    async def _read(call: Any, stream: Stream) -> None:
        try:
            async for message in call:
                now = time.perf_counter_ns()  # first: the message is decoded already
                kind = message.WhichOneof("kind")
                if kind == "change":
                    stream.got.setdefault(message.change.turn, now)
                elif kind == "snapshot":
                    stream.snapshot = True
            stream.ended = "OK"
        except grpc.aio.AioRpcError as error:
            stream.ended = error.code().name
        except asyncio.CancelledError:
            stream.ended = "CANCELLED"

    def drain(self, call: Any) -> dict[str, Any]:
        """Read a stalled stream at last: what it held, and how it ended."""

        async def go() -> dict[str, Any]:
            held: dict[str, Any] = {"snapshot": None, "snapshot_bytes": 0, "changes": 0}
            try:
                while True:
                    message = await asyncio.wait_for(call.read(), DRAIN_QUIET_S)
                    if message is grpc.aio.EOF:
                        return held | {"ended": "OK"}
                    kind = message.WhichOneof("kind")
                    if kind == "snapshot":
                        held["snapshot"] = len(message.snapshot.advisories)
                        held["snapshot_bytes"] = message.ByteSize()
                    held["changes"] += kind == "change"
            except grpc.aio.AioRpcError as error:
                return held | {"ended": error.code().name}
            except TimeoutError:
                return held | {"ended": f"still open (nothing for {DRAIN_QUIET_S:g} s)"}

        return self.call(go())

    def close(self) -> None:
        if not self._thread.is_alive():
            return

        async def go() -> None:
            for call in self._calls:
                call.cancel()
            await asyncio.gather(*self._readers, return_exceptions=True)
            for channel in self._channels:
                await channel.close()

        try:
            self.call(go())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


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


# --- figures ------------------------------------------------------------------------------


QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("max", 1.0))


def quantiles(values: Sequence[float]) -> dict[str, float]:
    """Nearest-rank percentiles and the maximum; NaN when there is nothing to rank."""
    ordered = sorted(values)
    if not ordered:
        return {name: math.nan for name, _ in QUANTILES}
    return {
        name: ordered[max(0, min(len(ordered), math.ceil(q * len(ordered))) - 1)]
        for name, q in QUANTILES
    }


def delivery(events: Sequence[Event], streams: Sequence[Stream]) -> dict[str, Any]:
    """Latencies in ms over every (subscriber, event) pair, and per event for the first."""
    every: list[float] = []
    after_return: list[float] = []
    first: list[float] = []
    last: list[float] = []
    missing = 0
    for event in events:
        times = [s.got[event.turn] for s in streams if event.turn in s.got]
        missing += len(streams) - len(times)
        if not times:
            continue
        every += [(t - event.t0_ns) / 1e6 for t in times]
        after_return += [(t - event.t1_ns) / 1e6 for t in times]
        first.append((min(times) - event.t0_ns) / 1e6)
        last.append((max(times) - event.t0_ns) / 1e6)
    return {
        "events": len(events),
        "subscribers": len(streams),
        "pairs": len(every),
        "missing": missing,
        "exports_ok": sum(e.ok for e in events),
        "export_errors": sorted({e.error for e in events if not e.ok}),
        "export_rtt_ms": quantiles([(e.t1_ns - e.t0_ns) / 1e6 for e in events]),
        "every_ms": quantiles(every),
        "after_return_ms": quantiles(after_return),
        "first_ms": quantiles(first),
        "last_ms": quantiles(last),
    }


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    began = time.perf_counter_ns()
    result = call()
    return (time.perf_counter_ns() - began) / 1e6, result


# --- the runs -----------------------------------------------------------------------------


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


def start_service(workdir: Path, children: ExitStack, args: argparse.Namespace) -> Service:
    otlp, advisories, metrics = free_port(), free_port(), free_port()
    argv = [sys.executable, "-m", "processor", "serve", "--log-level", "warning"]
    for setting in (
        f"receivers.grpc.endpoint={LOOPBACK}:{otlp}",
        "receivers.http.enabled=false",
        f"telemetry.metrics_endpoint={LOOPBACK}:{metrics}",
        f"advisories.endpoint={LOOPBACK}:{advisories}",
        f"advisories.subscriber_queue={args.subscriber_queue}",
        *BREAKER_SETTINGS,
        *args.serve_settings,
    ):
        argv += ["--set", setting]
    child = start("serve", argv, workdir)
    children.callback(stop, child)
    wait_http_ready(child, f"http://{LOOPBACK}:{metrics}/readyz")
    return Service(child, f"{LOOPBACK}:{otlp}", f"{LOOPBACK}:{advisories}", metrics)


def delivered(streams: Sequence[Stream], expected: int) -> bool:
    """Wait until every stream has read ``expected`` changes; False if some never did."""
    return wait(lambda: all(len(s.got) >= expected for s in streams), "", DELIVERY_WAIT_S)


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


def run_stall(
    service: Service,
    fleet: Fleet,
    sender: Sender,
    healthy: Sequence[Stream],
    numbering: Numbering,
    args: argparse.Namespace,
) -> dict[str, Any]:
    cut_before = service.metric(METRIC_CUT_OFF)
    accepted_before = service.metric(METRIC_ACCEPTED)
    stalled = fleet.stall(() if args.stalled_bdp else SMALL_WINDOW)
    wait(
        lambda: service.metric(METRIC_SUBSCRIBERS) >= len(healthy) + 1,
        "the stalled subscriber to be registered",
    )
    had = min(len(s.got) for s in healthy)
    events = numbering.events("stall", args.events)
    sender.send(events, args.interval_s)
    cap = args.events + args.stall_extra_max
    while service.metric(METRIC_CUT_OFF) == cut_before and len(events) < cap:
        more = numbering.events(f"stall{len(events)}", STALL_EXTRA_BATCH)
        sender.send(more, args.interval_s)
        events += more
    delivered(healthy, had + sum(e.ok for e in events))
    figures = delivery(events, healthy)
    figures["extra_events"] = len(events) - args.events
    figures["server_cut_off"] = int(service.metric(METRIC_CUT_OFF) - cut_before)
    figures["server_accepted_spans"] = int(service.metric(METRIC_ACCEPTED) - accepted_before)
    figures["stalled"] = held = fleet.drain(stalled)
    # Where the cut fell: the service queues a change for a subscriber whose transport is
    # full, and cuts it at the first change that finds its queue full. What it read at
    # last is what the transport had taken (the last of it finished by the reading).
    cut_at = held["changes"] + args.subscriber_queue + 1 if figures["server_cut_off"] else None
    figures["cut_at"] = cut_at
    figures["before_cut"] = delivery(events[:cut_at], healthy)
    figures["after_cut"] = delivery(events[cut_at:] if cut_at else [], healthy)
    return figures


def run_checks(service: Service, blocked: Event, count: int) -> dict[str, Any]:
    advisory_channel = grpc.insecure_channel(service.advisories)
    otlp_channel = grpc.insecure_channel(service.otlp)
    try:
        check = pb_grpc.AdvisoriesStub(advisory_channel).Check  # type: ignore[no-untyped-call]
        health = health_pb2_grpc.HealthStub(otlp_channel).Check
        deny = pb.CheckRequest(turn=blocked.turn, server=blocked.server, tool=TOOL)
        allow = pb.CheckRequest(turn="bench-check-turn", server="bench-check", tool=TOOL)
        calls: dict[str, Callable[[], Any]] = {
            "health": lambda: health(health_pb2.HealthCheckRequest(), timeout=CALL_TIMEOUT_S),
            "deny": lambda: check(deny, timeout=CALL_TIMEOUT_S),
            "allow": lambda: check(allow, timeout=CALL_TIMEOUT_S),
        }
        expected = {
            "health": health_pb2.HealthCheckResponse.SERVING,
            "deny": pb.VERDICT_DENY,
            "allow": pb.VERDICT_ALLOW,
        }
        latencies: dict[str, list[float]] = {name: [] for name in calls}
        wrong: dict[str, int] = dict.fromkeys(calls, 0)
        names = list(calls)
        for round_ in range(-max(1, count // 20), count):  # the first rounds warm up
            for offset in range(len(names)):  # rotated, so no kind always goes first
                name = names[(round_ + offset) % len(names)]
                elapsed, response = timed(calls[name])
                answer = response.status if name == "health" else response.verdict
                wrong[name] += answer != expected[name]
                if round_ >= 0:
                    latencies[name].append(elapsed)
        return {
            "calls": count,
            "wrong_answers": wrong,
            **{f"{name}_ms": quantiles(values) for name, values in latencies.items()},
        }
    finally:
        advisory_channel.close()
        otlp_channel.close()


def run_all(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    with tempfile.TemporaryDirectory(prefix="advisory-bench-") as tmp, ExitStack() as stack:
        service = start_service(Path(tmp), stack, args)
        sender = Sender(service.otlp)
        stack.callback(sender.close)
        fleet = Fleet(service.advisories)
        stack.callback(fleet.close)  # before the service stops (last in, first out)
        numbering = Numbering()
        sender.send(numbering.events("warmup", WARMUP_EVENTS), args.interval_s)
        alone = numbering.events("alone", min(args.events, BASELINE_EVENTS))
        before = cpu(service)
        sender.send(alone, args.interval_s)
        alone_cpu = cpu_per_span(before, cpu(service), len(alone))

        healthy = fleet.subscribe(args.subscribers, "healthy")
        warmup = numbering.events("warmup2", WARMUP_EVENTS)
        sender.send(warmup, args.interval_s)
        delivered(healthy, sum(e.ok for e in warmup))
        events = numbering.events("run", args.events)
        before = cpu(service)
        sender.send(events, args.interval_s)
        delivered(healthy, sum(e.ok for e in (*warmup, *events)))
        run_cpu = cpu_per_span(before, cpu(service), len(events))
        no_stall = delivery(events, healthy)
        no_stall["cpu"] = run_cpu
        no_stall["alone"] = {
            "events": len(alone),
            "exports_ok": sum(e.ok for e in alone),
            "export_rtt_ms": quantiles([(e.t1_ns - e.t0_ns) / 1e6 for e in alone]),
            "cpu": alone_cpu,
        }

        with_stall = run_stall(service, fleet, sender, healthy, numbering, args)
        fleet_ended = sorted({s.ended for s in healthy if s.ended})
        changes = int(service.metric(METRIC_CHANGES))
        fleet.close()  # Check runs with no stream open

        checks = run_checks(service, next(e for e in events if e.ok), args.checks)
        check_alive(service.child)
        results = {
            "delivery": no_stall,
            "stall": with_stall,
            "healthy_streams_ended": fleet_ended,
            "spans_sent": numbering.made,
            "changes_published": changes,
            "check": checks,
        }
        stack.close()
        serve_log = service.child.output.read_text(errors="replace").strip()
    return results, serve_log


# --- the report ---------------------------------------------------------------------------


ALL = tuple(name for name, _ in QUANTILES)
SHORT = ("p50", "p99", "max")
LABEL_WIDTH = 48


def _ms(value: float) -> str:
    return f"{value:9.2f}" if not math.isnan(value) else f"{'-':>9}"


def _heading(text: str, keys: Sequence[str]) -> None:
    print(f"\n{text:<{LABEL_WIDTH + 2}}" + "".join(f"{k:>9}" for k in keys))


def _row(label: str, figures: dict[str, float], keys: Sequence[str]) -> None:
    print(f"  {label:<{LABEL_WIDTH}}" + "".join(_ms(figures[k]) for k in keys))


def _line(label: str, value: object) -> None:
    print(f"  {label:<{LABEL_WIDTH}}{value}")


def report(results: dict[str, Any], args: argparse.Namespace, problems: list[str]) -> None:
    d, s, c = results["delivery"], results["stall"], results["check"]
    stalled, alone = s["stalled"], d["alone"]
    per_subscriber = (d["cpu"]["service_ms"] - alone["cpu"]["service_ms"]) / d["subscribers"]
    print(
        f"advisory benchmark: {args.subscribers} subscribers, {args.events} failing spans "
        f"{args.interval_ms:g} ms apart, advisories.subscriber_queue={args.subscriber_queue}"
    )
    print(
        "service: python -m processor serve in its own process; subscribers: one grpc.aio "
        f"loop in this process, a connection each; {os.cpu_count()} CPUs shared by both"
    )

    _heading("1. delivery latency, ms, from just before Export", ALL)
    _row(
        f"Export round trip, no subscriber ({d['alone']['events']} spans)",
        alone["export_rtt_ms"],
        ALL,
    )
    _row("Export round trip (baseline)", d["export_rtt_ms"], ALL)
    _row("every subscriber, every event", d["every_ms"], ALL)
    _row("every subscriber, after Export returned", d["after_return_ms"], ALL)
    _row("first subscriber of each event", d["first_ms"], ALL)
    _row("last subscriber of each event", d["last_ms"], ALL)
    _line("changes delivered", f"{d['pairs']} of {d['events'] * d['subscribers']}")
    _line("service CPU per span, no subscriber", f"{alone['cpu']['service_ms']:.2f} ms")
    _line(
        f"service CPU per span, {d['subscribers']} subscribers",
        f"{d['cpu']['service_ms']:.2f} ms ({per_subscriber:.3f} ms more per subscriber)",
    )
    _line("this process's CPU per span (the reading)", f"{d['cpu']['bench_ms']:.2f} ms")

    _heading(f"2. one stalled subscriber more, {s['events']} spans, ms", SHORT)
    before, after = s["before_cut"], s["after_cut"]
    _row("healthy subscribers, no stall", d["every_ms"], SHORT)
    _row("healthy subscribers, with the stall", s["every_ms"], SHORT)
    _row(f"  spans 1-{before['events']}: until it was cut off", before["every_ms"], SHORT)
    _row(f"  the {after['events']} spans after", after["every_ms"], SHORT)
    _row("first subscriber, no stall", d["first_ms"], SHORT)
    _row("first subscriber, with the stall", s["first_ms"], SHORT)
    _row(f"  spans 1-{before['events']}: until it was cut off", before["first_ms"], SHORT)
    _row("Export round trip, no stall", d["export_rtt_ms"], SHORT)
    _row("Export round trip, with the stall", s["export_rtt_ms"], SHORT)
    _row(f"  spans 1-{before['events']}: until it was cut off", before["export_rtt_ms"], SHORT)
    _line(
        "changes delivered to healthy subscribers",
        f"{s['pairs']} of {s['events'] * s['subscribers']}",
    )
    _line(
        "spans accepted during the stall (Export OK)",
        f"{s['exports_ok']} of {s['events']} (service counted {s['server_accepted_spans']})",
    )
    _line(f"spans sent after the first {args.events}", s["extra_events"])
    _line(
        "stalled subscriber's HTTP/2 window",
        "gRPC default (grows)" if args.stalled_bdp else "64 KB (BDP probing off)",
    )
    _line("subscribers cut off (service counter)", s["server_cut_off"])
    snapshot = (
        f"a snapshot of {stalled['snapshot']} advisories ({stalled['snapshot_bytes']:,} bytes), "
        if stalled["snapshot"] is not None
        else "no snapshot, "
    )
    _line(
        "stalled stream, read at last",
        f"{snapshot}{stalled['changes']} changes, then {stalled['ended']}",
    )

    _heading(f"3. Check RPC, sequential, {c['calls']} calls each, ms", SHORT)
    _row("grpc.health.v1 Check, OTLP port (baseline)", c["health_ms"], SHORT)
    _row("Advisories/Check, a blocked call (DENY)", c["deny_ms"], SHORT)
    _row("Advisories/Check, an unknown turn (ALLOW)", c["allow_ms"], SHORT)

    every, rtt, first, after = (
        d["every_ms"],
        d["export_rtt_ms"],
        d["first_ms"],
        d["after_return_ms"],
    )
    stall_every, until_cut = s["every_ms"], s["before_cut"]["every_ms"]
    print("\nsummary (p50 / p99, ms)")
    _line("Export round trip", f"{rtt['p50']:.2f} / {rtt['p99']:.2f}")
    _line("delivery, every subscriber", f"{every['p50']:.2f} / {every['p99']:.2f}")
    _line("delivery after Export returned (RTT + this)", f"{after['p50']:.2f} / {after['p99']:.2f}")
    _line("delivery, first subscriber", f"{first['p50']:.2f} / {first['p99']:.2f}")
    _line(
        "delivery with a stalled subscriber", f"{stall_every['p50']:.2f} / {stall_every['p99']:.2f}"
    )
    _line("  until it was cut off", f"{until_cut['p50']:.2f} / {until_cut['p99']:.2f}")
    _line("stalled subscriber's stream ended", stalled["ended"])
    _line("spans accepted during the stall", f"{s['exports_ok']} of {s['events']}")
    _line("Check, DENY", f"{c['deny_ms']['p50']:.2f} / {c['deny_ms']['p99']:.2f}")
    _line("Check, ALLOW", f"{c['allow_ms']['p50']:.2f} / {c['allow_ms']['p99']:.2f}")
    _line("health Check (baseline)", f"{c['health_ms']['p50']:.2f} / {c['health_ms']['p99']:.2f}")
    print("checks: " + ("ok" if not problems else "\n  - ".join(["FAILED", *problems])))


def check(results: dict[str, Any], serve_log: str) -> list[str]:
    """What would make the figures meaningless, or is a fault in the service."""
    problems = []
    d, s, c = results["delivery"], results["stall"], results["check"]
    for what, figures in (("run 1", d), ("the stall run", s)):
        if figures["exports_ok"] != figures["events"]:
            problems.append(
                f"{what}: {figures['events'] - figures['exports_ok']} exports failed "
                f"{figures['export_errors']}"
            )
        if figures["missing"]:
            problems.append(f"{what}: {figures['missing']} changes never reached a subscriber")
    if d["alone"]["exports_ok"] != d["alone"]["events"]:
        problems.append("spans sent with no subscriber: some exports failed")
    if s["server_accepted_spans"] != s["events"]:
        problems.append(f"the stall run: the service accepted {s['server_accepted_spans']} spans")
    if s["stalled"]["ended"] != "RESOURCE_EXHAUSTED":
        problems.append(f"the stalled subscriber was not cut off: {s['stalled']['ended']}")
    if s["server_cut_off"] != 1:
        problems.append(f"the service cut off {s['server_cut_off']} subscribers, not 1")
    if results["changes_published"] != results["spans_sent"]:
        problems.append(
            f"the service published {results['changes_published']} changes for "
            f"{results['spans_sent']} failing spans, not one each"
        )
    if results["healthy_streams_ended"]:
        problems.append(f"healthy streams ended early: {results['healthy_streams_ended']}")
    if any(c["wrong_answers"].values()):
        problems.append(f"unexpected Check or health answers: {c['wrong_answers']}")
    unexpected = [
        line
        for line in serve_log.splitlines()
        # Expected at this level: no next hop, no tokens, and the cut-off itself.
        if not any(
            known in line for known in ("no next hop", "no tokens configured", "was cut off")
        )
    ]
    if unexpected:
        problems.append("the serve process logged:\n" + "\n".join(unexpected[-20:]))
    return problems


# The sizes of a full run, and of --quick; a flag given on the command line wins.
FULL = {"subscribers": 100, "events": 200, "interval_ms": 100.0, "checks": 2000}
FULL |= {"subscriber_queue": 64, "stall_extra_max": 8000}
QUICK = {"subscribers": 10, "events": 30, "interval_ms": 20.0, "checks": 200}
QUICK |= {"subscriber_queue": 16, "stall_extra_max": 400}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--subscribers", type=int, help="healthy subscribers (100)")
    parser.add_argument("--events", type=int, help="failing spans per run (200)")
    parser.add_argument("--interval-ms", type=float, help="between two spans (100)")
    parser.add_argument("--checks", type=int, help="Check calls of each kind (2000)")
    parser.add_argument(
        "--subscriber-queue",
        type=int,
        help="the service's advisories.subscriber_queue: changes held for one subscriber (64)",
    )
    parser.add_argument(
        "--stall-extra-max",
        type=int,
        help="spans sent after --events at most, until the stalled one is cut off (8000)",
    )
    parser.add_argument(
        "--stalled-bdp",
        action="store_true",
        help="give the stalled subscriber gRPC's default channel, whose window grows to a "
        "few MB: thousands of changes before the cut-off",
    )
    parser.add_argument("--quick", action="store_true", help="small numbers: a smoke test")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every number here")
    parser.add_argument(
        "--set",
        dest="serve_settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra setting for the serve process (repeatable)",
    )
    args = parser.parse_args()
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if min(args.subscribers, args.events, args.checks, args.subscriber_queue) < 1:
        parser.error("--subscribers, --events, --checks and --subscriber-queue must be positive")
    if args.interval_ms < 0 or args.stall_extra_max < 0:
        parser.error("--interval-ms and --stall-extra-max must not be negative")
    args.interval_s = args.interval_ms / 1000
    return args


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        results, serve_log = run_all(args)
    except RuntimeError as error:  # the service died or never answered: say so, with why
        print(f"advisory benchmark failed: {error}", file=sys.stderr)
        return 2
    problems = check(results, serve_log)
    report(results, args, problems)
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        document = {"settings": settings, "results": results, "problems": problems}
        args.json.write_text(json.dumps(document, indent=2, default=str) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
