"""The advisories in force, numbered changes, and what each subscriber may see.

Plain logic, clock passed in (wall-clock Unix seconds: advisories are for harnesses
running now). The hub turns the breaker's decisions into advisories, numbers every change
with a sequence number within an epoch (one per process start), keeps the latest
``replay_changes`` so a subscriber that reconnects gets exactly what it missed, and
expires advisories whose time is up: an open circuit past its open period becomes
half-open (one probe may go), a half-open one nobody probed and a finished turn's block
are dropped. Bounded: at most ``max_advisories`` in force, the oldest dropped first.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from processor.advisories.model import (
    CLOSED,
    TURN_BLOCKED,
    TURN_SCOPES,
    Advisory,
    from_block,
    from_circuit,
    from_collapse,
    turn_call_id,
    turn_tool_id,
)
from processor.config import AdvisoriesConfig, Rule
from processor.engines.breaker import Breaker, CallDecision
from processor.engines.circuit import CircuitKey, Scope, State, Transition
from processor.engines.roster import RosterFinding

Change = tuple[int, Advisory]  # (sequence number, the advisory as it now stands)
# With shared state, the changes an event of the shared stream makes are numbered from its
# position: position << CHANGE_BITS, plus one for each change. Every replica numbers them
# alike, so a subscriber can resume at another replica.
CHANGE_BITS = 20
_MAX_CHANGES_PER_EVENT = (1 << CHANGE_BITS) - 1


def position_seq(position: int) -> int:
    """The sequence number just before the changes of the shared event at ``position``."""
    return position << CHANGE_BITS


_RULE = {Scope.SERVER: Rule.SERVER, Scope.TOOL: Rule.TOOL}
_FORCED = (State.FORCED_OPEN, State.FORCED_CLOSED)


@dataclass(frozen=True, slots=True, kw_only=True)
class Audience:
    """What one subscriber (or caller) may see: its tenant, and the filters it asked for."""

    tenant: str
    servers: frozenset[str] = frozenset()
    harness: str = ""

    def sees(self, advisory: Advisory) -> bool:
        if advisory.tenant != self.tenant:
            return False
        if self.servers and advisory.server not in self.servers:
            return False
        turn_scoped = advisory.scope in TURN_SCOPES
        return not (self.harness and turn_scoped and advisory.harness != self.harness)


class AdvisoryHub:
    def __init__(self, config: AdvisoriesConfig, breaker: Breaker, epoch: str | None = None):
        self.config = config
        self.breaker = breaker
        self.epoch = epoch or secrets.token_hex(8)
        self.seq = 0
        self._current: OrderedDict[str, Advisory] = OrderedDict()
        self._log: deque[Change] = deque()
        self._floor = 0  # changes numbered up to this one may be gone from the log
        self._base: int | None = None  # numbering from a shared position (see ``at``)
        self._in_event = 0

    def __len__(self) -> int:
        return len(self._current)

    def get(self, advisory_id: str) -> Advisory | None:
        return self._current.get(advisory_id)

    def at(self, position: int | None) -> None:
        """Number the changes that follow as those of the shared stream's event at
        ``position``; None: one by one, as this process alone numbers them."""
        self._base = None if position is None else position_seq(position)
        self._in_event = 0

    def restart(self, epoch: str, *, seq: int | None = None) -> None:
        """Another epoch (the shared one, or this process's own while Redis is away): what
        was numbered before cannot be resumed from. ``seq``: where numbering starts again
        (the shared stream's: ``position_seq``); None: on from here."""
        self.epoch = epoch
        self._log.clear()
        if seq is not None:
            self.seq = seq
        self._floor = self.seq

    def forget(self) -> None:
        """Nothing in force (the breaker is being rebuilt from the shared stream, whose
        replay publishes what stands); subscribers learn it from the resync that follows."""
        self._current.clear()

    # -- changes in -------------------------------------------------------------------------
    def observe(self, decision: CallDecision, now_s: float) -> list[Change]:
        """The changes a call's decision makes: circuits that moved, a turn block opened."""
        if changes_nothing(decision):
            return []
        latest: dict[CircuitKey, Transition] = {}
        for transition in decision.transitions:
            latest[transition.key] = transition
        advisories = [
            a
            for transition in latest.values()
            if (a := self.circuit_advisory(transition.key, reason=transition.reason))
        ]
        block = decision.opened_block
        if block is not None:
            rule = Rule.TURN_TOOL if block.key.startswith("tool:") else Rule.TURN_CALL
            advisory = from_block(
                decision.call,
                block,
                enforced=self.breaker.enforced(rule),
                turn_idle_s=self.breaker.config.turn_idle_s,
            )
            # The turn's earliest failure stands for its block, as in the breaker: a failure
            # that arrives late but happened first takes its place. Only from the same
            # harness: the harness decides who may see the id.
            current = self._current.get(advisory.id) if advisory is not None else None
            if advisory is not None and (
                current is None
                or (
                    decision.call.harness in ("", current.harness)
                    and _since(advisory) < _since(current)
                )
            ):
                advisories.append(advisory)
        harness = decision.call.harness
        return self.publish(
            (replace(a, harness=harness) if not a.harness else a for a in advisories), now_s
        )

    def observe_roster(self, finding: RosterFinding, now_s: float) -> list[Change]:
        """A collapse opened (or extended) tells the harness to re-list; recovery ends it."""
        collapse = finding.collapse
        if collapse is None:
            return []
        advisory = from_collapse(
            finding.listing, collapse, turn_idle_s=self.breaker.config.turn_idle_s
        )
        known = self._current.get(advisory.id)
        if known is not None and known.message == advisory.message:
            return []  # the same collapse seen again: nothing new to say
        return self.publish([advisory], now_s)

    def circuit_advisory(
        self,
        key: CircuitKey,
        *,
        reason: str = "",
        state: State | None = None,
        now_s: float | None = None,
    ) -> Advisory | None:
        """The advisory for a circuit as it stands (or in ``state``, as a reader sees it at
        ``now_s``: then how long to wait counts from that time)."""
        circuit = self.breaker.circuits.peek(key)
        if circuit is None:
            return None
        evidence = self.breaker.evidence(circuit)
        state = state or circuit.state
        # The operator's reason outlives a release on the circuit: it is only why while forced.
        forced_reason = circuit.forced_reason if state in _FORCED else ""
        return from_circuit(
            circuit,
            state,
            # Why, in the words a person reads: the operator's reason, else the failure class.
            cause=reason or forced_reason or evidence.failure_class,
            evidence=evidence,
            enforced=self.breaker.enforced(_RULE[key.scope]),
            half_open_ttl_s=self.config.half_open_ttl_s,
            now_s=now_s,
        )

    def publish(self, advisories: Iterable[Advisory], now_s: float) -> list[Change]:
        changes: list[Change] = []
        for advisory in advisories:
            known = self._current.pop(advisory.id, None)
            if not advisory.in_force:
                if known is None:
                    continue  # nothing was in force: nothing to take back
                advisory = replace(advisory, state=CLOSED)
            else:
                self._current[advisory.id] = advisory
            changes.append(self._append(advisory))
        while len(self._current) > self.config.max_advisories:
            changes.append(self._append(self._evict().closed("evicted")))
        return changes

    def _evict(self) -> Advisory:
        """The oldest turn-scoped advisory goes first: a circuit's stands for a whole server
        or tool across every turn, and taking it back would let mirrors call a dead tool.
        Circuits are bounded by the breaker; only when nothing else is left does one go."""
        victim = next((a for a in self._current.values() if a.scope in TURN_SCOPES), None)
        if victim is None:
            victim = next(iter(self._current.values()))
        return self._current.pop(victim.id)

    def expire(self, now_s: float) -> list[Change]:
        """Advisories whose time is up: open → half-open; others taken back."""
        changes: list[Change] = []
        for advisory in list(self._current.values()):
            if not advisory.expires_s or advisory.expires_s > now_s:
                continue
            del self._current[advisory.id]
            if advisory.state == State.OPEN.value:
                moved = replace(
                    advisory,
                    state=State.HALF_OPEN.value,
                    cause="open_period_over",
                    message="",
                    retry_after_s=0.0,
                    expires_s=now_s + self.config.half_open_ttl_s,
                )
                self._current[moved.id] = moved
                changes.append(self._append(moved))
            else:
                cause = "turn_over" if advisory.state == TURN_BLOCKED else "expired"
                changes.append(self._append(advisory.closed(cause)))
        return changes

    def _append(self, advisory: Advisory) -> Change:
        if self._base is None:
            self.seq += 1
        else:
            self._in_event = min(self._in_event + 1, _MAX_CHANGES_PER_EVENT)
            self.seq = max(self.seq, self._base + self._in_event)
        change = (self.seq, advisory)
        self._log.append(change)
        while len(self._log) > self.config.replay_changes:
            self._floor = self._log.popleft()[0]
        return change

    # -- reading ----------------------------------------------------------------------------
    def in_force(self) -> list[Advisory]:
        """Every advisory in force, all tenants (for comparing replicas, never a wire)."""
        return list(self._current.values())

    def snapshot(self, audience: Audience) -> list[Advisory]:
        return [a for a in self._current.values() if audience.sees(a)]

    def since(self, epoch: str, seq: int, audience: Audience) -> list[Change] | None:
        """The changes after ``seq`` this audience may see, or None when they are not all
        held any more (or the epoch is another process's): the subscriber must resync."""
        if epoch != self.epoch or seq > self.seq:
            return None
        if seq == self.seq:
            return []
        if seq < self._floor:  # some of what came after it is no longer held
            return None
        return [(s, a) for s, a in self._log if s > seq and audience.sees(a)]

    def blocking_for(
        self, tenant: str, turn: str, server: str, tool: str, fingerprints: Sequence[str]
    ) -> Advisory | None:
        """A turn-scoped advisory that refuses this call, if any."""
        for advisory_id in (
            turn_tool_id(tenant, turn, server, tool),
            *(turn_call_id(tenant, turn, print_) for print_ in fingerprints if print_),
        ):
            advisory = self._current.get(advisory_id)
            if advisory is not None and advisory.blocking:
                return advisory
        return None


def changes_nothing(finding: CallDecision | RosterFinding) -> bool:
    """A finding no advisory can follow from: a decision that moved no circuit and opened
    no turn block, a listing in no collapse. Most are; the sink lets them go at once."""
    if isinstance(finding, RosterFinding):
        return finding.collapse is None
    return not finding.transitions and finding.opened_block is None


def _since(advisory: Advisory) -> float:
    """When the failure an advisory stands on happened (span time); unknown sorts last."""
    evidence = advisory.evidence
    return evidence.since_s if evidence is not None and evidence.since_s is not None else 1e30
