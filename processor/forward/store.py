"""Where the forwarder's queue keeps the requests it holds: in memory, or on disk.

The queue (``queue.py``) decides what it admits and when it sends; a store only keeps.
``MemoryStore`` keeps each request's bytes in the queue's own entries: nothing survives the
process. ``DiskStore`` keeps them in ``forward.queue.directory``: a row per request in one
SQLite database, and the request's bytes appended to a segment file the row points to
(``segments.py``: written once, rather than twice by SQLite):

- an appended request is committed before ``append`` returns, so the sender is told OK
  only once the request is on disk: its bytes are written first, then its row is committed
  (``forward.queue.fsync`` decides whether both also wait for the disk itself: without it
  a commit survives the process being killed, with it a power loss too);
- a request's row is deleted only once the next hop took it (or it was given up on, counted and
  logged), so a crash at any point leaves it on disk, and the next start sends it again:
  at least once, never silently lost;
- the queue's bounds hold for the disk: a request leaves the bound only once its row is
  deleted. Memory keeps a copy of each request too, up to ``MEMORY_COPY_LIMIT_BYTES``, so a
  request is sent without being read back; what is beyond it, and what a previous run
  left, is read from the disk when it is sent.

Why SQLite for the rows: it is in the standard library, and its commit is atomic and durable
by design (tested far beyond anything a file format of our own would be), so what is held
is exactly what was committed; WAL mode makes a commit one append to the write-ahead log.
A database written by an earlier version (layout 1: the bytes in the rows) is read as it is
and given the columns of layout 2; its old rows are sent from their blobs. The
store holds a lock on a file beside the database (``flock``, released by the kernel when
the process ends, however it ends), so a second process pointed at the same directory fails
at start-up instead of sending the same spans twice.

No SQLite call runs on the event loop. Commits run on one thread of their own: appends and
deletes that arrive while a commit is under way are committed together in the next
transaction (group commit), so a slow disk costs latency, not one commit per request, and a
delivered request costs no transaction of its own. Checkpoints (the log copied into the
database, and synced: the slow part) run on a second connection and thread while commits go
on; only the last step, what those commits added, runs on the writer's thread between two
commits, so that the log starts again from its beginning instead of growing.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import sqlite3
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from processor.errors import QueueStorageError, StartupError
from processor.forward.segments import Segments
from processor.inflight.stage import Prepared
from processor.request.sender import Sender

log = logging.getLogger(__name__)

FILE_NAME = "forward-queue.sqlite3"
LOCK_NAME = "forward-queue.lock"  # held while a store has the database open
SCHEMA_VERSION = 2  # PRAGMA user_version: layout 1 is upgraded, any other one refused
# After a checkpoint the write-ahead log is cut back to this, so it does not keep the size
# of the largest burst it ever held; above what it reaches between two checkpoints, so it is
# overwritten in place rather than cut and grown again (which costs the file system more).
WAL_SIZE_LIMIT_BYTES = 32 * 1024 * 1024
# The log is copied into the database (a checkpoint) once this much was committed. A
# queue's rows are deleted soon after they are written, so their pages are reused within
# one such stretch and copied once for many commits (with SQLite's default, 4 MiB, a span
# was written 1.8 times).
WAL_CHECKPOINT_BYTES = 16 * 1024 * 1024
COMMIT_PAGES = 3  # what a commit writes to the log, about: the rows' leaves and their parent
# The rows are small (the bytes are in the segments): SQLite's default page, since a commit
# writes each page it touches whole into the log. Set when the database is created: one
# made before (with 8 KiB pages, for the blobs it held) keeps its own.
PAGE_SIZE_BYTES = 4 * 1024
# Requests are also kept in memory up to this many bytes (the memory queue's default bound),
# so they are sent from there rather than read back from the disk they were just written
# to; beyond it, and what a previous run left, they are read back when they are sent.
MEMORY_COPY_LIMIT_BYTES = 64 * 1024 * 1024
_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,  -- arrival order
    spans INTEGER NOT NULL,
    size INTEGER NOT NULL,  -- bytes of payload, kept so recovery need not read them
    peer TEXT NOT NULL,  -- who sent it, to name them if the next hop refuses it
    tenant TEXT,
    payload BLOB NOT NULL  -- layout 1: the request's bytes; empty from layout 2 on
)
"""
# Layout 2: the bytes are in a segment file (segments.py); NULL in a row of layout 1.
_LAYOUT_2 = (
    "ALTER TABLE requests ADD COLUMN segment INTEGER",
    "ALTER TABLE requests ADD COLUMN position INTEGER",  # where its record begins in it
)


@dataclass(frozen=True, slots=True)
class Held:
    """A request the queue holds: what admission, the consumers and the logs need."""

    key: int  # its place in arrival order, and on disk its row
    span_count: int
    size: int  # bytes of its payload
    sender: Sender
    payload: bytes | None = None  # in memory; None: on disk only (read back when sent)


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
    """Rows in SQLite (WAL mode), bytes in segment files: one writer thread, group commit,
    checkpoints on a connection and a thread of their own, and a copy of the bytes in
    memory. Opened at start-up."""

    durable = True

    def __init__(
        self, directory: str, *, fsync: bool, memory_limit_bytes: int = MEMORY_COPY_LIMIT_BYTES
    ) -> None:
        self.where = str(Path(directory) / FILE_NAME)
        self._lock = _lock(Path(directory))
        try:
            self._db = _open(Path(directory), fsync=fsync)
        except StartupError:
            os.close(self._lock)  # and with it the lock
            raise
        try:
            # A second connection copies the log into the database on a thread of its own,
            # so that the syncs of a checkpoint (its slow part) do not hold up commits.
            self._checkpointer = _connect(Path(directory), fsync=fsync)
        except StartupError:
            self._db.close()
            os.close(self._lock)
            raise
        rows = self._db.execute(
            "SELECT id, spans, size, peer, tenant, segment, position FROM requests ORDER BY id"
        ).fetchall()
        self._recovered = [
            Held(key, spans, size, Sender(peer=peer, tenant=tenant))
            for key, spans, size, peer, tenant, _, _ in rows
        ]
        left = {row[0]: (row[5], row[6]) for row in rows if row[5] is not None}
        try:
            self._segments = Segments(Path(directory), fsync=fsync, left=left)
        except OSError as error:
            self._checkpointer.close()
            self._db.close()
            os.close(self._lock)
            raise StartupError(
                f"forward.queue.directory: cannot use {directory!r}: {error}"
            ) from None
        self._next_key = rows[-1][0] + 1 if rows else 1  # keys keep arrival order
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="disk-queue")
        self._checkpoint_thread = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="disk-queue-checkpoint"
        )
        self._checkpoint: asyncio.Task[None] | None = None
        self._logged_bytes = 0  # written to the log since the last checkpoint began (about)
        self._memory_limit_bytes = memory_limit_bytes
        self._page_size = int(self._db.execute("PRAGMA page_size").fetchone()[0])
        self._in_memory_bytes = 0  # payloads the Held entries carry, not yet removed
        self._next: _Transaction | None = None  # what the next commit writes
        self._writer: asyncio.Task[None] | None = None

    def recovered(self) -> list[Held]:
        held, self._recovered = self._recovered, []
        return held

    async def append(self, batch: Prepared) -> Held:
        transaction = self._pending()
        place = len(transaction.batches)
        transaction.batches.append(batch)
        # Shielded: one future for the whole group, which a cancelled caller must not cancel.
        key = (await asyncio.shield(transaction.committed))[place]
        size = len(batch.payload)
        if self._in_memory_bytes + size > self._memory_limit_bytes:
            return Held(key, batch.span_count, size, batch.sender)  # read back when sent
        self._in_memory_bytes += size
        return Held(key, batch.span_count, size, batch.sender, batch.payload)

    async def payloads(self, held: Sequence[Held]) -> list[bytes]:
        on_disk = [h for h in held if h.payload is None]
        found: dict[int, bytes] = {}
        if on_disk:
            loop = asyncio.get_running_loop()
            try:
                found = await loop.run_in_executor(self._thread, self._read, on_disk)
            except (sqlite3.Error, OSError) as error:
                raise QueueStorageError(f"cannot read from {self.where}: {error}") from None
            if len(found) != len(on_disk):
                missing = len(on_disk) - len(found)
                raise QueueStorageError(f"{self.where}: {missing} requests are missing")
        return [h.payload if h.payload is not None else found[h.key] for h in held]

    def _read(self, held: list[Held]) -> dict[int, bytes]:
        """From their segments; from their rows, those a database of layout 1 held."""
        found = {h.key: self._segments.read(h.key, h.size) for h in held if h.key in self._segments}
        in_rows = [h.key for h in held if h.key not in found]
        if in_rows:
            marks = ",".join("?" * len(in_rows))
            query = f"SELECT id, payload FROM requests WHERE id IN ({marks})"
            found.update((key, bytes(payload)) for key, payload in self._db.execute(query, in_rows))
        return found

    async def remove(self, held: Sequence[Held]) -> None:
        """Returns once they are deleted (so the bound holds for the disk), committed with
        the next appends rather than in a transaction of their own."""
        if not held:
            return
        self._in_memory_bytes -= sum(h.size for h in held if h.payload is not None)
        transaction = self._pending()
        transaction.removals.extend(h.key for h in held)
        try:
            await asyncio.shield(transaction.committed)
        except QueueStorageError as error:
            # Still on disk: sent again at the next start, a duplicate rather than a loss.
            log.error("disk queue: cannot delete %d delivered requests: %s", len(held), error)

    def _pending(self) -> _Transaction:
        """The transaction the next commit writes; a writer is started if none runs."""
        if self._next is None:
            self._next = _Transaction(asyncio.get_running_loop().create_future())
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_pending(), name="disk-queue-writer")
        return self._next

    async def _write_pending(self) -> None:
        """Commits what is pending, one transaction at a time: what arrives during one
        commit is written together by the next (group commit)."""
        loop = asyncio.get_running_loop()
        try:
            while self._next is not None:
                if self._logged_bytes >= WAL_CHECKPOINT_BYTES and self._checkpoint is not None:
                    # A checkpoint slower than the commits: waited for, so the log stays
                    # within twice the stretch between checkpoints.
                    await asyncio.wait([self._checkpoint])
                transaction, self._next = self._next, None
                batches, removals = transaction.batches, transaction.removals
                try:
                    keys = await loop.run_in_executor(self._thread, self._commit, removals, batches)
                except (sqlite3.Error, OSError) as error:
                    failure = QueueStorageError(f"cannot write to {self.where}: {error}")
                    transaction.committed.set_exception(failure)
                    transaction.committed.exception()  # its callers may all be gone: retrieved
                else:
                    transaction.committed.set_result(keys)
                    self._logged_bytes += COMMIT_PAGES * self._page_size
                    self._checkpoint_if_due()
        finally:
            self._writer = None

    def _checkpoint_if_due(self) -> None:
        if self._logged_bytes >= WAL_CHECKPOINT_BYTES and self._checkpoint is None:
            self._logged_bytes = 0
            self._checkpoint = asyncio.create_task(self._copy_log(), name="disk-queue-checkpoint")

    async def _copy_log(self) -> None:
        """Copy the log into the database: first while commits go on, on a connection and a
        thread of its own (the syncs are the slow part), then what they added meanwhile, on
        the writer's thread between two commits, so that the next commit starts the log from
        its beginning again rather than let it grow."""
        loop = asyncio.get_running_loop()
        try:
            for _ in range(2):  # the second copies what commits added during the first
                await loop.run_in_executor(
                    self._checkpoint_thread, _checkpoint, self._checkpointer, "PASSIVE"
                )
            await loop.run_in_executor(self._thread, _checkpoint, self._db, "RESTART")
        except sqlite3.Error as error:
            # Nothing is lost (the log still holds it all); the next checkpoint tries again.
            log.warning("disk queue: checkpoint of %s failed: %s", self.where, error)
        finally:
            self._checkpoint = None

    def _commit(self, removals: list[int], batches: list[Prepared]) -> list[int]:
        """One transaction for every request waiting and every removal: all, or none. The
        bytes are written (and with fsync, synced) before the rows that point to them are
        committed; a segment is deleted only once its last row's delete is."""
        keys = list(range(self._next_key, self._next_key + len(batches)))
        self._next_key += len(batches)  # a key is never used twice, even if this fails
        try:
            places = self._segments.write(zip(keys, (b.payload for b in batches), strict=True))
            self._segments.sync()
            rows = [
                (key, b.span_count, len(b.payload), b.sender.peer, b.sender.tenant, *place)
                for key, b, place in zip(keys, batches, places, strict=True)
            ]
            self._commit_rows(removals, rows)
        except BaseException:
            self._segments.release(keys)  # not committed: their bytes are never read
            raise
        self._segments.release(removals)
        return keys

    def _commit_rows(self, removals: list[int], rows: Sequence[tuple[object, ...]]) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            if removals:
                marks = ",".join("?" * len(removals))
                db.execute(f"DELETE FROM requests WHERE id IN ({marks})", removals)
            db.executemany(
                "INSERT INTO requests (id, spans, size, peer, tenant, payload, segment, position) "
                "VALUES (?, ?, ?, ?, ?, x'', ?, ?)",
                rows,
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    async def close(self) -> None:
        # Commits and a checkpoint under way finish first (a commit may start a checkpoint).
        while running := [t for t in (self._writer, self._checkpoint) if t is not None]:
            await asyncio.wait(running)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._checkpoint_thread, self._checkpointer.close)
        await loop.run_in_executor(self._thread, self._db.close)
        await loop.run_in_executor(self._thread, self._segments.close)
        self._checkpoint_thread.shutdown(wait=True)
        self._thread.shutdown(wait=True)
        os.close(self._lock)


@dataclass(slots=True)
class _Transaction:
    """What one commit writes; ``committed`` holds the new rows' keys once it is done."""

    committed: asyncio.Future[list[int]]
    batches: list[Prepared] = field(default_factory=list)
    removals: list[int] = field(default_factory=list)


def _lock(directory: Path) -> int:
    """The directory, created if need be, and its lock file, held until the store closes or
    the process ends (however it ends), so that two services never share one queue."""
    key = "forward.queue.directory"
    try:
        # It holds span data: readable by the service's user alone (as are the files).
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as error:
        raise StartupError(f"{key}: cannot create {str(directory)!r}: {error.strerror}") from None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        raise StartupError(
            f"{key}: {str(directory / FILE_NAME)!r} is in use by another process (two "
            "services cannot share one queue directory)"
        ) from None
    return descriptor


def _open(directory: Path, *, fsync: bool) -> sqlite3.Connection:
    """The queue's database, created if need be; StartupError names the key and the cause."""
    key = "forward.queue.directory"
    path = directory / FILE_NAME
    db = _connect(directory, fsync=fsync)
    with contextlib.suppress(OSError):  # not ours to change (a volume's own rules): left as is
        # Before the write-ahead log and its index exist: SQLite gives them the database's
        # permissions.
        os.chmod(path, 0o600)
    try:
        db.execute(f"PRAGMA page_size = {PAGE_SIZE_BYTES}")  # before anything is written
        mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StartupError(f"{key}: {str(path)!r} cannot use SQLite's WAL mode ({mode})")
        db.execute("BEGIN IMMEDIATE")
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        tables = db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'requests'")
        if version not in (0, 1, SCHEMA_VERSION) or (version == 0 and tables.fetchone()[0]):
            db.execute("ROLLBACK")
            raise StartupError(
                f"{key}: {str(path)!r} was not written by this version of mcp-breaker "
                f"(layout {version}, expected {SCHEMA_VERSION}); move it aside"
            )
        if version == 0:
            db.execute(_SCHEMA)
        if version < 2:  # a new database, or one of layout 1 (its rows keep their bytes)
            for statement in _LAYOUT_2:
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except sqlite3.Error as error:
        db.close()
        raise _unusable(path, error) from None
    except StartupError:
        db.close()
        raise
    return db


def _connect(directory: Path, *, fsync: bool) -> sqlite3.Connection:
    """A connection to the queue's database, as the writer and the checkpointer use it."""
    path = directory / FILE_NAME
    try:
        # autocommit (isolation_level None): transactions are written out where they are
        # meant; the timeout bounds a wait for the other connection's lock, which only
        # another program opening the file could make long.
        db = sqlite3.connect(path, isolation_level=None, timeout=5, check_same_thread=False)
    except sqlite3.Error as error:
        raise _unusable(path, error) from None
    try:
        db.execute(f"PRAGMA synchronous = {'FULL' if fsync else 'NORMAL'}")
        db.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}")
        db.execute("PRAGMA wal_autocheckpoint = 0")  # the store checkpoints, off the writer
        # Some builds (Debian's) zero every freed page: for a queue whose rows are all
        # deleted soon, that doubles the bytes written and the CPU. FAST zeroes only what
        # costs no extra write; freed pages are overwritten by the next requests.
        db.execute("PRAGMA secure_delete = FAST")
    except sqlite3.Error as error:
        db.close()
        raise _unusable(path, error) from None
    return db


def _unusable(path: Path, error: sqlite3.Error) -> StartupError:
    key = "forward.queue.directory"
    if isinstance(error, sqlite3.OperationalError):
        return StartupError(f"{key}: cannot use {str(path)!r}: {error}")
    return StartupError(
        f"{key}: {str(path)!r} is not a usable queue database ({error}); move it aside"
    )


def _checkpoint(db: sqlite3.Connection, mode: str) -> None:
    db.execute(f"PRAGMA wal_checkpoint({mode})").fetchall()
