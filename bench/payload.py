"""OTLP trace exports for the hop benchmark, and a cheap way to send them fresh.

Every request holds 512 spans. Four variants (``VARIANTS``), built once as templates:

    plain    one service's traffic (HTTP server and client spans, database and cache
             calls, internal work, 10-14 attributes each), no MCP span, and none of the
             stage's marker bytes anywhere in the encoding: the pass-through path
    mixed    the same traffic with about 15% MCP spans, as an upstream collector batches
             them: mcp SDK tool calls whose client half (the agent's process) and server
             half (the tool server's process, a second resource, the client span as its
             parent) come in the same request; server halves whose client is not
             instrumented, alone; tools/list listings, client and server halves
    harness  every request from one agent process: turns with LLM spans (gen_ai.*), the
             HTTP client spans under them, gen_ai execute_tool spans over mcp SDK calls to
             an in-process MCP server (both halves), a call and a listing in the client
             library's own convention (mcp.tool.call, mcp.tools.list), SDK listings
    frameworks   the agent runs recorded from the real frameworks (tests/fixtures/frameworks:
             pydantic-ai, the OpenAI Agents SDK, Strands, LangGraph, the Vercel AI SDK 6
             and 7; each 6 tool calls), whole runs as many as fit, their ids and times
             new, the rest of the spans ordinary traffic

In each, every MCP call is decided in its own request: both halves are there, or the half
that is there decides alone (a server half; a harness span), as in the captures of
tests/fixtures/real-spans.

``Fresh`` sends a template as a new request each time: the byte offsets of every trace
and span id, every span time and every turn id are found once (``Template``); per send a
random key is XOR-ed into the ids (the same key for a span id and the parent ids that
name it, so links hold), the times are moved to just before now, and the turn ids get a
new suffix. Template ids have the top bit of every byte set and keys have it clear, so a
fresh id never spells a marker (ASCII) and the plain variant stays on its path.

The pieces: payload_spans.py (the spans every payload is made of), payload_variants.py
(plain, mixed and harness), payload_frameworks.py, payload_roles.py (what a span is to
mcp-breaker and to the naive hop) and payload_legacy.py (``build_requests``, the older
generator, which bench/classify.py, offline.py, bulk_traces.py and delivery.py still read);
this module makes the templates and sends them fresh.

Run it to see what it builds: ``python bench/payload.py``.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from payload_frameworks import frameworks_request
from payload_roles import is_tool_kind, span_role
from payload_spans import (
    NONCE_CHARS,
    NONCE_KEYS,
    SEED,
    Counts,
    has_marker,
)
from payload_variants import harness_request, plain_or_mixed_request

VARIANTS = ("plain", "mixed", "harness", "frameworks")  # build_templates, Fresh
TEMPLATES_PER_VARIANT = 8
# Span times are moved by a multiple of this (about 1 ms) to end just before now.
TIME_QUANTUM_NS = 1 << 20
TEMPLATE_BASE_NS = 1_718_000_000_000_000_000

# The span fields and attribute structure the template walker reads (the OTLP protos).
_TRACE_ID, _SPAN_ID, _PARENT_ID, _START, _END, _ATTRIBUTES = 1, 2, 4, 7, 8, 9


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """The fields of the message in data[start:end]: (number, value start, value end)."""
    pos = start
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, after = _varint(data, pos)
        elif wire_type == 1:
            after = pos + 8
        elif wire_type == 2:
            length, pos = _varint(data, pos)
            after = pos + length
        elif wire_type == 5:
            after = pos + 4
        else:
            raise ValueError(f"wire type {wire_type} at {pos}")
        yield number, pos, after
        pos = after


def _children(data: bytes, start: int, end: int, number: int) -> Iterator[tuple[int, int]]:
    return ((s, e) for n, s, e in _fields(data, start, end) if n == number)


@dataclass
class Template:
    """An encoded request and where, in its bytes, its ids, times and turn ids are."""

    variant: str
    data: bytes
    counts: Counts
    array: np.ndarray = field(init=False, repr=False)
    trace_slots: np.ndarray = field(init=False, repr=False)  # (n, 16) byte offsets
    span_slots: np.ndarray = field(init=False, repr=False)  # (n, 8): span and parent ids
    time_slots: np.ndarray = field(init=False, repr=False)  # (n, 8)
    times: np.ndarray = field(init=False, repr=False)  # (n,) int64, the template's times
    nonce_slots: np.ndarray = field(init=False, repr=False)  # (n, 16)

    def __post_init__(self) -> None:
        data = self.data
        found: dict[str, list[int]] = {"trace": [], "span": [], "time": [], "nonce": []}
        times = []
        for resource in _children(data, 0, len(data), 1):
            for scope in _children(data, *resource, 2):
                for span in _children(data, *scope, 2):
                    for number, start, end in _fields(data, *span):
                        if number == _TRACE_ID:
                            assert end - start == 16
                            found["trace"].append(start)
                        elif number in (_SPAN_ID, _PARENT_ID) and end > start:
                            assert end - start == 8
                            found["span"].append(start)
                        elif number in (_START, _END):
                            found["time"].append(start)
                            times.append(int.from_bytes(data[start:end], "little"))
                        elif number == _ATTRIBUTES and self._nonce_key(start, end):
                            value = next(_children(data, start, end, 2))  # the AnyValue
                            string = next(_children(data, *value, 1))
                            found["nonce"].append(string[1] - NONCE_CHARS)

        def slots(starts: list[int], width: int) -> np.ndarray:
            return (np.array(starts, np.intp).reshape(-1, 1) + np.arange(width)).astype(np.intp)

        self.array = np.frombuffer(data, np.uint8)
        self.trace_slots = slots(found["trace"], 16)
        self.span_slots = slots(found["span"], 8)
        self.time_slots = slots(found["time"], 8)
        self.times = np.array(times, np.int64)
        self.nonce_slots = slots(found["nonce"], NONCE_CHARS)
        if len(found["trace"]) != self.counts.spans:
            raise AssertionError(f"{len(found['trace'])} trace ids for {self.counts.spans} spans")
        if int(self.array[self.trace_slots].min()) < 0x80 or (
            self.span_slots.size and int(self.array[self.span_slots].min()) < 0x80
        ):
            raise AssertionError("an id byte without its top bit: a fresh id could spell a marker")

    def _nonce_key(self, start: int, end: int) -> bool:
        key = next(_children(self.data, start, end, 1), None)
        return key is not None and self.data[key[0] : key[1]].decode() in NONCE_KEYS


def build_templates(
    variant: str, count: int = TEMPLATES_PER_VARIANT, seed: int = SEED
) -> list[Template]:
    """``count`` distinct requests of ``variant``, the same on every call."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown payload variant {variant!r}; choose from {VARIANTS}")
    rng = random.Random(f"{seed}-fresh-{variant}")
    templates = []
    for index in range(count):
        base_ns = TEMPLATE_BASE_NS + index * 100 * 10**9
        if variant == "harness":
            data, counts = harness_request(rng, base_ns)
        elif variant == "frameworks":
            data, counts = frameworks_request(rng, base_ns)
        else:
            data, counts = plain_or_mixed_request(variant, rng, base_ns)
        templates.append(Template(variant, data, counts))
    return templates


class Fresh:
    """New requests from templates: fresh trace and span ids, times just before now, new
    turn ids; nothing else changes (see the module's docstring). About 60-70 µs of CPU a
    request of 512 spans here; ``render_s`` adds it up, for the load generator to report."""

    def __init__(self, templates: list[Template], clock: Callable[[], int] = time.time_ns):
        self.templates = templates
        self._clock = clock
        # The plain variant must stay marker-free: shifted times are checked (ids cannot
        # spell one, see Template).
        self._check_times = templates[0].variant == "plain"
        self.render_s = 0.0

    def render(self, template: Template) -> bytes:
        started = time.thread_time()  # this thread's CPU: not gRPC's own threads
        buf = template.array.copy()
        key = np.frombuffer(os.urandom(24), np.uint8) & 0x7F
        buf[template.trace_slots] ^= key[:16]
        buf[template.span_slots] ^= key[16:]
        if template.nonce_slots.size:
            nonce = np.frombuffer(os.urandom(NONCE_CHARS // 2).hex().encode(), np.uint8)
            buf[template.nonce_slots] = nonce
        latest = self._clock() - 10**9  # every span ended a second ago or before
        delta = (latest - int(template.times.max())) // TIME_QUANTUM_NS * TIME_QUANTUM_NS
        while True:
            shifted = (template.times + delta).astype("<i8").view(np.uint8)
            if not (self._check_times and has_marker(shifted.tobytes())):
                break
            delta -= TIME_QUANTUM_NS  # a millisecond earlier spells something else
        buf[template.time_slots] = shifted.reshape(-1, 8)
        data = buf.tobytes()
        self.render_s += time.thread_time() - started
        return data


def _describe() -> None:
    for variant in VARIANTS:
        templates = build_templates(variant)
        fresh = Fresh(templates)
        first = ExportTraceServiceRequest.FromString(fresh.render(templates[0]))
        again = ExportTraceServiceRequest.FromString(fresh.render(templates[0]))
        spans = [s for r in first.resource_spans for sc in r.scope_spans for s in sc.spans]
        other = [s for r in again.resource_spans for sc in r.scope_spans for s in sc.spans]
        roles: dict[str | None, int] = {}
        for span in spans:
            role = span_role(span.name, span.kind, is_tool_kind(span))
            roles[role] = roles.get(role, 0) + 1
        sizes = ", ".join(f"{len(t.data) / 1024:.0f}" for t in templates)
        shared = {s.span_id for s in spans} & {s.span_id for s in other}
        print(
            f"{variant}: {len(templates)} templates of {len(spans)} spans, {templates[0].counts}"
            f"; roles {roles}; KiB: {sizes}; span ids shared by two sends: {len(shared)}"
        )
    fresh = Fresh(build_templates("mixed"))
    started = time.perf_counter()
    for _ in range(500):
        fresh.render(fresh.templates[0])
    print(f"render: {(time.perf_counter() - started) / 500 * 1e6:.0f} µs per request")


if __name__ == "__main__":
    _describe()
