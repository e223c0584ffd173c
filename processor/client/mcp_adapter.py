"""``BreakerSession``: an ``mcp`` SDK 2.x client session that heeds mcp-breaker.

Wraps a ``mcp.ClientSession`` (or a ``mcp.Client``: anything with the SDK's ``call_tool``)
and changes one thing, ``call_tool``:

1. check the advisory mirror for this turn, server, tool and arguments (microseconds);
2. **deny** → the call is not made. The model gets a ``CallToolResult`` with
   ``is_error=True`` whose text is the advisory's message (what is out, the recorded error,
   since when, what to do instead), and the harness's ``mcp.tool.call`` span records the
   refusal;
3. **half-open** → ask the service's ``Check`` for the probe permit (in a worker thread,
   with a short deadline; an unreachable service allows): granted → make the call; denied
   → refuse as above;
4. otherwise make the call through the real session and record its span: ``ok``, or
   ``failed`` with the error text when the result has ``is_error`` or the call raised
   (re-raised after recording). A result with ``is_error`` false whose body is a typed
   failure (``{"_tag": "...Failure"}`` in ``structuredContent`` or a text item, the T3
   seed) is recorded with that failure's identifying fields in ``mcp.tool.result``, so
   the service reads it as a hidden failure and the mirror refuses its repeat.

Every other attribute (``list_tools``, ``initialize``, ...) goes straight to the wrapped
session: **the tool stays in the model's roster**. Removing it would leave the model
guessing why a tool vanished (and the roster checks would rightly call it a collapse); a
refusal with the reason is something it can act on.

**The refused call's outcome: ``cancelled``, with ``mcp.breaker.refused = true``.** The
refused call's span goes to mcp-breaker like any other, and it must count neither as a
new failure of the tool (the tool was never reached; counting it would keep a circuit open
on failures that never happened, and a refusal would feed the next refusal) nor as a
success (it would close the circuit on no evidence). The classifier's neutral outcomes
(``processor/classify/outcome.py``: ``declined``, ``dismissed``, ``cancelled``) do exactly
that: the breaker records nothing for them, and the turn engine does not even touch the
turn's blocks (``processor/engines/turns.py``). Of the three, ``cancelled`` — "the harness
interrupted the call" — is what happened; ``declined`` would say a *user* refused
permission and skew that count. An absent or unknown outcome would be worse: an
``unknown`` call still touches its turn and is read as a dead call of the block it repeats.
``mcp.breaker.refused`` (and ``mcp.breaker.advisory``, the advisory's id) tell the
refusals apart from other cancellations in traces.

Turns: ``set_turn(turn_id, round_number)`` before each model round; the turn id is the
``mcp.turn.id`` of the spans, which is what turn-scoped advisories are keyed by. Without
it, the turn is what the service takes when a span has no ``mcp.turn.id``: the trace id,
here the trace of the span current at the call (a harness that runs each turn in a span
needs nothing more). With neither, every call would be a new trace and so a turn of its
own, in which no repeat can be refused: the session logs a warning, once.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Protocol

import anyio.to_thread
from mcp.types import CallToolResult, TextContent
from opentelemetry import trace
from opentelemetry.trace import Tracer

from processor.advisories.v1 import advisories_pb2 as pb
from processor.classify.result import read_result
from processor.client.calls import resolve_server
from processor.client.mirror import CheckResult, Decision
from processor.client.tracing import ToolCallRecord, record_tool_call

log = logging.getLogger(__name__)


class AdvisorySource(Protocol):
    """What the session needs of an ``AdvisoryClient``."""

    def check(
        self,
        turn: str,
        server: str | None,
        tool: str,
        arguments: Any = None,
        *,
        fingerprint: str | None = None,
    ) -> CheckResult: ...

    def check_remote(
        self,
        turn: str,
        server: str | None,
        tool: str,
        arguments: Any = None,
        *,
        fingerprint: str | None = None,
        timeout_s: float | None = None,
    ) -> CheckResult: ...

    def roster_collapse(self, turn: str) -> pb.Advisory | None: ...


class ToolSession(Protocol):
    """The part of ``mcp.ClientSession`` and ``mcp.Client`` that makes tool calls."""

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | None = None,
        progress_callback: Any = None,
        **kwargs: Any,
    ) -> Any: ...


class BreakerSession:
    def __init__(
        self,
        session: ToolSession,
        client: AdvisorySource | None,
        tracer: Tracer,
        server_name: str,
    ) -> None:
        """``client`` None: record spans only (no advisories consulted). The harness is
        named once, where mcp-breaker reads it: the tracer's resource (``service.name``)
        and the client's ``harness``."""
        self.session = session
        self.client = client
        self.tracer = tracer
        self.server_name = server_name
        self.turn_id = ""
        self.round_number: int | None = None
        self._warned_no_turn = False

    def set_turn(self, turn_id: str, round_number: int | None = None) -> None:
        self.turn_id = turn_id
        self.round_number = round_number

    def roster_collapse(self) -> pb.Advisory | None:
        """The current turn's roster-collapse advisory (a ``pb.Advisory``), if any: the
        tools offered fell to none mid-turn, so list them again (``list_tools``) before
        the next model request. None while the roster is fine."""
        turn = self.current_turn()
        if self.client is None or not turn:
            return None
        return self.client.roster_collapse(turn)

    def current_turn(self) -> str:
        """The turn a call made now belongs to, as mcp-breaker will read it from its span:
        the ``set_turn`` id, else the current trace's id (32 hex digits), else ""."""
        if self.turn_id:
            return self.turn_id
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            return trace.format_trace_id(context.trace_id)
        if not self._warned_no_turn:
            self._warned_no_turn = True
            log.warning(
                "mcp-breaker: no turn for calls to %s: call set_turn(turn_id) before each "
                "model round, or make the calls inside a span for the turn (its trace is "
                "the turn); without either, each call is a turn of its own and a repeated "
                "call cannot be refused",
                self.server_name or "this session",
            )
        return ""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)  # everything but call_tool: untouched

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | None = None,
        progress_callback: Any = None,
        **kwargs: Any,
    ) -> CallToolResult:
        server = resolve_server(self.server_name, name)
        turn = self.current_turn()
        check = await self._check(turn, name, server, arguments)
        with record_tool_call(
            self.tracer,
            tool=name,
            server=self.server_name or None,
            turn_id=self.turn_id or None,
            round_number=self.round_number,
            arguments=arguments,
        ) as record:
            if check.refused:
                record.refused(check.advisory)
                log.info("mcp-breaker refused %s/%s: %s", server, name, _advisory_id(check))
                return refusal_result(name, check.advisory)
            if check.decision is Decision.PROBE:
                record.note_probe(check.probe_permit)
            elif check.shadow and check.advisory is not None:
                record.note_shadow(check.advisory)
                log.info("mcp-breaker would refuse %s/%s (shadow mode)", server, name)
            result = await self.session.call_tool(
                name,
                arguments,
                read_timeout_seconds,
                progress_callback,
                **kwargs,
            )
            if not isinstance(result, CallToolResult):
                # e.g. an InputRequiredResult the caller asked for: not how the call ended.
                return result  # type: ignore[no-any-return]
            record_result(record, result)
            return result

    async def _check(self, turn: str, tool: str, server: str, arguments: Any) -> CheckResult:
        client = self.client
        if client is None:
            return CheckResult(decision=Decision.ALLOW)
        # The arguments, not their fingerprint: the mirror hashes them only when the turn
        # has an exact-call advisory, which most turns never do.
        local = client.check(turn, server, tool, arguments)
        if local.decision is not Decision.PROBE_NEEDED:
            return local
        # Half-open: exactly one caller may test it. The Check RPC blocks (briefly, and
        # fails open), so it runs in a worker thread, not on the event loop.
        ask = functools.partial(client.check_remote, turn, server, tool, arguments)
        return await anyio.to_thread.run_sync(ask)


def refusal_result(tool: str, advisory: pb.Advisory | None) -> CallToolResult:
    """What the model sees instead of the tool's answer: the advisory's message."""
    message = advisory.message if advisory is not None else ""
    if not message:
        cause = f": {advisory.cause}" if advisory is not None and advisory.cause else ""
        message = (
            f"`{tool}` is unavailable right now{cause}. Do not call it again this turn; "
            f"answer what you can without it."
        )
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def record_result(record: ToolCallRecord, result: CallToolResult) -> None:
    if result.is_error:
        record.failed(result_text(result) or "the tool returned isError", is_error=True)
        return
    # isError false is not yet a success: the T3 seed's failures come back as typed
    # failure bodies in a success envelope. Read the envelope as the service reads one.
    envelope = {
        "content": [b.model_dump(by_alias=True, exclude_none=True) for b in result.content],
        "structuredContent": result.structured_content,
        "isError": False,
    }
    record.ok(typed_failure=read_result(envelope).typed_failure)


def result_text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def _advisory_id(check: CheckResult) -> str:
    return check.advisory.id if check.advisory is not None else "(no advisory)"
