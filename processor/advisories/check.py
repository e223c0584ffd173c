"""``Check``: may this call be made now? Allow, deny with the advisory, or grant a probe.

Read from the same state the span path writes: the hub's turn blocks and the breaker's
circuits, seen at the caller's time (a circuit whose open period has run out is
half-open for the asker even before a span moves it). A half-open circuit's probe
permits are leases held here: exactly ``probe_permits`` askers get one until it expires
or the circuit leaves half-open, and everyone else is told to wait. The probing call
then reports its outcome through its span, like any call.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, replace

from processor.advisories.hub import AdvisoryHub
from processor.advisories.model import Advisory
from processor.engines.bounded import LruMap
from processor.engines.breaker import NO_SERVER
from processor.engines.circuit import CircuitKey, Scope, State


class Verdict(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    PROBE = "probe"


@dataclass(frozen=True, slots=True)
class CheckResult:
    verdict: Verdict
    advisory: Advisory | None = None
    permit: int = 0


ALLOWED = CheckResult(Verdict.ALLOW)


class Checker:
    def __init__(self, hub: AdvisoryHub) -> None:
        self.hub = hub
        self.breaker = hub.breaker
        config = self.breaker.config
        self._permits = config.probe_permits
        self._lease_s = config.probe_lease_s
        self._leases: LruMap[CircuitKey, dict[int, float]] = LruMap(config.max_circuits)
        self._ids = itertools.count(1)

    def check(
        self, *, tenant: str, turn: str, server: str, tool: str, fingerprint: str, now_s: float
    ) -> CheckResult:
        turn_block = self.hub.blocking_for(tenant, turn, server, tool, fingerprint)
        if turn_block is not None:
            return CheckResult(Verdict.DENY if turn_block.enforced else Verdict.ALLOW, turn_block)
        keys = [CircuitKey(Scope.TOOL, f"{server or NO_SERVER}/{tool}", tenant)]
        if server:
            keys.insert(0, CircuitKey(Scope.SERVER, server, tenant))
        probe: CheckResult | None = None
        for key in keys:
            circuit = self.breaker.circuits.peek(key)
            if circuit is None:
                continue
            state = self.breaker.machine.state_at(circuit, now_s)
            if state is not State.HALF_OPEN:
                self._leases.pop(key)
            if state in (State.OPEN, State.FORCED_OPEN):
                advisory = self._advisory(key, state)
                enforced = advisory is None or advisory.enforced
                return CheckResult(Verdict.DENY if enforced else Verdict.ALLOW, advisory)
            if state is State.HALF_OPEN:
                result = self._probe(key, now_s)
                if result.verdict is Verdict.DENY:
                    return result
                probe = probe or result
        return probe or ALLOWED

    def _probe(self, key: CircuitKey, now_s: float) -> CheckResult:
        leases = self._leases.setdefault(key, dict)
        for permit, expiry in list(leases.items()):
            if expiry <= now_s:
                del leases[permit]  # an unanswered probe gives its permit back
        advisory = self._advisory(key, State.HALF_OPEN)
        if len(leases) < self._permits:
            permit = next(self._ids)
            leases[permit] = now_s + self._lease_s
            return CheckResult(Verdict.PROBE, advisory, permit)
        if advisory is not None:
            what = f"`{advisory.tool}`" if advisory.tool else f"MCP server `{advisory.server}`"
            advisory = replace(
                advisory,
                message=f"{what} is recovering from failures and another call is testing it "
                f"now. Do not call it again this turn; answer what you can without it.",
                retry_after_s=max(0.0, min(leases.values()) - now_s),
            )
        return CheckResult(Verdict.DENY, advisory)

    def _advisory(self, key: CircuitKey, state: State) -> Advisory | None:
        return self.hub.circuit_advisory(key, state=state)
