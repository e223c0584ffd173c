"""The Redis side of shared state against a real ``redis-server``: what a replica reads
back from the stream is what was appended, in order, whichever protocol the URL asks for.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from processor.state.store import (
    ENTRY_BYTES,
    MAX_AT_S,
    MAX_EPOCH_CHARS,
    MAX_EVENTS_PER_ENTRY,
    Entry,
    RedisStore,
)
from tests.redis_server import RedisServer

PREFIX = "test"


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


def read_all(url: str, after: str = "0-0", count: int = 500, block_ms: int = 0) -> list[Entry]:
    async def read() -> list[Entry]:
        store = RedisStore(aioredis.from_url(url), PREFIX)
        try:
            return await store.read(after, count, block_ms)
        finally:
            await store.close()

    return asyncio.run(read())


def append(url: str, origin: str, events: list[tuple[int, bytes]]) -> list[tuple[str, int]]:
    async def add() -> list[tuple[str, int]]:
        store = RedisStore(aioredis.from_url(url), PREFIX)
        try:
            return await store.append(origin, events)
        finally:
            await store.close()

    return asyncio.run(add())


@pytest.mark.parametrize("protocol", [2, 3])
def test_entries_come_back_as_appended_in_order_over_either_protocol(
    redis: RedisServer, protocol: int
) -> None:
    first = append(redis.url, "replica-a", [(1, b'["c",1]'), (2, b"\x00\xffraw")])
    second = append(redis.url, "replica-b", [(7, b"{}")])

    entries = read_all(f"{redis.url}?protocol={protocol}")

    assert [(e.entry_id, e.position) for e in entries] == first + second
    assert [(e.origin, e.uid, e.payload) for e in entries] == [
        ("replica-a", 1, b'["c",1]'),
        ("replica-a", 2, b"\x00\xffraw"),
        ("replica-b", 7, b"{}"),
    ]
    assert [e.position for e in entries] == [1, 2, 3]
    # The stream's clock: the id's milliseconds.
    assert all(e.at_s == int(e.entry_id.split("-")[0]) / 1000 for e in entries)
    # One append's run of uids is one entry: after it, only what follows it; a count
    # bounds the read in entries.
    assert entries[0].entry_id == entries[1].entry_id != entries[2].entry_id
    assert read_all(redis.url, after=entries[0].entry_id) == entries[2:]
    assert read_all(redis.url, count=1) == entries[:2]


def test_a_run_of_events_is_cut_into_entries_at_a_gap_in_uids_and_at_the_bounds(
    redis: RedisServer,
) -> None:
    run = [(uid, b'["c",%d]' % uid) for uid in range(1, MAX_EVENTS_PER_ENTRY + 2)]
    gap = [(500, b"x"), (501, b"y"), (503, b"z")]
    large = [(600, b"a" * ENTRY_BYTES), (601, b"b"), (602, b"c")]
    placed = append(redis.url, "replica-a", run + gap + large)

    entries = read_all(redis.url)
    assert [(e.entry_id, e.position) for e in entries] == placed
    assert [(e.uid, e.payload) for e in entries] == run + gap + large
    assert [e.position for e in entries] == list(range(1, len(entries) + 1))
    # Full at MAX_EVENTS_PER_ENTRY; cut where a uid is missing; closed once ENTRY_BYTES in.
    sizes = [len(list(group)) for _, group in itertools.groupby(e.entry_id for e in entries)]
    assert sizes == [MAX_EVENTS_PER_ENTRY, 1, 2, 1, 1, 2]


def test_a_payload_with_a_newline_is_refused_before_anything_is_appended(
    redis: RedisServer,
) -> None:
    with pytest.raises(ValueError, match="newline"):
        append(redis.url, "replica-a", [(1, b"fine"), (2, b"two\nlines")])
    assert read_all(redis.url) == []


def test_a_run_longer_than_any_replica_writes_is_one_unreadable_entry(redis: RedisServer) -> None:
    async def add_by_hand() -> None:
        client = aioredis.from_url(redis.url)
        payload = b"\n".join([b"x"] * (MAX_EVENTS_PER_ENTRY + 1))
        await client.xadd(f"{PREFIX}:events", {"n": "1", "o": "elsewhere", "u": "1", "e": payload})
        await client.aclose()

    asyncio.run(add_by_hand())
    append(redis.url, "replica-a", [(2, b"after")])
    foreign, after = read_all(redis.url)
    assert foreign.payload is None and foreign.position == 0
    assert after.payload == b"after"


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_wait_that_runs_out_reads_nothing(redis: RedisServer, protocol: int) -> None:
    assert read_all(f"{redis.url}?protocol={protocol}", block_ms=50) == []
    append(redis.url, "replica-a", [(1, b"x")])
    last = read_all(redis.url)[-1].entry_id
    assert read_all(f"{redis.url}?protocol={protocol}", after=last, block_ms=50) == []


def test_an_entry_with_its_fields_in_another_order_is_read_by_name(redis: RedisServer) -> None:
    async def add_by_hand() -> None:
        client = aioredis.from_url(redis.url)
        fields = {"e": b"payload", "u": "9", "o": "elsewhere", "n": "4"}
        await client.xadd(f"{PREFIX}:events", fields)  # type: ignore[arg-type]
        await client.aclose()

    asyncio.run(add_by_hand())

    (entry,) = read_all(redis.url)
    assert (entry.position, entry.origin, entry.uid, entry.payload) == (
        4,
        "elsewhere",
        9,
        b"payload",
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"n": "1", "o": "elsewhere", "u": "2"},  # no payload
        {"n": "one", "o": "elsewhere", "u": "2", "e": b"x"},  # not a number
        {"n": "1", "o": b"\xff\xfe", "u": "2", "e": b"x"},  # an origin that is not UTF-8
        {"anything": "else"},
        # Numbers no counter of ours reaches: a position numbers advisory changes in the
        # wire's uint64 (position << 20), so one of 10^30 would fail every Subscribe.
        {"n": "1" + "0" * 30, "o": "elsewhere", "u": "2", "e": b"x"},
        {"n": "0", "o": "elsewhere", "u": "2", "e": b"x"},
        {"n": "-3", "o": "elsewhere", "u": "2", "e": b"x"},
        {"n": "1", "o": "elsewhere", "u": "9" * 5000, "e": b"x"},
        {"n": "1", "o": "elsewhere", "u": "-1", "e": b"x"},
        {"n": "1", "o": "o" * 100_000, "u": "2", "e": b"x"},
    ],
    ids=[
        *("field-missing", "not-a-number", "origin-not-utf8", "foreign", "position-huge"),
        *("position-zero", "position-negative", "uid-huge", "uid-negative", "origin-huge"),
    ],
)
def test_an_entry_no_replica_wrote_is_read_as_unreadable_and_the_rest_still_read(
    redis: RedisServer, fields: dict[str, str | bytes]
) -> None:
    append(redis.url, "replica-a", [(1, b"before")])

    async def add_by_hand() -> None:
        client = aioredis.from_url(redis.url)
        await client.xadd(f"{PREFIX}:events", fields)  # type: ignore[arg-type]
        await client.aclose()

    asyncio.run(add_by_hand())
    append(redis.url, "replica-a", [(2, b"after")])

    before, foreign, after = read_all(redis.url)
    assert (before.payload, after.payload) == (b"before", b"after")
    assert foreign.payload is None
    # Its id still moves a reader past it.
    assert read_all(redis.url, after=foreign.entry_id) == [after]


def test_an_entry_whose_id_another_writer_set_past_any_clock_is_unreadable(
    redis: RedisServer,
) -> None:
    """The id's milliseconds are the stream's clock, which expiry runs at: one no deadline
    of the wire could follow is not read as an event."""
    append(redis.url, "replica-a", [(1, b"before")])

    async def add_by_hand() -> None:
        client = aioredis.from_url(redis.url)
        fields = {"n": "2", "o": "elsewhere", "u": "3", "e": b"x"}
        await client.xadd(f"{PREFIX}:events", fields, id="9999999999999999-0")  # type: ignore[arg-type]
        await client.aclose()

    asyncio.run(add_by_hand())
    before, far = read_all(redis.url)
    assert before.payload == b"before"
    assert far.payload is None
    assert far.at_s > MAX_AT_S


def test_an_epoch_another_writer_set_is_read_short_and_readable(redis: RedisServer) -> None:
    """The epoch goes into every advisory message: bytes that are not UTF-8, or a megabyte
    of them, must not fail (or bloat) them; every replica reads it the same."""

    async def epoch_after(value: bytes) -> str:
        client = aioredis.from_url(redis.url)
        await client.set(f"{PREFIX}:epoch", value)
        store = RedisStore(client, PREFIX)
        try:
            return await store.epoch()
        finally:
            await store.close()

    assert asyncio.run(epoch_after(b"0123456789abcdef")) == "0123456789abcdef"
    odd = asyncio.run(epoch_after(b"\xff\xfe" + b"e" * 1_000_000))
    assert odd == ("\ufffd\ufffd" + "e" * MAX_EPOCH_CHARS)[:MAX_EPOCH_CHARS]
    assert odd.encode("utf-8").decode("utf-8") == odd
