"""Who sent the spans the next hop refused, and what the log says about them.

``RejectionLog`` on a fake clock; the sender's name read from encoded requests, bad ones
included (a name that is not UTF-8 is still a name).
"""

from __future__ import annotations

import logging

import pytest

from processor.forward.rejections import (
    MAX_NAME_CHARS,
    Culprit,
    RejectionLog,
    culprit,
    peer_address,
    service_names,
)
from processor.request.sender import Sender
from tests.poison import invalid_utf8_request, sender_request, too_deep_request
from tests.test_forward_outage import Clock, lines

TARGET = "collector:4317"


@pytest.mark.parametrize(
    ("peer", "address"),
    [
        ("ipv4:10.1.2.3:51234", "10.1.2.3"),
        ("ipv6:[::1]:4000", "::1"),
        ("ipv6:%5B::1%5D:4000", "%5B::1%5D"),  # as gRPC may escape it: left as it is
        ("10.1.2.3", "10.1.2.3"),  # aiohttp's remote address
        ("unix:/run/socket", "unix:/run/socket"),
        ("", ""),
    ],
)
def test_the_peer_is_named_without_its_port(peer: str, address: str) -> None:
    assert peer_address(peer) == address


def test_service_names_are_read_from_bad_requests_too() -> None:
    assert service_names(sender_request("checkout", 0, 3)) == "checkout"
    assert service_names(invalid_utf8_request("poison", 7)) == "poison"
    assert service_names(too_deep_request("deep-svc", 7)) == "deep-svc"
    two = sender_request("a", 0, 1) + sender_request("b", 1, 1) + sender_request("a", 2, 1)
    assert service_names(two) == "a,b"
    assert service_names(b"\xff\xff not protobuf") == ""


def test_a_service_name_that_is_not_text_is_made_printable_and_cut() -> None:
    payload = sender_request("X" * 500, 0, 1).replace(b"X" * 500, b"\xff\x07" + b"n" * 498)
    name = service_names(payload)
    assert name.startswith("\ufffd?n") and len(name) == MAX_NAME_CHARS


def test_culprit_names_service_peer_and_tenant() -> None:
    who = culprit(Sender(peer="ipv4:192.0.2.1:999", tenant="team-a"), sender_request("s", 0, 1))
    assert who == Culprit("s", "192.0.2.1", "team-a")
    assert who.describe() == "service.name s from 192.0.2.1, tenant team-a"


def test_each_sender_is_named_once_then_summarised(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    log = RejectionLog(TARGET, clock=clock, summary_interval_s=60)
    poison, other = Culprit("poison", "192.0.2.7", ""), Culprit("other", "192.0.2.8", "")
    with caplog.at_level(logging.INFO):
        log.refused(poison, 1, "INVALID_ARGUMENT: bad", whole=False)
        for _ in range(50):
            clock.now += 1
            log.refused(poison, 2, "INVALID_ARGUMENT: bad", whole=False)
        log.refused(other, 5, "INTERNAL: bad", whole=True)
        clock.now += 10  # past the interval: the next refusal brings the summary
        log.refused(poison, 1, "INVALID_ARGUMENT: bad", whole=False)
        log.close()  # nothing new since: no line
    said = lines(caplog)
    assert said == [
        (
            "ERROR",
            "next hop collector:4317 refused 1 span(s) for good, sent by service.name poison "
            "from 192.0.2.7: INVALID_ARGUMENT: bad; given up (counted in "
            "mcp_breaker_exporter_rejected_spans_total)",
        ),
        (
            "ERROR",
            "next hop collector:4317 refused 5 span(s) for good, sent by service.name other "
            "from 192.0.2.8: INTERNAL: bad; given up (counted in "
            "mcp_breaker_exporter_rejected_spans_total); the export could not be split "
            "further within its budget",
        ),
        (
            "ERROR",
            "next hop collector:4317 refused 101 more span(s) in 51 request(s) for good since "
            "the last line: service.name poison from 192.0.2.7: 101",
        ),
    ]
