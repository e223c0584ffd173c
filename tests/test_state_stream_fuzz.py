"""No entry on the shared stream breaks the advisory API: a fuzz against real replicas.

Entries are written to a real ``redis-server`` as another replica writes them (the store's
own append script, or XADD by hand for the stream's fields), each an event a replica
encodes with one field or the whole payload replaced by hypothesis: times of 10^30,
Infinity and NaN, integers of thousands of digits, JSON 200,000 levels deep, strings of
megabytes, lone surrogates, wrong types; and operators' overrides in Redis likewise. After
each, a good event is written, and the replica must apply it (it still follows the stream,
shared, not "deciding alone"), answer GetState, Check and Subscribe, and count every entry
it refused. At the end a replica that starts on the poisoned stream and overrides replays
them into the same circuits, and ``mcp-breaker status`` reads both.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from mcp_breaker_client.shared.verdict import FailureClass, Outcome, Verdict

from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from processor.classify.events import Dialect, ToolCall, ToolListing
from processor.config.state import DEFAULT_KEY_PREFIX
from processor.engines.circuit import CircuitKey, Scope, State
from processor.errors import BadEvent
from processor.state.events import (
    _CALL_FIELDS,
    Force,
    Release,
    SharedEvent,
    Tick,
    decode,
    encode,
)
from processor.state.store import RedisStore
from processor.state.validate import MAX_PAYLOAD_BYTES
from tests.redis_server import RedisServer
from tests.replicas import ReplicaProcess
from tests.support import wait_until

pytestmark = pytest.mark.timeout(600)

SETTLE_S = 30.0  # a bound on waiting for a replica, never a measurement
INTRUDER = "fuzz-replica"  # the origin the entries are written under: not the replica's own
FORCED = "fuzz"  # the server of the circuits the good events force open
_numbers = itertools.count(1)


# -- what is written -----------------------------------------------------------------------
def base_events(now_s: float) -> list[SharedEvent]:
    """One event of each kind, as a replica would encode it at ``now_s``."""
    now_ns = int(now_s * 1e9)
    trace_id, span_ids = bytes(range(1, 17)), (bytes(range(1, 9)),)
    return [
        ToolCall(
            turn="fuzz-turn",
            round=1,
            server="fuzz-server",
            tool="fuzz-tool",
            fingerprint="0" * 32,
            verdict=Verdict(outcome=Outcome.FAILED, failure_class=FailureClass.TRANSPORT),
            start_ns=now_ns - 10**9,
            end_ns=now_ns,
            dialect=Dialect.HARNESS,
            trace_id=trace_id,
            span_ids=span_ids,
        ),
        ToolListing(
            turn="fuzz-turn",
            round=1,
            server="fuzz-server",
            configured=2,
            namespaces_connected=("a",),
            namespaces_connected_at_s=(("a", now_s),),
            tool_snapshot_at_s=now_s,
            start_ns=now_ns,
            end_ns=now_ns,
            dialect=Dialect.HARNESS,
            trace_id=trace_id,
            span_ids=span_ids,
        ),
        Force(
            key=CircuitKey(Scope.SERVER, "fuzz-server"),
            target=State.FORCED_CLOSED,
            until_s=now_s + 60,
            reason="fuzz",
            at_s=now_s,
        ),
        Release(key=CircuitKey(Scope.SERVER, "fuzz-server"), reason="fuzz", at_s=now_s),
        Tick(),
    ]


def call_with_times(raw: bytes) -> Poison:
    """A replica's call with its start and end written as ``raw`` JSON text."""
    items = json.loads(encode(base_events(time.time())[0]))
    start = 1 + _CALL_FIELDS.index("start")
    items[start] = items[start + 1] = "@slot@"
    return Poison("stream", json.dumps(items).replace('"@slot@"', raw.decode()).encode())


def field_names(document: object) -> list[str | int]:
    """Where a field of this encoded event can be replaced: array positions, object keys."""
    if isinstance(document, list):
        return list(range(1, len(document)))
    assert isinstance(document, dict)
    return [key for key in document if key != "k"]


# Values as raw JSON text: json.dumps cannot write 1e400, a lone surrogate, or 200k levels.
VALUES = st.one_of(
    st.sampled_from([str(10**30), "9" * 5000, str(2**63), str(-(2**63) - 1), str(2**64)]),
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(["Infinity", "-Infinity", "NaN", "1e400", "-1e400", "1e308", "-0.0"]),
    st.floats(allow_nan=True, allow_infinity=True).map(json.dumps),
    st.sampled_from(["null", "true", "false", "[]", "{}", '"x"', "[1, 2]", '{"a": 1}']),
    st.sampled_from([r'"\ud800"', r'"\udfff x"', '"' + "0" * 32 + '"']),
    st.text(max_size=40).map(json.dumps),
    st.integers(300, 3_000_000).map(lambda n: json.dumps("s" * n)),
    st.integers(2, 200_000).map(lambda depth: "[" * depth + "]" * depth),
)


@dataclass(frozen=True)
class Poison:
    where: str  # "stream" (an entry), "fields" (the stream's own fields), "override"
    payload: bytes
    fields: tuple[tuple[str, str], ...] = ()


@st.composite
def poisons(draw: st.DrawFn) -> Poison:
    now_s = time.time()
    how = draw(st.sampled_from(["field", "field", "field", "field", "whole", "fields"]))
    where = draw(st.sampled_from(["stream", "stream", "stream", "override"]))
    if how == "fields":  # n, u, o as another writer might set them; the payload is fine
        name = draw(st.sampled_from(["n", "u", "o"]))
        numbers = st.sampled_from([str(10**30), "-1", "0", "x", "9" * 5000, " "])
        value = draw(st.just("o" * 100_000) if name == "o" else numbers)
        return Poison("fields", encode(Tick()), ((name, value),))
    if how == "whole":
        payload = draw(
            st.one_of(
                st.binary(max_size=64),
                VALUES.map(str.encode),
                st.just(b"[" * 200_000),
                st.just(b'{"k":' * 100_000),
                st.just(b'["call","' + b"x" * (MAX_PAYLOAD_BYTES + 1) + b'"]'),
            )
        )
        return Poison(where, payload)
    event = draw(st.sampled_from(base_events(now_s)))
    document = json.loads(encode(event))
    names = field_names(document)
    where_in = draw(st.sampled_from(names)) if names else "until"  # a tick: give it a field
    document[where_in] = "@slot@"
    raw = draw(VALUES)
    return Poison(where, json.dumps(document).replace('"@slot@"', raw, 1).encode())


# -- writing it, as another replica would --------------------------------------------------
class Writer:
    def __init__(self, url: str) -> None:
        self.url = url
        self.uids = itertools.count(1)

    def _run(self, work: object) -> object:
        async def go() -> object:
            client = aioredis.from_url(self.url)
            store = RedisStore(client, DEFAULT_KEY_PREFIX)
            try:
                return await work(store, client)  # type: ignore[operator]
            finally:
                await store.close()

        return asyncio.run(go())

    def append(self, payload: bytes) -> float:
        """Through the store's own script, as every replica appends; the entry's time."""

        async def work(store: RedisStore, client: aioredis.Redis) -> float:
            ((entry_id, _),) = await store.append(INTRUDER, [(next(self.uids), payload)])
            return int(entry_id.split("-")[0]) / 1000

        return float(self._run(work))  # type: ignore[arg-type]

    def append_fields(self, fields: dict[str, str | bytes]) -> None:
        async def work(store: RedisStore, client: aioredis.Redis) -> None:
            counter = f"{DEFAULT_KEY_PREFIX}:events:n"
            record = {"n": str(await client.incr(counter)), "o": INTRUDER, "u": "1", **fields}
            await client.xadd(store.stream, record)  # type: ignore[arg-type]

        self._run(work)

    def override(self, name: str, payload: bytes) -> None:
        async def work(store: RedisStore, client: aioredis.Redis) -> None:
            await store.set_override(name, payload)

        self._run(work)


@dataclass
class Ledger:
    """What the replicas must have refused: entries as they follow, overrides at a start."""

    entries: int = 0
    overrides: int = 0
    forced: list[str] = field(default_factory=list)  # the good events' circuits, in order


def refused(payload: bytes, at_s: float | None) -> bool:
    try:
        decode(payload, at_s=at_s)
    except BadEvent:
        return True
    return False


# -- the replica, as harnesses and an SRE use it ------------------------------------------
def forced_ids(replica: ReplicaProcess) -> set[str]:
    return {a.id for a in replica.state().advisories if a.state == pb.STATE_FORCED_OPEN}


def subscribe_snapshot(replica: ReplicaProcess) -> pb.SubscribeResponse:
    with grpc.insecure_channel(replica.advisories) as channel:
        stub = pb_grpc.AdvisoriesStub(channel)  # type: ignore[no-untyped-call]
        stream = stub.Subscribe(pb.SubscribeRequest(subscriber_name="fuzz"), timeout=20)
        try:
            first: pb.SubscribeResponse = next(stream)
        finally:
            stream.cancel()
        return first


def status(replica: ReplicaProcess, output: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "processor", "status", "--target", replica.advisories]
    return subprocess.run(
        [*command, "--output", output], capture_output=True, text=True, timeout=60, check=False
    )


def serves(replica: ReplicaProcess, tool: str) -> None:
    """GetState, Check and Subscribe answer, and the replica is still sharing."""
    state = replica.state()
    assert state.shared_state.startswith("redis: up"), state.shared_state
    wanted = f"|tool|{FORCED}/{tool}"
    assert wanted in {a.id for a in state.advisories}
    denied = replica.check(server=FORCED, tool=tool, turn="any-turn")
    assert (denied.verdict, denied.advisory.id) == (pb.VERDICT_DENY, wanted)
    first = subscribe_snapshot(replica)
    assert first.WhichOneof("kind") == "snapshot"
    assert wanted in {a.id for a in first.snapshot.advisories}


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


def test_no_entry_on_the_stream_breaks_the_advisory_api_on_any_replica(
    redis: RedisServer, tmp_path: Path
) -> None:
    writer, ledger = Writer(redis.url), Ledger()
    follower = ReplicaProcess("follower", redis.url, tmp_path).start()
    late: ReplicaProcess | None = None
    try:

        def force_one_open() -> str:
            """A good event after the poison: the replica applies it if it still follows."""
            now = time.time()
            tool = f"tool-{next(_numbers)}"
            key = CircuitKey(Scope.TOOL, f"{FORCED}/{tool}")
            writer.append(
                encode(
                    Force(
                        key=key,
                        target=State.FORCED_OPEN,
                        until_s=now + 3600,
                        reason="fuzz",
                        at_s=now,
                    )
                )
            )
            ledger.forced.append(f"|tool|{FORCED}/{tool}")
            wanted = ledger.forced[-1]
            wait_until(
                lambda: wanted in forced_ids(follower),
                SETTLE_S,
                f"the follower to apply the event after the poison\n{follower.log_tail()}",
            )
            return tool

        @settings(
            max_examples=40,
            deadline=None,
            derandomize=True,
            database=None,
            # Not shrunk: each example leaves its entry on the stream, so a rerun of one
            # is not the same test; the first failure is reported as it was.
            phases=(Phase.explicit, Phase.generate),
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(poison=poisons())
        # The three entries of the issue: a start of 10^30, of Infinity, JSON 200k deep.
        @example(poison=call_with_times(str(10**30).encode()))
        @example(poison=call_with_times(b"Infinity"))
        @example(poison=Poison("stream", b"[" * 200_000 + b"]" * 200_000))
        def one_entry(poison: Poison) -> None:
            before = follower.metric("mcp_breaker_shared_events_unreadable_total")
            assert before == ledger.entries
            if poison.where == "fields":
                writer.append_fields({**dict(poison.fields), "e": poison.payload})
                ledger.entries += 1
            elif poison.where == "override":
                writer.override(f"fuzz|{next(_numbers)}", poison.payload)
                ledger.overrides += refused(poison.payload, time.time())
            else:
                at_s = writer.append(poison.payload)
                ledger.entries += refused(poison.payload, at_s)
            serves(follower, force_one_open())
            assert follower.metric("mcp_breaker_shared_events_unreadable_total") == ledger.entries

        one_entry()
        # The three, at least, were refused; and no entry was a reason to leave the
        # stream, not even for a moment (the replica would have said so, and resynced its
        # subscribers on an epoch of its own).
        assert ledger.entries >= 3
        assert "Redis unavailable" not in follower.log_path.read_text()

        # A replica that starts now replays the poisoned stream and reads the overrides.
        late = ReplicaProcess("late", redis.url, tmp_path).start()
        assert forced_ids(follower) >= set(ledger.forced)
        wait_until(
            lambda: forced_ids(late) == forced_ids(follower),
            SETTLE_S,
            f"the late replica to replay into the follower's circuits\n{late.log_tail()}",
        )
        unreadable = late.metric("mcp_breaker_shared_events_unreadable_total")
        assert unreadable == ledger.entries + ledger.overrides
        for replica in (follower, late):
            serves(replica, ledger.forced[0].rpartition("/")[2])
            table = status(replica, "table")
            assert table.returncode == 0, table.stderr
            first = ledger.forced[0].rpartition("/")[2]
            assert any(
                first in line and "FORCED OPEN" in line for line in table.stdout.splitlines()
            )
            assert "Shared state: redis: up" in table.stdout
            reply = status(replica, "json")
            assert reply.returncode == 0, reply.stderr
            assert json.loads(reply.stdout)["shared_state"].startswith("redis: up")
        # And the late one follows the stream too.
        tool = force_one_open()
        wait_until(lambda: ledger.forced[-1] in forced_ids(late), SETTLE_S, "late to follow")
        serves(late, tool)
    finally:
        follower.kill()
        if late is not None:
            late.kill()
