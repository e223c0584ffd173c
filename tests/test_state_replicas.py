"""Many replicas, one breaker: real service processes sharing a real ``redis-server``.

Spans are sent as a harness sends them (the OpenTelemetry SDK over OTLP/gRPC), with the
span times of now, to one replica; what the others make of it is read as a harness and an
SRE read it: the next hop's spans, ``Check``, ``GetState``, a subscriber's mirror,
``/metrics``. Replicas are killed (SIGKILL) and started again on the same ports, and
Redis is killed and started again too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
import redis as redis_client
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mcp_breaker_client import AdvisoryClient
from opentelemetry.sdk.trace import ReadableSpan

from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from processor.config.state import DEFAULT_KEY_PREFIX
from tests.redis_server import RedisServer
from tests.replicas import SERVER, TOOL, ReplicaProcess, circuits_of, tool_calls
from tests.sdk import export_grpc
from tests.support import CaptureCollector, wait_until
from tests.tcp_proxy import TcpProxy

SETTLE_S = 30.0  # a bound on waiting for the replicas to agree, never a measurement
SERVER_ID = f"|server|{SERVER}"

pytestmark = pytest.mark.timeout(300)


def open_the_server(
    replica: ReplicaProcess, prefix: str = "fail", start_ns: int | None = None
) -> None:
    """Three session failures in three turns: the server's (and the tool's) circuit opens
    (if no success of the server ended after the first of them began: span time decides)."""
    spans = tool_calls([f"{prefix}-{i}" for i in range(3)], start_ns=start_ns)
    assert export_grpc(replica.otlp, spans).name == "SUCCESS"


def server_state(replica: ReplicaProcess) -> int | None:
    for advisory in replica.state().advisories:
        if advisory.id == SERVER_ID:
            return int(advisory.state)
    return None


def agree(replicas: list[ReplicaProcess], what: str = "the replicas to agree") -> None:
    """Wait until every replica shows the same circuits (states and expiries)."""
    seen: list[object] = []

    def same() -> bool:
        views = [circuits_of(r.state()) for r in replicas]
        seen[:] = views
        return bool(views[0]) and all(v == views[0] for v in views)

    wait_until(same, SETTLE_S, f"{what}: {seen}")


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


@pytest.fixture
def next_hop() -> Iterator[CaptureCollector]:
    collector = CaptureCollector().start()
    yield collector
    collector.stop()


@pytest.fixture
def three(
    redis: RedisServer, next_hop: CaptureCollector, tmp_path: Path
) -> Iterator[list[ReplicaProcess]]:
    replicas = [
        ReplicaProcess(name, redis.url, tmp_path, f"forward.endpoint={next_hop.endpoint}")
        for name in ("r1", "r2", "r3")
    ]
    for replica in replicas:
        replica.start()
    yield replicas
    for replica in replicas:
        replica.kill()


def test_a_failure_seen_at_one_replica_is_known_at_every_other(
    three: list[ReplicaProcess], next_hop: CaptureCollector
) -> None:
    r1, r2, r3 = three
    mirror = AdvisoryClient(r2.advisories, harness="harness-on-r2")
    try:
        assert mirror.wait_until_synced(20)
        open_the_server(r1)
        wait_until(lambda: server_state(r3) == pb.STATE_OPEN, SETTLE_S, "r3 to hear of it")

        # The next call, sent to r3, is a dead call on its forwarded span.
        (next_call,) = tool_calls(["after"], start_ns=time.time_ns())
        assert export_grpc(r3.otlp, [next_call]).name == "SUCCESS"
        span_id = next_call.context.span_id.to_bytes(8, "big")
        wait_until(lambda: span_id in {s.span_id for s in next_hop.spans()}, SETTLE_S)
        (forwarded,) = [s for s in next_hop.spans() if s.span_id == span_id]
        attributes = {kv.key: kv.value for kv in forwarded.attributes}
        assert attributes["mcp.breaker.dead_call"].bool_value is True
        assert attributes["mcp.breaker.rule"].string_value == "server"

        # Check at r2 says DENY (once r2 has read the stream as far), and r2's subscriber
        # holds the advisory.
        wait_until(lambda: server_state(r2) == pb.STATE_OPEN, SETTLE_S, "r2 to hear of it")
        denied = r2.check(server=SERVER, tool=TOOL, turn="a-new-turn")
        assert denied.verdict == pb.VERDICT_DENY
        assert denied.advisory.id == SERVER_ID
        wait_until(
            lambda: mirror.check("a-new-turn", SERVER, TOOL).refused,
            SETTLE_S,
            "r2's subscriber to hold the advisory",
        )
        agree(three)
        assert r2.state().shared_state.startswith("redis: up")
    finally:
        mirror.close()


def test_replicas_share_over_resp3_when_the_url_asks_for_it(
    redis: RedisServer, next_hop: CaptureCollector, tmp_path: Path
) -> None:
    # redis-py shapes a RESP3 reply differently (a stream read is a map): the replicas
    # must read it as well as RESP2's.
    url = f"{redis.url}?protocol=3"
    forward = f"forward.endpoint={next_hop.endpoint}"
    replicas = [ReplicaProcess(name, url, tmp_path, forward) for name in ("r1", "r2")]
    try:
        for replica in replicas:
            replica.start()
        r1, r2 = replicas
        open_the_server(r1)
        wait_until(lambda: server_state(r2) == pb.STATE_OPEN, SETTLE_S, "r2 to hear of it")
        agree(replicas)
        assert all(r.state().shared_state.startswith("redis: up") for r in replicas)
    finally:
        for replica in replicas:
            replica.kill()


def write_a_foreign_entry(redis: RedisServer) -> None:
    """An entry in the replicas' stream that no replica wrote (a field missing)."""
    client = redis_client.Redis.from_url(redis.url)
    try:
        client.xadd(f"{DEFAULT_KEY_PREFIX}:events", {"n": "1", "o": "someone-else"})
    finally:
        client.close()


def test_an_entry_no_replica_wrote_is_skipped_and_counted_and_sharing_goes_on(
    redis: RedisServer, next_hop: CaptureCollector, tmp_path: Path
) -> None:
    # One at the head of the stream, which a replica replays as it starts...
    write_a_foreign_entry(redis)
    forward = f"forward.endpoint={next_hop.endpoint}"
    replicas = [ReplicaProcess(name, redis.url, tmp_path, forward) for name in ("r1", "r2")]
    try:
        for replica in replicas:
            replica.start()
        r1, r2 = replicas
        # A stream of only that entry numbers from the start (not from before it).
        assert [r.state().seq for r in replicas] == [0, 0]
        # ...and one while they follow it.
        write_a_foreign_entry(redis)
        open_the_server(r1)
        wait_until(lambda: server_state(r2) == pb.STATE_OPEN, SETTLE_S, "r2 to hear of it")
        agree(replicas)
        for replica in replicas:
            assert replica.state().shared_state.startswith("redis: up")
            assert replica.metric("mcp_breaker_shared_events_unreadable_total") == 2
        # Numbered alike, from the first entry a replica wrote: a subscriber can resume at
        # either.
        wait_until(
            lambda: len({(s.epoch, s.seq) for s in (r1.state(), r2.state())}) == 1,
            SETTLE_S,
            "the replicas to number their changes alike",
        )
    finally:
        for replica in replicas:
            replica.kill()


def test_exactly_one_probe_permit_across_all_replicas_and_an_unanswered_one_expires(
    redis: RedisServer, tmp_path: Path
) -> None:
    settings = ("breaker.open_base_s=2", "breaker.open_max_s=2", "breaker.probe_lease_s=10")
    replicas = [
        ReplicaProcess(n, redis.url, tmp_path, *settings).start() for n in ("p1", "p2", "p3")
    ]
    try:
        open_the_server(replicas[0])
        agree(replicas)
        time.sleep(2.5)  # the open period (2 s, jittered by 10%) is over: half-open

        def ask(index: int) -> int:
            response = replicas[index % 3].check(server=SERVER, tool="a_sibling", turn=f"t{index}")
            return int(response.verdict)

        with ThreadPoolExecutor(max_workers=50) as pool:
            verdicts = list(pool.map(ask, range(50)))
        assert verdicts.count(pb.VERDICT_PROBE) == 1, verdicts
        assert verdicts.count(pb.VERDICT_DENY) == 49

        # The probe never reports back: its lease (10 s: longer than the burst of asks may take
        # on a loaded machine) runs out, and a permit is free again.
        def granted() -> bool:
            return ask(7) == pb.VERDICT_PROBE

        wait_until(granted, SETTLE_S, "the lease to expire")
    finally:
        for replica in replicas:
            replica.kill()


def test_a_killed_replica_comes_back_with_the_same_circuits_and_deadlines(
    three: list[ReplicaProcess],
) -> None:
    r1, r2, r3 = three
    open_the_server(r1)
    agree(three)
    before = circuits_of(r1.state())
    assert {state for state, _ in before.values()} == {pb.STATE_OPEN}

    r2.kill()
    r2.start()  # replays the stream before /readyz says yes
    assert circuits_of(r2.state()) == before

    # A rolling restart of all three: the circuit stays open, its deadline unmoved.
    for replica in three:
        assert replica.stop() in (0, 1)
        replica.start()
        agree(three, f"after restarting {replica.name}")
    assert circuits_of(r3.state()) == before


def circuits_of_server(
    replica: ReplicaProcess, server: str
) -> dict[tuple[int, str], tuple[int, int]]:
    """One server's circuits (its own and its tools') at a replica: state and expiry."""
    return {
        (a.scope, a.key): (a.state, a.expires_unix_nano)
        for a in replica.state().advisories
        if a.server == server and a.scope in (pb.SCOPE_SERVER, pb.SCOPE_TOOL)
    }


def decide_alone(
    d1: ReplicaProcess, d2: ReplicaProcess, next_hop: CaptureCollector
) -> list[ReadableSpan]:
    """Redis is away: a dead server's failures reach d1, which decides on its own engines
    (Check says DENY, the next call's forwarded span is a dead call) while d2, which cannot
    hear of it, still allows. Returns the spans sent."""
    failures = tool_calls([f"db-{i}" for i in range(3)], tool="query", server="db")
    assert export_grpc(d1.otlp, failures).name == "SUCCESS"
    wait_until(
        lambda: d1.check(server="db", tool="query", turn="alone").verdict == pb.VERDICT_DENY,
        SETTLE_S,
        "d1 to decide alone",
    )
    (dead,) = tool_calls(["db-after"], tool="query", server="db", start_ns=time.time_ns())
    assert export_grpc(d1.otlp, [dead]).name == "SUCCESS"
    span_id = dead.context.span_id.to_bytes(8, "big")
    wait_until(lambda: span_id in {s.span_id for s in next_hop.spans()}, SETTLE_S)
    (forwarded,) = [s for s in next_hop.spans() if s.span_id == span_id]
    attributes = {kv.key: kv.value for kv in forwarded.attributes}
    assert attributes["mcp.breaker.dead_call"].bool_value is True
    assert attributes["mcp.breaker.rule"].string_value == "server"
    assert d1.state().shared_state.startswith("redis: down")
    assert d2.check(server="db", tool="query", turn="alone").verdict == pb.VERDICT_ALLOW
    assert not circuits_of_server(d2, "db")
    return [*failures, dead]


def test_redis_lost_mid_stream_costs_no_span_and_the_replicas_converge_after(
    redis: RedisServer, next_hop: CaptureCollector, tmp_path: Path
) -> None:
    """Redis is killed mid-run (and comes back empty): every span is forwarded; a replica
    goes on deciding alone meanwhile, and what it decided reaches the other once Redis is
    back."""
    forward = f"forward.endpoint={next_hop.endpoint}"
    replicas = [ReplicaProcess(n, redis.url, tmp_path, forward).start() for n in ("d1", "d2")]
    d1, d2 = replicas
    sent: list[ReadableSpan] = []
    up_seen: list[float | None] = []
    stop = threading.Event()

    def watch_gauge() -> None:
        while not stop.is_set():
            up_seen.append(d1.metric("mcp_breaker_shared_state_up"))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch_gauge, daemon=True)
    watcher.start()
    try:
        for batch in range(20):
            spans = tool_calls([f"ok-{batch}-{i}" for i in range(5)], outcome="ok")
            assert export_grpc(replicas[batch % 2].otlp, spans).name == "SUCCESS"
            sent += spans
            if batch == 6:
                redis.kill()
                wait_until(lambda: 0.0 in up_seen, SETTLE_S, "the gauge to say Redis is away")
            if batch == 9:
                sent += decide_alone(d1, d2, next_hop)
            if batch == 13:
                redis.start()
                wait_until(lambda: up_seen[-1:] == [1.0], SETTLE_S, "the gauge to come back")
        wait_until(lambda: next_hop.span_count() >= len(sent), SETTLE_S, "every span forwarded")
        got = {s.span_id for s in next_hop.spans()}
        assert got == {s.context.span_id.to_bytes(8, "big") for s in sent}  # nothing lost
        assert 0.0 in up_seen and up_seen[-1] == 1.0
        assert up_seen.index(0.0) < len(up_seen) - 1

        # What d1 decided alone reaches d2 now that Redis is back: the same db circuits.
        wait_until(
            lambda: d2.check(server="db", tool="query", turn="back").verdict == pb.VERDICT_DENY,
            SETTLE_S,
            "d2 to hear what d1 decided alone",
        )
        wait_until(
            lambda: circuits_of_server(d2, "db") == circuits_of_server(d1, "db"),
            SETTLE_S,
            "d2's db circuits to match d1's",
        )
        state, _ = circuits_of_server(d2, "db")[(pb.SCOPE_SERVER, "db")]
        assert state == pb.STATE_OPEN

        # Shared again: a failure at d1 is known at d2.
        # After the successes above by span time too (tool_calls ends its calls just
        # before now): a failure that ended before a success does not extend a streak.
        open_the_server(d1, prefix="after-redis", start_ns=time.time_ns())
        wait_until(lambda: server_state(d2) == pb.STATE_OPEN, SETTLE_S, "d2 to hear of it")
        agree(replicas)
        assert "Redis unavailable" in d1.log_path.read_text()
    finally:
        stop.set()
        watcher.join(timeout=5)
        for replica in replicas:
            replica.kill()


def subscribe(
    replica: ReplicaProcess, **resume: object
) -> tuple[grpc.Channel, Iterator[pb.SubscribeResponse]]:
    channel = grpc.insecure_channel(replica.advisories)
    stub = pb_grpc.AdvisoriesStub(channel)  # type: ignore[no-untyped-call]
    return channel, stub.Subscribe(pb.SubscribeRequest(subscriber_name="t", **resume))


def test_a_subscriber_resumes_at_another_replica_with_exactly_what_it_missed(
    three: list[ReplicaProcess],
) -> None:
    r1, r2, r3 = three
    open_the_server(r1)
    agree(three)
    channel, stream = subscribe(r1)
    first = next(stream)
    assert first.WhichOneof("kind") == "snapshot"
    epoch, seq = first.epoch, first.seq
    channel.close()  # gone at this seq

    # Meanwhile: another server dies, seen at r3.
    other = tool_calls([f"db-{i}" for i in range(3)], tool="query", server="db")
    assert export_grpc(r3.otlp, other).name == "SUCCESS"
    wait_until(lambda: any(a.server == "db" for a in r2.state().advisories), SETTLE_S)
    agree(three, "every replica to hold the db circuits")
    last = r3.state().seq
    wait_until(lambda: r2.state().seq >= last, SETTLE_S, "r2 to number as far")

    witness_channel, witness = subscribe(r3, resume_epoch=epoch, resume_after_seq=seq)
    resumed_channel, resumed = subscribe(r2, resume_epoch=epoch, resume_after_seq=seq)
    try:
        expected = _changes_through(witness, last)
        got = _changes_through(resumed, last)
        assert got and [m.WhichOneof("kind") for m in got] == ["change"] * len(got)
        assert [(m.seq, m.change.id, m.change.state) for m in got] == [
            (m.seq, m.change.id, m.change.state) for m in expected
        ]
        assert {m.change.server for m in got} == {"db"}
    finally:
        witness_channel.close()
        resumed_channel.close()


def _changes_through(
    stream: Iterator[pb.SubscribeResponse], last: int
) -> list[pb.SubscribeResponse]:
    """A resumed stream's messages up to the change numbered ``last`` (heartbeats aside)."""
    got = []
    for message in stream:
        if message.WhichOneof("kind") == "heartbeat":
            continue
        got.append(message)
        if message.seq >= last:
            break
    return got


def test_an_operators_force_at_one_replica_holds_at_every_replica(
    redis: RedisServer, tmp_path: Path
) -> None:
    replicas = [
        ReplicaProcess(n, redis.url, tmp_path, "advisories.admin_tokens=sesame").start()
        for n in ("o1", "o2", "o3")
    ]
    o1, o2, o3 = replicas
    token = (("authorization", "Bearer sesame"),)
    try:
        with grpc.insecure_channel(o1.advisories) as channel:
            admin = pb_grpc.AdminStub(channel)  # type: ignore[no-untyped-call]
            forced = admin.ForceCircuit(
                pb.ForceCircuitRequest(
                    server="payments", open=True, duration_seconds=600, reason="maintenance"
                ),
                metadata=token,
                timeout=10,
            )
        assert forced.advisory.state == pb.STATE_FORCED_OPEN
        for replica in replicas:
            wait_until(
                lambda r=replica: (
                    r.check(server="payments", tool="charge").verdict == pb.VERDICT_DENY
                ),
                SETTLE_S,
                f"{replica.name} to refuse",
            )
        agree(replicas)
        with grpc.insecure_channel(o3.advisories) as channel:
            admin = pb_grpc.AdminStub(channel)  # type: ignore[no-untyped-call]
            released = admin.ReleaseCircuit(
                pb.ReleaseCircuitRequest(server="payments", reason="done"),
                metadata=token,
                timeout=10,
            )
        assert released.released
        for replica in replicas:
            wait_until(
                lambda r=replica: (
                    r.check(server="payments", tool="charge").verdict == pb.VERDICT_ALLOW
                ),
                SETTLE_S,
                f"{replica.name} to allow",
            )
        assert "forced server 'payments' open" in o1.log_path.read_text()
        assert o2.state().advisories == o3.state().advisories
    finally:
        for replica in replicas:
            replica.kill()


def test_a_replica_that_starts_without_redis_decides_alone_and_catches_up(
    tmp_path: Path,
) -> None:
    redis = RedisServer(tmp_path / "redis")  # not started yet
    alone = ReplicaProcess("alone", redis.url, tmp_path, "state.redis.startup_wait_s=1")
    alone.start()  # ready: forwarding works without Redis
    try:
        assert alone.metric("mcp_breaker_shared_state_up") == 0.0
        open_the_server(alone)
        wait_until(lambda: server_state(alone) == pb.STATE_OPEN, SETTLE_S, "decided alone")
        assert alone.check(server=SERVER, tool=TOOL, turn="x").verdict == pb.VERDICT_DENY
        assert alone.state().shared_state.startswith("redis: down")
        redis.start()
        wait_until(lambda: alone.metric("mcp_breaker_shared_state_up") == 1.0, SETTLE_S)
        # What it decided alone reaches the others: a replica started now replays it.
        wait_until(
            lambda: (alone.metric("mcp_breaker_shared_events_appended_total") or 0) >= 3,
            SETTLE_S,
        )
        late = ReplicaProcess("late", redis.url, tmp_path).start()
        try:
            wait_until(lambda: server_state(late) == pb.STATE_OPEN, SETTLE_S, "replayed")
        finally:
            late.kill()
    finally:
        alone.kill()
        redis.stop()


# -- the same evidence, the same state: whichever replica received which call, and when --


def advisories_of(replica: ReplicaProcess, servers: set[str]) -> list[str]:
    """GetState's advisories of these servers, field by field (deadlines, evidence, the
    message), all but how many seconds are left to wait: that counts down from the moment
    of reading, and two replicas are never read at the same instant."""
    state = replica.state()
    assert state.not_shown == 0  # all of them, or the comparison would say little
    shown = []
    for advisory in state.advisories:
        if advisory.server in servers:
            copy = pb.Advisory()
            copy.CopyFrom(advisory)
            copy.ClearField("retry_after_seconds")
            shown.append(str(copy))
    return shown


def agree_field_by_field(replicas: list[ReplicaProcess], servers: set[str]) -> list[str]:
    """Wait until every replica holds an open circuit for each of these servers and all
    say the same of them, field by field; what they say."""
    views: list[list[str]] = []

    def same() -> bool:
        views[:] = [advisories_of(r, servers) for r in replicas]
        opened = {
            a.server
            for a in replicas[0].state().advisories
            if a.scope == pb.SCOPE_SERVER and a.server in servers
        }
        return opened == servers and all(v == views[0] for v in views)

    wait_until(same, SETTLE_S, f"the replicas to agree field by field: {views}")
    return views[0]


def failure(server: str, turn: str, start_ns: int) -> ReadableSpan:
    (span,) = tool_calls([turn], server=server, tool=TOOL, start_ns=start_ns)
    return span


FAILURES = 3  # per circuit: the consecutive failures that open it (the default)
CIRCUITS_PER_EXAMPLE = 4


@st.composite
def interleavings(draw: st.DrawFn) -> list[tuple[int, int, int, int]]:
    """Every failure of the example's circuits, in the order they are sent: (circuit,
    its n-th failure in span time, the replica it goes to, milliseconds waited before)."""
    failures = [(c, n) for c in range(CIRCUITS_PER_EXAMPLE) for n in range(FAILURES)]
    order = draw(st.permutations(failures))
    return [
        (c, n, draw(st.integers(0, 2)), draw(st.sampled_from((0, 0, 1, 5, 20)))) for c, n in order
    ]


def test_failures_split_over_replicas_in_any_interleaving_leave_them_the_same_state(
    three: list[ReplicaProcess],
) -> None:
    """Which replica receives which failure, in which order and how close together, is
    hypothesis's choice; every replica's GetState ends the same, deadlines included (the
    jitter too: the default 10%, drawn from what opened each circuit)."""
    examples = iter(range(1000))

    @settings(
        max_examples=6,
        deadline=None,
        # Each example costs seconds of real processes: a failure is shown as drawn.
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(interleavings())
    def the_same_state(sent: list[tuple[int, int, int, int]]) -> None:
        example = next(examples)
        servers = {f"x{example}-s{c}" for c in range(CIRCUITS_PER_EXAMPLE)}
        base = time.time_ns() - 30 * 10**9  # ended before now: nothing is from the future
        for circuit, nth, to, wait_ms in sent:
            time.sleep(wait_ms / 1000)
            start_ns = base + nth * 10**9
            span = failure(f"x{example}-s{circuit}", f"x{example}-{circuit}-{nth}", start_ns)
            assert export_grpc(three[to].otlp, [span]).name == "SUCCESS"
        agree_field_by_field(three, servers)

    the_same_state()


def test_checks_at_half_open_one_per_replica_grant_exactly_one_probe_over_200_circuits(
    three: list[ReplicaProcess],
) -> None:
    """Each circuit's three failures reach the three replicas, each replica's share in one
    request sent at the same time as the others'; the spans are old enough that every
    open period (300 s, jittered) is over: half-open now, by any replica's clock. Three
    harnesses then ask ``Check`` at once, one per replica, for each of 200 circuits."""
    circuits = 200
    base = time.time_ns() - 2000 * 10**9
    shares: list[list[ReadableSpan]] = [[], [], []]
    for c in range(circuits):
        for nth in range(FAILURES):
            shares[(c + nth) % 3].append(
                failure(f"h-s{c}", f"h-{c}-{nth}", base + c * 10**9 + nth * 10**6)
            )
    with ThreadPoolExecutor(max_workers=3) as pool:
        sent = list(pool.map(lambda i: export_grpc(three[i].otlp, shares[i]).name, range(3)))
    assert sent == ["SUCCESS"] * 3
    servers = {f"h-s{c}" for c in range(circuits)}
    agree_field_by_field(three, servers)

    def ask(job: tuple[int, int]) -> int:
        c, at = job
        return int(three[at].check(server=f"h-s{c}", tool=TOOL, turn=f"probe-{c}-{at}").verdict)

    jobs = [(c, at) for c in range(circuits) for at in range(3)]
    with ThreadPoolExecutor(max_workers=12) as pool:
        verdicts = list(pool.map(ask, jobs))
    probes = {c: 0 for c in range(circuits)}
    for (c, _), verdict in zip(jobs, verdicts, strict=True):
        probes[c] += verdict == pb.VERDICT_PROBE
        assert verdict in (pb.VERDICT_PROBE, pb.VERDICT_DENY)
    assert {c: n for c, n in probes.items() if n != 1} == {}


def shared_state_lines(replica: ReplicaProcess) -> list[str]:
    return [
        line[line.index("shared state:") :]
        for line in replica.log_path.read_text().splitlines()
        if "shared state:" in line
    ]


def test_a_replica_that_decided_alone_takes_the_streams_deadline_when_it_is_back(
    redis: RedisServer, tmp_path: Path
) -> None:
    """a1 loses Redis (a partition: Redis keeps its data) and decides alone: three
    failures open a circuit there, until the third one's end plus 600 s. Meanwhile a2,
    still sharing, had a failure of the same server that began before them. In stream
    order the circuit opened at the *second* of a1's failures; back on the stream, a1's
    shared engines are rebuilt from it, and it says so too (its published deadline is
    corrected), as a2 does."""
    proxy = TcpProxy(redis.port).start()
    settings = ("breaker.open_jitter=0", "breaker.open_base_s=600", "breaker.open_max_s=600")
    a1 = ReplicaProcess("a1", proxy.url, tmp_path, *settings).start()
    a2 = ReplicaProcess("a2", redis.url, tmp_path, *settings).start()
    try:
        proxy.cut()
        wait_until(lambda: a1.metric("mcp_breaker_shared_state_up") == 0.0, SETTLE_S)
        base = time.time_ns() - 60 * 10**9
        first, *alone = (failure("late", f"late-{n}", base + n * 10**9) for n in range(4))
        assert export_grpc(a2.otlp, [first]).name == "SUCCESS"
        assert export_grpc(a1.otlp, alone).name == "SUCCESS"

        def deadline(replica: ReplicaProcess) -> int | None:
            views = circuits_of_server(replica, "late")
            state, expires = views.get((pb.SCOPE_SERVER, "late"), (None, None))
            return expires if state == pb.STATE_OPEN else None

        def until(replica: ReplicaProcess, span: ReadableSpan) -> bool:
            """The replica's deadline is the span's end plus 600 s. Deadlines are float
            seconds inside (about 240 ns apart at today's epoch), so to the microsecond; the
            failures are a second apart."""
            expires = deadline(replica)
            assert span.end_time is not None
            return expires is not None and abs(expires - (span.end_time + 600 * 10**9)) < 1000

        wait_until(lambda: until(a1, alone[2]), SETTLE_S, "a1 to decide alone")
        proxy.start()
        wait_until(lambda: until(a1, alone[1]), SETTLE_S, "a1 to take the stream's")
        agree_field_by_field([a1, a2], {"late"})
        assert until(a2, alone[1])
        # One line when Redis went away, one when it came back: no false "unavailable".
        lines = shared_state_lines(a1)
        assert [line.split(" (")[0] for line in lines[-2:]] == [
            "shared state: Redis unavailable",
            "shared state: connected to Redis",
        ], lines
    finally:
        for replica in (a1, a2):
            replica.kill()
        proxy.cut()
