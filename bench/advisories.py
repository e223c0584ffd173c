"""The advisory benchmark: how long a failing span takes to reach every subscribed harness.

    .venv/bin/python bench/advisories.py            # 100 subscribers, 200 spans a run: ~2 min
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

Parts 4 and 5 use the harness side, ``processor/client``, as a harness would.

4. ``check()`` in the client library. A second serve process, whose across-turn circuits
   do open (at ``ceil(--mirror-turns / 20) + 1`` failures in a row, more than any server of the turn
   blocks gets, and never by the failure ratio), and an ``AdvisoryClient`` subscribed to it. Failing
   spans, sent as in part 1, leave its mirror holding ``--mirror-turns`` turn blocks of a tool over
   20 servers, 20 blocks of an exact call (a tool error with arguments), and 3 server and 5 tool
   circuits (each opened by failures in a row within one turn, which blocks that turn too; a down
   server's tool opens with it). Then ``--client-checks`` calls of each kind, alternated, each timed
   alone with ``perf_counter_ns``: ``client.check`` for a call a turn block denies, a call in a turn
   with no advisory (allowed), a call in a turn that has an exact-call advisory for other arguments
   (allowed, once the fingerprint of its arguments is computed), and a call a server circuit denies;
   the same four on a ``Mirror`` holding the same advisories, called directly, without the client's
   lock (the time is read in the call, as the client reads it); and, as the floor, a plain dict
   lookup of a tuple key. The timer's own cost is in every figure.
5. From failure to mirror: what a user feels. A harness in this process, as the docs set
   one up: the OpenTelemetry SDK's ``TracerProvider`` with ``PromptToolSpanProcessor`` and
   an ``OTLPSpanExporter`` to the service of parts 1-3 (circuits never open there, so each
   failure makes one turn block and nothing else), and an ``AdvisoryClient`` subscribed to
   it with the harness's name. ``--harness-events`` failures, each in a turn of its own,
   ``--interval-ms`` apart, recorded with ``record_tool_call``; t0 just after
   ``failed(...)``, before the span ends (its end, and the processor's ``on_end``, are in
   the figure); t1 when ``client.check`` for that turn first says DENY. The client has no
   public hook that says "the mirror changed", so this thread polls ``check`` with a
   0.1 ms sleep between polls (the mean period is printed: it bounds the error on t1). A
   poll without a sleep keeps a core and this process's GIL busy and slows what it
   measures: tried on 2 CPUs, it quadrupled the median. Run twice: with this subscriber
   alone, then with ``--subscribers`` raw subscribers more (part 1's, on their event loop
   in this process: their reading shares this process's GIL with the harness's threads,
   as it would not in production), whose delivery from the same t0 is shown next to it.
   Then ``--batch-events`` failures through the SDK's default ``BatchSpanProcessor``
   instead (0.7 s apart, so they fall at different points of its schedule delay), for
   comparison. The issue's goal, p99 under 50 ms on loopback, is stated as met or not; it
   does not fail the run.

Figures only: nothing here judges a time (the goal line states, and fails nothing). The
checks at the end are about correctness (every change delivered, every span accepted, the
stalled stream cut off, verdicts, the mirror's contents, every failure reaching it).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
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
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from processor.client import AdvisoryClient, ClientConfig, Decision, Mirror
from processor.client.tracing import PromptToolSpanProcessor, record_tool_call

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
EXPECTED_LOG = ("no next hop", "no tokens configured", "no authentication", "was cut off")
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

# Part 4: what else the mirror holds, besides the turn blocks of a tool.
CALL_TURNS = SERVERS  # blocks of an exact call, one per server
CALL_TOOL = "query_table"
TOOL_ERROR = 'query failed: column "customer_ref" does not exist'  # the tool ran: tool_error
CALL_ARGUMENTS = {"table": "orders", "where": "customer_ref = 42", "limit": 50}
CORRECTED_ARGUMENTS = {"table": "orders", "where": "customer_id = 42", "limit": 50}
DOWN_SERVERS = 3  # server circuits: transport failures in a row
FLAKY_TOOLS = 2  # tool circuits: tool errors in a row
FLAKY_TOOL = "search_docs"
FREE_TURN = "bench-check-free-turn"  # a turn nothing was recorded in
SCOPES = {
    pb.SCOPE_TURN_TOOL: "turn_tool",
    pb.SCOPE_TURN_CALL: "turn_call",
    pb.SCOPE_SERVER: "server",
    pb.SCOPE_TOOL: "tool",
}
# Part 5: the harness in this process.
SDK_HARNESS = "advisory-bench-sdk-harness"  # its service.name, and its subscription's filter
POLL_S = 0.0001  # between two polls of client.check while waiting for an advisory
HARNESS_WAIT_S = 15.0  # for one failure to reach the mirror (beyond the batch delay)
BATCH_SPACING_S = 0.7  # not a divisor of the batch delay: failures fall all over its cycle
GOAL_P99_MS = 50.0  # the goal, failure to mirror on loopback


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


def failed_span(
    turn: str,
    server: str,
    number: int,
    *,
    tool: str = TOOL,
    error: str = ERROR,
    arguments: str = ARGUMENTS,
    start_ns: int = 0,
) -> Span:
    """A failed ``mcp.tool.call`` span as our harness writes it."""
    start_ns = start_ns or time.time_ns()  # now: the block is in force for turn_idle_s from here
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
            ("mcp.tool.name", tool),
            ("mcp.server.name", server),
            ("mcp.tool.outcome", "failed"),
            ("mcp.tool.error", error),
            ("mcp.tool.arguments", arguments),
            ("mcp.turn.id", turn),
            ("mcp.turn.round", 1),
        )
    )
    return span


def export_request(spans: Sequence[Span]) -> bytes:
    """One Export request from our harness, encoded."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.append(_attribute("service.name", HARNESS))
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name, scope_spans.scope.version = "advisory-bench.harness", "1"
    scope_spans.spans.extend(spans)
    return request.SerializeToString()


def failing_call(label: str, index: int, number: int) -> Event:
    """A failed ``mcp.tool.call`` span, alone in its request."""
    turn, server = f"bench-{label}-turn-{index:05d}", f"bench-mcp-{number % SERVERS:02d}"
    return Event(turn, server, export_request([failed_span(turn, server, number)]))


class Numbering:
    def __init__(self) -> None:
        self._next = 1

    @property
    def made(self) -> int:
        return self._next - 1

    def take(self, count: int) -> int:
        """The first of ``count`` numbers for spans of their own."""
        first, self._next = self._next, self._next + count
        return first

    def events(self, label: str, count: int) -> list[Event]:
        first = self.take(count)
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


# --- the harness side: part 4, check() in the client library ------------------------------


def mirror_population(numbering: Numbering, turns: int, failures: int) -> list[Event]:
    """Requests that leave a mirror holding ``turns`` turn blocks of a tool (a transport
    failure each, over SERVERS servers), CALL_TURNS blocks of an exact call (a tool error
    with arguments), DOWN_SERVERS server circuits and FLAKY_TOOLS tool circuits (each
    opened by ``failures`` failures in a row within one turn, in one request; the first
    of them blocks that turn's tool or call too)."""
    events = numbering.events("mirror", turns)
    for i in range(CALL_TURNS):
        turn, server = f"bench-call-turn-{i:05d}", f"bench-mcp-{i % SERVERS:02d}"
        span = failed_span(
            turn,
            server,
            numbering.take(1),
            tool=CALL_TOOL,
            error=TOOL_ERROR,
            arguments=json.dumps(CALL_ARGUMENTS),
        )
        events.append(Event(turn, server, export_request([span])))
    circuits = [(f"bench-down-{i}", TOOL, ERROR) for i in range(DOWN_SERVERS)]
    circuits += [(f"bench-flaky-{i}", FLAKY_TOOL, TOOL_ERROR) for i in range(FLAKY_TOOLS)]
    for server, tool, error in circuits:
        turn, first = f"bench-circuit-turn-{server}", numbering.take(failures)
        now_ns = time.time_ns()
        spans = [
            failed_span(turn, server, first + j, tool=tool, error=error, start_ns=now_ns + j)
            for j in range(failures)
        ]
        events.append(Event(turn, server, export_request(spans)))
    return events


def expected_mirror(turns: int) -> dict[str, int]:
    return {
        "turn_tool": turns + DOWN_SERVERS,
        "turn_call": CALL_TURNS + FLAKY_TOOLS,
        "server": DOWN_SERVERS,
        # A down server's tool opens too: every failure counts against its tool.
        "tool": FLAKY_TOOLS + DOWN_SERVERS,
    }


def by_scope(advisories: Sequence[pb.Advisory]) -> dict[str, int]:
    counts = dict.fromkeys(SCOPES.values(), 0)
    for advisory in advisories:
        scope = SCOPES.get(advisory.scope, "other")
        counts[scope] = counts.get(scope, 0) + 1
    return counts


def time_calls(
    calls: dict[str, Callable[[], Any]], expected: dict[str, Decision], count: int
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Each call ``count`` times (after a twentieth as many rounds of warm-up), the kinds
    alternated and rotated so that none always goes first: µs per call, the timer's own
    cost included; and how often each call answered other than ``expected``."""
    names = list(calls)
    samples: dict[str, list[float]] = {name: [] for name in names}
    wrong = dict.fromkeys(expected, 0)
    clock = time.perf_counter_ns
    for round_ in range(-max(1, count // 20), count):
        for offset in range(len(names)):
            name = names[(round_ + offset) % len(names)]
            call = calls[name]
            began = clock()
            result = call()
            elapsed = clock() - began
            if round_ >= 0:
                samples[name].append(elapsed / 1e3)
            if name in expected:
                wrong[name] += result.decision is not expected[name]
    return samples, wrong


def check_calls(
    client: AdvisoryClient, mirror: Mirror, turn: str, server: str, tool: str, arguments: Any
) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """One call's check through the client, and on the mirror directly (the client reads
    its clock, then calls Mirror.check under its lock)."""

    def through_client() -> Any:
        return client.check(turn, server, tool, arguments)

    def direct() -> Any:
        return mirror.check(
            turn=turn, server=server, tool=tool, arguments=arguments, now_s=time.time()
        )

    return through_client, direct


def run_client_checks(workdir: Path, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """Part 4, against a serve process of its own; its figures, and what it logged."""
    failures = math.ceil(args.mirror_turns / SERVERS) + 1
    breaker = (f"breaker.consecutive_failures={failures}", f"breaker.min_calls={2**31 - 1}")
    with ExitStack() as stack:
        service = start_service(workdir, stack, args, "serve-circuits", breaker)
        sender = Sender(service.otlp)
        stack.callback(sender.close)
        config = ClientConfig(subscriber_name="bench-check-client")
        client = AdvisoryClient(service.advisories, harness=HARNESS, config=config)
        stack.callback(client.close)  # before the service stops (last in, first out)
        if not client.wait_until_synced(CONNECT_TIMEOUT_S):
            raise RuntimeError(f"the check client never synced: {client.failure or 'no stream'}")
        events = mirror_population(Numbering(), args.mirror_turns, failures)
        sender.send(events, 0.0)
        expected = expected_mirror(args.mirror_turns)
        wait(lambda: by_scope(client.advisories()) == expected, "", DELIVERY_WAIT_S)
        advisories = client.advisories()
        mirror = Mirror()  # the same advisories, for Mirror.check without the client
        mirror.replace(*client.position, advisories)

        blocked = events[args.mirror_turns // 2]
        exact = events[args.mirror_turns]  # the first block of an exact call
        arguments, corrected = json.loads(ARGUMENTS), CORRECTED_ARGUMENTS
        cases: dict[str, tuple[str, str, str, Any, Decision]] = {
            "turn_block": (blocked.turn, blocked.server, TOOL, arguments, Decision.DENY),
            "no_advisory": (FREE_TURN, blocked.server, TOOL, arguments, Decision.ALLOW),
            "exact_call": (exact.turn, exact.server, CALL_TOOL, corrected, Decision.ALLOW),
            "server_circuit": (FREE_TURN, "bench-down-0", TOOL, arguments, Decision.DENY),
        }
        table = {("turn_tool", a.turn, a.server, a.tool): a for a in advisories}
        key_turn, key_server = blocked.turn, blocked.server
        calls: dict[str, Callable[[], Any]] = {
            "dict": lambda: table[("turn_tool", key_turn, key_server, TOOL)]
        }
        decisions: dict[str, Decision] = {}
        for case, (turn, server, tool, call_arguments, decision) in cases.items():
            calls[f"client_{case}"], calls[f"mirror_{case}"] = check_calls(
                client, mirror, turn, server, tool, call_arguments
            )
            decisions[f"client_{case}"] = decisions[f"mirror_{case}"] = decision
        samples, wrong = time_calls(calls, decisions, args.client_checks)
        stats = dataclasses.asdict(client.stats)
        check_alive(service.child)
        stack.close()
        log = service.child.output.read_text(errors="replace").strip()
    figures = {
        "calls": args.client_checks,
        "circuit_failures": failures,
        "held": by_scope(advisories),
        "expected": expected,
        "servers": len({a.server for a in advisories}),
        "wrong_answers": wrong,
        "client": stats,
        **{f"{name}_us": quantiles(values) for name, values in samples.items()},
    }
    return figures, log


# --- the harness side: part 5, from a failure to the harness's mirror ---------------------


@dataclass
class Failure:
    """One failing call in the harness: when it was recorded, and when its mirror knew."""

    turn: str
    server: str
    t0_ns: int = 0  # just after record.failed(...), before the span ends
    t1_ns: int = 0  # the first poll of client.check that said DENY; 0: never


def failures_to_mirror(
    tracer: Tracer,
    client: AdvisoryClient,
    label: str,
    count: int,
    spacing_s: float,
    wait_s: float,
) -> dict[str, Any]:
    """Record ``count`` failing calls ``spacing_s`` apart, each in a turn of its own, and
    poll ``client.check`` until each is refused (at most ``wait_s`` each)."""
    arguments = json.loads(ARGUMENTS)
    failures = [
        Failure(f"bench-{label}-turn-{i:05d}", f"bench-sdk-mcp-{i % SERVERS:02d}")
        for i in range(count)
    ]
    pending: list[Failure] = []
    recorded = waiting_polls = waiting_ns = 0
    began, last_poll_ns = time.perf_counter(), time.perf_counter_ns()
    while recorded < count or pending:
        if recorded < count and time.perf_counter() >= began + recorded * spacing_s:
            failure = failures[recorded]
            recorded += 1
            with record_tool_call(
                tracer,
                tool=TOOL,
                server=failure.server,
                turn_id=failure.turn,
                round_number=1,
                arguments=arguments,
            ) as call:
                call.failed(ERROR)
                failure.t0_ns = time.perf_counter_ns()  # the span ends as the block exits
            pending.append(failure)
            last_poll_ns = failure.t0_ns
        now_ns = time.perf_counter_ns()
        if pending:
            waiting_polls += 1
            waiting_ns += now_ns - last_poll_ns
        last_poll_ns = now_ns
        for failure in list(pending):
            if client.check(failure.turn, failure.server, TOOL, arguments).refused:
                failure.t1_ns = time.perf_counter_ns()
                pending.remove(failure)
            elif now_ns - failure.t0_ns > wait_s * 1e9:
                pending.remove(failure)  # never reached the mirror: counted as missing
        time.sleep(POLL_S)
    seen = [f for f in failures if f.t1_ns]
    return {
        "events": count,
        "seen": len(seen),
        "latency_ms": quantiles([(f.t1_ns - f.t0_ns) / 1e6 for f in seen]),
        "poll_ms": waiting_ns / waiting_polls / 1e6 if waiting_polls else math.nan,
        "failures": failures,  # dropped from the results once the fan-out is read
    }


def raw_delivery(failures: Sequence[Failure], streams: Sequence[Stream]) -> dict[str, Any]:
    """When the raw subscribers read the same changes, from the harness's t0, in ms."""
    every: list[float] = []
    first: list[float] = []
    missing = 0
    for failure in failures:
        times = [s.got[failure.turn] for s in streams if failure.turn in s.got]
        missing += len(streams) - len(times)
        every += [(t - failure.t0_ns) / 1e6 for t in times]
        if times:
            first.append((min(times) - failure.t0_ns) / 1e6)
    return {
        "subscribers": len(streams),
        "missing": missing,
        "every_ms": quantiles(every),
        "first_ms": quantiles(first),
    }


def run_harness(service: Service, args: argparse.Namespace) -> dict[str, Any]:
    """Part 5, against the service of parts 1-3."""
    resource = Resource.create({"service.name": SDK_HARNESS})
    with ExitStack() as stack:
        config = ClientConfig(subscriber_name="bench-sdk-harness")
        client = AdvisoryClient(service.advisories, harness=SDK_HARNESS, config=config)
        stack.callback(client.close)
        prompt = PromptToolSpanProcessor(
            OTLPSpanExporter(endpoint=service.otlp, insecure=True, timeout=CALL_TIMEOUT_S)
        )
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(prompt)
        stack.callback(provider.shutdown)
        tracer = provider.get_tracer("advisory-bench.sdk-harness", "1")
        if not client.wait_until_synced(CONNECT_TIMEOUT_S):
            raise RuntimeError(f"the harness never synced: {client.failure or 'no stream'}")
        spacing_s = args.interval_s
        failures_to_mirror(tracer, client, "sdk-warmup", WARMUP_EVENTS, spacing_s, HARNESS_WAIT_S)
        alone = failures_to_mirror(
            tracer, client, "sdk-alone", args.harness_events, spacing_s, HARNESS_WAIT_S
        )

        fleet = Fleet(service.advisories)
        stack.callback(fleet.close)
        streams = fleet.subscribe(args.subscribers, "fanout")
        failures_to_mirror(tracer, client, "sdk-warmup2", WARMUP_EVENTS, spacing_s, HARNESS_WAIT_S)
        fanout = failures_to_mirror(
            tracer, client, "sdk-fanout", args.harness_events, spacing_s, HARNESS_WAIT_S
        )
        turns = [f.turn for f in fanout["failures"]]
        wait(lambda: all(t in s.got for s in streams for t in turns), "", DELIVERY_WAIT_S)
        fanout["raw"] = raw_delivery(fanout["failures"], streams)
        fanout["raw"]["ended"] = sorted({s.ended for s in streams if s.ended})
        fleet.close()

        # The SDK's own batch processor, as its defaults have it, for comparison.
        delay_ms = BatchSpanProcessor._default_schedule_delay_millis()
        batch_provider = TracerProvider(resource=resource)
        batch_provider.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=service.otlp, insecure=True, timeout=CALL_TIMEOUT_S)
            )
        )
        stack.callback(batch_provider.shutdown)
        batch = failures_to_mirror(
            batch_provider.get_tracer("advisory-bench.sdk-harness", "1"),
            client,
            "sdk-batch",
            args.batch_events,
            BATCH_SPACING_S,
            delay_ms / 1000 + HARNESS_WAIT_S,
        )
        batch["schedule_delay_ms"] = delay_ms
        stats = dataclasses.asdict(client.stats)
        stack.close()  # the providers flush what they hold, then the client stops
        prompt_stats = dataclasses.asdict(prompt.stats)
    for run in (alone, fanout, batch):
        del run["failures"]
    return {
        "spacing_ms": args.interval_ms,
        # Warm-ups included: each makes one turn block, one change on the harness's stream.
        "recorded": 2 * (WARMUP_EVENTS + args.harness_events) + args.batch_events,
        "alone": alone,
        "fanout": fanout,
        "batch": batch,
        "client": stats,
        "prompt": prompt_stats,
    }


def run_all(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str]]:
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
        harness = run_harness(service, args)
        check_alive(service.child)
        results = {
            "delivery": no_stall,
            "stall": with_stall,
            "healthy_streams_ended": fleet_ended,
            "spans_sent": numbering.made,
            "changes_published": changes,
            "check": checks,
            "harness": harness,
        }
        stack.close()
        logs = {"serve": service.child.output.read_text(errors="replace").strip()}
        # Part 4 on a serve process of its own, once the first has stopped.
        results["client_check"], logs["serve-circuits"] = run_client_checks(Path(tmp), args)
    return results, logs


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

    k = results["client_check"]
    _heading(f"4. client.check(), {k['calls']} calls each, µs", SHORT)
    _row("dict lookup of a tuple key (baseline)", k["dict_us"], SHORT)
    for case, what in CHECK_CASES.items():
        _row(f"client.check, {what}", k[f"client_{case}_us"], SHORT)
    for case, what in CHECK_CASES.items():
        _row(f"Mirror.check, {what}", k[f"mirror_{case}_us"], SHORT)
    _line("Mirror.check", "a Mirror holding the same, called directly: no lock")
    held = k["held"]
    _line(
        "the mirror held",
        f"{sum(held.values())} advisories on {k['servers']} servers: {held['turn_tool']} turn "
        f"blocks of a tool, {held['turn_call']} of an exact call, {held['server']} server "
        f"and {held['tool']} tool circuits",
    )
    _line(
        "circuits opened by",
        f"{k['circuit_failures']} failures in a row (breaker.consecutive_failures)",
    )
    answers = "as expected" if not any(k["wrong_answers"].values()) else k["wrong_answers"]
    _line("answers (DENY, ALLOW, ALLOW, DENY)", answers)

    h = results["harness"]
    alone, fanout, batch = h["alone"], h["fanout"], h["batch"]
    _heading("5. failure in the harness to its mirror, ms", ALL)
    _row("PromptToolSpanProcessor, only this subscriber", alone["latency_ms"], ALL)
    _row("PromptToolSpanProcessor, with the fan-out", fanout["latency_ms"], ALL)
    _row("  the raw subscribers, every one", fanout["raw"]["every_ms"], ALL)
    _row("  the raw subscribers, first of each event", fanout["raw"]["first_ms"], ALL)
    _row("SDK default BatchSpanProcessor", batch["latency_ms"], ALL)
    _line(
        "failures in the mirror",
        f"{alone['seen']} of {alone['events']}, {fanout['seen']} of {fanout['events']}, "
        f"{batch['seen']} of {batch['events']}",
    )
    _line(
        "failures recorded",
        f"{h['spacing_ms']:g} ms apart (batch: {BATCH_SPACING_S * 1000:g} ms), a turn each",
    )
    _line("the fan-out", f"{fanout['raw']['subscribers']} raw subscribers more (part 1's)")
    _line("BatchSpanProcessor's schedule delay", f"{batch['schedule_delay_ms']:g} ms")
    _line(f"goal: p99 < {GOAL_P99_MS:g} ms on loopback", goal(h))
    polls = [run["poll_ms"] for run in (alone, fanout)]
    _line(
        "t1: client.check polled every",
        f"{max(polls):.2f} ms or less on average (sleeping {POLL_S * 1000:g} ms in between)",
    )
    spans, stream = h["prompt"], h["client"]
    _line(
        "the harness's tool spans",
        f"{spans['exported']} exported at once, {spans['dropped']} dropped, "
        f"{spans['failed']} failed",
    )
    _line(
        "the harness's stream",
        f"{stream['connects']} connect, {stream['broken']} broken, {stream['cut_off']} cut off, "
        f"{stream['changes']} changes for {h['recorded']} failures",
    )

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
    for case, label in (("turn_block", "turn block (DENY)"), ("exact_call", "exact call (ALLOW)")):
        figures = k[f"client_{case}_us"]
        _line(f"client.check, {label}, µs", f"{figures['p50']:.2f} / {figures['p99']:.2f}")
    for label, run in (
        ("failure to mirror, only this subscriber", alone),
        ("failure to mirror, with the fan-out", fanout),
        ("failure to mirror, BatchSpanProcessor", batch),
    ):
        figures = run["latency_ms"]
        _line(label, f"{figures['p50']:.2f} / {figures['p99']:.2f}")
    _line(f"p99 < {GOAL_P99_MS:g} ms on loopback (the goal)", goal(h))
    print("checks: " + ("ok" if not problems else "\n  - ".join(["FAILED", *problems])))


CHECK_CASES = {
    "turn_block": "denied by a turn block",
    "no_advisory": "no advisory in the turn",
    "exact_call": "exact-call advisory in turn",
    "server_circuit": "denied by a server circuit",
}


def goal(harness: dict[str, Any]) -> str:
    """Whether failure to mirror stayed under the issue's p99 goal, with the prompt
    processor, alone and with the fan-out. A statement: it fails nothing."""
    alone, fanout = (harness[run]["latency_ms"]["p99"] for run in ("alone", "fanout"))
    met = alone < GOAL_P99_MS and fanout < GOAL_P99_MS  # False for NaN: nothing arrived
    return f"{'met' if met else 'NOT met'} ({alone:.2f} ms alone, {fanout:.2f} with the fan-out)"


def check(results: dict[str, Any], logs: dict[str, str]) -> list[str]:
    """What would make the figures meaningless, or is a fault in the service or client."""
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
    k = results["client_check"]
    if k["held"] != k["expected"]:
        problems.append(f"part 4: the mirror held {k['held']}, not {k['expected']}")
    if any(k["wrong_answers"].values()):
        problems.append(f"part 4: unexpected check() answers: {k['wrong_answers']}")
    h = results["harness"]
    for name in ("alone", "fanout", "batch"):
        if h[name]["seen"] != h[name]["events"]:
            problems.append(
                f"part 5 ({name}): {h[name]['events'] - h[name]['seen']} failures never "
                "reached the harness's mirror"
            )
    if h["fanout"]["raw"]["missing"] or h["fanout"]["raw"]["ended"]:
        problems.append(
            f"part 5: {h['fanout']['raw']['missing']} changes never reached a raw subscriber; "
            f"streams ended: {h['fanout']['raw']['ended']}"
        )
    if h["prompt"]["dropped"] or h["prompt"]["failed"]:
        problems.append(f"part 5: the prompt processor lost tool spans: {h['prompt']}")
    for what, stats in (("part 4", k["client"]), ("part 5", h["client"])):
        if stats["connects"] != 1 or stats["broken"] or stats["cut_off"]:
            problems.append(f"{what}: the client's stream did not hold: {stats}")
    if h["client"]["changes"] != h["recorded"]:
        problems.append(
            f"part 5: the harness's stream carried {h['client']['changes']} changes for "
            f"{h['recorded']} failures, not one each"
        )
    for name, log in logs.items():
        unexpected = [
            line
            for line in log.splitlines()
            # Expected at this level: no next hop, no tokens on either port, the cut-off.
            if not any(known in line for known in EXPECTED_LOG)
        ]
        if unexpected:
            problems.append(f"the {name} process logged:\n" + "\n".join(unexpected[-20:]))
    return problems


# The sizes of a full run, and of --quick; a flag given on the command line wins.
FULL = {"subscribers": 100, "events": 200, "interval_ms": 100.0, "checks": 2000}
FULL |= {"subscriber_queue": 64, "stall_extra_max": 8000}
FULL |= {"mirror_turns": 300, "client_checks": 20000, "harness_events": 200, "batch_events": 10}
QUICK = {"subscribers": 10, "events": 30, "interval_ms": 20.0, "checks": 200}
QUICK |= {"subscriber_queue": 16, "stall_extra_max": 400}
QUICK |= {"mirror_turns": 60, "client_checks": 2000, "harness_events": 30, "batch_events": 5}


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
    parser.add_argument(
        "--mirror-turns", type=int, help="part 4: turn blocks of a tool in the mirror (300)"
    )
    parser.add_argument(
        "--client-checks", type=int, help="part 4: check() calls of each kind (20000)"
    )
    parser.add_argument(
        "--harness-events",
        type=int,
        help="part 5: failures recorded by the harness, each run (200)",
    )
    parser.add_argument(
        "--batch-events",
        type=int,
        help="part 5: failures through the SDK's BatchSpanProcessor (10)",
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
    counts = (
        *("subscribers", "events", "checks", "subscriber_queue"),
        *("mirror_turns", "client_checks", "harness_events", "batch_events"),
    )
    if min(getattr(args, name) for name in counts) < 1:
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in counts)
        parser.error(f"{flags} must be positive")
    if args.interval_ms < 0 or args.stall_extra_max < 0:
        parser.error("--interval-ms and --stall-extra-max must not be negative")
    args.interval_s = args.interval_ms / 1000
    return args


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        results, logs = run_all(args)
    except RuntimeError as error:  # the service died or never answered: say so, with why
        print(f"advisory benchmark failed: {error}", file=sys.stderr)
        return 2
    problems = check(results, logs)
    report(results, args, problems)
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        document = {"settings": settings, "results": results, "problems": problems}
        args.json.write_text(json.dumps(document, indent=2, default=str) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
