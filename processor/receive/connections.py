"""A cap on the connections one HTTP listener holds, that idle connections cannot fill.

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
handler; the middleware only marks a connection busy while its request is handled.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ConnectionLimit:
    def __init__(self, cap: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.cap = cap
        self.refused = 0  # connections closed at accept: every held one was busy
        self.evicted = 0  # quiet connections closed to make room for a new one
        self._clock = clock
        self._held: dict[asyncio.BaseTransport, _Counted] = {}

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

    def _admit(self, counted: _Counted, transport: asyncio.BaseTransport) -> bool:
        if len(self._held) >= self.cap:
            quiet = [c for c in self._held.values() if not c.busy]
            if not quiet:
                self.refused += 1
                return False
            self.evicted += 1
            min(quiet, key=lambda c: c.active_at).close()
        counted.active_at = self._clock()
        self._held[transport] = counted
        return True

    def _release(self, transport: asyncio.BaseTransport | None) -> None:
        if transport is not None:
            self._held.pop(transport, None)


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
        self._limit._release(transport)
        if transport is not None:
            transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not self._limit._admit(self, transport):
            transport.close()  # no handler ever sees it; nothing was read or written
            return
        self._transport = transport
        self._admitted = True
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        transport, self._transport = self._transport, None
        self._limit._release(transport)
        if self._admitted:
            self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self.active_at = self._limit._clock()
        self._inner.data_received(data)  # type: ignore[attr-defined]

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()  # type: ignore[attr-defined,no-any-return]

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()
