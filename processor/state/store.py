"""Everything mcp-breaker keeps in Redis, and the only module that talks to it.

Under ``state.redis.key_prefix`` (``P``):

    P:events            a Stream: every replica's events, in one order (fields n, o, u, e)
    P:events:n          the counter that numbers them: n is the event's position
    P:epoch             the deployment's epoch: advisory sequence numbers are its own
    P:ticker            which replica marks the stream's time (a lease, SET NX PX)
    P:overrides         a hash: operators' forced circuits still in force, by circuit
    P:probe:<circuit>:<period>:<i>   probe permit i of a half-open period (SET NX PX)

Appends number and add in one Lua script, so the stream's order is the numbers' order.
An entry holds a run of one replica's events (consecutive uids, at most
``MAX_EVENTS_PER_ENTRY`` and about ``ENTRY_BYTES``), their payloads joined by newlines
(an event's JSON holds none): ``n`` and ``u`` are the first event's position and uid, the
next ones count on from them. Reading and appending cost mostly per entry, not per event:
on the mixed payload, appending and reading an event cost 4.1 µs here and in Redis
together against 9.4 with an entry each (bench/sharing.py; docs/scaling.md, "What sharing
costs"). An entry of one event is written as before batching was.
"""

from __future__ import annotations

import secrets
import ssl
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from mcp_breaker_client.shared.cheap_dataclasses import builder

from processor.config import RedisConfig
from processor.errors import StartupError

# KEYS[1] stream, KEYS[2] counter; ARGV[1] origin, then (first uid, events, payloads)
# triples, one per entry; the entry's id and its first event's position for each.
_APPEND = """
local out = {}
for i = 2, #ARGV, 3 do
  local k = tonumber(ARGV[i + 1])
  local n = redis.call('INCRBY', KEYS[2], k) - k + 1
  local id = redis.call('XADD', KEYS[1], '*', 'n', n, 'o', ARGV[1], 'u', ARGV[i], 'e', ARGV[i + 2])
  out[#out + 1] = id
  out[#out + 1] = n
end
return out
"""
MAX_EVENTS_PER_ENTRY = 100  # what a reader takes in one entry; more is not ours
ENTRY_BYTES = 64 * 1024  # an entry is closed once it holds this much (one event may hold more)
_SEPARATOR = b"\n"
# KEYS[1] the ticker key; ARGV[1] this replica, ARGV[2] lease ms. 1 when this replica ticks.
_TICKER = """
local holder = redis.call('GET', KEYS[1])
if holder == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
# KEYS: one base key per half-open circuit; ARGV[1] permits, ARGV[2] lease ms, ARGV[3] the
# caller's token, ARGV[4] the permit counter key. A permit on every circuit, or none.
_PROBE = """
local taken = {}
for k = 1, #KEYS do
  local got = false
  for i = 1, tonumber(ARGV[1]) do
    local slot = KEYS[k] .. ':' .. i
    if redis.call('SET', slot, ARGV[3], 'NX', 'PX', ARGV[2]) then
      taken[#taken + 1] = slot
      got = true
      break
    end
  end
  if not got then
    for _, slot in ipairs(taken) do redis.call('DEL', slot) end
    return 0
  end
end
return redis.call('INCR', ARGV[4])
"""


@dataclass(frozen=True, slots=True)
class Entry:
    """One event as the stream holds it."""

    entry_id: str  # Redis's id, "ms-seq"
    position: int  # n: 1, 2, 3... in stream order
    origin: str  # the replica that appended it
    uid: int  # its number at that replica
    payload: bytes | None  # None: the entry was not written as _APPEND writes (unreadable)
    at_s: float  # Redis's clock when it was appended (the id's milliseconds)


build_entry = builder(Entry)  # one per entry read: every replica reads every event
_FIELD_NAMES = [b"n", b"o", b"u", b"e"]  # an entry's fields, as _APPEND writes them
# What an entry _APPEND wrote holds; anything else is another writer's, read as unreadable.
# A position numbers advisory changes (position << CHANGE_BITS in the wire's uint64).
MAX_POSITION = 2**40
MAX_UID = 2**63 - 1
MAX_ORIGIN_CHARS = 64  # a replica's name is 12 hex digits
# The stream's clock drives expiry; past this (an id another writer set, ~2116) no deadline
# computed from it fits the wire's int64 of nanoseconds.
MAX_AT_S = 2**62 / 1e9
MAX_EPOCH_CHARS = 64  # an epoch is 16 hex digits; it goes into every advisory message


def password_of(config: RedisConfig) -> str | None:
    if config.password_file:
        try:
            return Path(config.password_file).read_text(encoding="utf-8").strip()
        except OSError as error:
            raise StartupError(
                f"state.redis.password_file: cannot read {config.password_file!r}: {error.strerror}"
            ) from None
    return config.password or None


def client_for(config: RedisConfig) -> aioredis.Redis:
    """A Redis client as configured; it connects on first use."""
    options: dict[str, object] = {
        "username": config.username or None,
        "password": password_of(config),
        "socket_timeout": config.timeout_s,
        "socket_connect_timeout": config.timeout_s,
        "health_check_interval": 30,
    }
    if config.url.startswith("rediss://") and config.ca_file:
        options["ssl_ca_certs"] = config.ca_file
        options["ssl_cert_reqs"] = ssl.CERT_REQUIRED
    return aioredis.from_url(config.url, **options)


class RedisStore:
    """The Redis side of shared state: the stream, its ticker, the probe arbiter and the
    operators' overrides, each one Redis command or script."""

    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.stream = f"{prefix}:events"
        self._counter = f"{prefix}:events:n"
        # XREAD's reply is read by _entries: redis-py's own parsing of it (into dicts, and
        # from RESP3's shape into RESP2's) cost a worker as much as applying the entries.
        client.set_response_callback("XREAD", _unparsed)
        self._append = client.register_script(_APPEND)
        self._ticker = client.register_script(_TICKER)
        self._probe = client.register_script(_PROBE)

    async def ping(self) -> None:
        await self.client.ping()

    async def epoch(self) -> str:
        """The deployment's epoch, made by the first replica ever to ask."""
        key = f"{self.prefix}:epoch"
        await self.client.set(key, secrets.token_hex(8), nx=True)
        value = await self.client.get(key)
        # Another writer's epoch is taken as every replica takes it: readable, and short.
        text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
        return text[:MAX_EPOCH_CHARS]

    async def append(self, origin: str, events: list[tuple[int, bytes]]) -> list[tuple[str, int]]:
        """Add events (uid, payload: no newline in it) in order; each one's (entry id,
        position). Runs of consecutive uids share entries."""
        runs = _runs(events)
        argv: list[bytes | str | int | float] = [origin]
        for run in runs:
            argv += [run[0][0], len(run), _SEPARATOR.join(payload for _, payload in run)]
        out = await self._append(keys=[self.stream, self._counter], args=argv)
        placed = []
        for index, run in enumerate(runs):
            entry_id, first = _text(out[2 * index]), int(out[2 * index + 1])
            placed += [(entry_id, first + offset) for offset in range(len(run))]
        return placed

    async def read(self, after: str, count: int, block_ms: int) -> list[Entry]:
        """Entries after ``after`` (an entry id; "0-0" from the start), waiting up to
        ``block_ms`` for the first (0: do not wait)."""
        wait = ("BLOCK", block_ms) if block_ms > 0 else ()
        answer: Any = await self.client.execute_command(  # type: ignore[no-untyped-call]
            "XREAD", "COUNT", count, *wait, "STREAMS", self.stream, after
        )
        return _entries(answer)

    async def head(self) -> str:
        """The id of the latest entry ("0-0" for none)."""
        items: Any = await self.client.xrevrange(self.stream, count=1)
        return _text(items[0][0]) if items else "0-0"

    async def trim(self, older_than_s: float) -> int:
        return int(
            await self.client.xtrim(self.stream, minid=int(older_than_s * 1000), approximate=True)
        )

    async def hold_ticker(self, replica: str, lease_s: float) -> bool:
        key = f"{self.prefix}:ticker"
        return bool(await self._ticker(keys=[key], args=[replica, int(lease_s * 1000)]))

    async def set_override(self, circuit: str, payload: bytes) -> None:
        await self.client.hset(f"{self.prefix}:overrides", circuit, payload)

    async def clear_override(self, circuit: str) -> None:
        await self.client.hdel(f"{self.prefix}:overrides", circuit)

    async def overrides(self) -> list[bytes]:
        values: Any = await self.client.hvals(f"{self.prefix}:overrides")
        return [bytes(v) for v in values]

    async def probe(self, circuits: list[str], permits: int, lease_s: float) -> int:
        """A probe permit on every one of these half-open circuits (each ``circuit`` names
        one and its half-open period), or 0 when one of them has none free."""
        keys = [f"{self.prefix}:probe:{circuit}" for circuit in circuits]
        token = secrets.token_hex(8)
        counter = f"{self.prefix}:probe-permits"
        return int(
            await self._probe(
                keys=keys, args=[permits, max(1, int(lease_s * 1000)), token, counter]
            )
        )

    async def close(self) -> None:
        await self.client.aclose()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _unparsed(response: object, **options: object) -> object:
    return response


def _runs(events: list[tuple[int, bytes]]) -> list[list[tuple[int, bytes]]]:
    """``events`` cut into entries: runs of consecutive uids, each within the bounds."""
    runs: list[list[tuple[int, bytes]]] = []
    run: list[tuple[int, bytes]] = []
    size = 0
    for uid, payload in events:
        if _SEPARATOR in payload:
            raise ValueError("an event's payload holds a newline")  # events.encode writes none
        if run and (
            uid != run[-1][0] + 1 or len(run) >= MAX_EVENTS_PER_ENTRY or size >= ENTRY_BYTES
        ):
            runs.append(run)
            run, size = [], 0
        run.append((uid, payload))
        size += len(payload)
    if run:
        runs.append(run)
    return runs


def _entries(answer: Any) -> list[Entry]:
    """XREAD's reply as the server sent it: nothing when the wait ran out; per stream (a
    list of pairs in RESP2, a map in RESP3) its entries, each [id, [field, value, ...]]:
    an event each, as a run of them the stream holds."""
    if not answer:
        return []
    per_stream = answer.values() if isinstance(answer, dict) else (s[1] for s in answer)
    out: list[Entry] = []
    for items in per_stream:
        for entry_id, fields in items:
            entry = _entry(entry_id, fields)
            payload = entry.payload
            if payload is None or _SEPARATOR not in payload:
                out.append(entry)
            else:
                out += _events(entry, payload.split(_SEPARATOR))
    return out


def _events(entry: Entry, payloads: list[bytes]) -> list[Entry]:
    """A run's events, numbered on from its first; one unreadable entry when no replica
    could have written the run."""
    last = len(payloads) - 1
    if (
        last >= MAX_EVENTS_PER_ENTRY
        or entry.position + last > MAX_POSITION
        or entry.uid + last > MAX_UID
    ):
        return [replace(entry, position=0, origin="", uid=0, payload=None)]
    position, origin, uid, at_s = entry.position, entry.origin, entry.uid, entry.at_s
    return [
        build_entry(
            entry_id=entry.entry_id,
            position=position + offset,
            origin=origin,
            uid=uid + offset,
            payload=payload,
            at_s=at_s,
        )
        for offset, payload in enumerate(payloads)
    ]


def _entry(entry_id: bytes, fields: list[bytes]) -> Entry:
    text = entry_id.decode()
    at_s = int(text[: text.index("-")]) / 1000
    try:
        if fields[0::2] == _FIELD_NAMES:  # as _APPEND writes them
            position, origin, uid, payload = fields[1::2]
        else:  # in another order: by name
            data = dict(zip(fields[0::2], fields[1::2], strict=False))
            position, origin, uid, payload = (data[name] for name in _FIELD_NAMES)
        entry = build_entry(
            entry_id=text,
            position=int(position),
            origin=origin.decode(),
            uid=int(uid),
            payload=payload,
            at_s=at_s,
        )
        if (
            0 < entry.position <= MAX_POSITION
            and 0 < entry.uid <= MAX_UID
            and len(entry.origin) <= MAX_ORIGIN_CHARS
            and at_s <= MAX_AT_S
        ):
            return entry
    except (KeyError, ValueError, TypeError, AttributeError):
        pass  # a field missing, a number or an origin unreadable
    # Something else wrote to the stream. The entry is handed on to be skipped and counted:
    # raising here would stop the replica at it, retrying it for ever.
    return build_entry(entry_id=text, position=0, origin="", uid=0, payload=None, at_s=at_s)
