"""The report's building blocks: a count with its seconds and the ids behind it, and
bounded tables for rows keyed by names that senders chose."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from processor.engines.turns import NS_PER_S

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

MAX_NAME_CHARS = 200  # a tool, server or turn name as the report shows it


@dataclass(slots=True)
class Count:
    """How many, how many seconds, and the first ``cap`` (trace id, span id) pairs."""

    cap: int
    n: int = 0
    seconds: float = 0.0
    ids: list[tuple[bytes, bytes]] = field(default_factory=list)

    def add(self, trace_id: bytes, span_id: bytes, seconds: float = 0.0) -> None:
        self.n += 1
        self.seconds += seconds
        if len(self.ids) < self.cap:
            self.ids.append((trace_id, span_id))

    def to_json(self, *, seconds: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"count": self.n}
        if seconds:
            out["seconds"] = round(self.seconds, 3)
        out["ids"] = [{"trace_id": t.hex(), "span_id": s.hex()} for t, s in self.ids]
        if self.n > len(self.ids):
            out["ids_not_listed"] = self.n - len(self.ids)
        return out


class Rows(Generic[K, V]):
    """At most ``max_rows`` rows; past that, every new key shares one overflow row."""

    def __init__(self, max_rows: int, make: Callable[[K | None], V]) -> None:
        self._max_rows = max_rows
        self._make = make
        self._rows: dict[K, V] = {}
        self.overflow: V | None = None
        self.overflowed_keys = 0

    def __len__(self) -> int:
        return len(self._rows)

    def at(self, key: K) -> V:
        row = self._rows.get(key)
        if row is not None:
            return row
        if len(self._rows) < self._max_rows:
            row = self._rows[key] = self._make(key)
            return row
        self.overflowed_keys += 1
        if self.overflow is None:
            self.overflow = self._make(None)
        return self.overflow

    def items(self) -> Iterator[tuple[K, V]]:
        return iter(self._rows.items())

    def values(self) -> Iterator[V]:
        return iter(self._rows.values())


def bump(counts: dict[str, int], key: str, by: int = 1) -> None:
    counts[key] = counts.get(key, 0) + by


def seconds_between(start_ns: int, end_ns: int) -> float:
    return max(0, end_ns - start_ns) / NS_PER_S


def name(value: str | None) -> str:
    """A sender's name, safe to print: printable, and cut at ``MAX_NAME_CHARS``."""
    text = "".join(c if c.isprintable() else "\ufffd" for c in (value or "")[:MAX_NAME_CHARS])
    return text


def iso(seconds: float | None) -> str | None:
    """Span time as ISO 8601 UTC, to the millisecond."""
    if seconds is None:
        return None
    whole = int(seconds // 1)
    millis = round((seconds - whole) * 1000)
    if millis == 1000:
        whole, millis = whole + 1, 0
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{millis:03d}Z"
