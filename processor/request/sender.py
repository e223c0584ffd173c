"""Who sent a request: what its transport says, carried from the receiver to every stage.

The receivers know the sender — its peer address, and, when it authenticated, the tenant
its credentials map to — and the stages that follow need it: the pipeline keeps tenants
apart, the forwarder names the sender of spans it has to give up. One small value object,
passed along with the request, rather than a context variable nobody can see.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sender:
    peer: str = ""  # gRPC's context.peer() ("ipv4:127.0.0.1:51234"), HTTP's remote address
    # The tenant the sender's credentials map to; None when it did not authenticate (then a
    # span's own tenant attribute is all there is to go by).
    tenant: str | None = None


UNKNOWN_SENDER = Sender()
