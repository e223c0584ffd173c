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
(``shared/outcome.py``: ``declined``, ``dismissed``, ``cancelled``) do exactly
that: the breaker records nothing for them, and the turn engine does not even touch the
turn's blocks (``processor/engines/turns.py``). Of the three, ``cancelled`` — "the harness
interrupted the call" — is what happened; ``declined`` would say a *user* refused
permission and skew that count. An absent or unknown outcome would be worse: an
``unknown`` call still touches its turn and is read as a dead call of the block it repeats.
``mcp.breaker.refused`` (and ``mcp.breaker.advisory``, the advisory's id) tell the
refusals apart from other cancellations in traces.

**Repeats the mirror cannot know of yet.** The mirror learns of a failure only after its
span went to mcp-breaker and the advisory came back (milliseconds with the prompt span
processor, seconds with a batching one), and a harness may repeat a call sooner: the
model's next round, or the next tool call of the same round, starts a few milliseconds
after the failure. So the session keeps its own note of the failures it has just recorded,
and refuses a repeat in the same turn itself, exactly as the service's turn rules will
(``processor/engines/turns.py``, ``docs/breaker.md``): with ``turn_key`` ``cause`` (the
service's default), a ``transport`` or ``timeout`` failure closes the tool for the rest of
the turn, any other failure (``tool_error``, ``protocol``, ``unknown_tool``, ``hidden``)
only the identical call (same fingerprint; a call without arguments has none and is never
refused this way), and neutral outcomes nothing. The failure class is the one the service
will read from the span (``ToolCallRecord.verdict``). The refusal is the advisory the
service would send (``SCOPE_TURN_TOOL`` or ``SCOPE_TURN_CALL``, ``STATE_TURN_BLOCKED``, the
same message, an id starting ``local|``), recorded on the span as any refusal is. A note
stands until the mirror holds the service's advisory for it (from then on the mirror
answers: the note is dropped the first time a check finds that advisory, so when the
service closes it, or sent it in shadow mode, the call goes), or until it expires as the
service's own advisory would (``breaker.turn_idle_s`` after the failure, an hour by
default). Bounded: ``MAX_NOTED_BLOCKS_PER_TURN`` per turn (as the service's
``breaker.max_blocks_per_turn``), and the ``MAX_NOTED_TURNS`` turns used last.

Calls already in flight when a failure is recorded are not held back: they were checked,
and started, before any failure was known (two identical calls the model asked for in one
round run side by side, and both reach the tool). Making one wait for its twin would
serialize every parallel round on the chance of a duplicate. The service may still count
the later one as a dead call (a call begun after the failing one began, within
``breaker.clock_skew_s`` of its end, repeats it).

A service configured with another ``breaker.turn_key`` should be told to the session
(``turn_key=TurnKey.TOOL`` or ``TurnKey.CALL``); ``turn_key=None`` turns the local notes
off (the mirror alone decides, as before; e.g. while the service runs in shadow mode, in
which a note would refuse the repeats that come before the shadow advisory does).

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
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio.to_thread
from mcp.types import CallToolResult, TextContent
from opentelemetry import trace
from opentelemetry.trace import Tracer

from mcp_breaker_client.calls import call_fingerprint, resolve_server
from mcp_breaker_client.mirror import NS_PER_S, CheckResult, Decision
from mcp_breaker_client.shared.messages import refused_without_message, tool_subject
from mcp_breaker_client.shared.result import read_result
from mcp_breaker_client.shared.turns import (
    DEFAULT_MAX_BLOCKS_PER_TURN,
    DEFAULT_TURN_IDLE_S,
    TOOL_WIDE,
    TurnKey,
    turn_block_message,
)
from mcp_breaker_client.shared.verdict import Outcome, Verdict
from mcp_breaker_client.tracing import ToolCallRecord, record_tool_call
from mcp_breaker_client.v1 import advisories_pb2 as pb

log = logging.getLogger(__name__)

# The local notes of failures (see the module docstring), bounded.
MAX_NOTED_TURNS = 256  # turns with notes; the one used longest ago is forgotten first
MAX_NOTED_BLOCKS_PER_TURN = DEFAULT_MAX_BLOCKS_PER_TURN  # then, as the service, no more
NOTE_TTL_S = DEFAULT_TURN_IDLE_S  # as long as the service's advisory for a turn block
LOCAL_ID_PREFIX = "local|"  # the id of a note's advisory: not one the service sent
_MADE = frozenset({"ok", "failed"})  # outcomes of calls that reached the session


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

    # Whatever else each takes (positional or keyword) is passed through as given.
    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, *args: Any, **kwargs: Any
    ) -> Any: ...


@dataclass(slots=True)
class _TurnNotes:
    tools: dict[tuple[str, str], pb.Advisory] = field(default_factory=dict)  # (server, tool)
    calls: dict[str, pb.Advisory] = field(default_factory=dict)  # fingerprint

    def __len__(self) -> int:
        return len(self.tools) + len(self.calls)


class FailureNotes:
    """The failures a session recorded itself, per turn, as the turn blocks the service
    will open for them, until the mirror has the service's advisory. Not thread-safe: one
    session's calls run on one event loop."""

    def __init__(
        self,
        turn_key: TurnKey = TurnKey.CAUSE,
        *,
        max_turns: int = MAX_NOTED_TURNS,
        max_blocks_per_turn: int = MAX_NOTED_BLOCKS_PER_TURN,
        ttl_s: float = NOTE_TTL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if max_turns < 1 or max_blocks_per_turn < 1 or ttl_s <= 0:
            raise ValueError("FailureNotes: bounds and ttl_s must be positive")
        self.turn_key = turn_key
        self.max_turns = max_turns
        self.max_blocks_per_turn = max_blocks_per_turn
        self.ttl_s = ttl_s
        self.clock = clock
        self._turns: OrderedDict[str, _TurnNotes] = OrderedDict()

    def __len__(self) -> int:
        return sum(len(notes) for notes in self._turns.values())

    def note(
        self,
        turn: str,
        server: str,
        tool: str,
        arguments: Any,
        verdict: Verdict,
        span_context: trace.SpanContext | None = None,
    ) -> pb.Advisory | None:
        """A call of ``turn`` ended with ``verdict``: note the block its failure opens, as
        the service's ``TurnBreaker`` does (the earliest failure of a key stands)."""
        if not turn or verdict.outcome is not Outcome.FAILED:
            return None
        mode = self.turn_key
        tool_wide = mode is TurnKey.TOOL or (
            mode is TurnKey.CAUSE and verdict.failure_class in TOOL_WIDE
        )
        fingerprint = None if tool_wide else call_fingerprint(server, tool, arguments)
        if not tool_wide and fingerprint is None:
            return None  # no fingerprint: a repeat cannot be told from a correction
        notes = self._turns.get(turn)
        if notes is None:
            notes = self._turns[turn] = _TurnNotes()
            while len(self._turns) > self.max_turns:
                self._turns.popitem(last=False)
        self._turns.move_to_end(turn)
        held = notes.tools.get((server, tool)) if tool_wide else notes.calls.get(fingerprint or "")
        if held is not None:
            return held
        if len(notes) >= self.max_blocks_per_turn:
            return None  # as the service: a full turn opens no more blocks
        advisory = _local_advisory(
            turn, server, tool, fingerprint, verdict, self.clock(), self.ttl_s, span_context
        )
        if fingerprint is None:
            notes.tools[(server, tool)] = advisory
        else:
            notes.calls[fingerprint] = advisory
        return advisory

    def check(self, turn: str, server: str, tool: str, arguments: Any) -> pb.Advisory | None:
        """The note refusing this call, if any (expired ones are dropped)."""
        notes = self._turns.get(turn) if turn else None
        if notes is None:
            return None
        self._turns.move_to_end(turn)
        now_ns = int(self.clock() * NS_PER_S)
        found = notes.tools.get((server, tool))
        if found is not None and found.expires_unix_nano <= now_ns:
            del notes.tools[(server, tool)]
            found = None
        if found is None and notes.calls:
            fingerprint = call_fingerprint(server, tool, arguments)
            found = notes.calls.get(fingerprint) if fingerprint else None
            if found is not None and found.expires_unix_nano <= now_ns:
                del notes.calls[found.fingerprint]
                found = None
        if not notes:
            del self._turns[turn]
        return found

    def settle(self, turn: str, advisory: pb.Advisory) -> None:
        """The mirror holds ``advisory``: if it is the service's word on a noted block,
        the note is dropped and the mirror answers from now on."""
        notes = self._turns.get(turn) if turn else None
        if notes is None or advisory.turn != turn or advisory.id.startswith(LOCAL_ID_PREFIX):
            return
        if advisory.scope == pb.SCOPE_TURN_TOOL:
            notes.tools.pop((advisory.server, advisory.tool), None)
        elif advisory.scope == pb.SCOPE_TURN_CALL:
            notes.calls.pop(advisory.fingerprint, None)
        if not notes:
            del self._turns[turn]


def _local_advisory(
    turn: str,
    server: str,
    tool: str,
    fingerprint: str | None,
    verdict: Verdict,
    now_s: float,
    ttl_s: float,
    span_context: trace.SpanContext | None,
) -> pb.Advisory:
    """The advisory the service will send for this block (``advisories/model.py``,
    ``from_block``), as far as the harness can know it."""
    failure_class = verdict.failure_class.value if verdict.failure_class else ""
    excerpt = verdict.error_excerpt
    # The key and id as the service writes them (engines/turns.py, advisories/model.py).
    if fingerprint is None:
        scope, key, name = pb.SCOPE_TURN_TOOL, f"tool:{server}/{tool}", f"{server}/{tool}"
    else:
        scope, key, name = pb.SCOPE_TURN_CALL, f"call:{fingerprint}", fingerprint
    since_ns = int(now_s * NS_PER_S)
    evidence = pb.Evidence(
        calls=1,
        failures=1,
        since_unix_nano=since_ns,
        failure_class=failure_class,
        excerpt=excerpt,
    )
    if span_context is not None and span_context.is_valid:
        evidence.trace_id = span_context.trace_id.to_bytes(16, "big")
        evidence.span_id = span_context.span_id.to_bytes(8, "big")
    return pb.Advisory(
        id=f"{LOCAL_ID_PREFIX}{'turn_tool' if fingerprint is None else 'turn_call'}|{turn}|{name}",
        scope=scope,
        key=key,
        state=pb.STATE_TURN_BLOCKED,
        server=server,
        tool=tool,
        turn=turn,
        fingerprint=fingerprint or "",
        cause=failure_class,
        message=turn_block_message(tool, server, tool_wide=fingerprint is None, excerpt=excerpt),
        expires_unix_nano=since_ns + int(ttl_s * NS_PER_S),
        evidence=evidence,
        enforced=True,
    )


class BreakerSession:
    def __init__(
        self,
        session: ToolSession,
        client: AdvisorySource | None,
        tracer: Tracer,
        server_name: str,
        *,
        turn_key: TurnKey | None = TurnKey.CAUSE,
    ) -> None:
        """``client`` None: record spans only (no advisories consulted, nothing refused).
        The harness is named once, where mcp-breaker reads it: the tracer's resource
        (``service.name``) and the client's ``harness``. ``turn_key``: the service's
        ``breaker.turn_key``, for refusing repeats of this session's own failures before
        the mirror knows of them; None: no local refusals (see the module docstring)."""
        self.session = session
        self.client = client
        self.tracer = tracer
        self.server_name = server_name
        self.turn_id = ""
        self.round_number: int | None = None
        self._warned_no_turn = False
        self.notes = FailureNotes(turn_key) if turn_key is not None and client else None

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
        record: ToolCallRecord | None = None
        try:
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
                    # e.g. an InputRequiredResult the caller asked for: not how it ended.
                    return result  # type: ignore[no-any-return]
                record_result(record, result)
                return result
        finally:
            # The span has ended (an exception is on its way out, if any): note a failure
            # now, before the next call can be checked.
            if self.notes is not None and record is not None and record.outcome in _MADE:
                self.notes.note(
                    turn,
                    server,
                    name,
                    arguments,
                    record.verdict(),
                    record.span.get_span_context(),
                )

    async def _check(self, turn: str, tool: str, server: str, arguments: Any) -> CheckResult:
        client = self.client
        if client is None:
            return CheckResult(decision=Decision.ALLOW)
        # The arguments, not their fingerprint: the mirror hashes them only when the turn
        # has an exact-call advisory, which most turns never do.
        local = client.check(turn, server, tool, arguments)
        notes = self.notes
        if notes is not None and turn:
            if local.advisory is not None:
                notes.settle(turn, local.advisory)  # the mirror has it: the mirror answers
            if not local.refused:
                # A failure of this session the mirror cannot know of yet. A turn block
                # comes before a half-open circuit, as in the service's Check.
                noted = notes.check(turn, server, tool, arguments)
                if noted is not None:
                    return CheckResult(decision=Decision.DENY, advisory=noted)
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
        server = advisory.server if advisory is not None else ""
        cause = advisory.cause if advisory is not None else ""
        message = refused_without_message(tool_subject(tool, server), cause=cause)
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
