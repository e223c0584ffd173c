"""Within a turn: after a failed call, a repeat is a dead call.

A failure blocks a key for the rest of its turn. Which key is the config's ``turn_key``:
``cause`` (the default) blocks the whole tool after a transport or timeout failure
(arguments cannot revive a dead session) and only the identical call (same fingerprint)
after a tool, protocol, hidden or unknown-tool failure, so a corrected retry stays
allowed; ``tool`` and ``call`` block one way always. A call without a fingerprint cannot
be told from a corrected retry: it never opens nor meets a call-scoped block (only a
tool-scoped one). Neutral outcomes block nothing and are never dead calls.

Every failure opens the block its class calls for, a repeat's too: a repeat of a tool
error that fails on the transport has shown that the session is gone, and the tool is
out. Span time decides, not arrival: a key's block is its *earliest* failure, whichever
arrived first. When a failure arrives after a repeat of it (spans out of order), it takes
the block's place and the verdict says so (``placed``): the breaker then revises the
calls already decided that it stands in front of (``repeats``, ``reorder.py``).

A key here has two states, open (blocked) or not; the across-turn circuits in
``circuit.py`` are the full state machine.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mcp_breaker_client.shared.turns import TOOL_WIDE
from mcp_breaker_client.shared.verdict import FailureClass, Outcome

from processor.classify.events import ToolCall
from processor.config import BreakerConfig, TurnKey
from processor.engines.bounded import IdleMap

NS_PER_S = 1_000_000_000
# Read off the enum once, for the tests every call makes: on Python 3.11 an enum member
# read off its class costs some 60 ns, a module name 10.
_NEUTRAL, _FAILED = Outcome.NEUTRAL, Outcome.FAILED


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
    start_ns: int  # when it began: calls are ordered by (start, span id)
    failure_class: FailureClass | None
    excerpt: str


@dataclass(frozen=True, slots=True)
class TurnVerdict:
    dead_call: bool
    block: Block | None  # the block the call ran into, or the one it opened
    # The block this failure opened, or moved earlier: calls after it may be repeats of it.
    placed: Block | None = None


_CLEAR = TurnVerdict(False, None)  # not a dead call, no block: shared, as it is frozen


class TurnBreaker:
    def __init__(self, config: BreakerConfig) -> None:
        self.config = config
        # Keyed by (tenant, turn): turn ids a harness chooses may repeat across tenants.
        self._turns: IdleMap[tuple[str, str], dict[str, Block]]
        self._turns = IdleMap(config.max_turns, config.turn_idle_s)

    def __len__(self) -> int:
        return len(self._turns)

    def observe(self, call: ToolCall) -> TurnVerdict:
        outcome = call.verdict.outcome  # as call.outcome, without the property
        if outcome is _NEUTRAL:
            # Not even a touch: a declined call must not keep a turn's blocks alive, or
            # move the clock that expires other turns (it would change their decisions).
            return _CLEAR
        # Span time drives expiry, and idle time counts from the turn's latest call.
        blocks = self._turns.touch(turn_key(call), call.end_ns / NS_PER_S, dict)
        candidate = self._block_for(call) if outcome is _FAILED else None
        if candidate is None and not blocks:  # most calls: nothing to meet, nothing to open
            return _CLEAR
        # A failure earlier than the block of its own key is that key's first failure,
        # whatever arrived first: it takes the block's place instead of repeating it.
        placing = candidate is not None and _earlier(candidate, blocks.get(candidate.key))
        met = None
        for key in (_tool_key(call), _call_key(call)):
            block = blocks.get(key or "")
            if block is None or (placing and candidate is not None and key == candidate.key):
                continue
            if self.repeats(block, call):
                met = block
                break
        placed = None
        room = candidate is not None and (
            candidate.key in blocks or len(blocks) < self.config.max_blocks_per_turn
        )
        if placing and room and candidate is not None:
            blocks[candidate.key] = candidate
            placed = candidate
        if met is not None:
            return TurnVerdict(True, met, placed=placed)
        known = blocks.get(candidate.key) if candidate is not None else None
        return TurnVerdict(False, known, placed=placed)

    def repeats(self, block: Block, call: ToolCall) -> bool:
        """Does ``call`` repeat the failure behind ``block`` (same key, made after it)?"""
        if block.key not in (_tool_key(call), _call_key(call)):
            return False
        # Only a call made after the failing one (in span time, ties by span id) and begun
        # once it had ended repeats it; the skew allows for clocks of different hosts.
        if block.span_id in call.span_ids or (call.start_ns, call.span_ids[0]) <= (
            block.start_ns,
            block.span_id,
        ):
            return False
        return call.start_ns + int(self.config.clock_skew_s * NS_PER_S) >= block.at_ns

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
            start_ns=call.start_ns,
            failure_class=call.failure_class,
            excerpt=call.verdict.error_excerpt,
        )


def _earlier(block: Block, than: Block | None) -> bool:
    """The earlier failure of one key, in the order calls are made (start, then span id,
    so the order of arrival never decides which of two concurrent failures is first)."""
    return than is None or (block.start_ns, block.span_id) < (than.start_ns, than.span_id)


def turn_key(call: ToolCall) -> tuple[str, str]:
    """Turns are keyed by tenant too: turn ids a harness chooses may repeat across tenants."""
    return (call.tenant, call.turn)


def _tool_key(call: ToolCall) -> str:
    return f"tool:{call.server or ''}/{call.tool}"


def _call_key(call: ToolCall) -> str | None:
    return f"call:{call.fingerprint}" if call.fingerprint else None
