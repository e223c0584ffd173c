"""Where the forwarder's queue keeps the requests it holds: in memory, or on disk.

The queue (``queue.py``) decides what it admits and when it sends; a store only keeps.
``MemoryStore`` keeps each request's bytes in the queue's own entries: nothing survives the
process. ``DiskStore`` keeps them in one SQLite database in ``forward.queue.directory``:

- an appended request is committed before ``append`` returns, so the sender is told OK
  only once the request is on disk (``forward.queue.fsync`` decides whether the commit also
  waits for the disk itself: without it a commit survives the process being killed, with
  it a power loss too);
- a request is deleted only once the next hop took it (or it was given up on, counted and
  logged), so a crash at any point leaves it on disk, and the next start sends it again:
  at least once, never silently lost;
- memory holds only what is being sent; the queue's bounds hold for the disk.

Why SQLite: it is in the standard library, and its commit is atomic and durable by design
(tested far beyond anything a file format of our own would be); WAL mode makes a commit one
append to the write-ahead log, and lets a delete of a delivered request cost little. The
database is opened in exclusive locking mode, so a second process pointed at the same
directory fails at start-up instead of sending the same spans twice.

Every SQLite call runs on one thread of its own, never on the event loop: appends that
arrive while a commit is under way are committed together in the next transaction (group
commit), so a slow disk costs latency, not one commit per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from processor.errors import QueueStorageError, StartupError
from processor.inflight.stage import Prepared
from processor.request.sender import Sender

log = logging.getLogger(__name__)

FILE_NAME = "forward-queue.sqlite3"
SCHEMA_VERSION = 1  # PRAGMA user_version: a database written by another layout is refused
# After a checkpoint the write-ahead log is cut back to this, so it does not keep the size
# of the largest burst it ever held.
WAL_SIZE_LIMIT_BYTES = 8 * 1024 * 1024
_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,  -- arrival order
    spans INTEGER NOT NULL,
    size INTEGER NOT NULL,  -- bytes of payload, kept so recovery need not read them
    peer TEXT NOT NULL,  -- who sent it, to name them if the next hop refuses it
    tenant TEXT,
    payload BLOB NOT NULL  -- the encoded ExportTraceServiceRequest, as it will be sent
)
"""


@dataclass(frozen=True, slots=True)
class Held:
    """A request the queue holds: what admission, the consumers and the logs need."""

    key: int  # its place in arrival order, and on disk its row
    span_count: int
    size: int  # bytes of its payload
    sender: Sender
    payload: bytes | None = None  # in memory; None on disk (read back when it is sent)


class Store(Protocol):
    where: str  # for the logs: "memory", or the database's path
    durable: bool  # what it holds survives the process

    def recovered(self) -> list[Held]:
        """What a previous run left undelivered, oldest first."""
        ...

    async def append(self, batch: Prepared) -> Held:
        """Keep ``batch``; once this returns it survives what the store promises to.
        Raises QueueStorageError when it cannot."""
        ...

    async def payloads(self, held: Sequence[Held]) -> list[bytes]:
        """The bytes of each, in order. Raises QueueStorageError when they cannot be read."""
        ...

    async def remove(self, held: Sequence[Held]) -> None:
        """Forget requests delivered or given up on."""
        ...

    async def close(self) -> None: ...


class MemoryStore:
    """The bytes stay in the queue's entries: lost with the process."""

    where = "memory"
    durable = False

    def __init__(self) -> None:
        self._next_key = 0

    def recovered(self) -> list[Held]:
        return []

    async def append(self, batch: Prepared) -> Held:
        self._next_key += 1
        size = len(batch.payload)
        return Held(self._next_key, batch.span_count, size, batch.sender, batch.payload)

    async def payloads(self, held: Sequence[Held]) -> list[bytes]:
        return [h.payload for h in held if h.payload is not None]

    async def remove(self, held: Sequence[Held]) -> None:
        return None

    async def close(self) -> None:
        return None


class DiskStore:
    """SQLite in WAL mode, one writer thread, group commit. Opened at start-up."""

    durable = True

    def __init__(self, directory: str, *, fsync: bool) -> None:
        self.where = str(Path(directory) / FILE_NAME)
        self._db = _open(Path(directory), fsync=fsync)
        self._recovered = [
            Held(key, spans, size, Sender(peer=peer, tenant=tenant))
            for key, spans, size, peer, tenant in self._db.execute(
                "SELECT id, spans, size, peer, tenant FROM requests ORDER BY id"
            )
        ]
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="disk-queue")
        self._pending: list[tuple[Prepared, asyncio.Future[Held]]] = []
        self._writer: asyncio.Task[None] | None = None

    def recovered(self) -> list[Held]:
        held, self._recovered = self._recovered, []
        return held

    async def append(self, batch: Prepared) -> Held:
        future: asyncio.Future[Held] = asyncio.get_running_loop().create_future()
        self._pending.append((batch, future))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_pending(), name="disk-queue-writer")
        return await future

    async def _write_pending(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                group, self._pending = self._pending, []
                batches = [batch for batch, _ in group]
                try:
                    keys = await loop.run_in_executor(self._thread, self._insert, batches)
                except sqlite3.Error as error:
                    failure = QueueStorageError(f"cannot write to {self.where}: {error}")
                    for _, future in group:
                        if not future.done():
                            future.set_exception(failure)
                    continue
                for (batch, future), key in zip(group, keys, strict=True):
                    if not future.done():
                        future.set_result(
                            Held(key, batch.span_count, len(batch.payload), batch.sender)
                        )
        finally:
            self._writer = None

    def _insert(self, batches: list[Prepared]) -> list[int]:
        """One transaction for every request waiting: committed, or none of them."""
        db = self._db
        keys = []
        db.execute("BEGIN IMMEDIATE")
        try:
            for batch in batches:
                cursor = db.execute(
                    "INSERT INTO requests (spans, size, peer, tenant, payload) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (
                        batch.span_count,
                        len(batch.payload),
                        batch.sender.peer,
                        batch.sender.tenant,
                        batch.payload,
                    ),
                )
                keys.append(int(cursor.lastrowid or 0))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return keys

    async def payloads(self, held: Sequence[Held]) -> list[bytes]:
        keys = [h.key for h in held]
        loop = asyncio.get_running_loop()
        try:
            found = await loop.run_in_executor(self._thread, self._select, keys)
        except sqlite3.Error as error:
            raise QueueStorageError(f"cannot read from {self.where}: {error}") from None
        if len(found) != len(keys):
            raise QueueStorageError(f"{self.where}: {len(keys) - len(found)} requests are missing")
        return [found[key] for key in keys]

    def _select(self, keys: list[int]) -> dict[int, bytes]:
        marks = ",".join("?" * len(keys))
        rows = self._db.execute(f"SELECT id, payload FROM requests WHERE id IN ({marks})", keys)
        return {key: bytes(payload) for key, payload in rows}

    async def remove(self, held: Sequence[Held]) -> None:
        keys = [h.key for h in held]
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._thread, self._delete, keys)
        except sqlite3.Error as error:
            # Still on disk: sent again at the next start, a duplicate rather than a loss.
            log.error("disk queue: cannot delete %d delivered requests: %s", len(keys), error)

    def _delete(self, keys: list[int]) -> None:
        marks = ",".join("?" * len(keys))
        self._db.execute(f"DELETE FROM requests WHERE id IN ({marks})", keys)

    async def close(self) -> None:
        while self._writer is not None:  # appends under way finish first
            await asyncio.shield(self._writer)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._db.close)
        self._thread.shutdown(wait=True)


def _open(directory: Path, *, fsync: bool) -> sqlite3.Connection:
    """The queue's database, created if need be; StartupError names the key and the cause."""
    key = "forward.queue.directory"
    try:
        # It holds span data: readable by the service's user alone (as is the file).
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        raise StartupError(f"{key}: cannot create {str(directory)!r}: {error.strerror}") from None
    path = directory / FILE_NAME
    try:
        # autocommit (isolation_level None): transactions are written out where they are
        # meant; timeout 0: a database another process holds fails now, not in 5 s.
        db = sqlite3.connect(path, isolation_level=None, timeout=0, check_same_thread=False)
    except sqlite3.Error as error:
        raise StartupError(f"{key}: cannot open {str(path)!r}: {error}") from None
    with contextlib.suppress(OSError):  # not ours to change (a volume's own rules): left as is
        # Before the write-ahead log exists: SQLite gives it the database's permissions.
        os.chmod(path, 0o600)
    try:
        # Exclusive: held until the process ends, so two services never share one queue.
        db.execute("PRAGMA locking_mode = EXCLUSIVE")
        mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StartupError(f"{key}: {str(path)!r} cannot use SQLite's WAL mode ({mode})")
        db.execute(f"PRAGMA synchronous = {'FULL' if fsync else 'NORMAL'}")
        db.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}")
        # Some builds (Debian's) zero every freed page: for a queue whose rows are all
        # deleted soon, that doubles the bytes written and the CPU. FAST zeroes only what
        # costs no extra write; freed pages are overwritten by the next requests.
        db.execute("PRAGMA secure_delete = FAST")
        db.execute("BEGIN IMMEDIATE")  # takes the exclusive lock now
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        tables = db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'requests'")
        if version not in (0, SCHEMA_VERSION) or (version == 0 and tables.fetchone()[0]):
            db.execute("ROLLBACK")
            raise StartupError(
                f"{key}: {str(path)!r} was not written by this version of mcp-breaker "
                f"(layout {version}, expected {SCHEMA_VERSION}); move it aside"
            )
        db.execute(_SCHEMA)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except sqlite3.OperationalError as error:
        db.close()
        if getattr(error, "sqlite_errorname", "") in ("SQLITE_BUSY", "SQLITE_LOCKED"):
            raise StartupError(
                f"{key}: {str(path)!r} is in use by another process (two services cannot "
                "share one queue directory)"
            ) from None
        raise StartupError(f"{key}: cannot use {str(path)!r}: {error}") from None
    except sqlite3.DatabaseError as error:
        db.close()
        raise StartupError(
            f"{key}: {str(path)!r} is not a usable queue database ({error}); move it aside"
        ) from None
    except StartupError:
        db.close()
        raise
    return db
