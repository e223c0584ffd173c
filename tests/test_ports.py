"""The ports tests and benchmarks hand their children: never one an outgoing connection takes."""

from __future__ import annotations

import socket
from pathlib import Path

from bench import ports


def test_a_port_handed_out_is_outside_the_ephemeral_range_and_free() -> None:
    low, high = ports.ephemeral_range()
    handed = [ports.free_port() for _ in range(50)]
    if len(ports.outside_ephemeral(low, high)) >= ports.ENOUGH_PORTS:
        assert all(not low <= port <= high for port in handed)
        assert len(set(handed)) == len(handed)  # not handed out twice before the walk wraps
    # (else this machine's ephemeral range leaves too few: ports come from port 0)
    for port in handed:
        assert ports.bindable(port)


def test_a_port_someone_listens_on_is_skipped() -> None:
    with socket.socket() as taken:
        taken.bind((ports.LOOPBACK, ports.free_port()))
        taken.listen()
        assert not ports.bindable(taken.getsockname()[1])


def test_the_ephemeral_range_is_read_from_the_kernel_file(tmp_path: Path) -> None:
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("40000\t50000\n")
    assert ports.ephemeral_range(range_file) == (40000, 50000)
    assert ports.ephemeral_range(tmp_path / "absent") == ports.DEFAULT_EPHEMERAL_RANGE
    range_file.write_text("garbage\n")
    assert ports.ephemeral_range(range_file) == ports.DEFAULT_EPHEMERAL_RANGE


def test_ports_below_and_above_the_ephemeral_range_are_both_used() -> None:
    outside = ports.outside_ephemeral(32768, 60999)
    assert outside[0] == ports.LOWEST_PORT and outside[-1] == ports.HIGHEST_PORT
    assert 32768 not in outside and 60999 not in outside
    assert 32767 in outside and 61000 in outside
    assert ports.outside_ephemeral(1024, 65535) == []  # nothing outside: port 0 is used
