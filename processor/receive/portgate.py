"""A gate in front of a gRPC port: a connection cap with eviction, and rapid reset cut off.

grpcio's server owns its sockets and offers no eviction: its one connection limit
(``grpc.max_allowed_incoming_connections``) closes the *new* connection at the cap, so
1,100 connections that only send the HTTP/2 preface lock a sender out as surely as
running out of descriptors does, and idle timeouts only free a slot the attacker takes
again first. So the public port is an asyncio listener that holds each connection under
a ``ConnectionLimit`` (the HTTP receiver's cap: at the cap, the quietest connection with
no call in progress is closed to make room, so a sender always gets in) and relays its
bytes to the gRPC server listening on an internal loopback port.

The relay also reads the HTTP/2 frame headers of a cleartext connection
(``h2frames.FrameScanner``): a client that resets streams faster than ``ResetBudget``
allows gets a GOAWAY (ENHANCE_YOUR_CALM) at the next frame boundary and is closed, and
counted. grpc-core refuses streams over ``grpc.max_concurrent_streams`` but never sends a
GOAWAY for resets, so without this an attacker may reset for as long as it likes. Under
TLS the bytes are relayed unread: TLS ends in gRPC, which keeps the client's certificate
for authentication, and grpc-core's own stream limits are what applies.

gRPC sees every call come from the relay's loopback address; ``GatePeers`` gives the
handlers the caller's own address instead (``context.peer()``), and marks its
connection busy while a call is in progress, as the HTTP middleware does. Measured
costs are in docs/security.md ("Connections").
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import grpc

from processor.receive.connections import ConnectionLimit
from processor.receive.h2frames import (
    ENHANCE_YOUR_CALM,
    FrameScanner,
    Reading,
    ResetBudget,
    goaway_frame,
)

INTERNAL_HOST = "127.0.0.1"  # where the gRPC server behind a gate listens
# Stream resets one connection may send: gRPC exporters reset a stream when an export
# times out or is cancelled (a few a minute at worst); rapid reset sends thousands in a
# millisecond. A burst of 1,000, then 100 a second, leaves a busy client with short
# deadlines its cancellations and stops an attack within a millisecond's worth of it.
RESET_BURST = 1000
RESETS_PER_S = 100.0
GOAWAY_DEBUG = b"too many stream resets"
# A GOAWAY waits for the server's frame in progress to end; past this the connection is
# closed without it.
GOAWAY_WAIT_S = 1.0
# The relay stops reading one side while the other side's write buffer holds this much.
HIGH_WATER_BYTES = 256 * 1024


def grpc_peer(address: Any) -> str:
    """A socket address as gRPC writes a peer: ``ipv4:10.0.0.5:51234``, ``ipv6:[::1]:5``."""
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        return f"ipv6:[{host}]:{port}" if ":" in str(host) else f"ipv4:{host}:{port}"
    return f"unix:{address}" if address else ""


def _no_delay(transport: asyncio.Transport) -> None:
    """Small writes go at once. asyncio sets TCP_NODELAY only on sockets whose protocol
    number is TCP's, and ``socket.create_server``'s listener (so each accepted socket) has
    0: with Nagle on, the server's SETTINGS and its answer waited on the client's delayed
    ACK, and a new connection's first export took some 40 ms longer through the gate."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class PortGate:
    """Holds the connections of one public port and relays them to ``target_port``."""

    def __init__(self, limit: ConnectionLimit) -> None:
        self.limit = limit
        self.target_port = 0  # known at start
        self.goaways = 0  # connections sent a GOAWAY for resetting too many streams
        self._relays: dict[str, _Relay] = {}  # by the peer gRPC sees: the relay's side
        self._listener: asyncio.Server | None = None

    async def start(self, sock: socket.socket, target_port: int) -> None:
        self.target_port = target_port
        loop = asyncio.get_running_loop()
        self._listener = await loop.create_server(lambda: _Relay(self), sock=sock)

    def stop_accepting(self) -> None:
        if self._listener is not None:
            self._listener.close()  # held connections stay: their calls may finish

    def close(self) -> None:
        self.stop_accepting()
        for relay in list(self._relays.values()):
            relay.close()

    def relay_of(self, internal_peer: str) -> _Relay | None:
        return self._relays.get(internal_peer)

    @contextlib.contextmanager
    def calling(self, internal_peer: str) -> Iterator[str]:
        """The caller's own peer, its connection busy meanwhile (never evicted)."""
        relay = self._relays.get(internal_peer)
        if relay is None:  # not through the gate (or gone): as gRPC saw it
            yield internal_peer
            return
        relay.busy += 1
        try:
            yield relay.peer
        finally:
            relay.busy -= 1
            relay.active_at = self.limit.now()

    def _connected(self, relay: _Relay, internal_peer: str) -> None:
        self._relays[internal_peer] = relay

    def _gone(self, relay: _Relay) -> None:
        self.limit.release(relay)
        if relay.internal_peer and self._relays.get(relay.internal_peer) is relay:
            del self._relays[relay.internal_peer]


class _Relay(asyncio.Protocol):
    """One client connection: its bytes to the gRPC server and back."""

    def __init__(self, gate: PortGate) -> None:
        self._gate = gate
        self.busy = 0  # calls in progress (GatePeers)
        self.active_at = 0.0
        self.peer = ""
        self.internal_peer = ""
        self._client: asyncio.Transport | None = None
        self._upstream: _Upstream | None = None
        self._opening: asyncio.Task[None] | None = None
        self._requests = FrameScanner(expect_preface=True)
        self._responses = FrameScanner(expect_preface=False)
        self._resets = ResetBudget(RESET_BURST, RESETS_PER_S, gate.limit.now())
        self._abusive = False
        self._closed = False

    # --- the client's side ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._client = transport
        if not self._gate.limit.admit(self, self):
            self._closed = True
            transport.close()  # every held connection busy: nothing was read or written
            return
        self.peer = grpc_peer(transport.get_extra_info("peername"))
        _no_delay(transport)
        transport.set_write_buffer_limits(high=HIGH_WATER_BYTES)
        transport.pause_reading()
        self._opening = asyncio.get_running_loop().create_task(self._open_upstream())

    async def _open_upstream(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, upstream = await loop.create_connection(
                lambda: _Upstream(self), INTERNAL_HOST, self._gate.target_port
            )
        except OSError:
            self.close()  # the gRPC server is gone (stopping) or out of descriptors
            return
        if self._closed or self._client is None:
            transport.close()
            return
        self._upstream = upstream
        self.internal_peer = grpc_peer(transport.get_extra_info("sockname"))
        self._gate._connected(self, self.internal_peer)
        self._client.resume_reading()  # paused until there was somewhere to send it

    def data_received(self, data: bytes) -> None:
        if self._abusive:
            return  # a GOAWAY is on its way; nothing more of it reaches gRPC
        self.active_at = self._gate.limit.now()
        resets = self._requests.feed(data)
        if resets and not self._resets.spend(resets, self.active_at):
            self._refuse_abuse()
            return
        upstream = self._upstream
        if upstream is not None and upstream.transport is not None:
            upstream.transport.write(data)

    def eof_received(self) -> bool:
        if self._upstream is not None and self._upstream.transport is not None:
            self._upstream.transport.write_eof()
        return True  # half-open: the server may still answer

    def connection_lost(self, exc: Exception | None) -> None:
        self._client = None
        self.close()

    def pause_writing(self) -> None:
        if self._upstream is not None and self._upstream.transport is not None:
            self._upstream.transport.pause_reading()

    def resume_writing(self) -> None:
        if self._upstream is not None and self._upstream.transport is not None:
            self._upstream.transport.resume_reading()

    # --- the server's side ------------------------------------------------------------------

    def from_server(self, data: bytes) -> None:
        client = self._client
        if client is None:
            return
        if not self._abusive:
            if self._requests.reading is not Reading.OPAQUE:  # a GOAWAY may follow
                self._responses.feed(data)
            client.write(data)
            return
        view = memoryview(data)  # a GOAWAY pending: only up to the frame boundary
        while view and not self._responses.at_boundary:
            step = self._responses.to_boundary()
            self._responses.feed(bytes(view[:step]))
            client.write(bytes(view[:step]))
            view = view[step:]
        if self._responses.at_boundary:
            self._send_goaway()

    def _refuse_abuse(self) -> None:
        self._abusive = True
        self._gate.goaways += 1
        if self._client is not None:
            self._client.pause_reading()
        if self._responses.at_boundary:
            self._send_goaway()
        else:
            asyncio.get_running_loop().call_later(GOAWAY_WAIT_S, self.close)

    def _send_goaway(self) -> None:
        if self._client is not None and not self._closed:
            self._client.write(goaway_frame(ENHANCE_YOUR_CALM, GOAWAY_DEBUG))
        self.close()

    def server_paused(self, paused: bool) -> None:
        if self._client is not None and not self._abusive:
            (self._client.pause_reading if paused else self._client.resume_reading)()

    def server_gone(self) -> None:
        if self._client is not None:
            self._client.close()  # what gRPC wrote is flushed first
        self.close()

    def close(self) -> None:
        if self._closed and self._client is None and self._upstream is None:
            return
        self._closed = True
        self._gate._gone(self)
        client, self._client = self._client, None
        upstream, self._upstream = self._upstream, None
        if client is not None:
            client.close()
        if upstream is not None and upstream.transport is not None:
            upstream.transport.close()


class _Upstream(asyncio.Protocol):
    def __init__(self, relay: _Relay) -> None:
        self._relay = relay
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=HIGH_WATER_BYTES)

    def data_received(self, data: bytes) -> None:
        self._relay.from_server(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._relay.server_gone()

    def pause_writing(self) -> None:
        self._relay.server_paused(True)

    def resume_writing(self) -> None:
        self._relay.server_paused(False)


# --- the handlers' view ----------------------------------------------------------------------


class _SeenFrom:
    """A servicer context whose ``peer()`` is the caller's, not the gate's."""

    __slots__ = ("_context", "_peer")

    def __init__(self, context: grpc.aio.ServicerContext, peer: str) -> None:
        self._context = context
        self._peer = peer

    def peer(self) -> str:
        return self._peer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


class GatePeers(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Every call on a gated server sees its caller's address and keeps its connection
    busy while it runs."""

    def __init__(self, gate: PortGate) -> None:
        self._gate = gate
        self._wrapped: dict[Any, Any] = {}  # handlers are made once, at registration

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Any],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        wrapped = self._wrapped.get(handler)
        if wrapped is None:
            wrapped = self._wrapped[handler] = self._wrap(handler)
        return wrapped

    def _wrap(self, handler: Any) -> Any:
        kind = (
            ("stream_" if handler.request_streaming else "unary_")
            + ("stream" if handler.response_streaming else "unary")
        )  # fmt: skip
        behaviour = getattr(handler, kind)
        gate = self._gate
        if inspect.isasyncgenfunction(behaviour):

            async def streaming(request: Any, context: Any) -> AsyncIterator[Any]:
                with gate.calling(context.peer()) as peer:
                    async for response in behaviour(request, _SeenFrom(context, peer)):
                        yield response

            return handler._replace(**{kind: streaming})
        if inspect.iscoroutinefunction(behaviour):

            async def call(request: Any, context: Any) -> Any:
                with gate.calling(context.peer()) as peer:
                    return await behaviour(request, _SeenFrom(context, peer))

            return handler._replace(**{kind: call})
        return handler  # a synchronous handler runs in a thread: none here
