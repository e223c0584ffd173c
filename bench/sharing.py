"""What sharing the breaker costs per event, against what the span that made it cost.

With ``state.backend: redis`` (replicas, or ``serve --workers N``) every event a replica's
pipeline decides is also encoded into the outbox, appended to the stream, read back and
taken by the shared engines (and the advisories) at its place in the stream; every other
replica reads it, decodes it and applies it to its shared engines and to its local ones.
This measures each part with the real code (``processor/state/``) on the events of fresh
requests of the hop benchmark's payloads, in ns of CPU per event, next to the baseline
measured in the same run: what serve's stage spent on the spans that made the event, on
the memory backend.

    stage          serve's stage, memory backend: the baseline
    share          encoding the event into the outbox
    own back       the replica's own event back from the stream: shared engines, advisories
    decode         another replica's event: decoded and validated
    apply other    another replica's event: shared engines, local engines, advisories
    append         RedisStore.append, in the outbox's batches: this process, and Redis
    read           RedisStore.read, as a replica follows the stream: this process, and Redis

The last two run against a real ``redis-server`` (on a free port, for the run). The model:
one replica on Redis costs ``stage + share + append + read + own back``; with N workers
each also reads, decodes and applies every event the other N-1 made. CPU time, best of
several rounds, fresh engines each round. The run checks its own work: every event
appended is taken back by its replica and applied at the other, none unreadable, and the
stream read back holds every event appended, in order.

    .venv/bin/python bench/sharing.py [--rounds 5] [--requests 48]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import redis.asyncio as aioredis
from classify import cpu_ns
from payload import Fresh, Template, build_templates
from ports import free_port

from processor.config import ServiceConfig
from processor.config.state import Backend
from processor.server import Service, tune_garbage_collection
from processor.state import events as codec
from processor.state.replica import APPEND_BATCH, READ_BATCH, SharedState
from processor.state.store import Entry, RedisStore

VARIANTS = ("mixed", "harness")
PARTS = ("stage", "share", "own_back", "decode", "apply_other")
REDIS_PARTS = ("append_client", "append_redis", "read_client", "read_redis")
LOOPBACK = "127.0.0.1"
T = TypeVar("T")


def service(backend: Backend) -> Service:
    config = ServiceConfig()
    config = dataclasses.replace(config, state=dataclasses.replace(config.state, backend=backend))
    built = Service(config)
    if built.shared is not None:
        built.shared.stats.up = True  # as when Redis answers: events wait for the stream
    return built


def shared(replica: Service) -> SharedState:
    assert replica.shared is not None
    return replica.shared


def each(work: Callable[[T], object], items: Sequence[T]) -> Callable[[], None]:
    """The work over every item, as one call to time."""

    def run() -> None:
        for item in items:
            work(item)

    return run


def stream_of(source: SharedState) -> list[Entry]:
    """What the stream would hold of ``source``'s outbox, in order."""
    now = time.time()
    return [
        Entry(f"{int(now * 1000)}-{n}", n, source.replica, uid, payload, now)
        for n, (uid, payload) in enumerate(source._outbox, start=1)
    ]


def one_round(
    templates: list[Template], fresh: Fresh, requests: int
) -> tuple[dict[str, int], list[Entry]]:
    """CPU ns of each part over one round's fresh requests, and the stream they made."""
    payloads = [fresh.render(templates[i % len(templates)]) for i in range(requests)]
    memory, a, b, sharer = (service(backend) for backend in (Backend.MEMORY, *[Backend.REDIS] * 3))
    stage = cpu_ns(each(memory.stage.from_protobuf, payloads))
    for payload in payloads:
        a.stage.from_protobuf(payload)
    made = list(shared(a)._pending.values())
    stream = stream_of(shared(a))
    if not stream:
        raise SystemExit("no event was shared")
    into = shared(sharer)
    share = cpu_ns(each(lambda event: into.share(event, None), made))  # type: ignore[arg-type]
    own_back = cpu_ns(each(shared(a)._apply, stream))
    bounds = shared(b)._bounds
    decoded: list[codec.SharedEvent] = []
    decode = cpu_ns(
        lambda: decoded.extend(
            codec.decode(e.payload or b"", at_s=e.at_s, bounds=bounds) for e in stream
        )
    )
    other = shared(b)
    apply_other = cpu_ns(
        each(lambda pair: other._apply_event(*pair), list(zip(stream, decoded, strict=True)))
    )
    problems = []
    if shared(a)._pending:
        problems.append(f"{len(shared(a)._pending)} own events not taken back")
    if shared(b).stats.applied != len(stream):
        problems.append(f"{shared(b).stats.applied} of {len(stream)} applied at the other")
    if shared(a).stats.unreadable or shared(b).stats.unreadable:
        problems.append("unreadable events")
    if problems:
        raise SystemExit("; ".join(problems))
    parts = {"stage": stage, "share": share, "own_back": own_back, "decode": decode}
    parts["apply_other"] = apply_other
    return parts, stream


def redis_costs(stream: list[Entry]) -> dict[str, float]:
    """Appending ``stream``'s events and reading them back, through a real redis-server:
    ns of CPU per event, here and in Redis."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (scripts/_system.sh installs it)")
    port = free_port()
    with tempfile.TemporaryDirectory() as workdir:
        argv = [binary, "--port", str(port), "--bind", LOOPBACK, "--save", "", "--dir", workdir]
        server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            return asyncio.run(_through_redis(port, stream))
        finally:
            server.terminate()
            server.wait(10)


async def _through_redis(port: int, stream: list[Entry]) -> dict[str, float]:
    client = aioredis.Redis(host=LOOPBACK, port=port)
    for _ in range(100):
        try:
            await client.ping()
            break
        except OSError:
            await asyncio.sleep(0.05)
    store = RedisStore(client, "bench")
    events = [(entry.uid, entry.payload or b"") for entry in stream]

    async def redis_cpu_ns() -> int:
        cpu = await client.info("cpu")
        return int((float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])) * 1e9)

    redis_before, started = await redis_cpu_ns(), time.process_time_ns()
    for start in range(0, len(events), APPEND_BATCH):
        await store.append("bench", events[start : start + APPEND_BATCH])
    append_client, redis_after = time.process_time_ns() - started, await redis_cpu_ns()
    append_redis = redis_after - redis_before
    read: list[Entry] = []
    redis_before, started = await redis_cpu_ns(), time.process_time_ns()
    after = "0-0"
    while got := await store.read(after, READ_BATCH, 0):
        read += got
        after = got[-1].entry_id
    read_client, redis_after = time.process_time_ns() - started, await redis_cpu_ns()
    read_redis = redis_after - redis_before
    await client.aclose()
    if [(e.uid, e.payload) for e in read] != events:
        raise SystemExit("the stream read back is not what was appended")
    if [e.position for e in read] != list(range(1, len(events) + 1)):
        raise SystemExit("the stream's positions are not 1, 2, 3, ...")
    count = len(events)
    return {
        "append_client": append_client / count,
        "append_redis": append_redis / count,
        "read_client": read_client / count,
        "read_redis": read_redis / count,
    }


def measure(variant: str, rounds: int, requests: int) -> dict[str, float]:
    templates = build_templates(variant)
    fresh = Fresh(templates)
    best = dict.fromkeys(PARTS, float("inf"))
    events = 0
    stream: list[Entry] = []
    for _ in range(rounds):
        parts, stream = one_round(templates, fresh, requests)
        events = len(stream)
        for name, value in parts.items():
            best[name] = min(best[name], value / events)
    row = {f"{name}_ns_per_event": best[name] for name in PARTS}
    redis = redis_costs(stream)  # Redis's CPU is read per second of INFO: one large run
    row.update({f"{name}_ns_per_event": value for name, value in redis.items()})
    row["events_per_request"] = events / requests
    transport = sum(redis.values())
    one = best["stage"] + best["share"] + best["own_back"] + transport
    other = best["decode"] + best["apply_other"] + redis["read_client"] + redis["read_redis"]
    row["redis_over_memory"] = one / best["stage"]
    row["other_over_stage"] = other / best["stage"]
    row["two_workers_over_one"] = (one + other) / best["stage"]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="best of this many rounds")
    parser.add_argument("--requests", type=int, default=48, help="fresh requests per round")
    args = parser.parse_args()
    tune_garbage_collection()  # as serve runs
    rows = {variant: measure(variant, args.rounds, args.requests) for variant in VARIANTS}
    labels: list[tuple[str, str, str]] = [
        ("events_per_request", "events per 512-span request", "{:.0f}"),
        ("stage_ns_per_event", "stage (memory backend), ns per event", "{:,.0f}"),
        ("share_ns_per_event", "  share: encode into the outbox", "{:,.0f}"),
        ("append_client_ns_per_event", "  append: this process", "{:,.0f}"),
        ("append_redis_ns_per_event", "  append: Redis", "{:,.0f}"),
        ("read_client_ns_per_event", "  read: this process", "{:,.0f}"),
        ("read_redis_ns_per_event", "  read: Redis", "{:,.0f}"),
        ("own_back_ns_per_event", "  own event back from the stream", "{:,.0f}"),
        ("decode_ns_per_event", "other's event: decode", "{:,.0f}"),
        ("apply_other_ns_per_event", "other's event: apply", "{:,.0f}"),
        ("redis_over_memory", "one replica on Redis / memory (CPU)", "{:.2f}"),
        ("other_over_stage", "other's event / its stage cost", "{:.2f}"),
        ("two_workers_over_one", "two workers / one (CPU per event)", "{:.2f}"),
    ]
    print(f"{'':44}" + "".join(f"{v:>14}" for v in VARIANTS))
    for key, label, form in labels:
        print(label.ljust(44) + "".join(form.format(rows[v][key]).rjust(14) for v in VARIANTS))
    print("\nchecks: every event taken back by its replica and applied at the other; the")
    print("stream read back from Redis is what was appended, in order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
