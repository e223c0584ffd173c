"""Within a turn: after a failed call, a repeat is a dead call.

A failure blocks a key for the rest of its turn. Which key is the config's ``turn_key``:
``cause`` (the default) blocks the whole tool after a transport or timeout failure
(arguments cannot revive a dead session) and only the identical call (same fingerprint)
after a tool, protocol, hidden or unknown-tool failure, so a corrected retry stays
allowed; ``tool`` and ``call`` block one way always. A call without a fingerprint cannot
be told from a corrected retry: it never opens nor meets a call-scoped block (only a
tool-scoped one). Neutral outcomes block nothing and are never dead calls.

A key here has two states, open (blocked) or not; the across-turn circuits in
``circuit.py`` are the full state machine.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from processor.classify.events import FailureClass, Outcome, ToolCall
from processor.config import BreakerConfig, TurnKey
from processor.engines.bounded import IdleMap

TOOL_WIDE = frozenset({FailureClass.TRANSPORT, FailureClass.TIMEOUT})
NS_PER_S = 1_000_000_000


class TurnScope(enum.StrEnum):
    CALL = "turn_call"
    TOOL = "turn_tool"


@dataclass(frozen=True, slots=True)
class Block:
    """The failure that closed a key for the rest of its turn."""

    scope: TurnScope
    key: str
    span_id: bytes
    trace_id: bytes
    at_ns: int  # when the failing call ended
    failure_class: FailureClass | None
    excerpt: str


@dataclass(frozen=True, slots=True)
class TurnVerdict:
    dead_call: bool
    block: Block | None  # the block the call ran into, or the one it opened


class TurnBreaker:
    def __init__(self, config: BreakerConfig) -> None:
        self.config = config
        # Keyed by (tenant, turn): turn ids a harness chooses may repeat across tenants.
        self._turns: IdleMap[tuple[str, str], dict[str, Block]]
        self._turns = IdleMap(config.max_turns, config.turn_idle_s)

    def __len__(self) -> int:
        return len(self._turns)

    def observe(self, call: ToolCall) -> TurnVerdict:
        if call.outcome is Outcome.NEUTRAL:
            # Not even a touch: a declined call must not keep a turn's blocks alive, or
            # move the clock that expires other turns (it would change their decisions).
            return TurnVerdict(False, None)
        # Span time drives expiry, and idle time counts from the turn's latest call.
        blocks = self._turns.touch((call.tenant, call.turn), call.end_ns / NS_PER_S, dict)
        met = self._met(blocks, call)
        if met is not None:
            return TurnVerdict(True, met)
        if call.outcome is Outcome.FAILED and len(blocks) < self.config.max_blocks_per_turn:
            opened = self._block_for(call)
            if opened is not None:
                blocks.setdefault(opened.key, opened)
                return TurnVerdict(False, opened)
        return TurnVerdict(False, None)

    def _met(self, blocks: dict[str, Block], call: ToolCall) -> Block | None:
        skew_ns = int(self.config.clock_skew_s * NS_PER_S)
        for key in (_tool_key(call), _call_key(call)):
            block = blocks.get(key) if key else None
            # Only a call that began after the failure ended repeats it; the skew allows
            # for clocks of different hosts, and for the failing call itself.
            if (
                block is not None
                and block.span_id not in call.span_ids
                and call.start_ns + skew_ns >= block.at_ns
            ):
                return block
        return None

    def _block_for(self, call: ToolCall) -> Block | None:
        mode = self.config.turn_key
        tool_wide = mode is TurnKey.TOOL or (
            mode is TurnKey.CAUSE and call.failure_class in TOOL_WIDE
        )
        key = _tool_key(call) if tool_wide else _call_key(call)
        if key is None:
            return None
        return Block(
            scope=TurnScope.TOOL if tool_wide else TurnScope.CALL,
            key=key,
            span_id=call.span_ids[0],
            trace_id=call.trace_id,
            at_ns=call.end_ns,
            failure_class=call.failure_class,
            excerpt=call.verdict.error_excerpt,
        )


def _tool_key(call: ToolCall) -> str:
    return f"tool:{call.server or ''}/{call.tool}"


def _call_key(call: ToolCall) -> str | None:
    return f"call:{call.fingerprint}" if call.fingerprint else None
