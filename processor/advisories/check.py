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
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from mcp_breaker_client.shared import messages

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


@dataclass(frozen=True, slots=True)
class HalfOpen:
    """The call may go as a probe, if it gets a permit on each of these circuits:
    (circuit, the end of the open period its half-open period follows)."""

    circuits: tuple[tuple[CircuitKey, float], ...]


@dataclass(slots=True)
class _Leases:
    """The probe permits held on one circuit, for the half-open period that follows the
    open period ending at ``period``: a later half-open period starts with none."""

    period: float
    held: dict[int, float] = field(default_factory=dict)  # permit -> lease expiry


class Checker:
    def __init__(self, hub: AdvisoryHub) -> None:
        self.hub = hub
        self.breaker = hub.breaker
        config = self.breaker.config
        self._permits = config.probe_permits
        self._lease_s = config.probe_lease_s
        self._leases: LruMap[CircuitKey, _Leases] = LruMap(config.max_circuits)
        self._ids = itertools.count(1)

    def check(
        self,
        *,
        tenant: str,
        turn: str,
        server: str,
        tool: str,
        fingerprints: Sequence[str],
        now_s: float,
    ) -> CheckResult:
        """The answer, with probe permits held here (one process)."""
        assessed = self.assess(
            tenant=tenant,
            turn=turn,
            server=server,
            tool=tool,
            fingerprints=fingerprints,
            now_s=now_s,
        )
        if isinstance(assessed, CheckResult):
            return assessed
        return self.grant_here(assessed, now_s)

    def assess(
        self,
        *,
        tenant: str,
        turn: str,
        server: str,
        tool: str,
        fingerprints: Sequence[str],
        now_s: float,
    ) -> CheckResult | HalfOpen:
        """The answer, or the half-open circuits a permit is wanted on (``grant_here``, or
        the shared arbiter of several replicas, hands it out)."""
        turn_block = self.hub.blocking_for(tenant, turn, server, tool, fingerprints)
        if turn_block is not None:
            return CheckResult(Verdict.DENY if turn_block.enforced else Verdict.ALLOW, turn_block)
        keys = [CircuitKey(Scope.TOOL, f"{server or NO_SERVER}/{tool}", tenant)]
        if server:
            keys.insert(0, CircuitKey(Scope.SERVER, server, tenant))
        half_open: list[tuple[CircuitKey, float]] = []
        for key in keys:
            circuit = self.breaker.circuits.peek(key)
            if circuit is None:
                continue
            state = self.breaker.machine.state_at(circuit, now_s)
            if state is not State.HALF_OPEN:
                self._leases.pop(key)
            if state in (State.OPEN, State.FORCED_OPEN):
                advisory = self._advisory(key, state, now_s)
                return CheckResult(self._refusal(advisory), advisory)
            if state is State.HALF_OPEN:
                half_open.append((key, circuit.open_until_s))
        if not half_open:
            return ALLOWED
        return HalfOpen(tuple(half_open))

    def grant_here(self, wanted: HalfOpen, now_s: float) -> CheckResult:
        # A permit is taken only when the call may go: every half-open circuit it touches
        # has one free (a caller denied by another circuit holds none).
        held = [(key, self._held(key, period, now_s)) for key, period in wanted.circuits]
        for key, leases in held:
            if len(leases.held) >= self._permits:
                retry = max(0.0, min(leases.held.values()) - now_s)
                return self.waiting(wanted, now_s, key=key, retry_after_s=retry)
        permit = next(self._ids)
        for _, leases in held:
            leases.held[permit] = now_s + self._lease_s
        return self.granted(wanted, permit, now_s)

    def granted(self, wanted: HalfOpen, permit: int, now_s: float) -> CheckResult:
        first = wanted.circuits[0][0]
        return CheckResult(Verdict.PROBE, self._advisory(first, State.HALF_OPEN, now_s), permit)

    def waiting(
        self,
        wanted: HalfOpen,
        now_s: float,
        *,
        key: CircuitKey | None = None,
        retry_after_s: float | None = None,
    ) -> CheckResult:
        """Every permit is taken: another call is testing the circuit now."""
        key = key or wanted.circuits[0][0]
        advisory = self._advisory(key, State.HALF_OPEN, now_s)
        if advisory is not None:
            subject = (
                messages.tool_subject(advisory.tool, advisory.server)
                if advisory.tool
                else messages.server_subject(advisory.server)
            )
            advisory = replace(
                advisory,
                message=messages.probe_in_flight(subject),
                retry_after_s=self._lease_s if retry_after_s is None else retry_after_s,
            )
        return CheckResult(self._refusal(advisory), advisory)

    def _held(self, key: CircuitKey, period: float, now_s: float) -> _Leases:
        leases = self._leases.setdefault(key, lambda: _Leases(period))
        if leases.period != period:  # the circuit closed or reopened since: a new half-open
            leases.period = period
            leases.held.clear()
        for permit, expiry in list(leases.held.items()):
            if expiry <= now_s:
                del leases.held[permit]  # an unanswered probe gives its permit back
        return leases

    @staticmethod
    def _refusal(advisory: Advisory | None) -> Verdict:
        """Deny, unless the rule is in shadow mode: then tell, and let the call go."""
        return Verdict.DENY if advisory is None or advisory.enforced else Verdict.ALLOW

    def _advisory(self, key: CircuitKey, state: State, now_s: float) -> Advisory | None:
        return self.hub.circuit_advisory(key, state=state, now_s=now_s)
