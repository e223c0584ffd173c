"""A budget of the bytes the OTLP/HTTP receiver reads and decodes at once, over all requests.

``receivers.http.max_body_bytes`` bounds one request; without a bound over all of them, a
few hundred connections each sending a max-size body (or a small gzip body that inflates
to one, or an OTLP/JSON body whose decoding costs many times its size) hold gigabytes at
once. So every request reserves what it is about to cost before its body is read, and
gives it back when it has been answered. A request the budget cannot take is answered at
once with a retryable ``503`` and ``Retry-After``; its body is never read.

The budget is counted on the event loop only (no locks): a check and the reservation it
allows happen with no ``await`` in between, so no other request can take the room in the
meantime. A request larger than the whole budget is still taken when nothing else is in
flight (no bytes held), or a legal max-size body would be refused for ever; memory is
then bounded by that one request. Under a load that never leaves the budget empty, such
a request waits for a quiet moment: with the defaults, a protobuf body always fits in
the room left by smaller ones, an OTLP/JSON body over 8 MiB needs the budget to itself.
"""

from __future__ import annotations

import sys

UNLIMITED = sys.maxsize  # the room a reservation has when it is alone in flight


class Budget:
    def __init__(self, cap_bytes: int) -> None:
        if cap_bytes <= 0:
            raise ValueError(f"the budget must be positive, got {cap_bytes}")
        self.cap_bytes = cap_bytes
        self.used_bytes = 0
        self.holders = 0  # reservations not yet released
        self.refused = 0  # reservations refused (the counter tests and reports read)

    def try_reserve(self, size_bytes: int) -> Reservation | None:
        """A reservation of ``size_bytes``, or None when it would take the budget over.

        Always granted when no bytes are held, whatever its size.
        """
        if size_bytes < 0:
            raise ValueError(f"cannot reserve a negative size, got {size_bytes}")
        if self.used_bytes and self.used_bytes + size_bytes > self.cap_bytes:
            self.refused += 1
            return None
        self.used_bytes += size_bytes
        self.holders += 1
        return Reservation(self, size_bytes)


class Reservation:
    """What one request holds. ``release`` may be called more than once; only the first counts."""

    __slots__ = ("_budget", "_released", "size_bytes")

    def __init__(self, budget: Budget, size_bytes: int) -> None:
        self._budget = budget
        self._released = False
        self.size_bytes = size_bytes

    @property
    def room_bytes(self) -> int:
        """How far this reservation may grow: without limit when it alone holds bytes."""
        budget = self._budget
        if self._released:
            return 0
        if budget.used_bytes == self.size_bytes:
            return UNLIMITED
        return max(0, budget.cap_bytes - budget.used_bytes)

    def resize(self, size_bytes: int) -> bool:
        """Hold ``size_bytes`` instead; False (and nothing changed) when it does not fit."""
        if size_bytes < 0:
            raise ValueError(f"cannot reserve a negative size, got {size_bytes}")
        if self._released:
            raise RuntimeError("the reservation was released")
        growth = size_bytes - self.size_bytes
        if growth > self.room_bytes:
            self._budget.refused += 1
            return False
        self._budget.used_bytes += growth
        self.size_bytes = size_bytes
        return True

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        self._budget.used_bytes -= self.size_bytes
        self._budget.holders -= 1


__all__ = ["UNLIMITED", "Budget", "Reservation"]
