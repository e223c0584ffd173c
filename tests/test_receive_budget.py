"""The OTLP/HTTP receiver's budget of request bytes in flight: the object, then the service.

The service tests hold requests open on raw sockets (headers and part of a body sent, the
rest never), so their reservations are held for as long as the test likes, then show what
the receiver answers meanwhile, and after.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import re
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2

from processor.config.receivers import DEFAULT_HTTP_MAX_INFLIGHT_BYTES
from processor.errors import ConfigError
from processor.receive import http as http_receiver
from processor.receive.budget import UNLIMITED, Budget
from processor.receive.http import BUDGET, BUSY_RETRY_AFTER_S, JSON_DECODE_WEIGHT
from tests.otlp_builders import (
    JSON,
    PROTOBUF,
    RECEIVER_REQUESTS,
    padded_request,
    plain_request,
    span_names,
    to_otlp_json,
)
from tests.support import (
    LOOPBACK,
    CaptureCollector,
    ServiceThread,
    make_config,
    start_serve,
    terminate,
    wait_until,
)

TIMEOUT_S = 20.0
MIB = 1024 * 1024

# --- the budget itself ----------------------------------------------------------------------


def test_reservations_add_up_and_are_given_back() -> None:
    budget = Budget(100)
    first = budget.try_reserve(60)
    second = budget.try_reserve(40)
    assert first is not None and second is not None
    assert (budget.used_bytes, budget.holders) == (100, 2)
    first.release()
    assert (budget.used_bytes, budget.holders) == (40, 1)
    second.release()
    assert (budget.used_bytes, budget.holders) == (0, 0)


def test_a_reservation_over_the_budget_is_refused_and_changes_nothing() -> None:
    budget = Budget(100)
    held = budget.try_reserve(70)
    assert held is not None
    assert budget.try_reserve(31) is None
    assert (budget.used_bytes, budget.holders, budget.refused) == (70, 1, 1)
    assert budget.try_reserve(30) is not None  # what fits still does


def test_an_empty_budget_takes_a_request_bigger_than_itself() -> None:
    budget = Budget(100)
    big = budget.try_reserve(250)  # a legal max-size body must not be refused for ever
    assert big is not None
    assert budget.try_reserve(1) is None  # but nothing else meanwhile
    big.release()
    assert budget.used_bytes == 0
    assert budget.try_reserve(250) is not None


def test_empty_reservations_do_not_keep_a_big_one_out() -> None:
    budget = Budget(100)
    empty = budget.try_reserve(0)  # a request with no body
    assert empty is not None
    big = budget.try_reserve(250)
    assert big is not None
    assert big.room_bytes == UNLIMITED


def test_release_counts_once() -> None:
    budget = Budget(100)
    held = budget.try_reserve(10)
    other = budget.try_reserve(20)
    assert held is not None and other is not None
    held.release()
    held.release()
    assert (budget.used_bytes, budget.holders) == (20, 1)


def test_a_reservation_grows_within_the_room_and_shrinks_freely() -> None:
    budget = Budget(100)
    held = budget.try_reserve(10)
    other = budget.try_reserve(50)
    assert held is not None and other is not None
    assert held.room_bytes == 40
    assert not held.resize(51)  # 41 more: over
    assert (held.size_bytes, budget.used_bytes) == (10, 60)
    assert held.resize(50)
    assert (held.size_bytes, budget.used_bytes, held.room_bytes) == (50, 100, 0)
    assert held.resize(5)
    assert budget.used_bytes == 55
    other.release()
    assert held.room_bytes == UNLIMITED  # alone in flight: only the body limit holds it
    assert held.resize(1000)
    held.release()
    assert held.room_bytes == 0
    assert (budget.used_bytes, budget.holders) == (0, 0)


def test_nonsense_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        Budget(0)
    budget = Budget(10)
    with pytest.raises(ValueError, match="negative"):
        budget.try_reserve(-1)
    held = budget.try_reserve(1)
    assert held is not None
    with pytest.raises(ValueError, match="negative"):
        held.resize(-1)
    held.release()
    with pytest.raises(RuntimeError, match="released"):
        held.resize(1)


# --- the service ----------------------------------------------------------------------------

BODY_LIMIT = 4 * MIB
HELD_BYTES = MIB  # what each held request declares as its Content-Length
BUDGET_BYTES = 2 * HELD_BYTES + HELD_BYTES // 2  # two held requests leave half of one


class Started:
    def __init__(self, service: ServiceThread, budget: Budget) -> None:
        self.service = service
        self.budget = budget

    @property
    def url(self) -> str:
        return self.service.http_url

    def refused(self) -> float:
        return self.service.metric(RECEIVER_REQUESTS, transport="http", outcome="refused")


@pytest.fixture
def start_service(
    next_hop: CaptureCollector, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Started]]:
    """The real service; its OTLP/HTTP app's budget is kept for the test to watch."""
    apps: list[Any] = []
    services: list[ServiceThread] = []
    make_app = http_receiver.make_app

    def start(budget_bytes: int = BUDGET_BYTES) -> Started:
        config = make_config(
            f"forward.endpoint={next_hop.endpoint}",
            f"receivers.http.max_body_bytes={BODY_LIMIT}",
            f"receivers.http.max_inflight_bytes={budget_bytes}",
        )

        def keeping(*args: Any, **kwargs: Any) -> Any:
            app = make_app(*args, **kwargs)
            apps.append(app)
            return app

        monkeypatch.setattr(http_receiver, "make_app", keeping)
        service = ServiceThread(config)
        services.append(service)
        return Started(service, apps[-1][BUDGET])

    yield start
    for service in services:
        service.stop()


def post(
    url: str, body: bytes, content_type: str = PROTOBUF, encoding: str | None = None
) -> requests.Response:
    headers = {"Content-Type": content_type}
    if encoding is not None:
        headers["Content-Encoding"] = encoding
    return requests.post(url, data=body, headers=headers, timeout=TIMEOUT_S)


def exactly(size: int) -> bytes:
    """A valid request of exactly ``size`` bytes."""
    overhead = len(padded_request(size)) - size
    payload = padded_request(size - overhead)
    assert len(payload) == size
    return payload


def hold(url: str, declared: int, sent: bytes = b"\0" * 1024) -> socket.socket:
    """A request whose headers and first bytes are sent, and whose body never ends."""
    port = int(url.split(":")[2].split("/")[0])
    sock = socket.create_connection((LOOPBACK, port), timeout=TIMEOUT_S)
    head = (
        "POST /v1/traces HTTP/1.1\r\n"
        f"Host: {LOOPBACK}:{port}\r\n"
        f"Content-Type: {PROTOBUF}\r\n"
        f"Content-Length: {declared}\r\n\r\n"
    )
    sock.sendall(head.encode() + sent)
    return sock


def finish(sock: socket.socket, rest: bytes) -> int:
    """Send the rest of a held body; the answer's status code."""
    sock.sendall(rest)
    answer = b""
    while b"\r\n" not in answer:
        chunk = sock.recv(4096)
        assert chunk, "the service closed the connection without an answer"
        answer += chunk
    return int(answer.split(b" ", 2)[1])


def assert_busy(response: requests.Response, reply_type: str = PROTOBUF) -> None:
    assert response.status_code == 503
    assert response.headers["Retry-After"] == str(BUSY_RETRY_AFTER_S)
    if reply_type == JSON:
        status = json_format.Parse(response.content, status_pb2.Status())
    else:
        status = status_pb2.Status.FromString(response.content)
    assert status.code == code_pb2.UNAVAILABLE
    assert "receivers.http.max_inflight_bytes" in status.message


def test_held_bodies_take_the_budget_and_later_requests_are_told_to_retry(
    start_service: Callable[..., Started], next_hop: CaptureCollector
) -> None:
    started = start_service()
    budget = started.budget
    body = exactly(HELD_BYTES)  # valid, so that a held one can also be finished
    held = [hold(started.url, HELD_BYTES, body[:1024]) for _ in range(2)]
    try:
        wait_until(lambda: budget.holders == 2, TIMEOUT_S, "both held requests reserved")
        assert budget.used_bytes == 2 * HELD_BYTES

        # As big as a held one: over what is left, refused before its body is read.
        assert_busy(post(started.url, body))
        # Small enough for what is left: taken and delivered.
        small = post(started.url, plain_request(100, 3).SerializeToString())
        assert small.status_code == 200
        wait_until(lambda: next_hop.span_count() >= 3, TIMEOUT_S, "the small request")
        # OTLP/JSON counts its decoding: 100 KiB of JSON is 800 KiB, more than is left.
        document = json.dumps(to_otlp_json(plain_request(200, 1000))).encode()
        assert len(document) * JSON_DECODE_WEIGHT > BUDGET_BYTES - budget.used_bytes
        assert len(document) < BUDGET_BYTES - budget.used_bytes
        assert_busy(post(started.url, document, JSON), JSON)
        # A gzip body reserves what it inflates to: 1 MiB from a few KiB is over what is left.
        bomb = gzip.compress(body)
        assert len(bomb) < 64 * 1024
        assert_busy(post(started.url, bomb, encoding="gzip"))
        assert started.refused() == 3
        assert budget.holders == 2  # the refused ones gave back what they held

        # One held request completes, the other goes away: the budget is free again.
        assert finish(held[0], body[1024:]) == 200
        held[1].close()
        wait_until(lambda: budget.holders == 0, TIMEOUT_S, "the held requests given back")
        assert budget.used_bytes == 0
    finally:
        for sock in held:
            sock.close()

    before = next_hop.span_count()
    assert post(started.url, body).status_code == 200
    assert post(started.url, document, JSON).status_code == 200
    assert post(started.url, bomb, encoding="gzip").status_code == 200
    wait_until(lambda: next_hop.span_count() >= before + 1002, TIMEOUT_S, "the retried requests")
    assert "step 1199" in span_names(list(next_hop.requests))
    assert started.refused() == 3


def test_a_request_bigger_than_the_budget_is_taken_when_nothing_else_is_in_flight(
    start_service: Callable[..., Started], next_hop: CaptureCollector
) -> None:
    started = start_service(budget_bytes=MIB)
    body = padded_request(3 * MIB)  # three budgets, under the body limit
    for payload, content_type, encoding in (
        (body, PROTOBUF, None),
        (gzip.compress(body), PROTOBUF, "gzip"),
        (json.dumps(to_otlp_json(plain_request(0, 2000))).encode(), JSON, None),
    ):
        response = post(started.url, payload, content_type, encoding)
        assert response.status_code == 200, response.content[:200]
    assert started.budget.used_bytes == 0
    assert started.refused() == 0
    wait_until(lambda: next_hop.span_count() >= 2002, TIMEOUT_S, "every request")


def test_a_chunked_body_reserves_the_body_limit(
    start_service: Callable[..., Started], next_hop: CaptureCollector
) -> None:
    started = start_service(budget_bytes=BODY_LIMIT)
    sock = hold(started.url, HELD_BYTES)  # held: 1 MiB of the 4
    try:
        wait_until(lambda: started.budget.holders == 1, TIMEOUT_S, "the held request")

        def chunks() -> Iterator[bytes]:
            yield plain_request(0, 2).SerializeToString()

        # No Content-Length: the body limit (4 MiB) is reserved, more than the 3 MiB left,
        # although the body is a few bytes.
        assert started.budget.cap_bytes - started.budget.used_bytes < BODY_LIMIT
        chunked = requests.post(
            started.url, data=chunks(), headers={"Content-Type": PROTOBUF}, timeout=TIMEOUT_S
        )
        assert chunked.request.headers.get("Transfer-Encoding") == "chunked"
        assert_busy(chunked)
    finally:
        sock.close()
    wait_until(lambda: started.budget.holders == 0, TIMEOUT_S, "the held request given back")
    chunked = requests.post(
        started.url,
        data=iter([plain_request(0, 2).SerializeToString()]),
        headers={"Content-Type": PROTOBUF},
        timeout=TIMEOUT_S,
    )
    assert chunked.status_code == 200
    wait_until(lambda: next_hop.span_count() >= 2, TIMEOUT_S, "the chunked request")


def test_the_config_key_has_a_default_and_is_checked() -> None:
    assert make_config().receivers.http.max_inflight_bytes == DEFAULT_HTTP_MAX_INFLIGHT_BYTES
    assert 3 * make_config().receivers.http.max_body_bytes <= DEFAULT_HTTP_MAX_INFLIGHT_BYTES
    with pytest.raises(ConfigError, match=r"receivers\.http\.max_inflight_bytes: .*got 0"):
        make_config("receivers.http.max_inflight_bytes=0")


def test_the_service_takes_its_budget_from_the_config(
    next_hop: CaptureCollector, monkeypatch: pytest.MonkeyPatch
) -> None:
    apps: list[Any] = []
    make_app = http_receiver.make_app

    def keeping(*args: Any, **kwargs: Any) -> Any:
        apps.append(make_app(*args, **kwargs))
        return apps[-1]

    monkeypatch.setattr(http_receiver, "make_app", keeping)
    service = ServiceThread(
        make_config(
            f"forward.endpoint={next_hop.endpoint}", "receivers.http.max_inflight_bytes=12345"
        )
    )
    try:
        assert apps[0][BUDGET].cap_bytes == 12345
    finally:
        service.stop()


# --- the field test's attack, against mcp-breaker serve -----------------------------------


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _scraped(telemetry_port: int, sample: str) -> float:
    url = f"http://{LOOPBACK}:{telemetry_port}/metrics"
    text = urllib.request.urlopen(url, timeout=TIMEOUT_S).read().decode()
    found = re.search(rf"^{re.escape(sample)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_forty_held_max_size_bodies_stay_within_the_budget() -> None:
    """The field test: 40 connections each sent a 19 MiB body but its last byte, and the
    process grew from 80 to 847 MB. Now three are read; the rest are told to retry."""
    connections, size = 40, 19 * MIB
    held = DEFAULT_HTTP_MAX_INFLIGHT_BYTES // size  # 3 at the defaults
    refused_sample = 'mcp_breaker_receiver_requests_total{outcome="refused",transport="http"}'
    process, ports = start_serve()
    sockets: list[socket.socket] = []
    try:
        before = _rss_bytes(process.pid)
        head = (
            f"POST /v1/traces HTTP/1.1\r\nHost: {LOOPBACK}\r\nContent-Type: {PROTOBUF}\r\n"
            f"Content-Length: {size}\r\n\r\n"
        ).encode()
        body = b"\n" * (size - 1)

        def send() -> None:
            sock = socket.create_connection((LOOPBACK, ports["http"]), timeout=TIMEOUT_S * 3)
            sockets.append(sock)
            with contextlib.suppress(OSError):  # a refused one may be closed after its answer
                sock.sendall(head)
                sock.sendall(body)

        senders = [threading.Thread(target=send) for _ in range(connections)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join()
        wait_until(
            lambda: _scraped(ports["telemetry"], refused_sample) >= connections - held,
            TIMEOUT_S * 3,
            "the requests over the budget refused",
        )
        grown = _rss_bytes(process.pid) - before
        unbounded = connections * size
        print(
            f"{connections} held {size // MIB} MiB bodies: RSS grew by {grown / 2**20:.0f} MB "
            f"(unbounded they would hold {unbounded / 2**20:.0f} MiB; {held} held, "
            f"{connections - held} refused)"
        )
        assert _scraped(ports["telemetry"], refused_sample) == connections - held
        assert grown < math.ceil(unbounded / 2)  # a wide bound: 862 MB before the budget
    finally:
        for sock in sockets:
            sock.close()
        terminate(process)
