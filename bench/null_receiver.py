"""A null OTLP/gRPC trace receiver: takes every export and does nothing with it.

The handler gets the request's raw bytes (no deserializer) and answers with an empty
``ExportTraceServiceResponse``, which encodes to no bytes at all. It is the floor of what
any Python hop can do: the cost of grpc.aio itself. On SIGTERM or SIGINT it prints one
JSON line with what it received in all, so that a benchmark can check that the bytes it
sent arrived.

A benchmark that puts it behind a hop also needs to know what came out of the hop. A
second method, ``/bench.NullReceiver/Report`` (JSON in, JSON out, raw bytes), says what
arrived since the last reset, and sets what to do until the next one:

    {"reset": true, "count_spans": true, "sample": 24}

``count_spans`` counts the spans of every request as it arrives (a shallow parse down to
the span boundary, in C: a few µs per request); ``sample`` keeps that many requests, drawn
uniformly (reservoir sampling: one random number per request), and decodes them only when
asked for a report, outside the timed path: how many MCP spans of each kind they hold and
which carry mcp-breaker's annotations (or the naive hop's mark). Both are off by default,
so a benchmark running straight into the null receiver measures bare grpc.aio.

    python bench/null_receiver.py --port 4417
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

# A sibling module: bench/ is on sys.path when these files are run as scripts.
from payload_roles import NAIVE_ATTRIBUTE, is_tool_kind, may_be_mcp, span_role

SERVICE_NAME = "opentelemetry.proto.collector.trace.v1.TraceService"
CONTROL_SERVICE = "bench.NullReceiver"
REPORT_METHOD = f"/{CONTROL_SERVICE}/Report"
# Well over any request the benchmark sends; the null receiver must never be the one to refuse.
MAX_RECEIVE_BYTES = 64 * 1024 * 1024
STOP_GRACE_S = 2.0
BREAKER_PREFIXES = ("mcp.breaker.", "mcp.roster.")


def _shallow_request() -> Any:
    """The OTLP request's framing down to ScopeSpans, with spans as bytes: parsed in C,
    so counting spans builds no Python object per span or attribute."""
    package = "bench.shallow"
    proto = descriptor_pb2.FileDescriptorProto(
        name="bench/shallow_trace.proto", package=package, syntax="proto3"
    )
    repeated = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    scope = proto.message_type.add(name="ScopeSpans")
    scope.field.add(name="spans", number=2, label=repeated, type=12)  # TYPE_BYTES
    for name, child, number in (
        ("ResourceSpans", "ScopeSpans", 2),
        ("Request", "ResourceSpans", 1),
    ):
        message = proto.message_type.add(name=name)
        message.field.add(
            name="children", number=number, label=repeated, type=11, type_name=f".{package}.{child}"
        )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.Request"))


_Shallow = _shallow_request()


def count_spans(payload: bytes) -> int:
    shallow = _Shallow.FromString(payload)
    return sum(len(scope.spans) for resource in shallow.children for scope in resource.children)


def inspect(payload: bytes) -> Counter[str]:
    """What one request holds, by span role (payload.span_role), and what was written on
    its spans on the way."""
    found: Counter[str] = Counter()
    for resource in ExportTraceServiceRequest.FromString(payload).resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                keys = {kv.key for kv in span.attributes}
                role = span_role(span.name, span.kind, is_tool_kind(span))
                found["spans"] += 1
                found["named_mcp"] += may_be_mcp(span.name, scope.scope.name)
                found["naive_marked"] += NAIVE_ATTRIBUTE in keys
                annotated = any(key.startswith(BREAKER_PREFIXES) for key in keys)
                if role is None:
                    found["other_annotated"] += annotated
                    continue
                found[f"{role}_spans"] += 1
                if role == "call":
                    found["call_outcome"] += "mcp.breaker.outcome" in keys
                    found["call_decided"] += "mcp.breaker.state" in keys
                    found["call_pending"] += "mcp.breaker.pending" in keys
                elif role == "listing":
                    found["listing_state"] += "mcp.roster.state" in keys
                else:
                    found["server-listing_annotated"] += annotated
    return found


@dataclass
class Tally:
    requests: int = 0
    size: int = 0  # bytes
    spans: int = 0
    count_spans: bool = False
    sample_size: int = 0
    samples: list[bytes] = field(default_factory=list)
    all_requests: int = 0  # since start, never reset: the final line
    all_bytes: int = 0

    def take(self, payload: bytes) -> None:
        self.requests += 1
        self.size += len(payload)
        self.all_requests += 1
        self.all_bytes += len(payload)
        if self.count_spans:
            self.spans += count_spans(payload)
        if self.sample_size:
            if len(self.samples) < self.sample_size:
                self.samples.append(payload)  # a reference: no copy
            else:
                slot = random.randrange(self.requests)
                if slot < self.sample_size:
                    self.samples[slot] = payload

    def report(self, inspect_samples: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"requests": self.requests, "bytes": self.size}
        if self.count_spans:
            out["spans"] = self.spans
        if inspect_samples and self.sample_size:
            found: Counter[str] = Counter()
            for payload in self.samples:
                found.update(inspect(payload))
            out["sample"] = {"requests": len(self.samples), **found}
        return out

    def reset(self, count_spans: bool, sample_size: int) -> None:
        self.requests = self.size = self.spans = 0
        self.count_spans, self.sample_size, self.samples = count_spans, sample_size, []


async def serve(port: int) -> dict[str, int]:
    tally = Tally()

    async def export(payload: bytes, context: grpc.aio.ServicerContext) -> bytes:
        tally.take(payload)
        return b""

    async def report(payload: bytes, context: grpc.aio.ServicerContext) -> bytes:
        order = json.loads(payload or b"{}")
        out = tally.report(inspect_samples=bool(order.get("inspect", True)))
        if order.get("reset"):
            tally.reset(bool(order.get("count_spans")), int(order.get("sample", 0)))
        return json.dumps(out).encode()

    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
            # A stale receiver on the same port must make this one fail, not share traffic.
            ("grpc.so_reuseport", 0),
        ]
    )
    raw = grpc.unary_unary_rpc_method_handler  # no (de)serializer: raw bytes
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(SERVICE_NAME, {"Export": raw(export)}),
            grpc.method_handlers_generic_handler(CONTROL_SERVICE, {"Report": raw(report)}),
        )
    )
    server.add_insecure_port(f"127.0.0.1:{port}")  # raises RuntimeError if the port is taken
    await server.start()

    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    await stopping.wait()
    await server.stop(STOP_GRACE_S)
    return {"requests": tally.all_requests, "bytes": tally.all_bytes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=4417, help="port on 127.0.0.1")
    args = parser.parse_args()
    received = asyncio.run(serve(args.port))
    print(json.dumps(received), flush=True)


if __name__ == "__main__":
    main()
