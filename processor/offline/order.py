"""Spans from many files, in span-end order, with bounded memory.

In flight, spans reach the pipeline roughly when they end; recorded traces are roughly in
that order too, but only roughly: an exporter sends a batch seconds after its first span
ended, client and server halves of a call come from different processes, and a directory
of rotated files holds one stretch of time per file. So the spans are merged:

- each file is read as a stream; the next record is always taken from the file that is
  furthest behind (the smallest latest end time), so files are read side by side exactly
  as far as their times overlap, and a file whose first span is later than every open
  file's progress plus the window is opened only when the merge gets there (rotated files
  are then read one after the other, each opened once);
- the spans taken are held in one heap, by end time, and a span leaves it once every open
  file has read past its end plus ``window_ns``: no span still to come from a file that is
  itself in order within the window can be earlier.

The bound: at most ``max_spans`` spans are held. Past it, the earliest is let go at once.
A span that arrives after a later one has already gone, because it was further out of
order than the window or the bound allowed, is analysed as it arrives (out of order, as
the hop itself would see it) and counted in ``late`` with how late it was, so the report
can say that the window should be wider.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from processor.offline.decode import Decoded, Kept


class Feed(Protocol):
    """One input, as a stream of decoded records."""

    name: str

    def first_end_ns(self) -> int | None:
        """The end time of its first span, to know when to open it; None: open it first."""

    def records(self) -> Iterator[Decoded]:
        """Its records, in file order (an input is opened once for this)."""


@dataclass(slots=True)
class OrderStats:
    late: int = 0  # spans that came after a later span had already been analysed
    late_max_ns: int = 0  # the most out of order one of them was
    forced: int = 0  # spans let go before their time because the bound was reached
    held_max: int = 0  # the most spans held at once


@dataclass(slots=True)
class _Open:
    feed: Feed
    records: Iterator[Decoded]
    latest_ns: int = -1


def in_span_order(
    feeds: list[Feed], window_ns: int, max_spans: int, stats: OrderStats
) -> Iterator[Kept]:
    """Every kept span of every feed, in end-time order as far as the window allows."""
    waiting = sorted(
        ((feed.first_end_ns(), index, feed) for index, feed in enumerate(feeds)),
        key=lambda entry: (-1 if entry[0] is None else entry[0], entry[1]),
    )
    waiting.reverse()  # popped from the end: earliest first
    reading: list[_Open] = []
    heap: list[tuple[int, int, Kept]] = []
    order = itertools.count()  # ties keep file order
    released = -1  # the end time of the latest span let go

    def progress() -> int:
        return min(entry.latest_ns for entry in reading) if reading else 2**63

    while True:
        while waiting and (not reading or _starts_by(waiting[-1][0], progress() + window_ns)):
            feed = waiting.pop()[2]
            reading.append(_Open(feed, feed.records()))
        if not reading:
            break
        behind = min(reading, key=lambda entry: entry.latest_ns)
        decoded = next(behind.records, None)
        if decoded is None:
            reading.remove(behind)
        else:
            if decoded.latest_end_ns > behind.latest_ns:
                behind.latest_ns = decoded.latest_end_ns
            for item in decoded.kept or ():
                if item[0] < released:
                    stats.late += 1
                    stats.late_max_ns = max(stats.late_max_ns, released - item[0])
                heapq.heappush(heap, (item[0], next(order), item))
            stats.held_max = max(stats.held_max, len(heap))
        limit = progress() - window_ns
        while heap and (heap[0][0] <= limit or len(heap) > max_spans):
            end, _, item = heapq.heappop(heap)
            if end > limit:
                stats.forced += 1
            released = max(released, end)
            yield item
    while heap:
        yield heapq.heappop(heap)[2]


def _starts_by(first_end_ns: int | None, horizon_ns: int) -> bool:
    return first_end_ns is None or first_end_ns <= horizon_ns
