"""The stage between decode and forward.

Most traffic through a telemetry pipeline is not MCP, so the first question about a request
is asked of its raw bytes: can it hold an MCP span at all? If not, it is forwarded as the
very bytes that arrived, without being parsed or re-encoded; only its spans are counted,
through a shallow view of the message that stops at the span boundary. If it can, the
same question is asked of each of its spans, and only the spans that may be MCP spans are
decoded (``processor/request/sparse.py``); the span hooks (classify, engines, enrich: later
stages) run over them, and each they annotated goes back in its place among the others'
bytes, as its own bytes with the annotation's after them (``processor/request/edits.py``).

It runs in two steps, so that the forwarder's queue can say no before any analysis runs
(a refused request must leave no trace in the breaker, or its retry would read as a
duplicate): ``open`` decides the path and counts the spans, ``prepare`` runs the hooks.

A large request is prepared in a worker thread (``prepare_in_thread``), so that the event
loop serves other senders and the probes while it is analysed; what the hooks do to state
that outlives the request they still do on the loop, a step at a time (``engine_steps``).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from processor.errors import InvalidRequest, UnreadableSpan
from processor.request.sender import UNKNOWN_SENDER, Sender
from processor.request.sparse import (
    SPAN_ID_BYTES,
    TRACE_ID_BYTES,
    RequestSpans,
    ShallowRequest,
    SparseRequest,
    may_hold,
    read_sparse,
    valid_ids,
)

log = logging.getLogger(__name__)

# Byte strings that every tool span of a supported dialect writes somewhere: "mcp" in the
# MCP dialects' attribute keys ("mcp.method.name"), span names ("mcp.tool.call", "MCP send
# tools/call x") and scopes ("fastmcp", "mcp-python-sdk"); "tool" in every tool span an agent
# framework writes ("execute_tool x", "gen_ai.tool.name", "ai.toolCall", OpenInference's
# "tool.name"), in a Traceloop "<tool>.tool" and in the method "tools/call". A false positive
# costs one parse; a false negative hides a tool call, so they are broad. Each is a full scan
# of the request (about 0.3-0.9 ns per byte here), so they are two.
MCP_MARKERS: tuple[bytes, ...] = (b"mcp", b"tool")

SpanHook = Callable[[RequestSpans, Sender], None]
"""A later stage: reads the request's spans (and who sent it), may annotate them: in a
request read sparsely, through its ``edits`` (attributes appended as bytes; a span changed
in place said so there, or it goes out as it came); in one decoded whole, in its spans.
What it does to state that outlives the request (the engines, the consumers it tells) it
does through ``engine_steps``."""

EngineStep = Callable[[], object]


def run_in_place(step: EngineStep) -> None:
    step()


engine_steps: ContextVar[Callable[[EngineStep], None]] = ContextVar(
    "engine_steps", default=run_in_place
)
"""How a hook runs a step that touches what outlives its request: where that state lives,
on the event loop, which is not thread-safe. On the loop the step runs in place; in the
worker thread of ``prepare_in_thread`` it is handed to the loop, which runs it between
other work, and the hook waits for it. The request's own spans the hook reads wherever it
runs: nothing else touches them."""


class StagePath(enum.Enum):
    PASSTHROUGH = "passthrough"  # forwarded as received
    # Analysed: its spans that may be MCP spans decoded, and each one annotated put back
    # in its place as its bytes with the annotation's appended; the others forwarded as
    # their bytes came (or, from OTLP/JSON, decoded whole and encoded again).
    PARSED = "parsed"
    # May hold an MCP span, but a resource, scope or span that holds a marker does not
    # decode (invalid UTF-8 in a string, a corrupt length inside, nesting past the
    # decoder's limit), while the framing down to the spans is sound: forwarded as
    # received, like a request without a marker, and not analysed. The bytes "mcp"
    # decide nothing about what is refused: the next hop judges, and the forwarder
    # isolates what it refuses.
    UNREADABLE = "unreadable"


@dataclass(frozen=True, slots=True)
class Opened:
    """A request whose path is decided and whose spans are counted; nothing analysed yet."""

    path: StagePath
    span_count: int
    size: int  # encoded bytes, as received: what the queue's byte bound is checked against
    payload: bytes = b""  # pass-through: forwarded as these very bytes
    request: RequestSpans | None = None  # parsed: analysed, then encoded
    # The spans the hooks will read, what their analysis costs: the possible MCP spans of
    # a request read sparsely, every span of one decoded whole.
    analysed_spans: int = 0


@dataclass(frozen=True, slots=True)
class Prepared:
    """A request ready for the forwarder, and what to tell its sender."""

    payload: bytes  # an encoded ExportTraceServiceRequest
    span_count: int  # spans in ``payload``
    rejected_spans: int  # spans dropped from the request, reported as partial success
    rejection_message: str
    path: StagePath
    sender: Sender = UNKNOWN_SENDER


def may_hold_mcp(payload: bytes, markers: Sequence[bytes] = MCP_MARKERS) -> bool:
    """Does any marker occur in the request's bytes? The question every request is asked
    (StringZilla's SIMD search, ``sparse.may_hold``), and then each span of one that does."""
    return may_hold(payload, markers)


def count_spans_shallow(payload: bytes) -> int:
    """Spans in an encoded request, checking its framing; raises InvalidRequest."""
    try:
        shallow: Any = ShallowRequest.FromString(payload)
    except DecodeError:
        raise InvalidRequest("request body is not a valid ExportTraceServiceRequest") from None
    return sum(len(scope.spans) for resource in shallow.children for scope in resource.children)


def check_passthrough(payload: bytes) -> int:
    """The whole check of a request that takes the pass-through path; its span count.

    Framing only, down to the span boundary: a span inside with invalid UTF-8, nesting
    deeper than the next hop takes, or a bad id is left for the next hop to judge, and if
    it refuses the export the forwarder sends its parts apart, so that only the refused
    spans are given up (docs/delivery.md: what a full check would cost, measured, and why
    it is not made). Raises InvalidRequest.
    """
    return count_spans_shallow(payload)


def halve_request(payload: bytes) -> list[tuple[bytes, int]]:
    """Two requests with half the spans each (bytes, spans), or the request alone if it has
    fewer than two. As ``split_request``: cuts between spans, each piece keeps its resource
    and scope, no span is decoded (the bad one may be among them)."""
    shallow: Any = ShallowRequest.FromString(payload)
    total = sum(len(scope.spans) for resource in shallow.children for scope in resource.children)
    if total < 2:
        return [(payload, total)]
    half, taken = total // 2, 0
    first: list[bytes] = []
    second: list[bytes] = []
    for resource in shallow.children:
        for scope in resource.children:
            spans = list(scope.spans)
            cut = max(0, min(len(spans), half - taken))
            if cut:
                first.append(_piece(resource, scope, spans[:cut]))
            if cut < len(spans):
                second.append(_piece(resource, scope, spans[cut:]))
            taken += cut
    return [(b"".join(first), half), (b"".join(second), total - half)]


def split_request(payload: bytes, limit_bytes: int) -> list[tuple[bytes, int]]:
    """Cut an encoded request into requests of at most ``limit_bytes``: (bytes, spans) each.

    Cuts fall between resources, scopes and spans, never inside one, so each piece keeps
    its resource and scope (carried along as fields the shallow view does not name); a
    single span larger than the limit goes alone. Pieces are joined back together while
    they fit: encoded requests concatenate into one valid request.
    """
    if len(payload) <= limit_bytes:
        return [(payload, count_spans_shallow(payload))]
    shallow: Any = ShallowRequest.FromString(payload)
    pieces: list[tuple[bytes, int]] = []
    for resource in shallow.children:
        for scope in resource.children:
            if scope.ByteSize() < limit_bytes // 2:  # most scopes: whole, spans left unread
                pieces.append((_piece(resource, scope), len(scope.spans)))
                continue
            spans = list(scope.spans)
            start = 0
            while start < len(spans):
                end, size = start, 0
                while end < len(spans) and (
                    end == start or size + len(spans[end]) < limit_bytes // 2
                ):
                    size += len(spans[end]) + 8  # tag and length of each span
                    end += 1
                pieces.append((_piece(resource, scope, spans[start:end]), end - start))
                start = end
    # Joined once each: adding bytes to bytes piece by piece copied each request's bytes
    # again for every piece it took (30-40 ms for a 4.5 MB request of 10,000 MCP spans, on
    # the loop, where the forwarder splits).
    merged: list[tuple[list[bytes], int, int]] = []  # (pieces, bytes, spans)
    for piece, count in pieces:
        if merged and merged[-1][1] + len(piece) <= limit_bytes:
            parts, size, spans_in = merged[-1]
            parts.append(piece)
            merged[-1] = (parts, size + len(piece), spans_in + count)
        else:
            merged.append(([piece], len(piece), count))
    return [(b"".join(parts), spans_in) for parts, _, spans_in in merged]


def _piece(resource: Any, scope: Any, spans: list[bytes] | None = None) -> bytes:
    """One request with ``resource``, its ``scope`` and just these spans (all of them by
    default)."""
    request: Any = ShallowRequest()
    resource_copy = request.children.add()
    resource_copy.CopyFrom(resource)
    del resource_copy.children[:]
    scope_copy = resource_copy.children.add()
    scope_copy.CopyFrom(scope)
    if spans is not None:
        del scope_copy.spans[:]
        scope_copy.spans.extend(spans)
    return bytes(request.SerializeToString())


def reject_invalid_spans(request: ExportTraceServiceRequest) -> int:
    """Remove spans whose ids the spec calls invalid; return how many were removed."""
    rejected = 0
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            spans = scope.spans
            if all(valid_ids(s.trace_id, s.span_id) for s in spans):
                continue
            keep = [s for s in spans if valid_ids(s.trace_id, s.span_id)]
            rejected += len(spans) - len(keep)
            kept = [type(s)() for s in keep]
            for copy, original in zip(kept, keep, strict=True):
                copy.CopyFrom(original)
            del spans[:]
            spans.extend(kept)
    return rejected


class Stage:
    """Turns a decoded request into what is forwarded; the hooks are later issues' work."""

    def __init__(
        self,
        hooks: Sequence[SpanHook] = (),
        markers: Sequence[bytes] = MCP_MARKERS,
        on_hook_error: Callable[[], object] = lambda: None,
        let_go: Callable[[], object] = lambda: None,
    ) -> None:
        """``let_go``: called in the worker thread once a request analysed there is
        prepared, for the hooks to let go of what they kept of it (``release.let_go``)."""
        self._hooks = tuple(hooks)
        self._markers = tuple(markers)
        self._on_hook_error = on_hook_error
        self._let_go = let_go

    def open(self, payload: bytes) -> Opened:
        """The gRPC and protobuf-over-HTTP entry: the path, the spans; raises InvalidRequest."""
        if not may_hold_mcp(payload, self._markers):
            count = check_passthrough(payload)
            return Opened(StagePath.PASSTHROUGH, count, len(payload), payload=payload)
        try:
            sparse = read_sparse(payload, self._markers)  # raises when the framing is broken
        except UnreadableSpan:
            count = check_passthrough(payload)
            return Opened(StagePath.UNREADABLE, count, len(payload), payload=payload)
        read = _span_count(sparse)
        return Opened(StagePath.PARSED, sparse.span_count, len(payload), b"", sparse, read)

    def open_request(self, request: ExportTraceServiceRequest) -> Opened:
        """The entry for requests already decoded (OTLP/JSON)."""
        count = _span_count(request)
        return Opened(StagePath.PARSED, count, request.ByteSize(), b"", request, count)

    def prepare(self, opened: Opened, sender: Sender = UNKNOWN_SENDER) -> Prepared:
        """What is forwarded: the bytes as received, or the request after the hooks."""
        if opened.request is None:
            return Prepared(opened.payload, opened.span_count, 0, "", opened.path, sender)
        return self._analysed(opened.request, sender)

    def prepare_in_thread(
        self, opened: Opened, sender: Sender, on_loop: Callable[[EngineStep], None]
    ) -> Prepared:
        """``prepare``, for a worker thread: each engine step the hooks take is given to
        ``on_loop``, which runs it on the event loop and returns when it has run. The
        caller lets no other request be prepared meanwhile (the hooks read one request at
        a time), and waits for this one even if its sender goes."""
        token = engine_steps.set(on_loop)
        try:
            return self.prepare(opened, sender)
        finally:
            engine_steps.reset(token)
            # Here, not when the next request comes (maybe analysed on the loop, in
            # place): freed in slices, in this thread, the loop runs in between.
            self._let_go()
            if isinstance(opened.request, SparseRequest):
                opened.request.let_go()

    def from_protobuf(self, payload: bytes, sender: Sender = UNKNOWN_SENDER) -> Prepared:
        """Both steps at once: bytes in, bytes out; raises InvalidRequest."""
        return self.prepare(self.open(payload), sender)

    def from_request(
        self, request: ExportTraceServiceRequest, sender: Sender = UNKNOWN_SENDER
    ) -> Prepared:
        return self.prepare(self.open_request(request), sender)

    def _analysed(self, request: RequestSpans, sender: Sender) -> Prepared:
        if isinstance(request, SparseRequest):
            rejected = request.rejected  # removed as it is encoded
        else:
            rejected = reject_invalid_spans(request)
        for hook in self._hooks:
            try:
                hook(request, sender)
            except Exception:  # a bug in analysis must not cost the sender its spans
                self._on_hook_error()
                log.exception("span analysis failed; forwarding the request as it is")
        if isinstance(request, SparseRequest):
            payload, span_count = request.encode(), request.span_count - rejected
        else:
            payload, span_count = request.SerializeToString(), _span_count(request)
        message = (
            f"{rejected} span(s) rejected: trace_id must be {TRACE_ID_BYTES} and span_id "
            f"{SPAN_ID_BYTES} bytes, not all zero"
            if rejected
            else ""
        )
        return Prepared(payload, span_count, rejected, message, StagePath.PARSED, sender)


def _span_count(request: RequestSpans) -> int:
    return sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
