"""Tool-call spans for mcp-breaker: written in our harness convention, and sent at once.

**Why a processor of its own.** The OpenTelemetry SDK's ``BatchSpanProcessor`` holds an
ended span for up to ``schedule_delay_millis`` (5 s by default) before exporting it. A
model's next round often comes sooner, so the span proving a tool dead would reach
mcp-breaker after the model had already asked for the same call again, and the advisory
would come too late to spare it. ``PromptToolSpanProcessor`` sends MCP tool-call spans as
soon as they end, and hands every other span to a normal batch processor:

    span ends ─▶ tool call?  yes ─▶ bounded queue ─▶ one worker thread ─▶ exporter (now)
                             no  ─▶ BatchSpanProcessor ─────────────────▶ exporter (batched)

``on_end`` runs on the harness's thread and never blocks it: the queue is bounded and a
span that finds it full is dropped and counted (``stats.dropped``), as the SDK's batch
processor does. The worker exports what has queued up in one call, so a burst of tool
spans is one request, not one each. ``force_flush`` waits for both paths; ``shutdown``
drains the queue, then shuts the batch processor and the exporter down.

A tool-call span is one named ``mcp.tool.call`` (our convention), ``tools/call ...`` or
``MCP send tools/call ...`` (OpenTelemetry MCP semantic conventions, the ``mcp`` SDK), or
one carrying ``mcp.tool.name`` or ``mcp.method.name = tools/call``.

**Writing the span.** ``record_tool_call`` opens an ``mcp.tool.call`` span with the
attributes of ``docs/conventions.md`` and yields a ``ToolCallRecord`` on which the harness
says how the call ended: ``ok()``, ``failed(error)``, ``cancelled()``, or ``refused(advisory)``
for a call mcp-breaker's advisory kept from being made. An exception escaping the block
records ``failed`` (or ``cancelled`` for a cancellation) and is re-raised. A block that
ends without saying records no outcome: mcp-breaker never guesses one.

A refused call is recorded with outcome ``cancelled`` (the harness stopped the call) and
``mcp.breaker.refused = true``: a neutral outcome, which mcp-breaker counts neither as a
failure of the tool nor as a success, and which does not touch the turn's blocks. See
``BreakerSession`` for why.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry.context import (
    _SUPPRESS_INSTRUMENTATION_KEY,
    Context,
    attach,
    detach,
    set_value,
)
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from mcp_breaker_client.calls import recorded_arguments
from mcp_breaker_client.shared.conventions import REFUSED_ATTRIBUTE
from mcp_breaker_client.shared.outcome import Signals, judge
from mcp_breaker_client.shared.redact import redact
from mcp_breaker_client.shared.result import read_result
from mcp_breaker_client.shared.verdict import Verdict
from mcp_breaker_client.v1 import advisories_pb2 as pb

log = logging.getLogger(__name__)

TOOL_CALL_SPAN = "mcp.tool.call"
_TOOL_SPAN_PREFIXES = ("tools/call", "MCP send tools/call")
MAX_ERROR_CHARS = 4096  # the service keeps a 300-character redacted excerpt anyway
MAX_FIELD_CHARS = 300  # each field of a typed failure body recorded on the span


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptExportConfig:
    max_queue: int = 2048  # tool spans waiting for the worker; beyond it they are dropped
    max_batch: int = 256  # spans per export call
    shutdown_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.max_queue < 1 or self.max_batch < 1 or self.shutdown_timeout_s <= 0:
            raise ValueError("PromptExportConfig: sizes and timeout must be positive")


@dataclass(slots=True)
class PromptExportStats:
    exported: int = 0
    dropped: int = 0  # the queue was full: the harness is never held up
    failed: int = 0  # the exporter did not deliver them


def is_tool_span(span: ReadableSpan) -> bool:
    name = span.name
    if name == TOOL_CALL_SPAN or name.startswith(_TOOL_SPAN_PREFIXES):
        return True
    attributes = span.attributes or {}
    return "mcp.tool.name" in attributes or attributes.get("mcp.method.name") == "tools/call"


class PromptToolSpanProcessor(SpanProcessor):
    """Exports tool-call spans as they end; everything else through ``batch``.

    ``batch`` defaults to a ``BatchSpanProcessor`` on the same exporter (and then owns its
    shutdown). The exporter must accept calls from two threads, as the OTLP exporters do.
    """

    def __init__(
        self,
        exporter: SpanExporter,
        batch: SpanProcessor | None = None,
        *,
        config: PromptExportConfig | None = None,
    ) -> None:
        self.config = config or PromptExportConfig()
        self.stats = PromptExportStats()
        self._exporter = exporter
        self._batch = batch if batch is not None else BatchSpanProcessor(exporter)
        # Shut the exporter down ourselves unless the batch processor does it.
        self._owns_exporter = getattr(self._batch, "span_exporter", None) is not exporter
        self._shut_down = False
        self._start_worker()
        if hasattr(os, "register_at_fork"):
            # A forked child has the queue but not the thread: give it its own.
            weak_restart = weakref.WeakMethod(self._start_worker)

            def restart_in_child() -> None:
                restart = weak_restart()
                if restart is not None:
                    restart()

            os.register_at_fork(after_in_child=restart_in_child)

    def _start_worker(self) -> None:
        self._queue: collections.deque[ReadableSpan] = collections.deque()
        self._ready = threading.Condition(threading.Lock())
        self._in_flight = 0
        self._stopping = False
        self._worker = threading.Thread(
            target=self._work, name="mcp-breaker-prompt-spans", daemon=True
        )
        self._worker.start()

    # -- SpanProcessor ---------------------------------------------------------------------
    def on_start(self, span: SdkSpan, parent_context: Context | None = None) -> None:
        self._batch.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self._shut_down:
            return
        if not is_tool_span(span):
            self._batch.on_end(span)
            return
        with self._ready:
            if len(self._queue) >= self.config.max_queue:
                self.stats.dropped += 1
                return
            self._queue.append(span)
            self._ready.notify_all()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        deadline = time.monotonic() + timeout_millis / 1000
        with self._ready:
            drained = self._ready.wait_for(
                lambda: not self._queue and not self._in_flight, timeout_millis / 1000
            )
        left_ms = max(0, int((deadline - time.monotonic()) * 1000))
        return self._batch.force_flush(left_ms) and drained

    def shutdown(self) -> None:
        if self._shut_down:
            return
        self._shut_down = True
        with self._ready:
            self._stopping = True
            self._ready.notify_all()
        self._worker.join(self.config.shutdown_timeout_s)  # it drains the queue first
        self._batch.shutdown()
        if self._owns_exporter:
            self._exporter.shutdown()

    # -- the worker ------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._ready:
                self._ready.wait_for(lambda: bool(self._queue) or self._stopping)
                if not self._queue:
                    return  # stopping, and nothing left to send
                count = min(len(self._queue), self.config.max_batch)
                spans = [self._queue.popleft() for _ in range(count)]
                self._in_flight = count
            self._export(spans)
            with self._ready:
                self._in_flight = 0
                self._ready.notify_all()

    def _export(self, spans: Sequence[ReadableSpan]) -> None:
        # As the SDK's own processors do: the exporter's gRPC/HTTP calls are not traced.
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            result = self._exporter.export(spans)
        except Exception:
            log.exception("prompt span export failed")
            result = SpanExportResult.FAILURE
        finally:
            detach(token)
        with self._ready:
            if result is SpanExportResult.SUCCESS:
                self.stats.exported += len(spans)
            else:
                self.stats.failed += len(spans)


class ToolCallRecord:
    """The ``mcp.tool.call`` span of one call; say once how the call ended.

    It also keeps what it wrote that bears on the outcome, so ``verdict()`` can tell how
    mcp-breaker will read the span, even when the span is not recorded (sampled out)."""

    def __init__(self, span: Span) -> None:
        self.span = span
        self.outcome: str | None = None
        self._error = ""  # mcp.tool.error as written (redacted), and the status message
        self._error_type: str | None = None
        self._is_error: bool | None = None
        self._result: str | None = None  # mcp.tool.result as written
        self._exceptions: list[tuple[str, str]] = []
        self._refused = False

    def ok(self, typed_failure: Mapping[str, Any] | None = None) -> None:
        """The result came back with ``isError`` false. ``typed_failure``: the typed
        failure body inside it (``mcp_breaker_client.shared.result``), recorded so the service
        reads the call as a hidden failure; only its identifying fields go on the span
        (``_tag``, ``code``, ``ok``, ``type``, ``name``, a redacted ``message``), never the
        rest of the result."""
        self._set_outcome("ok")
        self.span.set_attribute("mcp.tool.is_error", False)
        self._is_error = False
        if typed_failure is not None:
            fields = failure_fields(typed_failure)
            self._result = json.dumps(fields, sort_keys=True)
            self.span.set_attribute("mcp.tool.result", self._result)

    def failed(
        self, error: str, *, error_type: str | None = None, is_error: bool | None = None
    ) -> None:
        """The call failed: ``error`` verbatim (the service redacts it); ``error_type`` a
        JSON-RPC code as text or an exception type; ``is_error`` the result's isError."""
        self._set_outcome("failed")
        # Redacted here, in the harness: the span goes on to tracing backends as it is.
        text = redact(error, max_chars=MAX_ERROR_CHARS)
        self.span.set_attribute("mcp.tool.error", text)
        self._error = text
        if error_type:
            self.span.set_attribute("error.type", error_type)
            self._error_type = error_type
        if is_error is not None:
            self.span.set_attribute("mcp.tool.is_error", is_error)
            self._is_error = is_error
        self.span.set_status(Status(StatusCode.ERROR, text))

    def cancelled(self) -> None:
        """The harness stopped the call (neutral: neither a failure nor a success)."""
        self._set_outcome("cancelled")

    def refused(self, advisory: pb.Advisory | None) -> None:
        """mcp-breaker's advisory kept the call from being made: neutral, marked refused."""
        self._set_outcome("cancelled")
        self.span.set_attribute(REFUSED_ATTRIBUTE, True)
        self._refused = True
        if advisory is not None:
            self.span.set_attribute("mcp.breaker.advisory", advisory.id)

    def note_probe(self, permit: int) -> None:
        """This call tests a half-open circuit under the service's probe permit."""
        self.span.set_attribute("mcp.breaker.probe_permit", permit)

    def note_shadow(self, advisory: pb.Advisory) -> None:
        """Made although an advisory refuses it: the advisory is in shadow mode."""
        self.span.set_attribute("mcp.breaker.shadow_advisory", advisory.id)

    def note_exception(self, kind: str, message: str) -> None:
        """An ``exception`` event: the error's type and its message, redacted; no stack
        trace (it holds file paths)."""
        message = redact(message, max_chars=MAX_ERROR_CHARS)
        self.span.add_event("exception", {"exception.type": kind, "exception.message": message})
        self._exceptions.append((kind, message))

    def verdict(self) -> Verdict:
        """The outcome mcp-breaker will read from this span: the service's own reading of
        the attributes written here (``processor/classify/dialects.py``, the harness
        convention), so ``failed`` comes with the failure class the service will give it,
        and a typed failure inside an ``ok`` is a hidden failure, as there."""
        result = read_result(self._result, is_error=self._is_error)
        return judge(
            Signals(
                outcome_attribute=self.outcome,
                error_type=self._error_type,
                status_error=self.outcome == "failed",  # only failed() sets an ERROR status
                status_message=self._error,
                exceptions=tuple(self._exceptions),
                refused_by_advisory=self._refused,
                is_error=result.is_error,
                typed_failure=result.typed_failure,
                result_text=result.text,
            )
        )

    def _set_outcome(self, outcome: str) -> None:
        self.outcome = outcome
        self.span.set_attribute("mcp.tool.outcome", outcome)


@contextmanager
def record_tool_call(
    tracer: Tracer,
    *,
    tool: str,
    server: str | None = None,
    turn_id: str | None = None,
    round_number: int | None = None,
    arguments: Any = None,
    attributes: Mapping[str, AttributeValue] | None = None,
) -> Iterator[ToolCallRecord]:
    """An ``mcp.tool.call`` span around one call, current for the block (so the MCP SDK's
    own spans nest under it); see the module docstring."""
    values: dict[str, AttributeValue] = {"mcp.tool.name": tool}
    if server:
        values["mcp.server.name"] = server
    if turn_id:
        values["mcp.turn.id"] = turn_id
    if round_number is not None:
        values["mcp.turn.round"] = round_number
    if arguments is not None:
        values.update(recorded_arguments(arguments))
    values.update(attributes or {})
    with tracer.start_as_current_span(
        TOOL_CALL_SPAN,
        kind=SpanKind.CLIENT,
        attributes=values,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        record = ToolCallRecord(span)
        try:
            yield record
        except Exception as error:
            if record.outcome is None:
                message = describe_error(error)
                record.failed(message, error_type=error_type_of(error))
                # An exception event without the stack trace (file paths) and with the
                # message redacted, as the error attribute is.
                record.note_exception(type(error).__qualname__, message)
            raise
        except BaseException:
            # Cancelled (asyncio, anyio, Ctrl-C): the harness stopped it, the tool did not fail.
            if record.outcome is None:
                record.cancelled()
            raise


_FAILURE_KEYS = ("_tag", "code", "ok", "type", "name", "message")


def failure_fields(body: Mapping[str, Any], *, depth: int = 0) -> dict[str, Any]:
    """The fields of a typed failure body that say what failed, bounded and redacted: a
    failure body may carry what the user asked about, and spans travel on to tracing
    backends. An ``error`` object is kept the same way, one level down."""
    fields: dict[str, Any] = {}
    for key in _FAILURE_KEYS:
        value = body.get(key)
        if isinstance(value, str):
            fields[key] = redact(value, max_chars=MAX_FIELD_CHARS)
        elif isinstance(value, (bool, int, float)):
            fields[key] = value
    error = body.get("error")
    if depth == 0 and isinstance(error, Mapping):
        fields["error"] = failure_fields(error, depth=1)
    return fields


def describe_error(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def error_type_of(error: BaseException) -> str:
    """A JSON-RPC code as text when the error carries one (the MCP SDK's ``MCPError``:
    mcp-breaker classes calls by it), else the exception's type."""
    code = getattr(error, "code", None)
    if isinstance(code, int) and not isinstance(code, bool):
        return str(code)
    return type(error).__qualname__
