"""A cap on the connections one listener holds, that idle connections cannot fill.

Every connection is a file descriptor and buffers; an outsider who opens thousands and
sends nothing would otherwise exhaust the process's descriptors, and with them the gRPC
port and the health probes. So a listener holds at most ``cap`` connections. When a new
one comes at the cap, the connection that has been quiet longest and has no request in
progress is closed to make room (counted); only when every connection is busy with a
request is the new one closed instead. An attacker's idle connections therefore make
room for a sender's, instead of locking it out. Idle connections are also closed by
aiohttp's keep-alive timeout (``receivers.http.idle_timeout_s``), which applies to a
connection that never sends a request too.

The counting protocol only forwards the transport's callbacks to aiohttp's own request
handler; the middleware only marks a connection busy while its request is handled. The
gRPC ports hold their connections in a port gate (``processor/receive/portgate.py``)
under the same limit: anything with ``busy``, ``active_at`` and ``close()`` can be held.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Protocol

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Held(Protocol):
    busy: int  # requests in progress on the connection: while any is, it is not evicted
    active_at: float  # when it last received anything, by the limit's clock

    def close(self) -> None: ...


class ConnectionLimit:
    def __init__(self, cap: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.cap = cap
        self.refused = 0  # connections closed at accept: every held one was busy
        self.evicted = 0  # quiet connections closed to make room for a new one
        self._clock = clock
        self._held: dict[Hashable, Held] = {}

    @property
    def open(self) -> int:
        return len(self._held)

    def wrap(self, factory: Callable[[], asyncio.BaseProtocol]) -> Callable[[], asyncio.Protocol]:
        return lambda: _Counted(factory(), self)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        counted = self._held.get(request.transport) if request.transport else None
        if counted is None:
            return await handler(request)
        counted.busy += 1
        try:
            return await handler(request)
        finally:
            counted.busy -= 1
            counted.active_at = self._clock()

    def now(self) -> float:
        return self._clock()

    def admit(self, held: Held, key: Hashable) -> bool:
        """Holds ``held`` (under ``key``), closing the quietest idle one at the cap; False
        when every held connection is busy: the caller closes the new one."""
        if len(self._held) >= self.cap:
            quiet = [c for c in self._held.values() if not c.busy]
            if not quiet:
                self.refused += 1
                return False
            self.evicted += 1
            min(quiet, key=lambda c: c.active_at).close()
        held.active_at = self._clock()
        self._held[key] = held
        return True

    def release(self, key: Hashable | None) -> None:
        if key is not None:
            self._held.pop(key, None)


class _Counted(asyncio.Protocol):
    __slots__ = ("_admitted", "_inner", "_limit", "_transport", "active_at", "busy")

    def __init__(self, inner: asyncio.BaseProtocol, limit: ConnectionLimit) -> None:
        self._inner = inner
        self._limit = limit
        self._transport: asyncio.BaseTransport | None = None
        self._admitted = False  # the handler saw connection_made, so it hears of the end
        self.active_at = 0.0
        self.busy = 0  # requests being handled on this connection

    def close(self) -> None:
        transport, self._transport = self._transport, None
        self._limit.release(transport)
        if transport is not None:
            transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not self._limit.admit(self, transport):
            transport.close()  # no handler ever sees it; nothing was read or written
            return
        self._transport = transport
        self._admitted = True
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        transport, self._transport = self._transport, None
        self._limit.release(transport)
        if self._admitted:
            self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self.active_at = self._limit.now()
        self._inner.data_received(data)  # type: ignore[attr-defined]

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()  # type: ignore[attr-defined,no-any-return]

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()
