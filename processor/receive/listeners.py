"""How the service's ports are opened: listening sockets, the gRPC servers behind the
port gates (portgate.py), and the limits each is built with.

A gated gRPC port costs three descriptors a connection, so the gates' caps are fitted to
the open-files limit (``gated_caps``); HTTP/2 stream and ping limits are set here so that
grpc-core's defaults cannot drift under them. A port that cannot be opened is a
StartupError naming what listens there, the key that sets it, and the system's reason.
"""

from __future__ import annotations

import os
import socket

import grpc

from processor.config import GrpcReceiverConfig, split_endpoint
from processor.errors import StartupError
from processor.receive.portgate import GatePeers, PortGate

GRPC_BACKSTOP_FACTOR = 2  # gRPC's own concurrency limit, over receivers.grpc.max_concurrent_rpcs
# The telemetry port answers scrapes and probes: a few connections, briefly held.
TELEMETRY_MAX_CONNECTIONS = 128
TELEMETRY_IDLE_TIMEOUT_S = 30.0
# Connections each gRPC port's gate holds (processor/receive/portgate.py). At the cap the
# quietest idle one makes room, so more exporters than this still get in, by turns.
GRPC_MAX_CONNECTIONS = 512
# The advisory port: one per subscriber stream at most, and some for Check callers.
ADVISORY_SPARE_CONNECTIONS = 64
# A gated connection holds three descriptors (the caller's, and both ends of the relay
# to gRPC); what the caps may take is kept under the open-files limit, less this for
# everything else (logs, the disk queue, Redis, the next hop, gRPC's own).
GATED_DESCRIPTORS = 3
RESERVED_DESCRIPTORS = 64
# HTTP/2 streams one client may have open on a connection (SETTINGS_MAX_CONCURRENT_STREAMS;
# grpc-core's default is unlimited). With grpc-core's overload protection (on by
# default, and set here so it stays on) a stream counts until gRPC has freed it, not only
# until the client resets it: a rapid-reset client gets REFUSED_STREAM past this many
# instead of a call each. An OTLP exporter sends one export at a time per connection;
# an advisory caller may hold up to advisories.max_subscribers_per_caller (100) streams.
RECEIVER_MAX_STREAMS = 100
ADVISORY_MAX_STREAMS = 128
# Pings without data a client may send; a third too soon is a GOAWAY (too_many_pings)
# from grpc-core itself. Its defaults, stated so they stay.
MIN_PING_INTERVAL_WITHOUT_DATA_MS = 5 * 60 * 1000
MAX_PING_STRIKES = 2


def _socket(endpoint: str, reuse_port: bool = False) -> socket.socket:
    host, port = split_endpoint(endpoint)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, reuse_port=reuse_port)


def listening_socket(endpoint: str, what: str, key: str, reuse_port: bool = False) -> socket.socket:
    try:
        return _socket(endpoint, reuse_port)
    except OSError as error:
        raise StartupError(_cannot_listen(what, endpoint, key, error)) from None


def _cannot_listen(what: str, endpoint: str, key: str, error: OSError | None) -> str:
    """What could not listen, where, the key that sets it, and the system's reason."""
    reason = f": {os.strerror(error.errno)}" if error is not None and error.errno else ""
    return f"{what}: cannot listen on {endpoint} (set by {key}){reason}"


def _bind_error(endpoint: str) -> OSError | None:
    """Why gRPC could not bind, which it does not say: what a plain bind there gets."""
    try:
        _socket(endpoint).close()
    except OSError as error:
        return error
    return None


def grpc_server(
    max_receive_bytes: int,
    gate: PortGate,
    limits: GrpcReceiverConfig | None = None,
    max_streams: int = RECEIVER_MAX_STREAMS,
) -> grpc.aio.Server:
    """A gRPC server for the internal port behind ``gate`` (which owns the public one, so
    no two instances share it: gRPC's port sharing is off)."""
    options: list[tuple[str, int]] = [
        ("grpc.max_receive_message_length", max_receive_bytes),
        ("grpc.so_reuseport", 0),
        # Against stream floods and rapid reset (CVE-2023-44487): see the constants.
        ("grpc.max_concurrent_streams", max_streams),
        ("grpc.http.overload_protection", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", MIN_PING_INTERVAL_WITHOUT_DATA_MS),
        ("grpc.http2.max_ping_strikes", MAX_PING_STRIKES),
    ]
    interceptors = (GatePeers(gate),)
    if limits is None:
        return grpc.aio.server(options=options, interceptors=interceptors)
    # What an outsider's connections may hold: idle ones are closed, old ones recycled (an
    # OTLP exporter reconnects by itself), dead peers found by keepalive pings, and a
    # connection that never completes its handshake dropped.
    options += [
        ("grpc.max_connection_idle_ms", _ms(limits.max_connection_idle_s)),
        ("grpc.max_connection_age_ms", _ms(limits.max_connection_age_s)),
        ("grpc.max_connection_age_grace_ms", _ms(limits.max_connection_age_grace_s)),
        ("grpc.keepalive_time_ms", _ms(limits.keepalive_time_s)),
        ("grpc.keepalive_timeout_ms", _ms(limits.keepalive_timeout_s)),
        ("grpc.server_handshake_timeout_ms", _ms(limits.handshake_timeout_s)),
    ]
    # max_concurrent_rpcs is enforced by the export handler, which tells a sender to retry;
    # gRPC's own limit, twice it, is a backstop (its RESOURCE_EXHAUSTED carries no delay).
    backstop = GRPC_BACKSTOP_FACTOR * limits.max_concurrent_rpcs
    return grpc.aio.server(
        options=options, interceptors=interceptors, maximum_concurrent_rpcs=backstop
    )


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def gated_caps(wanted: dict[str, int], ungated: int, open_files: int) -> dict[str, int]:
    """The gated ports' connection caps, cut in proportion where ``wanted`` would take
    more descriptors than ``open_files`` leaves once ``ungated`` connections (the HTTP
    ports', one descriptor each) and the reserve are counted; at least one each."""
    room = max(0, open_files - RESERVED_DESCRIPTORS - ungated) // GATED_DESCRIPTORS
    total = sum(wanted.values())
    if total <= room:
        return dict(wanted)
    return {name: max(1, cap * room // total) for name, cap in wanted.items()}


def bind(
    server: grpc.aio.Server,
    endpoint: str,
    credentials: grpc.ServerCredentials | None,
    what: str,
    key: str,
) -> int:
    """The port ``server`` listens on, or a StartupError naming what could not listen."""
    try:
        if credentials is None:
            port = server.add_insecure_port(endpoint)
        else:
            port = server.add_secure_port(endpoint, credentials)
    except RuntimeError:
        port = 0
    if not port:
        raise StartupError(_cannot_listen(what, endpoint, key, _bind_error(endpoint)))
    return int(port)
