"""Who may hold another Subscribe stream: the caps on streams, kept fair between callers.

Three caps, checked in this order when a stream asks for a slot:

- per caller (``max_subscribers_per_caller``): one bearer token, or one peer host when no
  tokens are configured, cannot take all of its tenant's streams;
- per tenant (``max_subscribers_per_tenant``): one tenant of the token map cannot take all
  of the service's streams (without tokens there is a single tenant: this cap does not
  apply, the per-caller one does);
- the global cap (``max_subscribers``), under which ``reserved_subscribers_per_tenant``
  streams stay free for every tenant of the token map that holds fewer than that, so that
  tenants at their own cap cannot lock another tenant out.

Plain bookkeeping: no I/O and no clock. The service takes a slot before it registers a
subscriber and gives it back when the stream ends, however it ends.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass

from processor.config import AdvisoriesConfig


@dataclass(frozen=True, slots=True)
class Limits:
    total: int
    per_tenant: int
    per_caller: int
    reserved_per_tenant: int

    @classmethod
    def of(cls, config: AdvisoriesConfig) -> Limits:
        return cls(
            total=config.max_subscribers,
            per_tenant=config.max_subscribers_per_tenant,
            per_caller=config.max_subscribers_per_caller,
            reserved_per_tenant=config.reserved_subscribers_per_tenant,
        )


class Refused(Exception):
    """No slot. The message names the limit; it is what the refused subscriber is told."""


@dataclass(eq=False, slots=True)
class Slot:
    tenant: str
    caller: str
    held: bool = True


class Slots:
    """The streams held, by tenant and by caller. ``tenants``: the tenants of the token map
    (read at each request, so a reloaded map counts at once); empty without tokens."""

    def __init__(self, limits: Limits, tenants: Callable[[], Collection[str]]) -> None:
        self.limits = limits
        self._tenants = tenants
        self._by_tenant: Counter[str] = Counter()
        self._by_caller: Counter[str] = Counter()
        self.held = 0

    def take(self, tenant: str, caller: str) -> Slot:
        """A slot for a stream of ``tenant`` opened by ``caller``, or Refused."""
        limits, known = self.limits, self._tenants()
        if self._by_caller[caller] >= limits.per_caller:
            raise Refused(
                f"this caller holds {limits.per_caller} streams already "
                "(advisories.max_subscribers_per_caller)"
            )
        if tenant in known and self._by_tenant[tenant] >= limits.per_tenant:
            raise Refused(
                f"this tenant holds {limits.per_tenant} streams already "
                "(advisories.max_subscribers_per_tenant)"
            )
        if self.held >= limits.total:
            raise Refused(
                f"the service holds {limits.total} streams, its most (advisories.max_subscribers)"
            )
        # A tenant still within its reservation takes from it; any other stream must leave
        # every other tenant's unused reservation free.
        within_reservation = (
            tenant in known and self._by_tenant[tenant] < limits.reserved_per_tenant
        )
        if not within_reservation and self.held + 1 + self._reserved(known, tenant) > limits.total:
            raise Refused(
                "the streams left are reserved for other tenants "
                "(advisories.reserved_subscribers_per_tenant under advisories.max_subscribers)"
            )
        self._by_tenant[tenant] += 1
        self._by_caller[caller] += 1
        self.held += 1
        return Slot(tenant, caller)

    def give_back(self, slot: Slot) -> None:
        """The stream ended; once per slot (again is harmless)."""
        if not slot.held:
            return
        slot.held = False
        self.held -= 1
        for counts, key in ((self._by_tenant, slot.tenant), (self._by_caller, slot.caller)):
            counts[key] -= 1
            if counts[key] <= 0:
                del counts[key]  # no entry left behind by a caller that has gone

    def of_tenant(self, tenant: str) -> int:
        return self._by_tenant[tenant]

    def of_caller(self, caller: str) -> int:
        return self._by_caller[caller]

    def _reserved(self, known: Collection[str], tenant: str) -> int:
        """Slots still reserved for the known tenants other than ``tenant``."""
        reserve = self.limits.reserved_per_tenant
        if not reserve:
            return 0
        return sum(max(0, reserve - self._by_tenant[t]) for t in known if t != tenant)


def caller_of(token: str | None, peer: str) -> str:
    """Who opens a stream: its bearer token (as a digest, so the tables hold no secret), or
    without one its peer's host (``ipv4:10.0.0.5:51234`` -> ``ipv4:10.0.0.5``)."""
    if token:
        return "token:" + hashlib.sha256(token.encode()).hexdigest()[:32]
    return peer_host(peer)


def peer_host(peer: str) -> str:
    """A gRPC peer without its port: all the connections of one host are one caller."""
    if peer.startswith(("ipv4:", "ipv6:")):
        host, _, port = peer.rpartition(":")
        if host and port.isdigit():
            return host
    return peer  # unix sockets and anything unknown: as given
