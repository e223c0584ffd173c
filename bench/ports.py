"""Loopback ports for the processes that the tests and benchmarks start.

Binding port 0 and passing the number on to a child is racy in a way that shows: the
kernel picks port 0's number from the ephemeral range, the range it also draws every
outgoing connection's local port from. Between the pick and the child's own bind, a
connection (to Redis, to a next hop, to a scrape target) can take the port, and the child
exits with "Address already in use". A port outside the ephemeral range is never taken
that way. Each process walks those ports from a random start, so it hands a port out
once before it wraps, and two runs side by side rarely meet.
"""

from __future__ import annotations

import itertools
import random
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

LOOPBACK = "127.0.0.1"
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL_RANGE = (32768, 60999)  # Linux's default
LOWEST_PORT = 10000  # clear of the well-known ports and the usual development servers
HIGHEST_PORT = 65535
ENOUGH_PORTS = 1000  # fewer outside the ephemeral range: fall back to port 0


def ephemeral_range(path: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    try:
        low, high = (int(field) for field in path.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL_RANGE
    return low, high


def outside_ephemeral(low: int, high: int) -> list[int]:
    return [
        *range(LOWEST_PORT, max(LOWEST_PORT, low)),
        *range(max(LOWEST_PORT, high + 1), HIGHEST_PORT + 1),
    ]


def _walk(ports: list[int]) -> Iterator[int]:
    start = random.randrange(len(ports))
    return itertools.cycle(ports[start:] + ports[:start])


_PORTS = outside_ephemeral(*ephemeral_range())
_walker = _walk(_PORTS) if len(_PORTS) >= ENOUGH_PORTS else None
_lock = threading.Lock()


def bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port nothing listens on now and no outgoing connection will take."""
    with _lock:
        if _walker is not None:
            for _ in range(len(_PORTS)):
                port = next(_walker)
                if bindable(port):
                    return port
    with socket.socket() as sock:  # no port outside the ephemeral range is free
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])
