"""The breaker as a harness that heeds it would have met it: a refused call is never made.

Recorded traffic holds every call the harness made. Replayed as it stands, each repeat the
breaker would have refused still counts as a failure of its tool and its server, so
circuits open on failures an enforcing breaker never lets happen (a turn's repeats open the
circuit in that very turn) and the counterfactual is not what enforcing does. Here, before
the engine hears of a call, it is judged as the harness's check would judge it at the
moment the call was made; a call the check refuses goes into the engine as what an
enforced refusal is on the wire (the client's ``mcp_adapter.py``): neutral, refused on
an advisory. It moves the clocks (an open period runs out as it would) and is evidence for
nothing. Its decision is the engine's dead-call decision, made from the recorded call.

What the check refuses, as the client library and the service's ``Check`` refuse:

- a repeat of a failure of its turn (``TurnBreaker.repeats``) begun once that failure had
  ended: a call already in flight when its twin failed was made, and the engine's clock
  skew (which counts it as a dead call) does not unmake it;
- a call while its governing circuit is open, or half-open with every probe permit taken
  (a call with no outcome signal never takes a permit, as in the engine).

Dead calls that were made all the same (in flight, or found dead only when a late span
arrived: ``CallDecision.revised``) keep ``dead_call`` and are marked ``enforced=False``:
the tally counts them apart from the refusals, and they stay evidence, as they were.
"""

from __future__ import annotations

from dataclasses import replace

from mcp_breaker_client.shared.verdict import NeutralReason, Outcome, Verdict

from processor.classify.events import ToolCall
from processor.config import BreakerConfig
from processor.engines.breaker import Breaker, CallDecision, _governing
from processor.engines.circuit import BLOCKING, Circuit, Jitter, State, Transition
from processor.engines.turns import NS_PER_S, Block, TurnScope, turn_key

# What the client library records for a call it refused (``ToolCallRecord.refused``).
REFUSED = Verdict(outcome=Outcome.NEUTRAL, neutral_reason=NeutralReason.REFUSED_BY_ADVISORY)
_NEUTRAL, _UNKNOWN, _HALF_OPEN = Outcome.NEUTRAL, Outcome.UNKNOWN, State.HALF_OPEN


class EnforcingBreaker(Breaker):
    """A ``Breaker`` whose refused calls are never made (see the module docstring)."""

    def __init__(self, config: BreakerConfig, *, jitter: Jitter | None = None) -> None:
        super().__init__(config, jitter=jitter)
        self.refused = 0  # calls kept from being made

    def observe(self, call: ToolCall) -> CallDecision:
        if call.verdict.outcome is _NEUTRAL:
            return super().observe(call)
        # The circuits as of the call's start; what moving them there did goes on the
        # decision, as the engine's own advance would have put it there.
        moved, circuit = self._circuit_refusing(call)
        block = self._block_refusing(call)
        if block is None and circuit is None:
            decision = self._made(super().observe(call))
        else:
            self.refused += 1
            seen = super().observe(replace(call, verdict=REFUSED))
            if block is not None:
                decision = self._decide(call, block, list(seen.transitions), None)
            else:
                assert circuit is not None
                decision = self._refused_by_circuit(call, seen, circuit)
        if moved:
            decision = replace(decision, transitions=(*moved, *decision.transitions))
        return decision

    # -- what the harness's check would have said -----------------------------------------
    def _circuit_refusing(self, call: ToolCall) -> tuple[list[Transition], Circuit | None]:
        """Advance the call's circuits to its start: the governing one if it refuses."""
        made_s = call.start_ns / NS_PER_S
        server_key, tool_key = self._keys(call.tenant, call.server, call.tool)
        keys = (tool_key,) if server_key is None else (server_key, tool_key)
        circuits = tuple(self._circuit(key, call) for key in keys)
        moved = [t for circuit in circuits for t in self.machine.advance(circuit, made_s)]
        state, governing = _governing(circuits, made_s)
        if state in BLOCKING:
            return moved, governing
        decisive = call.verdict.outcome is not _UNKNOWN
        late = made_s < governing.changed_s  # judged by the state alone, as in the engine
        # The permit the engine would grant (``CircuitMachine.permit``), not taken here: a
        # call let through takes it in the engine itself.
        permits_taken = len(governing.leases) >= self.config.probe_permits
        if state is _HALF_OPEN and decisive and not late and permits_taken:
            return moved, governing
        return moved, None

    def _block_refusing(self, call: ToolCall) -> Block | None:
        """The turn block that refuses the call: one it repeats, that had ended when the
        call began. A tool-wide block first, as the engine and the client check."""
        met = [
            block
            for block in self._blocks_of(call)
            if call.start_ns >= block.at_ns and self.turns.repeats(block, call)
        ]
        return min(met, key=lambda b: b.scope is not TurnScope.TOOL) if met else None

    def _blocks_of(self, call: ToolCall) -> list[Block]:
        """The blocks the engine holds for the call's turn, read without touching the turn
        (a refused call must not keep its turn alive). The engine has no read-only way to
        them, so this reads its idle map as ``IdleMap.touch`` would judge the entry."""
        turns = self.turns._turns
        entry = turns._items.get(turn_key(call))
        if entry is None:
            return []
        stamp, blocks = entry
        now_s = max(turns._now, call.end_ns / NS_PER_S)
        return list(blocks.values()) if now_s - stamp < turns._idle_s else []

    # -- the decisions ----------------------------------------------------------------------
    def _refused_by_circuit(
        self, call: ToolCall, seen: CallDecision, circuit: Circuit
    ) -> CallDecision:
        """The refused call's decision: the state, rule and evidence its neutral twin met.
        No message: the report shows none, and its wording is the service's to make."""
        first = circuit.first_failure
        return replace(
            seen,
            call=call,
            dead_call=True,
            repeat_of=first.span_id if first else None,
            evidence=seen.evidence if seen.evidence is not None else self.evidence(circuit),
        )

    @staticmethod
    def _made(decision: CallDecision) -> CallDecision:
        """A call that was made: dead calls among it and its revisions were not refused."""
        revised = tuple(replace(d, enforced=False) for d in decision.revised)
        if decision.dead_call:
            return replace(decision, enforced=False, revised=revised)
        return replace(decision, revised=revised) if revised else decision
