"""The frame scanner reads HTTP/2 by its frame headers, split anywhere; the reset budget."""

from __future__ import annotations

import h2.config
import h2.connection
import h2.events
import pytest

from processor.receive.h2frames import (
    ENHANCE_YOUR_CALM,
    FrameScanner,
    Reading,
    ResetBudget,
    goaway_frame,
)

HEADERS = [(":method", "POST"), (":scheme", "http"), (":path", "/x"), (":authority", "a")]


def client_bytes(pairs: int, body: bytes = b"") -> bytes:
    """What the h2 library writes for ``pairs`` streams opened (with a body) then reset."""
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    for _ in range(pairs):
        stream = connection.get_next_available_stream_id()
        connection.send_headers(stream, HEADERS)
        if body:
            connection.send_data(stream, body)
        connection.reset_stream(stream)
    return connection.data_to_send()


@pytest.mark.parametrize("chunk", [1, 7, 9, 10, 4096])
def test_resets_are_counted_however_the_bytes_are_split(chunk: int) -> None:
    data = client_bytes(50, body=b"x" * 300)
    scanner = FrameScanner(expect_preface=True)
    seen = sum(scanner.feed(data[at : at + chunk]) for at in range(0, len(data), chunk))
    assert seen == scanner.resets == 50
    assert scanner.at_boundary


def test_a_tls_hello_is_passed_through_unread() -> None:
    scanner = FrameScanner(expect_preface=True)
    hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(256))
    assert scanner.feed(hello) == 0
    assert scanner.reading is Reading.OPAQUE
    assert scanner.feed(client_bytes(3)[24:]) == 0  # later frames are not read either
    assert not scanner.at_boundary


def test_to_boundary_walks_a_split_frame_to_its_end() -> None:
    data = client_bytes(1, body=b"y" * 1000)[24:]  # frames only, as a server would see
    scanner = FrameScanner(expect_preface=False)
    scanner.feed(data[:13])  # a frame header and a few bytes of the next
    at = 13
    while not scanner.at_boundary:
        step = scanner.to_boundary()
        scanner.feed(data[at : at + step])
        at += step
    assert scanner.at_boundary and at <= len(data)


def test_the_budget_allows_a_burst_then_a_rate() -> None:
    budget = ResetBudget(burst=10, per_s=2, now=0.0)
    assert budget.spend(10, now=0.0)
    assert not budget.spend(1, now=0.0)
    budget = ResetBudget(burst=10, per_s=2, now=0.0)
    assert budget.spend(10, now=0.0)
    assert budget.spend(2, now=1.0)  # refilled at 2 a second
    assert not budget.spend(3, now=2.0)


def test_the_goaway_is_one_frame_a_client_reads_as_enhance_your_calm() -> None:
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    client.initiate_connection()
    client.data_to_send()
    server_settings = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    server_settings.initiate_connection()
    events = client.receive_data(server_settings.data_to_send() + goaway_frame(ENHANCE_YOUR_CALM))
    ended = [event for event in events if isinstance(event, h2.events.ConnectionTerminated)]
    assert len(ended) == 1 and ended[0].error_code == ENHANCE_YOUR_CALM
