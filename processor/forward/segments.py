"""The files that hold the disk queue's request bytes: appended once, deleted whole.

The store (``store.py``) commits one SQLite row per request; the row says where the
request's bytes are: a segment file and a position in it. Why not the row itself: SQLite
writes a blob twice (into its write-ahead log, then into the database at a checkpoint) and
cuts it into pages, each with a frame header and a checksum; appended to a file, the bytes
are written once, by one system call. In process, a request of 206 KB cost 300 µs of CPU
as a blob and 65 µs appended here (its row included).

A record is a header (a mark, the size of the bytes, the request's key) and the bytes. It
is written before its row is committed, so a committed row's bytes were written first: a
process killed at any point leaves both in the page cache, which the kernel writes out
anyway. With ``forward.queue.fsync`` the segment is synced before the row is committed, so
a power loss keeps them too. Without it, a power loss may keep a row whose bytes never
reached the disk; its header is checked when it is read, so such a request is counted as
given up (``reason="storage"``) rather than sent as whatever the file holds.

A segment is never overwritten: writing goes to a new one once the current one holds
``SEGMENT_BYTES``, and at every start. One is deleted once none of its requests is held.
Not thread-safe: the store calls it from its writer thread alone.
"""

from __future__ import annotations

import collections
import contextlib
import os
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path

from processor.errors import QueueStorageError

PREFIX, SUFFIX = "forward-queue-", ".requests"
# A new segment starts once the current one holds this much. A segment stays on disk until
# all its requests are delivered, so an export still being retried keeps its segment alive:
# with forward.queue.consumers exports at a time, what the disk holds beyond
# forward.queue.max_bytes stays within a few segments per consumer.
SEGMENT_BYTES = 4 * 1024 * 1024
_PATTERN = f"{PREFIX}[0-9]*{SUFFIX}"
_HEADER = struct.Struct("<4sIQ")  # mark, size of the bytes, the request's key
_MARK = b"MBQ1"

Place = tuple[int, int]  # segment number, position of the record's header


def segment_name(number: int) -> str:
    return f"{PREFIX}{number:06d}{SUFFIX}"


class Segments:
    def __init__(self, directory: Path, *, fsync: bool, left: Mapping[int, Place]) -> None:
        """``left``: where each request a previous run left is. Segments none of them is in
        (all delivered, or written for a commit that never happened) are deleted."""
        self._directory = directory
        self._fsync = fsync
        self._places = dict(left)  # key -> place, for every request held here
        self._held = collections.Counter(segment for segment, _ in self._places.values())
        self._files: dict[int, int] = {}  # segment number -> descriptor
        names = (p.name[len(PREFIX) : -len(SUFFIX)] for p in directory.glob(_PATTERN))
        found = [int(name) for name in names if name.isdigit()]
        for number in found:
            if number in self._held:
                # One that cannot be opened is reported when its requests are read.
                with contextlib.suppress(OSError):
                    self._files[number] = os.open(self._path(number), os.O_RDONLY)
            else:
                os.unlink(self._path(number))
        # Written to from the next number on: never one a row names, even if it is missing.
        self._current = max([*found, *self._held], default=0)
        self._end = SEGMENT_BYTES  # the current one is full: the first write starts one
        self._unsynced: set[int] = set()  # segments written since the last sync
        self._new_entry = False  # a segment was created since the last sync

    def write(self, items: Iterable[tuple[int, bytes]]) -> list[Place]:
        """Append each (key, bytes): where each went. A request counts as held from here on
        (``release`` it if its row is not committed). Raises OSError."""
        places = []
        for key, payload in items:
            if self._end >= SEGMENT_BYTES:
                self._start_segment()
            header = _HEADER.pack(_MARK, len(payload), key)
            position = self._end
            written = os.pwritev(self._files[self._current], [header, payload], position)
            self._end += written  # a short write's bytes are never read: skipped
            if written != len(header) + len(payload):
                raise OSError(f"{self._path(self._current)}: short write (is the disk full?)")
            self._places[key] = (self._current, position)
            self._held[self._current] += 1
            self._unsynced.add(self._current)
            places.append((self._current, position))
        return places

    def sync(self) -> None:
        """With fsync: what was written is on the disk, and the new files' names too."""
        if self._fsync:
            for number in self._unsynced & self._files.keys():
                os.fdatasync(self._files[number])
            if self._new_entry:
                directory = os.open(self._directory, os.O_RDONLY)
                try:
                    os.fsync(directory)
                finally:
                    os.close(directory)
        self._unsynced.clear()
        self._new_entry = False

    def __contains__(self, key: int) -> bool:
        return key in self._places

    def read(self, key: int, size: int) -> bytes:
        """The bytes of a request held here. Raises QueueStorageError, or OSError."""
        segment, position = self._places[key]
        name = str(self._path(segment))
        if segment not in self._files:
            raise QueueStorageError(f"{name}, which holds request {key}, is missing")
        record = os.pread(self._files[segment], _HEADER.size + size, position)
        if len(record) < _HEADER.size or _HEADER.unpack_from(record) != (_MARK, size, key):
            # A row committed, its bytes not on the disk: a power loss without fsync.
            raise QueueStorageError(f"{name} does not hold request {key} where its row says")
        if len(record) != _HEADER.size + size:
            raise QueueStorageError(f"{name} ends within request {key}")
        return record[_HEADER.size :]

    def release(self, keys: Iterable[int]) -> None:
        """Forget requests whose rows are deleted (or were never committed); a segment none
        is left in is deleted, unless it is still being written to."""
        for key in keys:
            place = self._places.pop(key, None)
            if place is None:  # its bytes are in its row (layout 1), or were never written
                continue
            segment = place[0]
            self._held[segment] -= 1
            if not self._held[segment]:
                del self._held[segment]
                if segment != self._current:
                    self._delete(segment)

    def close(self) -> None:
        if self._current not in self._held and self._current in self._files:
            self._delete(self._current)  # a clean stop with nothing left leaves no segment
        for descriptor in self._files.values():
            os.close(descriptor)
        self._files.clear()

    def _start_segment(self) -> None:
        previous = self._current
        self._current += 1
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL
        # Span data: readable by the service's user alone, as the database is.
        self._files[self._current] = os.open(self._path(self._current), flags, 0o600)
        self._end = 0
        self._new_entry = True
        if previous in self._files and previous not in self._held:
            self._delete(previous)

    def _delete(self, segment: int) -> None:
        descriptor = self._files.pop(segment, None)
        if descriptor is not None:
            os.close(descriptor)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(segment))

    def _path(self, number: int) -> Path:
        return self._directory / segment_name(number)
