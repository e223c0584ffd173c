"""The port gate in process: what it does to the connections it holds (the floods and
resets it stops are in tests/test_receive_http2_abuse.py)."""

from __future__ import annotations

import asyncio
import socket

from processor.receive.connections import ConnectionLimit
from processor.receive.portgate import PortGate, grpc_peer
from tests.support import LOOPBACK

WAIT_S = 10.0


async def _relayed_once() -> tuple[bytes, int]:
    """One client through a gate to an echo server: what came back, and whether the
    gate's socket towards the client has Nagle off."""
    upstream_peers: list[str] = []

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_peers.append(grpc_peer(writer.get_extra_info("peername")))
        writer.write(await reader.read(100))
        await writer.drain()
        await reader.read()  # held open until the client goes
        writer.close()

    target = await asyncio.start_server(echo, LOOPBACK, 0)
    gate = PortGate(ConnectionLimit(8))
    # As the service makes its listeners: socket.create_server, whose accepted sockets
    # asyncio does not set TCP_NODELAY on (their protocol number is 0).
    await gate.start(socket.create_server((LOOPBACK, 0)), target.sockets[0].getsockname()[1])
    assert gate._listener is not None
    port = gate._listener.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection(LOOPBACK, port)
        writer.write(b"hello")
        echoed = await asyncio.wait_for(reader.read(100), WAIT_S)
        relay = gate.relay_of(upstream_peers[0])
        assert relay is not None and relay._client is not None
        towards_client = relay._client.get_extra_info("socket")
        no_delay = towards_client.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        writer.close()
        return echoed, no_delay
    finally:
        gate.close()
        target.close()


def test_a_gated_connection_relays_its_bytes_with_nagle_off() -> None:
    """With Nagle on, the gRPC server's SETTINGS and its answer to a new connection's
    first export waited on the client's delayed ACK: some 40 ms for each new connection
    (44 ms against 6 ms to the gRPC server directly, on the test machine)."""
    echoed, no_delay = asyncio.run(_relayed_once())
    assert echoed == b"hello"
    assert no_delay != 0
